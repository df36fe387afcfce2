import assert from "node:assert/strict";
import { test } from "node:test";

import {
  AuthError,
  type Backend,
  CounterExhausted,
  CounterNotFound,
  FailoverBackend,
  type IdRange,
  InvalidRequest,
  Sequence,
  SequenceClosed,
  ServiceUnavailable,
  UnsafeId,
} from "../../src/index.js";
import { LOST_RESPONSE, MemoryBackend, THROTTLED, UNAVAILABLE } from "../../src/testing.js";
import { turn } from "../manual-timers.js";
import { ModelService } from "../model/service.js";
import { FailingBackend, RecordingBackend, drawMany, eventually, isIncreasing, range, settleAll } from "../support.js";

// -- handing out -----------------------------------------------------------------

test("next() hands out every ID of its blocks once, in order, and close() reports the rest", async () => {
  // Given a Sequence over a memory backend with blocks of 10
  const backend = new MemoryBackend();
  const seq = new Sequence(backend, "orders", { blockSize: 10 });
  // When 25 IDs are drawn and the Sequence is closed
  const ids = await drawMany(seq, 25);
  const unused = await seq.close();
  // Then they are 1..25, and everything the service handed out is used or reported
  assert.deepEqual(ids, range(1, 25));
  assert.equal(seq.unusedIds, unused);
  assert.equal(backend.handedOut, 25 + unused);
});

test("callers that call together get their IDs in call order, each above the one before", async () => {
  // Given a Sequence whose blocks take a moment to come
  const backend = new MemoryBackend({ latency: 0.002 });
  const seq = new Sequence(backend, "order", { blockSize: 7 });
  // When 100 calls are made at once, through many block boundaries
  const calls = Array.from({ length: 100 }, () => seq.next());
  const ids = await Promise.all(calls);
  // Then the i-th call got the i-th ID
  assert.deepEqual(ids, range(1, 100));
  await seq.close();
});

test("prefetch: the next block is asked for before the current one runs out", async () => {
  // Given blocks of 10, asked for when half is used
  const backend = new RecordingBackend(new MemoryBackend());
  const seq = new Sequence(backend, "ahead", { blockSize: 10, prefetchAt: 0.5 });
  await seq.next();
  assert.equal(backend.calls.length, 1);
  // When the first half is used and the event loop turns
  await drawMany(seq, 5);
  await eventually(() => backend.calls.length === 2, "the prefetch request");
  // Then the second block came while 4 IDs of the first were still held
  const ids = await drawMany(seq, 14);
  assert.deepEqual(ids, range(7, 14));
  assert.equal(backend.calls.length, 2);
  await seq.close();
});

test("without prefetch a block is asked for only when the last one is used up", async () => {
  const backend = new RecordingBackend(new MemoryBackend());
  const seq = new Sequence(backend, "lazy", { blockSize: 10, prefetch: false });
  await drawMany(seq, 10);
  await turn();
  assert.equal(backend.calls.length, 1);
  assert.equal(await seq.next(), 11);
  assert.equal(backend.calls.length, 2);
  await seq.close();
});

test("block sizes adapt to the rate, within [minBlock, maxBlock]", async () => {
  // Given a fast consumer and a clock that moves 1 ms per call
  let now = 0;
  const backend = new MemoryBackend();
  const seq = new Sequence(backend, "adapt", {
    initialBlock: 10,
    minBlock: 10,
    maxBlock: 2_000,
    runway: 1.0,
    prefetch: false,
    clock: () => (now += 0.001),
  });
  await drawMany(seq, 5_000);
  await seq.close();
  const sizes = backend.blocks.map((block) => Number(block.end - block.start) + 1);
  // Then blocks grew from 10, by at most 8x a step, and never passed 2,000
  assert.equal(sizes[0], 10);
  assert.ok(sizes.some((size) => size > 10), `sizes ${sizes.join(",")}`);
  assert.ok(sizes.every((size, i) => size <= 2_000 && (i === 0 || size <= (sizes[i - 1] as number) * 8)));
});

// -- take ------------------------------------------------------------------------

test("take(n) gives n consecutive IDs above everything before, and next() goes on above them", async () => {
  const backend = new MemoryBackend();
  const seq = new Sequence(backend, "take", { blockSize: 10, prefetch: false });
  assert.equal(await seq.next(), 1);
  const taken = await seq.take(5);
  assert.deepEqual(taken.toArray(), [2, 3, 4, 5, 6]);
  assert.equal(await seq.next(), 7);
  await seq.close();
});

test("take(n) larger than what is held skips the held IDs, counts them unused, and never goes back", async () => {
  // Given 3 IDs held of a block of 10, and another client that took 11..15
  const backend = new MemoryBackend();
  const seq = new Sequence(backend, "skip", { blockSize: 10, prefetch: false });
  await drawMany(seq, 7);
  await backend.allocate("skip", 5, { idempotencyKey: "another client" });
  // When 50 are taken (a block of at least 50 is fetched, which does not continue the held one)
  const taken = await seq.take(50);
  // Then they come from the new block, and the next ID is above them
  assert.equal(taken.length, 50);
  assert.equal(taken.start, 16);
  assert.ok((await seq.next()) > taken.last);
  // And the 3 IDs passed over are reported unused with the rest
  const unused = await seq.close();
  assert.equal(backend.handedOut - 5, 7 + 50 + 1 + unused);
  assert.ok(unused >= 3);
});

test("a next() called while take(n) waits for a block is served after it, above its range", async () => {
  // Given 3 IDs held, and a take(50) that must wait for a block
  const backend = new MemoryBackend({ latency: 0.001 });
  const seq = new Sequence(backend, "queue", { blockSize: 10, prefetch: false });
  await drawMany(seq, 7);
  const taking = seq.take(50);
  // When next() is called meanwhile
  const after = seq.next();
  // Then it does not jump the queue with a held ID: it gets one above the range
  const taken = await taking;
  assert.ok((await after) > taken.last);
  await seq.close();
});

test("take(n) joins held IDs with a fetched block that continues them", async () => {
  const backend = new MemoryBackend();
  const seq = new Sequence(backend, "join", { blockSize: 10, prefetch: false });
  await drawMany(seq, 7);
  const taken = await seq.take(50);
  assert.equal(taken.start, 8);
  assert.equal(await seq.next(), 58);
  const unused = await seq.close();
  assert.equal(backend.handedOut, 7 + 50 + 1 + unused);
});

test("take(n) over maxBatch, or not a positive integer, is refused before anything is asked", async () => {
  const backend = new RecordingBackend(new MemoryBackend());
  const seq = new Sequence(backend, "refuse", { maxBatch: 100 });
  await assert.rejects(seq.take(101), RangeError);
  await assert.rejects(seq.take(0), RangeError);
  await assert.rejects(seq.take(1.5), RangeError);
  assert.equal(backend.calls.length, 0);
  await seq.close();
});

test("a count the service refuses as too large is halved until it goes through", async () => {
  // Given a service whose MaxBatchSize is 30
  const backend = new MemoryBackend({ maxBatch: 30 });
  const seq = new Sequence(backend, "cap", { initialBlock: 100, prefetch: false });
  // When IDs are drawn
  const ids = await drawMany(seq, 60);
  // Then they still come, in blocks the service accepts
  assert.deepEqual(ids, range(1, 60));
  assert.ok(backend.blocks.every((block) => block.end - block.start < 30n));
  await seq.close();
});

// -- the block request and its retries ---------------------------------------------

test("a block request whose answer was lost is sent again with the same count and key, so it costs no IDs", async () => {
  // Given every third block request loses its answer (the block is taken, the answer never arrives)
  const memory = new MemoryBackend();
  const backend = new RecordingBackend(memory);
  const seq = new Sequence(backend, "lost", { initialBlock: 5, maxBlock: 40, prefetch: false });
  const ids: number[] = [];
  let told = 0;
  for (let i = 0; ids.length < 300; i++) {
    if (backend.calls.length % 3 === 2) memory.failNext(1, LOST_RESPONSE);
    try {
      ids.push(await seq.next());
    } catch (error) {
      assert.ok(error instanceof ServiceUnavailable);
      told += 1;
    }
  }
  const unused = await seq.close();
  // Then no ID was lost or repeated: the IDs are 1..300, the service handed out nothing else
  assert.ok(told > 0, "no answer was lost");
  assert.deepEqual(ids, range(1, 300));
  assert.equal(memory.handedOut, 300 + unused);
  // And each retry carried its request's key and count
  const byKey = new Map<string, number>();
  for (const call of backend.calls) {
    assert.equal(byKey.get(call.key) ?? call.count, call.count);
    byKey.set(call.key, call.count);
  }
  assert.equal(byKey.size, memory.blocks.length);
});

test("the prefetcher's lost answer is asked again with its key by the caller that needs the block", async () => {
  const memory = new MemoryBackend();
  const backend = new RecordingBackend(memory);
  const seq = new Sequence(backend, "lost-prefetch", { blockSize: 10 });
  await seq.next();
  memory.failNext(1, LOST_RESPONSE);
  await drawMany(seq, 5);
  await eventually(() => backend.calls.length === 2, "the prefetch that loses its answer");
  const ids = await drawMany(seq, 14);
  assert.deepEqual(ids, range(7, 14));
  assert.equal(backend.calls[2]?.key, backend.calls[1]?.key);
  assert.equal(memory.handedOut, 1 + 5 + 14 + (await seq.close()));
});

test("take() resends a lost request with the same key too", async () => {
  const memory = new MemoryBackend();
  const backend = new RecordingBackend(memory);
  const seq = new Sequence(backend, "lost-take", { blockSize: 10, prefetch: false });
  memory.failNext(1, LOST_RESPONSE);
  await assert.rejects(seq.take(10), ServiceUnavailable);
  const taken = await seq.take(10);
  assert.deepEqual(taken.toArray(), range(1, 10));
  assert.equal(backend.calls[1]?.key, backend.calls[0]?.key);
  assert.equal(memory.blocks.length, 1);
  await seq.close();
});

// -- errors ------------------------------------------------------------------------

for (const [name, error] of [
  ["CounterNotFound", () => new CounterNotFound(404, "counter_not_found", "no such counter")],
  ["AuthError", () => new AuthError(403, "access_denied", "not allowed")],
  ["InvalidRequest", () => new InvalidRequest(400, "invalid_body", "bad")],
] as const) {
  test(`every waiting caller is told ${name}, an error retrying cannot fix, after one request`, async () => {
    // Given 50 callers waiting for a block
    const backend = new FailingBackend(error);
    const seq = new Sequence(backend, "told", { prefetch: false });
    const calls = Array.from({ length: 50 }, (_, i) => (i % 5 ? seq.next() : seq.take(3)));
    // When the one request is answered with an error retrying cannot fix
    const { values, errors } = await settleAll<unknown>(calls);
    // Then every caller gets it, as its own type
    assert.equal(values.length, 0);
    assert.equal(errors.length, 50);
    assert.ok(errors.every((e) => e instanceof Error && e.name === name));
    assert.equal(backend.calls, 1);
    await seq.close();
  });
}

test("ServiceUnavailable reaches the caller whose request failed; the others send it again, with its key", async () => {
  // Given 10 callers waiting for a block, and a service unavailable once
  const memory = new MemoryBackend();
  const backend = new RecordingBackend(memory);
  const seq = new Sequence(backend, "transient", { blockSize: 100, prefetch: false });
  memory.failNext(1, UNAVAILABLE);
  const calls = Array.from({ length: 10 }, () => seq.next());
  const { values, errors } = await settleAll(calls);
  // Then the first caller (whose request it was) is told, the nine others get IDs in order
  assert.equal(errors.length, 1);
  assert.ok(errors[0] instanceof ServiceUnavailable);
  assert.deepEqual(values, range(1, 9));
  assert.equal(backend.calls[1]?.key, backend.calls[0]?.key);
  await seq.close();
});

test("a caller waiting longer than waitTimeout is told ServiceUnavailable; the request goes on", async () => {
  // Given a service that does not answer until released
  const backend = new RecordingBackend(new MemoryBackend());
  backend.held = true;
  const seq = new Sequence(backend, "slow", { blockSize: 10, waitTimeout: 0.05, prefetch: false });
  // When a caller waits past its timeout
  await assert.rejects(seq.next(), ServiceUnavailable);
  // Then the request is still the one out: released, its block serves the next caller
  backend.release();
  assert.equal(await seq.next(), 1);
  assert.equal(backend.calls.length, 1);
  await seq.close();
});

test("exhaustion is told only when nothing held can be given", async () => {
  // Given a counter with 25 IDs left and blocks of 10 asked for early
  const backend = new MemoryBackend({ maxId: 25 });
  const seq = new Sequence(backend, "small", { blockSize: 10, prefetchAt: 0.9 });
  // When all of them are drawn (the prefetch meets the max while IDs are held)
  const ids = await drawMany(seq, 25);
  // Then every ID up to the max is handed out, and only then CounterExhausted
  assert.deepEqual(ids, range(1, 25));
  await assert.rejects(seq.next(), CounterExhausted);
  await assert.rejects(seq.take(1), CounterExhausted);
  assert.equal(await seq.close(), 0);
});

test("capacity refusals lengthen the runway, up to maxRunway", async () => {
  const backend = new MemoryBackend();
  const seq = new Sequence(backend, "hot", { runway: 5, maxRunway: 20, prefetch: false, blockSize: 10 });
  backend.failNext(1, THROTTLED);
  await seq.next();
  assert.equal(seq.sizer.currentRunway, 10);
  backend.failNext(3, UNAVAILABLE);
  await drawMany(seq, 9);
  for (let i = 0; i < 3; i++) await assert.rejects(seq.next(), ServiceUnavailable);
  assert.equal(await seq.next(), 11);
  assert.equal(seq.sizer.currentRunway, 20);
  await seq.close();
});

// -- regions, failover, numbers -------------------------------------------------------

test("stepped blocks (one region of three) hand out that region's IDs only, by next() and take()", async () => {
  const backend = new MemoryBackend({ start: 2, step: 3 });
  const seq = new Sequence(backend, "region", { blockSize: 4, prefetch: false });
  const ids = await drawMany(seq, 6);
  assert.deepEqual(ids, range(2, 6, 3));
  const taken = await seq.take(3);
  assert.deepEqual(taken.toArray(), [20, 23, 26]);
  assert.equal(taken.step, 3);
  await seq.close();
});

test("failover: a region that is unavailable hands over to the next, and the Sequence goes on", async () => {
  // Given two regions (residues 1 and 2 of 2), the first unavailable
  const first = new MemoryBackend({ start: 1, step: 2 });
  const second = new MemoryBackend({ start: 2, step: 2 });
  const failover = new FailoverBackend([first, second]);
  const seq = new Sequence(failover, "global", { blockSize: 5, prefetch: false });
  assert.deepEqual(await drawMany(seq, 5), range(1, 5, 2));
  first.failNext(1, UNAVAILABLE);
  // Then the next block comes from the second region, and later ones stay there
  assert.deepEqual(await drawMany(seq, 10), range(2, 10, 2));
  assert.equal(failover.failovers, 1);
  assert.equal(failover.current, second);
  // And the refusal counted towards a longer runway
  assert.equal(seq.sizer.currentRunway, 10);
  await seq.close();
});

test("failover: a pause is asked for only if every region asked for one, the shortest", async () => {
  const asking = (retryAfter?: number): Backend => ({
    allocate: () => Promise.reject(new ServiceUnavailable("503", { retryAfter })),
  });
  const pauseOf = (backends: Backend[]): Promise<unknown> =>
    new FailoverBackend(backends).allocate("x", 1, { idempotencyKey: "k" }).catch((error: unknown) => (error as ServiceUnavailable).retryAfter);
  assert.equal(await pauseOf([asking(30), asking(5)]), 5);
  assert.equal(await pauseOf([asking(30), asking()]), undefined);
});

test("failover: ServiceUnavailable once every region failed, with every region's refusals", async () => {
  const regions = [new MemoryBackend(), new MemoryBackend()];
  for (const region of regions) region.failNext(1, UNAVAILABLE);
  const failover = new FailoverBackend(regions);
  await assert.rejects(failover.allocate("x", 1, { idempotencyKey: "k" }), (error: unknown) => {
    assert.ok(error instanceof ServiceUnavailable);
    assert.equal(error.capacityRefusals, 2);
    return true;
  });
});

test("a block above Number.MAX_SAFE_INTEGER is UnsafeId for number IDs, counted unused, and bigint IDs go on", async () => {
  // Given a counter 15 IDs below 2^53 - 1
  const start = Number.MAX_SAFE_INTEGER - 14;
  const backend = new MemoryBackend({ start, maxId: 2n ** 63n - 1n });
  const seq = new Sequence(backend, "big", { blockSize: 10, prefetch: false });
  // When number IDs are drawn past it
  assert.deepEqual(await drawMany(seq, 10), range(start, 10));
  const calls = [seq.next(), seq.next()];
  const { errors } = await settleAll(calls);
  // Then every waiting caller is told UnsafeId, and the block is reported unused
  assert.equal(errors.length, 2);
  assert.ok(errors.every((error) => error instanceof UnsafeId));
  assert.equal(await seq.close(), 10);

  // And with bigint IDs the same counter goes on, exactly
  const big = new Sequence(backend, "big", { blockSize: 10, prefetch: false, bigint: true });
  const first = await big.next();
  assert.equal(typeof first, "bigint");
  assert.equal(first, BigInt(Number.MAX_SAFE_INTEGER) + 6n);
  const taken = await big.take(5);
  assert.equal(taken.start, first + 1n);
  await big.close();
});

// -- close -------------------------------------------------------------------------

test("close() tells every waiting caller SequenceClosed, and nothing is handed out after", async () => {
  const backend = new RecordingBackend(new MemoryBackend());
  backend.held = true;
  const seq = new Sequence(backend, "closing", { blockSize: 10 });
  const waiting = [seq.next(), seq.take(2)];
  await eventually(() => backend.waiting === 1, "the request on the network");
  const closing = seq.close();
  const { errors } = await settleAll<unknown>(waiting);
  assert.ok(errors.length === 2 && errors.every((error) => error instanceof SequenceClosed));
  backend.release();
  // The block on the network when it closed is counted
  assert.equal(await closing, 10);
  await assert.rejects(seq.next(), SequenceClosed);
});

test("close() asks again for a request whose answer was lost, so the block it took is counted", async () => {
  const memory = new MemoryBackend();
  const backend = new RecordingBackend(memory);
  const seq = new Sequence(backend, "close-lost", { blockSize: 10 });
  await seq.next();
  memory.failNext(1, LOST_RESPONSE);
  await drawMany(seq, 5); // past the mark: the next block is asked for, and its answer lost
  await eventually(() => backend.calls.length === 2, "the prefetch that loses its answer");
  await eventually(() => memory.calls === 2, "its answer lost");
  const unused = await seq.close();
  assert.equal(backend.calls[2]?.key, backend.calls[1]?.key);
  assert.equal(unused, 14);
  assert.equal(memory.handedOut, 6 + unused);
});

test("a block landing after close() adds to unusedIds", async () => {
  const backend = new RecordingBackend(new MemoryBackend());
  backend.held = true;
  const seq = new Sequence(backend, "late", { blockSize: 10 });
  void seq.next().catch(() => undefined);
  await eventually(() => backend.waiting === 1, "the request on the network");
  assert.equal(await seq.close(0), 0);
  backend.release();
  await eventually(() => seq.unusedIds === 10, "the late block counted");
});

test("IDs increase for each caller, mixing next() and take(), many callers at once", async () => {
  const backend = new MemoryBackend({ latency: 0.001 });
  const seq = new Sequence(backend, "mixed", { initialBlock: 8 });
  const perCaller = await Promise.all(
    Array.from({ length: 50 }, async (_, caller) => {
      const mine: number[] = [];
      for (let i = 0; i < 40; i++) {
        if ((i + caller) % 7 === 0) mine.push(...(await seq.take(1 + (i % 5))));
        else mine.push(await seq.next());
      }
      return mine;
    }),
  );
  const unused = await seq.close();
  const all = perCaller.flat();
  assert.ok(perCaller.every(isIncreasing));
  assert.equal(new Set(all).size, all.length);
  assert.equal(backend.handedOut, all.length + unused);
});

test("take(n) is served from fetched blocks that continue each other, though no block has been started", async () => {
  // Given a service whose MaxBatchSize (16) is below the first block asked
  // for (20), and that loses answers: next() and then take(11) are told
  // ServiceUnavailable, their requests' blocks 1..10 and 11..21 come later
  const service = new ModelService(40, 16);
  const seq = new Sequence(service, "stretch", { initialBlock: 20, prefetch: false });
  // (each call's outcome caught at once: some fail before the last is made)
  const calls: Promise<PromiseSettledResult<unknown>>[] = [];
  const watch = (call: Promise<unknown>): void => {
    calls.push(Promise.allSettled([call]).then(([outcome]) => outcome));
  };
  watch(seq.next());
  await turn();
  for (const step of ["lost", "lost", 11, 17, "block", "lost", "block"] as const) {
    if (typeof step === "number") watch(seq.take(step));
    else service.answer({ kind: step });
    await turn();
  }
  // Then take(17) gets 17 of the 21 IDs in a row held, with no request more
  assert.equal(service.onNetwork.length, 0, "a request went out for take(17)");
  const unused = await seq.close(0);
  const [first, taking11, taking17] = await Promise.all(calls);
  assert.ok(first?.status === "rejected" && first.reason instanceof ServiceUnavailable);
  assert.ok(taking11?.status === "rejected" && taking11.reason instanceof ServiceUnavailable);
  assert.ok(taking17?.status === "fulfilled", String(taking17?.status === "rejected" ? taking17.reason : ""));
  assert.deepEqual((taking17.value as IdRange<number>).toArray(), range(1, 17));
  assert.equal(unused, 4);
});
