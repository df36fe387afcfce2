/**
 * A counter that moved back (its table restored from an earlier backup)
 * hands out again IDs it handed out before. A Sequence refuses a block that
 * overlaps the IDs it was given from that counter and region, hands none of
 * it out, and tells its callers CounterMovedBack (status 0, code
 * counter_moved_back); the service's own answer (HTTP 500
 * counter_moved_back) is raised as CounterMovedBack at once, never retried.
 */

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { CounterMovedBack, FailoverBackend, HttpBackend, RetryPolicy, Sequence, ServiceError } from "../../src/index.js";
import { MemoryBackend, UNAVAILABLE } from "../../src/testing.js";
import { StubServer, json } from "../stub-server.js";
import { range } from "../support.js";

/** `count` calls of next(): the IDs, and the CounterMovedBack told. */
async function draw(seq: Sequence, count: number): Promise<{ ids: number[]; told: CounterMovedBack[] }> {
  const ids: number[] = [];
  const told: CounterMovedBack[] = [];
  for (let i = 0; i < count; i++) {
    try {
      ids.push(await seq.next());
    } catch (error) {
      if (!(error instanceof CounterMovedBack)) throw error;
      told.push(error);
    }
  }
  return { ids, told };
}

/** Until a block fetched ahead (on the loop's next turn, from a backend that answers at once) has landed. */
async function settled(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
}

test("a block overlapping IDs given before is refused, the caller told, and nothing handed out twice", async () => {
  // Given a Sequence that was given 1..30 and handed out 1..25
  const backend = new MemoryBackend();
  const seq = new Sequence(backend, "orders", { blockSize: 10, prefetch: false });
  const before = (await draw(seq, 25)).ids;
  // When the counter moves back to 5 (restored from a backup)
  backend.moveBack(5);
  const { ids: after, told } = await draw(seq, 40);
  const unused = await seq.close();
  // Then what it held is handed out, every block at or below 30 is refused
  // (5..14, 15..24, 25..34), each told to a caller, and it goes on above them
  assert.deepEqual(after, [...range(26, 5), ...range(35, 32)]);
  assert.deepEqual(
    told.map((error) => [error.status, error.code]),
    [
      [0, "counter_moved_back"],
      [0, "counter_moved_back"],
      [0, "counter_moved_back"],
    ],
  );
  assert.match(told[0]?.detail ?? "", /\[5, 14\].*below 30/);
  assert.equal(new Set([...before, ...after]).size, before.length + after.length);
  // and every ID it was given is handed out or counted unused
  assert.equal(before.length + after.length + unused, backend.handedOut);
});

test("a block fetched ahead that overlaps is told before any later block is asked for", async () => {
  // Given a Sequence with prefetch, whose next block (fetched ahead) overlaps
  const backend = new MemoryBackend();
  const seq = new Sequence(backend, "orders", { blockSize: 10 });
  const first = (await draw(seq, 4)).ids;
  backend.moveBack(3);
  first.push(...(await draw(seq, 2)).ids); // past the prefetch mark: 3..12 is asked for
  await settled();
  assert.equal(backend.calls, 2);
  // When the callers use what is held (a take past the mark among them), and then need more
  const held = (await seq.take(2)).toArray();
  await settled(); // a block asked for ahead now would land
  const more = await draw(seq, 2);
  await assert.rejects(seq.next(), (error: unknown) => error instanceof CounterMovedBack && error.status === 0);
  const callsWhenTold = backend.calls;
  const later = (await draw(seq, 3)).ids;
  await seq.close();
  // Then the IDs held come first, then the caller is told, and only then is
  // a block asked for again; no ID of 3..12 is handed out
  assert.deepEqual([first, [...held, ...more.ids], more.told], [range(1, 6), range(7, 4), []]);
  assert.equal(callsWhenTold, 2);
  assert.deepEqual(later, [13, 14, 15]);
});

test("another region's lower IDs are not a move back; a region's own are", async () => {
  const even = new MemoryBackend({ start: 2, step: 2 });
  const odd = new MemoryBackend({ start: 1001, step: 2 });
  const seq = new Sequence(new FailoverBackend([odd, even]), "orders", { blockSize: 5, prefetch: false });
  const ids = (await draw(seq, 5)).ids; // 1001..1009 from the first region
  odd.failNext(1, UNAVAILABLE); // the next block comes from the other region, far below
  const failedOver = await draw(seq, 5);
  assert.deepEqual([...ids, ...failedOver.ids, ...failedOver.told], [...range(1001, 5, 2), ...range(2, 5, 2)]);
  even.moveBack(4); // that region moves back
  await assert.rejects(seq.next(), CounterMovedBack); // 4..12 is refused
  assert.deepEqual((await draw(seq, 3)).ids, [14, 16, 18]);
  await seq.close();
});

const stub = new StubServer();
let url = "";
before(async () => {
  url = await stub.start();
});
after(async () => {
  await stub.stop();
});

const movedBack = json(500, {
  error: { code: "counter_moved_back", message: "counter 'orders' was given IDs 5-14, at or below 30, the highest it had taken" },
});

test("the service's counter_moved_back is raised at once, never retried, and told to the Sequence's caller", async () => {
  const slept: number[] = [];
  const retry = new RetryPolicy({
    sleep: (seconds) => {
      slept.push(seconds);
      return Promise.resolve();
    },
  });
  stub.received.length = 0;
  stub.script(movedBack, movedBack, movedBack);
  await assert.rejects(
    new HttpBackend(url, { retry }).allocate("orders", 10, { idempotencyKey: "k1" }),
    (error: unknown) => error instanceof CounterMovedBack && error instanceof ServiceError && error.status === 500,
  );
  assert.deepEqual([stub.received.length, slept], [1, []]);

  stub.answers.length = stub.received.length = 0;
  stub.script(movedBack);
  const seq = new Sequence(new HttpBackend(url, { retry }), "orders", { prefetch: false });
  await assert.rejects(seq.next(), /at or below 30/);
  await seq.close();
  assert.equal(stub.received.length, 1);
});
