/** What the tests share: a backend that records and scripts its calls, waiting on a condition, and drawing IDs. */

import { setTimeout as sleepFor } from "node:timers/promises";

import type { AllocateOptions, Backend, Block, Sequence } from "../src/index.js";

/** Wait until `condition` holds, checking often; fail only after a generous ceiling (never a timing assertion). */
export async function eventually(condition: () => boolean, what: string, ceilingSeconds = 30): Promise<void> {
  const until = Date.now() + ceilingSeconds * 1000;
  while (!condition()) {
    if (Date.now() > until) throw new Error(`still not true after ${ceilingSeconds} s: ${what}`);
    await sleepFor(1);
  }
}

export interface Call {
  counter: string;
  count: number;
  key: string;
}

/** Wraps a backend: records every call, and lets a test hold calls until it releases them. */
export class RecordingBackend implements Backend {
  readonly calls: Call[] = [];
  held = false;
  readonly #inner: Backend;
  readonly #waiting: (() => void)[] = [];

  constructor(inner: Backend) {
    this.#inner = inner;
  }

  async allocate(counter: string, count: number, options: AllocateOptions): Promise<Block> {
    this.calls.push({ counter, count, key: options.idempotencyKey });
    if (this.held) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    return this.#inner.allocate(counter, count, options);
  }

  get waiting(): number {
    return this.#waiting.length;
  }

  release(): void {
    this.held = false;
    for (const resume of this.#waiting.splice(0)) resume();
  }
}

/** A backend that fails every call with `error`, counting them. */
export class FailingBackend implements Backend {
  calls = 0;
  constructor(readonly error: () => Error) {}

  allocate(): Promise<Block> {
    this.calls += 1;
    return Promise.reject(this.error());
  }
}

/** Settle every promise; the fulfilled values and the rejections, in call order. */
export async function settleAll<T>(promises: Promise<T>[]): Promise<{ values: T[]; errors: unknown[] }> {
  const results = await Promise.allSettled(promises);
  return {
    values: results.flatMap((r) => (r.status === "fulfilled" ? [r.value] : [])),
    errors: results.flatMap((r) => (r.status === "rejected" ? [r.reason as unknown] : [])),
  };
}

export function isIncreasing(ids: readonly number[]): boolean {
  return ids.every((id, i) => i === 0 || id > (ids[i - 1] as number));
}

/** `count` numbers from `start`, `step` apart: the IDs a test expects. */
export const range = (start: number, count: number, step = 1): number[] =>
  Array.from({ length: count }, (_, i) => start + i * step);

/** `count` IDs from `seq`, one next() at a time. */
export async function drawMany(seq: Sequence, count: number): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < count; i++) ids.push(await seq.next());
  return ids;
}
