import assert from "node:assert/strict";
import { test } from "node:test";

import { BlockSizer, prefetchTail, smoothedLatency } from "../../src/index.js";

test("the block sizer aims at the runway, grows at most eight times a block, and stays within its bounds", () => {
  // Given a sizer for a 5 s runway between 1 and 10,000
  const sizer = new BlockSizer(100, 1, 10_000, 5.0);
  assert.equal(sizer.nextSize(), 100); // no rate measured yet
  // When 100 IDs lasted 0.1 s (1,000 IDs/s: 5,000 for the runway)
  sizer.observe(100, 0.1);
  // Then the next block grows to at most 8 x 100
  assert.equal(sizer.nextSize(), 800);
  assert.equal(sizer.nextSize(), 5_000);
  // And a burst never passes the maximum
  sizer.observe(1_000_000, 0.001);
  assert.equal(sizer.nextSize(), 10_000);
});

test("each capacity refusal doubles the runway, up to maxRunway, and it never shortens", () => {
  const sizer = new BlockSizer(100, 1, 1_000_000, 5.0, 8.0, 300.0);
  sizer.contended(1);
  assert.equal(sizer.currentRunway, 10.0);
  sizer.contended(3);
  assert.equal(sizer.currentRunway, 80.0);
  sizer.contended(1_000);
  assert.equal(sizer.currentRunway, 300.0);
  sizer.contended(0);
  assert.equal(sizer.currentRunway, 300.0);
});

test("a block's interval runs from where the previous one ran out, so waiting demand is not read as memory speed", () => {
  const sizer = new BlockSizer(100, 1, 1_000_000, 5.0);
  sizer.demandFrom(10.0);
  sizer.blockFinished(100, 11.0); // asked at 10, ran out at 11: 100 IDs/s
  assert.equal(sizer.rate, 100);
});

test("cap lowers the maximum and the last size, never below the minimum", () => {
  const sizer = new BlockSizer(1_000, 10, 1_000_000, 5.0);
  sizer.cap(500);
  assert.equal(sizer.maximum, 500);
  assert.equal(sizer.nextSize(), 500);
  sizer.cap(1);
  assert.equal(sizer.maximum, 10);
});

test("bad sizes are refused before anything is built", () => {
  assert.throws(() => new BlockSizer(0, 1, 10, 5.0), RangeError);
  assert.throws(() => new BlockSizer(20, 1, 10, 5.0), RangeError);
  assert.throws(() => new BlockSizer(5, 1, 10, 0), RangeError);
  assert.throws(() => new BlockSizer(5, 1, 10, 5.0, 8.0, 1.0), RangeError);
});

test("the prefetch tail is the prefetchAt share, or two requests' worth when requests are slow, never more than the block", () => {
  assert.equal(prefetchTail(100, 0.5, null, null), 50);
  assert.equal(prefetchTail(100, 0.1, 1_000, 0.02), 40); // 1,000 IDs/s x 20 ms x 2
  assert.equal(prefetchTail(100, 0.1, 1_000_000, 1.0), 100);
  assert.equal(prefetchTail(100, 0, null, null), 0);
});

test("request latency is smoothed by halves", () => {
  assert.equal(smoothedLatency(null, 0.2), 0.2);
  assert.equal(smoothedLatency(0.2, 0.4), 0.30000000000000004);
});
