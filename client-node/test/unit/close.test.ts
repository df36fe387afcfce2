/**
 * close() accounts for every ID taken, however it ends and however many
 * calls there are: a close during another resolves to the same count; a
 * close that ran out of time is finished by the next; a block that lands
 * after close, of the size asked or not, adds to what close reports; a
 * timeout of any length works.
 *
 * Each test holds 139 IDs of a block of 200 (61 handed out), with the next
 * block's request on the network: the case the counts below are made of
 * (the Python client's tests use the same).
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import type { AllocateOptions, Backend, Block } from "../../src/index.js";
import { Sequence } from "../../src/index.js";
import { LOST_RESPONSE, MemoryBackend } from "../../src/testing.js";
import { RecordingBackend, eventually } from "../support.js";

const BLOCK = 200;
const HANDED = 61; // past the prefetch mark (20 into the block, prefetchAt 0.9)
const HELD = BLOCK - HANDED;

/**
 * A Sequence holding 139 IDs, once the next block's request is out
 * (`sent`); `then` runs after the first block has come (to hold or lose
 * the next one).
 */
async function holding(backend: Backend, sent: () => boolean, then?: () => void): Promise<Sequence> {
  const seq = new Sequence(backend, "orders", { blockSize: BLOCK, prefetchAt: 0.9 });
  assert.equal(await seq.next(), 1);
  then?.();
  for (let id = 2; id <= HANDED; id++) assert.equal(await seq.next(), id);
  await eventually(sent, "the next block's request");
  return seq;
}

/** Its next request held on the network. */
async function holdingWithRequestOut(): Promise<{ seq: Sequence; backend: RecordingBackend; memory: MemoryBackend }> {
  const memory = new MemoryBackend();
  const backend = new RecordingBackend(memory);
  const seq = await holding(backend, () => backend.waiting === 1, () => (backend.held = true));
  return { seq, backend, memory };
}

test("a close during another waits for it and resolves to the same count", async () => {
  const { seq, backend, memory } = await holdingWithRequestOut();
  const first = seq.close(60);
  const second = seq.close();
  await new Promise((resolve) => setTimeout(resolve, 20));
  backend.release();
  assert.deepEqual(await Promise.all([first, second]), [HELD + BLOCK, HELD + BLOCK]);
  assert.equal(memory.handedOut, HANDED + HELD + BLOCK);
});

for (const timeout of [1e10, Infinity]) {
  test(`close(${timeout}) (past 2^31 - 1 ms) waits for the block on the network`, async () => {
    const { seq, backend } = await holdingWithRequestOut();
    let done = false;
    const closing = seq.close(timeout).finally(() => (done = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(done, false, "close resolved before the block landed");
    backend.release();
    assert.equal(await closing, HELD + BLOCK);
    assert.equal(await seq.close(), HELD + BLOCK);
  });
}

test("a close that ran out of time is finished by the next: the lost answer is asked for again and counted", async () => {
  const memory = new MemoryBackend();
  const backend = new RecordingBackend(memory);
  const seq = await holding(
    backend,
    () => memory.calls === 2,
    () => {
      memory.failNext(1, LOST_RESPONSE);
    },
  );
  assert.equal(await seq.close(0), HELD);
  assert.equal(await seq.close(), HELD + BLOCK);
  assert.equal(backend.calls[2]?.key, backend.calls[1]?.key);
  assert.equal(memory.handedOut, HANDED + HELD + BLOCK);
  assert.equal(await seq.close(), HELD + BLOCK);
});

/** Answers the first request; the later ones when released, with `short` IDs fewer than asked. */
class ShortBackend implements Backend {
  readonly memory = new MemoryBackend();
  readonly #gates: (() => void)[] = [];

  constructor(readonly short: number) {}

  get waiting(): number {
    return this.#gates.length;
  }

  async allocate(counter: string, count: number, options: AllocateOptions): Promise<Block> {
    if (this.memory.calls === 0) return this.memory.allocate(counter, count, options);
    await new Promise<void>((resolve) => this.#gates.push(resolve));
    return this.memory.allocate(counter, count - this.short, options);
  }

  release(): void {
    for (const open of this.#gates.splice(0)) open();
  }
}

test("a block of the wrong size landing after close is counted in unusedIds", async () => {
  const backend = new ShortBackend(10);
  const seq = await holding(backend, () => backend.waiting === 1);
  assert.equal(await seq.close(0), HELD);
  backend.release();
  await eventually(() => seq.unusedIds === HELD + BLOCK - 10, "the short block counted");
  assert.equal(await seq.close(), HELD + BLOCK - 10);
  assert.equal(backend.memory.handedOut, HANDED + HELD + BLOCK - 10);
});
