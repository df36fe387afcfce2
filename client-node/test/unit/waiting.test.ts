/**
 * Callers that wait for a block: who is served from what is held, who is told
 * what, and when; however long they may wait, and whether they stop waiting.
 */

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { CounterExhausted, HttpBackend, RetryPolicy, Sequence, ServiceUnavailable } from "../../src/index.js";
import { MemoryBackend } from "../../src/testing.js";
import { ManualTimers, turn } from "../manual-timers.js";
import { StubServer, serviceError } from "../stub-server.js";
import { RecordingBackend, drawMany, eventually, range } from "../support.js";

test("no caller is told CounterExhausted while IDs it could be given are held", async () => {
  // Given a counter with 20 IDs, blocks of 10 and then, the rate having
  // dropped (a clock that jumps 1,000 s a call), of 1
  let now = 0;
  const backend = new RecordingBackend(new MemoryBackend({ maxId: 20 }));
  const seq = new Sequence(backend, "held-exhausted", {
    initialBlock: 10,
    minBlock: 1,
    maxBlock: 10,
    clock: () => (now += 1000),
  });
  for (let i = 0; i < 15; i++) {
    await seq.next();
    await turn();
  }
  backend.held = true;
  assert.equal(await seq.next(), 16); // past the mark: a block of 1 is asked for
  await eventually(() => backend.waiting === 1, "the prefetch on the network");
  assert.deepEqual(
    backend.calls.map((call) => call.count),
    [10, 10, 1],
  );
  // When a take(9) waits (the 4 IDs held cannot serve it), five next() wait
  // behind it, and the prefetch is told the counter is exhausted
  const taking = seq.take(9);
  const nexts = Array.from({ length: 5 }, () => seq.next());
  backend.release();
  // Then take(9) hears it, and the next() calls get the 4 IDs held before
  // the fifth hears it
  await assert.rejects(taking, CounterExhausted);
  const settled = await Promise.allSettled(nexts);
  assert.deepEqual(
    settled.slice(0, 4).map((result) => (result.status === "fulfilled" ? result.value : (result.reason as unknown))),
    [17, 18, 19, 20],
  );
  assert.ok(settled[4]?.status === "rejected" && settled[4].reason instanceof CounterExhausted);
  assert.equal(await seq.close(), 0);
});

test("when a caller times out, the callers behind it are served from what is held", async () => {
  // Given 55 IDs held, and a service that answers nothing more
  const backend = new RecordingBackend(new MemoryBackend());
  const seq = new Sequence(backend, "behind-timeout", { blockSize: 100, prefetch: false, waitTimeout: 0.05 });
  assert.deepEqual(await drawMany(seq, 45), range(1, 45));
  backend.held = true;
  // When a take(200) waits for a block that does not come, three next() behind it
  const taking = seq.take(200);
  const nexts = [seq.next(), seq.next(), seq.next()];
  // Then take(200) is told ServiceUnavailable at its deadline, and the three get held IDs
  await assert.rejects(taking, ServiceUnavailable);
  assert.deepEqual(await Promise.all(nexts), [46, 47, 48]);
  backend.release();
  await seq.close();
});

const MAX_TIMER_MS = 2 ** 31 - 1;

for (const waitTimeout of [1e10, Infinity]) {
  test(`a waitTimeout of ${waitTimeout} s (past 2^31 - 1 ms) waits for the block, on no timer Node would cut to 1 ms`, async (t) => {
    // Given every timer the process sets is recorded
    const delays: number[] = [];
    const realSetTimeout = globalThis.setTimeout;
    t.mock.method(globalThis, "setTimeout", (callback: () => void, ms?: number) => {
      delays.push(ms ?? 0);
      return realSetTimeout(callback, ms);
    });
    const backend = new RecordingBackend(new MemoryBackend());
    backend.held = true;
    const seq = new Sequence(backend, "long-wait", { blockSize: 10, prefetch: false, waitTimeout });
    // When a caller waits for a block that takes a while
    const waiting = seq.next();
    await eventually(() => backend.waiting === 1, "the request on the network");
    for (let i = 0; i < 20; i++) await new Promise<void>((resolve) => realSetTimeout(resolve, 1));
    backend.release();
    // Then it gets its ID, no timer was longer than Node keeps, and none spun
    assert.equal(await waiting, 1);
    assert.ok(
      delays.every((ms) => ms <= MAX_TIMER_MS),
      `timers of ${delays.filter((ms) => ms > MAX_TIMER_MS).join(", ")} ms`,
    );
    assert.ok(delays.length <= 2, `${delays.length} timers set while one caller waited`);
    await seq.close();
  });
}

test("a caller whose signal aborts stops waiting; the IDs go to the callers after it, none lost", async () => {
  const memory = new MemoryBackend();
  const backend = new RecordingBackend(memory);
  backend.held = true;
  const seq = new Sequence(backend, "abort", { blockSize: 10, prefetch: false });
  const controller = new AbortController();
  const first = seq.next({ signal: controller.signal });
  const second = seq.take(2);
  await eventually(() => backend.waiting === 1, "the request on the network");
  controller.abort();
  await assert.rejects(first, { name: "AbortError" });
  backend.release();
  assert.deepEqual((await second).toArray(), [1, 2]);
  assert.equal(await seq.next({ signal: controller.signal }).catch((error: unknown) => (error as Error).name), "AbortError");
  assert.equal(await seq.next(), 3);
  assert.equal(memory.handedOut, 3 + (await seq.close()));
});

// -- Retry-After, through HttpBackend ------------------------------------------------

const stub = new StubServer();
let url = "";
before(async () => {
  url = await stub.start();
});
after(async () => {
  await stub.stop();
});

function httpBackend(): HttpBackend {
  const retry = new RetryPolicy({ deadline: 5, random: () => 0.5, sleep: () => Promise.resolve() });
  return new HttpBackend(url, { retry });
}

test("a Retry-After past the callers' deadlines: one request, every waiting caller told at once, nothing sent until it passes", async () => {
  // Given a service that answers 503 with Retry-After: 60
  stub.received.length = 0;
  stub.script(serviceError(503, "service_unavailable", { "retry-after": "60" }));
  const timers = new ManualTimers();
  const seq = new Sequence(httpBackend(), "retry-after", { prefetch: false, initialBlock: 100, waitTimeout: 10, timers });
  // When five callers wait for a block, and one more calls after
  const calls = Array.from({ length: 5 }, () => seq.next());
  const results = await Promise.allSettled(calls);
  await assert.rejects(seq.next(), (error: unknown) => {
    assert.ok(error instanceof ServiceUnavailable);
    assert.match(error.message, /asked for no request/);
    return true;
  });
  // Then one request was sent, and every caller was told ServiceUnavailable
  assert.equal(stub.received.length, 1);
  assert.ok(results.every((result) => result.status === "rejected" && result.reason instanceof ServiceUnavailable));
  // And once the 60 s have passed, a caller's request goes out again
  stub.script({ status: 200, body: '{"counter":"retry-after","start":1,"end":100,"count":100,"step":1}' });
  await timers.advance(60);
  assert.equal(await seq.next(), 1);
  assert.equal(stub.received.length, 2);
  await seq.close();
});

// -- waitTimeout against a service that never answers, through HttpBackend ----------
// Each caller's wait ends at its waitTimeout on the Sequence's clock, whoever
// sent the request it waits for and however long that request's own retries
// go on (a 10 s timeout per attempt here); the request goes on after it. The
// Python client's: tests/unit/test_client_wait_timeout.py.

const BLOCK_OF_10 = '{"counter":"silent","start":1,"end":10,"count":10,"step":1}';

for (const prefetch of [false, true]) {
  test(`a caller's own request to a service that never answers ends its wait at waitTimeout (prefetch ${prefetch})`, async () => {
    // Given a service that takes the request and never answers
    const sent = stub.received.length;
    stub.script({ status: 0, hang: true });
    const timers = new ManualTimers();
    const seq = new Sequence(httpBackend(), "silent", { prefetch, waitTimeout: 2, timers });
    // When a caller asks for an ID (nothing held: its own request goes out)
    const waiting = seq.next();
    let told = false;
    waiting.catch(() => (told = true));
    await eventually(() => stub.received.length === sent + 1, "the request at the service");
    // Then it is told ServiceUnavailable at its waitTimeout, and not before
    await timers.advance(1.99);
    assert.equal(told, false);
    await timers.advance(0.01);
    await assert.rejects(waiting, (error: unknown) => {
      assert.ok(error instanceof ServiceUnavailable);
      assert.match(error.message, /no block for 'silent' within 2 s/);
      return true;
    });
    await seq.close(0);
  });
}

test("a caller waiting on a prefetch that is never answered is told at its waitTimeout", async () => {
  // Given a block, then a service that stops answering: the prefetch hangs
  const sent = stub.received.length;
  stub.script({ status: 200, body: BLOCK_OF_10 }, { status: 0, hang: true });
  const timers = new ManualTimers();
  const seq = new Sequence(httpBackend(), "silent", { blockSize: 10, waitTimeout: 2, timers });
  assert.deepEqual(await drawMany(seq, 10), range(1, 10));
  await timers.settle();
  await eventually(() => stub.received.length === sent + 2, "the prefetch at the service");
  // When a caller asks for the 11th ID
  const waiting = seq.next();
  let told = false;
  waiting.catch(() => (told = true));
  // Then it is told ServiceUnavailable at its waitTimeout
  await timers.advance(1.99);
  assert.equal(told, false);
  await timers.advance(0.01);
  await assert.rejects(waiting, ServiceUnavailable);
  await seq.close(0);
});
