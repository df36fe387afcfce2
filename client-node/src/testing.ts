/**
 * An in-memory backend for tests and benchmarks: no network, with latency
 * and faults to inject (the Python client's testing.py). It keeps the
 * service's contract: blocks are consecutive and never overlap, and a
 * request repeated with the same Idempotency-Key gets the same block back.
 */

import { setTimeout as sleepFor } from "node:timers/promises";

import { type AllocateOptions, type Backend, type Block, blockLength } from "./block.js";
import { CounterExhausted, InvalidRequest, ServiceUnavailable } from "./errors.js";

/**
 * Refused before anything was taken, as a throttled service refuses (503):
 * the ServiceUnavailable counts one capacity refusal.
 */
export const UNAVAILABLE = "unavailable";
/**
 * Refused for capacity once, retried by the backend and then answered: the
 * block counts one capacity refusal, as HttpBackend's does after a 503.
 */
export const THROTTLED = "throttled";
/** The block was taken, the answer never arrived. */
export const LOST_RESPONSE = "lost_response";

export type Fault = typeof UNAVAILABLE | typeof THROTTLED | typeof LOST_RESPONSE;
const FAULTS: ReadonlySet<string> = new Set([UNAVAILABLE, THROTTLED, LOST_RESPONSE]);

export interface MemoryBackendOptions {
  /** Seconds each allocate() takes. */
  latency?: number;
  start?: number | bigint;
  maxId?: number | bigint;
  maxBatch?: number;
  /** > 1 hands out every step-th ID from start, as one region of `step` does. */
  step?: number | bigint;
  sleep?: (seconds: number) => Promise<void>;
}

export class MemoryBackend implements Backend {
  latency: number;
  readonly step: bigint;
  readonly maxBatch: number;
  readonly #sleep: (seconds: number) => Promise<void>;
  #next: bigint;
  readonly #max: bigint;
  readonly #byKey = new Map<string, [number, Block]>();
  readonly #faults: Fault[] = [];
  /** allocate() calls, failed ones included. */
  calls = 0;
  /** Every block taken, in order. */
  readonly blocks: Block[] = [];

  constructor(options: MemoryBackendOptions = {}) {
    this.latency = options.latency ?? 0;
    this.step = BigInt(options.step ?? 1);
    this.maxBatch = options.maxBatch ?? 1_000_000;
    this.#sleep = options.sleep ?? ((seconds) => sleepFor(seconds * 1000));
    this.#next = BigInt(options.start ?? 1);
    this.#max = BigInt(options.maxId ?? Number.MAX_SAFE_INTEGER);
  }

  failNext(times = 1, kind: Fault = UNAVAILABLE): void {
    if (!FAULTS.has(kind)) throw new RangeError(`unknown fault ${JSON.stringify(kind)}`);
    for (let i = 0; i < times; i++) this.#faults.push(kind);
  }

  /**
   * The counter's state moves back, as a table restored from an earlier
   * backup: its next ID is `to` again, so that IDs already handed out are
   * handed out again (what a client must then refuse).
   */
  moveBack(to: number | bigint): void {
    this.#next = BigInt(to);
  }

  get handedOut(): number {
    return this.blocks.reduce((total, block) => total + blockLength(block), 0);
  }

  async allocate(counter: string, count: number, options: AllocateOptions): Promise<Block> {
    if (this.latency) await this.#sleep(this.latency);
    this.calls += 1;
    const fault = this.#faults.shift();
    if (fault === UNAVAILABLE) {
      throw new ServiceUnavailable("injected: service unavailable", { capacityRefusals: 1 });
    }
    if (!(Number.isSafeInteger(count) && count >= 1 && count <= this.maxBatch)) {
      throw new InvalidRequest(400, "invalid_count", `count must be an integer from 1 to ${this.maxBatch}`);
    }
    let block: Block;
    const earlier = this.#byKey.get(options.idempotencyKey);
    if (earlier !== undefined) {
      if (earlier[0] !== count) {
        throw new InvalidRequest(422, "idempotency_key_reused", "key reused with a different count");
      }
      block = earlier[1];
    } else {
      const last = this.#next + BigInt(count - 1) * this.step;
      if (last > this.#max) {
        throw new CounterExhausted(409, "counter_exhausted", `counter '${counter}' is exhausted`);
      }
      block = { start: this.#next, end: last, step: this.step, capacityRefusals: 0 };
      this.#next = last + this.step;
      this.#byKey.set(options.idempotencyKey, [count, block]);
      this.blocks.push(block);
    }
    if (fault === LOST_RESPONSE) throw new ServiceUnavailable("injected: the response was lost");
    if (fault === THROTTLED) return { ...block, capacityRefusals: 1 };
    return block;
  }
}
