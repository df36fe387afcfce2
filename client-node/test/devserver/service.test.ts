/**
 * The Node client against the real service: the dev server over HTTP. Run by
 * tests/integration/test_client_node_devserver.py, which starts the server
 * and passes its URL in IDBLOCKS_URL.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { CounterExhausted, HttpBackend, RetryPolicy, Sequence, UnsafeId } from "../../src/index.js";
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
