/**
 * The Node client against the real service: the dev server over HTTP. Run by
 * tests/integration/test_client_node_devserver.py, which starts the server
 * and passes its URL in IDBLOCKS_URL.
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import { type Backend, CounterExhausted, HttpBackend, RetryPolicy, Sequence, UnsafeId } from "../../src/index.js";
import { isIncreasing } from "../support.js";

const url = process.env["IDBLOCKS_URL"] ?? "";
const skip = url ? false : "IDBLOCKS_URL is not set (tests/integration/test_client_node_devserver.py sets it)";
const admin = url ? new HttpBackend(url) : undefined;

async function highWater(counter: string): Promise<bigint> {
  const state = await (admin as HttpBackend).get(counter);
  return BigInt(state["next"] as number | bigint) - 1n;
}

test("a Sequence over HTTP hands out 1..500 and accounts for every ID the service allocated", { skip }, async () => {
  const seq = new Sequence(new HttpBackend(url), "node-seq-http", { initialBlock: 10 });
  const ids: number[] = [];
  for (let i = 0; i < 500; i++) ids.push(await seq.next());
  const unused = await seq.close();
  assert.deepEqual(ids, Array.from({ length: 500 }, (_, i) => i + 1));
  assert.equal(await highWater("node-seq-http"), BigInt(500 + unused));
});

test("300 callers at once over HTTP, mixing next() and take(): no ID twice, none unaccounted for", { skip }, async () => {
  const seq = new Sequence(new HttpBackend(url), "node-crowd", { initialBlock: 20, maxBlock: 200 });
  const perCaller = await Promise.all(
    Array.from({ length: 300 }, async (_, caller) => {
      const mine: number[] = [];
      for (let i = 0; i < 20; i++) {
        if ((caller + i) % 9 === 0) mine.push(...(await seq.take(4)));
        else mine.push(await seq.next());
      }
      return mine;
    }),
  );
  const unused = await seq.close();
  const all = perCaller.flat();
  assert.equal(new Set(all).size, all.length);
  assert.ok(perCaller.every(isIncreasing));
  assert.equal(await highWater("node-crowd"), BigInt(all.length + unused));
});

test("an exhausted counter is told only after every ID up to its max is handed out", { skip }, async () => {
  await (admin as HttpBackend).create("node-small", { max: 30 });
  const seq = new Sequence(new HttpBackend(url), "node-small", { blockSize: 8 });
  const ids: number[] = [];
  for (let i = 0; i < 30; i++) ids.push(await seq.next());
  assert.deepEqual(ids, Array.from({ length: 30 }, (_, i) => i + 1));
  await assert.rejects(seq.next(), CounterExhausted);
  assert.equal(await seq.close(), 0);
});

test("IDs past 2^53 - 1 arrive exact as bigints, and as numbers they are UnsafeId", { skip }, async () => {
  const start = 2n ** 53n - 4n;
  await (admin as HttpBackend).create("node-big", { start, max: 2n ** 63n - 1n });
  const safe = new Sequence(new HttpBackend(url), "node-big", { blockSize: 4, prefetch: false });
  const ids: number[] = [];
  for (let i = 0; i < 4; i++) ids.push(await safe.next());
  assert.equal(ids[3], Number.MAX_SAFE_INTEGER);
  await assert.rejects(safe.next(), UnsafeId);
  assert.equal(await safe.close(), 4);

  const big = new Sequence(new HttpBackend(url), "node-big", { blockSize: 4, bigint: true });
  assert.equal(await big.next(), 2n ** 53n + 4n);
  const taken = await big.take(3);
  assert.deepEqual([...taken], [2n ** 53n + 5n, 2n ** 53n + 6n, 2n ** 53n + 7n]);
  await big.close();
});

test("the lost answers the proxy was told to drop cost no IDs: the retries carried their keys", {
  skip: process.env["IDBLOCKS_LOSSY_URL"] ? false : "IDBLOCKS_LOSSY_URL is not set",
}, async () => {
  // Given a proxy that loses the answers of the next block requests, after applying them
  const backend = new HttpBackend(process.env["IDBLOCKS_LOSSY_URL"] ?? "", { retry: new RetryPolicy({ base: 0.01 }) });
  const seq = new Sequence(backend, "node-lossy", { blockSize: 20 });
  // When 200 IDs are drawn through it
  const ids: number[] = [];
  for (let i = 0; i < 200; i++) ids.push(await seq.next());
  const unused = await seq.close();
  // Then they are 1..200 and the service allocated nothing else
  assert.deepEqual(ids, Array.from({ length: 200 }, (_, i) => i + 1));
  assert.equal(await highWater("node-lossy"), BigInt(200 + unused));
});

// -- what a process skips when it stops -------------------------------------------------
// Measured by how far the counter moved (the admin GET); the requests by a
// backend that counts what it passes on.

async function skipped(counter: string, used: number): Promise<bigint> {
  return (await highWater(counter)) - BigInt(used);
}

/** An HttpBackend, and how many block requests went through it. */
function counting(): { backend: Backend; requests: () => number } {
  const http = new HttpBackend(url);
  let requests = 0;
  const backend: Backend = {
    allocate: (counter, count, options) => {
      requests += 1;
      return http.allocate(counter, count, options);
    },
  };
  return { backend, requests: () => requests };
}

/** `await seq.next()` `count` times, about `rate` times a second in ticks of 10 ms (never a catching-up burst): how many seconds it took. A count, not a time: however slow the machine, the block given up front is used up. */
async function steadily(seq: Sequence, rate: number, count: number): Promise<number> {
  const started = performance.now();
  for (let tick = 0; tick < count / (rate / 100); tick++) {
    for (let i = 0; i < rate / 100; i++) await seq.next();
    await sleep(10);
  }
  return (performance.now() - started) / 1000;
}

test("a process that takes one ID and closes skips at most 15", { skip }, async () => {
  const seq = new Sequence(new HttpBackend(url), "node-gaps-one");
  await seq.next();
  await seq.close();
  const gap = await skipped("node-gaps-one", 1);
  assert.ok(gap <= 15n, `skipped ${gap}`);
});

test("10,000 IDs as fast as they come skip at most 10,000, in at most 12 requests", { skip }, async () => {
  const { backend, requests } = counting();
  const seq = new Sequence(backend, "node-gaps-burst");
  for (let i = 0; i < 10_000; i++) await seq.next();
  await seq.close();
  const gap = await skipped("node-gaps-burst", 10_000);
  assert.ok(gap <= 10_000n, `skipped ${gap}`);
  assert.ok(requests() <= 12, `${requests()} requests`);
});

test("after drain() and 8 s at a steady rate, close skips at most a second's worth of IDs", { skip }, async () => {
  // Given a process using about 1,000 IDs/s, with blocks of 5 s (its rate given up front)
  const rate = 1_000;
  const seq = new Sequence(new HttpBackend(url), "node-gaps-drain", { initialBlock: 5 * rate });
  const before = 3 * rate;
  await steadily(seq, rate, before);
  // When it drains and goes on at that rate for 8 s (8 s of IDs), then closes
  seq.drain();
  const during = 8 * rate;
  const seconds = await steadily(seq, rate, during);
  await seq.close();
  // Then what it skipped is at most a second's worth at the rate it drew
  const gap = await skipped("node-gaps-drain", before + during);
  assert.ok(Number(gap) <= during / seconds, `skipped ${gap}, drawing ${during / seconds} IDs/s`);
});
