import assert from "node:assert/strict";
import { test } from "node:test";

import { type AllocateOptions, type Backend, type Block, Sequence, ServiceUnavailable } from "../../src/index.js";
import { LOST_RESPONSE, MemoryBackend, UNAVAILABLE } from "../../src/testing.js";
import { isIncreasing } from "../support.js";

/** Every second block request meets a fault: a lost answer, then an unavailable service, in turn. */
class FaultyBackend implements Backend {
  readonly memory = new MemoryBackend({ latency: 0.001 });
  calls = 0;

  allocate(counter: string, count: number, options: AllocateOptions): Promise<Block> {
    this.calls += 1;
    if (this.calls % 2 === 0) this.memory.failNext(1, this.calls % 4 === 0 ? LOST_RESPONSE : UNAVAILABLE);
    return this.memory.allocate(counter, count, options);
  }
}

test("1,000 concurrent callers through block boundaries, with lost answers and an unavailable service: no ID twice, none unaccounted for", async () => {
  // Given a Sequence with small adaptive blocks over a service that fails half its requests
  const backend = new FaultyBackend();
  const seq = new Sequence(backend, "crowd", { initialBlock: 16, minBlock: 8, maxBlock: 512 });
  let toldUnavailable = 0;
  // When 1,000 callers each draw 30 IDs (some as take(n)), trying again when told ServiceUnavailable
  const perCaller = await Promise.all(
    Array.from({ length: 1_000 }, async (_, caller) => {
      const mine: number[] = [];
      for (let i = 0; i < 30; ) {
        try {
          if ((caller + i) % 10 === 0) {
            const taken = await seq.take(3);
            mine.push(...taken);
            i += 3;
          } else {
            mine.push(await seq.next());
            i += 1;
          }
        } catch (error) {
          if (!(error instanceof ServiceUnavailable)) throw error;
          toldUnavailable += 1;
        }
      }
      return mine;
    }),
  );
  const unused = await seq.close();
  const all = perCaller.flat();
  // Then the faults happened, through many blocks
  assert.ok(backend.memory.blocks.length > 50, `only ${backend.memory.blocks.length} blocks`);
  assert.ok(backend.calls > backend.memory.blocks.length, "no fault was met");
  assert.ok(toldUnavailable > 0);
  // And no ID was handed out twice, each caller's IDs increase,
  assert.equal(new Set(all).size, all.length);
  assert.ok(perCaller.every(isIncreasing));
  // and every ID the service allocated was handed out or reported unused
  assert.equal(backend.memory.handedOut, all.length + unused);
  const allocated = new Set<number>();
  for (const block of backend.memory.blocks) {
    for (let id = block.start; id <= block.end; id += block.step) allocated.add(Number(id));
  }
  assert.ok(all.every((id) => allocated.has(id)));
});
