/**
 * What a process skips when it stops: the first block, the start bound
 * (while young, what is held or was passed over never exceeds what was
 * used, with next(), take(n) and prefetch alike) and drain(), on a
 * MemoryBackend and a clock the test moves. The same against the dev server
 * is in test/devserver/service.test.ts.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import fc from "fast-check";

import { blockLength, DRAIN_RUNWAY, INITIAL_BLOCK, Sequence } from "../../src/index.js";
import { MemoryBackend } from "../../src/testing.js";

// Stops on both sides of every block boundary of a burst, and beyond.
const STOPS = [
  ...Array.from({ length: 69 }, (_, i) => i + 1),
  ...Array.from({ length: 12 }, (_, k) => 2 ** (k + 6)).flatMap((power) => [power - 1, power, power + 1]),
  10_000,
];

test("a process stopping after any number of IDs skips at most as many, and 10,000 take at most 12 requests", async () => {
  for (const n of STOPS) {
    // Given a process that takes n IDs as fast as they come, then closes
    const backend = new MemoryBackend();
    const seq = new Sequence(backend, "burst");
    for (let i = 0; i < n; i++) await seq.next();
    const unused = await seq.close();
    // Then the counter moved by n and what close counted, which is at most max(15, n)
    assert.equal(backend.handedOut, n + unused);
    assert.ok(unused <= Math.max(INITIAL_BLOCK - 1, n), `${n} IDs: ${unused} unused`);
    if (n === 10_000) assert.ok(backend.calls <= 12, `${backend.calls} requests`);
  }
});

/** Until a block fetched ahead (on the loop's next turn, from a backend that answers at once) has landed. */
async function settled(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
}

for (const n of [20, 50]) {
  test(`one ID and a take(${n}), the prefetch given a moment before close, skip at most the ${n + 1} used`, async () => {
    // Reproduces: the block asked for after the take was the take's size,
    // whatever the start bound allowed: 35 unused after using 21, 65 after 51.
    const backend = new MemoryBackend();
    const seq = new Sequence(backend, "example");
    await seq.next();
    await seq.take(n);
    await settled();
    const unused = await seq.close();
    assert.ok(unused <= n + 1, `${unused} unused: ${backend.blocks.map((b) => `${b.start}..${b.end}`).join(", ")}`);
    assert.equal(backend.handedOut, n + 1 + unused);
  });
}

type Step = ["next", number] | ["take", number] | ["others", number] | ["settle"];

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.tuple(fc.constant("next" as const), fc.constantFrom(1, 3, 10, 30)),
  fc.tuple(fc.constant("take" as const), fc.constantFrom(1, 5, 20, 40, 50, 100, 300)),
  fc.tuple(fc.constant("others" as const), fc.integer({ min: 1, max: 5 })),
  fc.constant<Step>(["settle"]),
);

test("next(), take(n) and prefetch in any order, with other clients between blocks, skip at most what was used, or 15", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 12 }), async (program) => {
      const backend = new MemoryBackend();
      const seq = new Sequence(backend, "any");
      let used = 0;
      for (const [what, amount] of program) {
        if (what === "settle") await settled();
        else if (what === "others") await backend.allocate("any", amount, { idempotencyKey: `other-${backend.calls}` });
        else if (what === "next") for (let i = 0; i < amount; i++) used += [await seq.next()].length;
        else used += (await seq.take(amount)).length;
      }
      await settled(); // the worst moment to stop: a block fetched ahead has landed
      const unused = await seq.close();
      assert.ok(unused <= Math.max(INITIAL_BLOCK - 1, used), `${unused} unused after ${used} used`);
    }),
    { numRuns: 150 },
  );
});

test("a script that knows its count takes one block and skips nothing", async () => {
  const backend = new MemoryBackend();
  const seq = new Sequence(backend, "script", { initialBlock: 5_000, prefetch: false });
  for (let i = 0; i < 5_000; i++) await seq.next();
  assert.deepEqual([backend.calls, await seq.close()], [1, 0]);
});

test("draining sizes blocks for half a second at the rate, after using what is held", async () => {
  // Given a process at 1,000 IDs/s for 20 s (blocks of 5 s by now), without prefetch (exact)
  let now = 0;
  const backend = new MemoryBackend();
  const seq = new Sequence(backend, "drain", { prefetch: false, clock: () => now });
  const steadily = async (seconds: number): Promise<void> => {
    for (let i = 0; i < seconds * 1_000; i++) {
      await seq.next();
      now += 0.001;
    }
  };
  await steadily(20);
  const held = backend.blocks.length;
  const last = backend.blocks[held - 1];
  assert.ok(last !== undefined && Math.abs(blockLength(last) - 5_000) <= 250);
  // When it drains
  seq.drain();
  assert.ok(seq.draining);
  await steadily(8);
  // Then every later block is half a second's worth, and little is left at the stop
  const later = backend.blocks.slice(held).map(blockLength);
  assert.ok(later.length > 0);
  assert.ok(later.every((size) => Math.abs(size - 1_000 * DRAIN_RUNWAY) <= 25), later.join(", "));
  assert.ok((await seq.close()) <= 1_000 * DRAIN_RUNWAY);
  seq.drain(); // closed: changes nothing, throws nothing
});

test("drained within a first block it was given, the next block is half a second at the rate so far", async () => {
  // Given a Sequence given a first block of 5 s at 1,000 IDs/s, drained 3 s into it
  let now = 0;
  const backend = new MemoryBackend();
  const seq = new Sequence(backend, "first", { initialBlock: 5_000, clock: () => now });
  const draw = async (count: number): Promise<void> => {
    for (let i = 0; i < count; i++) {
      await seq.next();
      now += 0.001;
    }
  };
  await draw(3_000);
  seq.drain();
  // When it passes the prefetch mark (157 left) and the prefetch runs, before the block runs out
  await draw(1_900);
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  // Then the next block is half a second at the rate used so far, not the first one's size
  const next = backend.blocks[1];
  assert.ok(next !== undefined && Math.abs(blockLength(next) - 1_000 * DRAIN_RUNWAY) <= 25, String(next && blockLength(next)));
  await seq.close();
});
