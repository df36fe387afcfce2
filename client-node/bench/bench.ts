/**
 * The Node client's benchmarks (not tests), measured side by side in one run;
 * `make bench` runs them through bench/node.py, which writes
 * bench/results/node.json. Prints one flat JSON object.
 *
 * 1. Rate: `await seq.next()` IDs/s against a bare counter behind the same
 *    await (`await counter.next()`, a resolved promise of `++n`), rounds
 *    interleaved. (A bare `++n` with no await is no yardstick: V8 folds the
 *    loop away.)
 * 2. Stalls: the latency of each `await seq.next()` while every block
 *    request takes 50 ms, consuming at 400,000 IDs/s (a 50,000-ID block
 *    lasts 125 ms) and unpaced; the loop lets the event loop turn every
 *    1,000 IDs, as any service handling requests does.
 */

import { setImmediate as turn, setTimeout as sleepFor } from "node:timers/promises";

import { Sequence } from "../src/index.js";
import { MemoryBackend } from "../src/testing.js";

const RATE_CALLS = 3_000_000;
const RATE_ROUNDS = 5;
const STALL_CALLS = 2_000_000;
const STALL_LATENCY = 0.05;
const STALL_BLOCK = 50_000;
const STALL_PACE = 400_000;
const TURN_EVERY = 1_000;

function seconds(since: bigint): number {
  return Number(process.hrtime.bigint() - since) / 1e9;
}

async function awaitedCounterRate(calls: number): Promise<number> {
  let n = 0;
  const counter = { next: (): Promise<number> => Promise.resolve(++n) };
  const started = process.hrtime.bigint();
  let last = 0;
  for (let i = 0; i < calls; i++) last = await counter.next();
  if (last !== calls) throw new Error("the counter miscounted");
  return calls / seconds(started);
}

async function sequenceRate(calls: number): Promise<number> {
  const seq = new Sequence(new MemoryBackend(), "rate", { blockSize: 1_000_000 });
  await seq.next(); // the first block, outside the timing
  const started = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) await seq.next();
  const rate = calls / seconds(started);
  await seq.close(0);
  return rate;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

async function rates(): Promise<Record<string, number>> {
  const bare: number[] = [];
  const seq: number[] = [];
  await sequenceRate(RATE_CALLS / 10); // warm up the compiler on every path
  await awaitedCounterRate(RATE_CALLS / 10);
  for (let round = 0; round < RATE_ROUNDS; round++) {
    bare.push(await awaitedCounterRate(RATE_CALLS));
    seq.push(await sequenceRate(RATE_CALLS));
  }
  const ratios = seq.map((rate, i) => rate / (bare[i] as number));
  return {
    rate_awaited_counter_ids_per_s: Math.round(median(bare)),
    rate_sequence_ids_per_s: Math.round(median(seq)),
    rate_ratio: Number(median(ratios).toFixed(3)),
  };
}

async function stallRun(pace: number | null): Promise<Record<string, number>> {
  const backend = new MemoryBackend({ latency: STALL_LATENCY });
  const seq = new Sequence(backend, "stall", { blockSize: STALL_BLOCK });
  await seq.next();
  const took = new Float64Array(STALL_CALLS);
  const started = process.hrtime.bigint();
  for (let i = 0; i < STALL_CALLS; i++) {
    const before = process.hrtime.bigint();
    await seq.next();
    took[i] = Number(process.hrtime.bigint() - before);
    if (i % TURN_EVERY === TURN_EVERY - 1) {
      const ahead = pace === null ? 0 : (i + 1) / pace - seconds(started);
      if (ahead > 0.001) await sleepFor(ahead * 1000);
      else await turn();
    }
  }
  const requests = seq.requests;
  await seq.close(0);
  took.sort();
  const at = (share: number): number => (took[Math.min(took.length - 1, Math.floor(took.length * share))] as number) / 1000;
  return {
    p50_us: Number(at(0.5).toFixed(3)),
    p99_us: Number(at(0.99).toFixed(3)),
    p999_us: Number(at(0.999).toFixed(3)),
    max_us: Number(((took[took.length - 1] as number) / 1000).toFixed(1)),
    over_1ms: took.filter((ns) => ns > 1e6).length,
    requests,
  };
}

async function stalls(): Promise<Record<string, number>> {
  const results: Record<string, number> = {};
  for (const [suffix, pace] of [["", STALL_PACE], ["_unpaced", null]] as const) {
    for (const [name, value] of Object.entries(await stallRun(pace))) results[`stall_${name}${suffix}`] = value;
  }
  return results;
}

const results = {
  node: process.version,
  rate_calls: RATE_CALLS,
  stall_calls: STALL_CALLS,
  stall_latency_ms: STALL_LATENCY * 1000,
  stall_block: STALL_BLOCK,
  stall_pace_ids_per_s: STALL_PACE,
  ...(await rates()),
  ...(await stalls()),
};
console.log(JSON.stringify(results));
