/**
 * What the model-based test saw a Sequence do, and the promises it checks
 * after every step (each broken one is a line in `broken`):
 *
 * - no ID is handed out twice, and each came from a block the service
 *   answered with the size asked for, above every block answered before;
 * - a caller is told CounterMovedBack only after a block overlapping one
 *   answered before was answered; and once one was, no ID of a block
 *   answered after it is handed out before a caller is told;
 * - calls are served in call order: every ID (or range) a call gets lies
 *   above every one an earlier call got;
 * - no caller is told a failure (CounterExhausted above all) while the IDs
 *   held could serve it: one ID for next(), n in a row for take(n);
 * - every waiting call ends: served, failed, aborted, closed, or told
 *   ServiceUnavailable at its deadline, and never before it for waiting;
 * - no block request brings what the Sequence has not handed out of what it
 *   was given (held, or passed over by take) above what it has handed out
 *   (the start bound, while it applies: after the first block, and until a
 *   capacity refusal), beyond minBlock or a take(n) waiting; the last
 *   take(n) asks for more only as far as the bound allows;
 * - once closed, every ID the service took is handed out, reported unused,
 *   or in a block whose answer has not reached the client (lost or still
 *   on the network), across any number of close calls; each close resolves
 *   to the count the Sequence reports, and one called while another runs
 *   to the same count as that one.
 */

import { IdRange, type Sequence } from "../../src/index.js";
import type { ManualTimers } from "../manual-timers.js";
import type { ModelService } from "./service.js";

interface Call {
  readonly index: number;
  readonly take: boolean;
  readonly need: number;
  /** Manual seconds. */
  readonly at: number;
  readonly controller: AbortController | undefined;
  ended: boolean;
  /** The first and last ID it got. */
  ids?: [number, number];
}

/** Failures a call may end with. */
const FAILURES = new Set([
  "SequenceClosed",
  "AbortError",
  "ServiceUnavailable",
  "CounterExhausted",
  "CounterMovedBack",
  "InvalidRequest",
  "ServiceError",
  "UnexpectedResponse",
]);

export class Record {
  readonly broken: string[] = [];
  readonly calls: Call[] = [];
  closed = false;
  readonly #seq: Sequence;
  readonly #service: ModelService;
  readonly #timers: ManualTimers;
  readonly #waitTimeout: number;
  /** Blocks answered with the size asked for before close, as [first, last]. */
  readonly #delivered: [number, number][] = [];
  readonly #handed = new Set<number>();
  #highest = 0;
  #closing: Promise<number> | undefined;
  /** What a block request may ask for beyond the bound: the largest take(n) seen waiting since a block last landed. */
  #window = 0;
  /** Blocks answered that overlap one answered before (the counter moved back). */
  #movedBack = 0;
  /** Since the last of them, no caller has been told: the blocks answered since, as [first, last]. */
  #untold: [number, number][] | null = null;
  #landed = 0;

  constructor(seq: Sequence, service: ModelService, timers: ManualTimers) {
    this.#seq = seq;
    this.#service = service;
    this.#timers = timers;
    this.#waitTimeout = seq.waitTimeout;
    service.onDelivered = (block, usable, movedBack) => {
      const ids: [number, number] = [Number(block.start), Number(block.end)];
      if (movedBack) {
        this.#movedBack += 1;
        this.#untold = [];
      } else {
        this.#untold?.push(ids);
      }
      if (usable && !this.closed) this.#delivered.push(ids);
    };
  }

  /** Watch a call just made. */
  call(take: boolean, need: number, promise: Promise<number | IdRange<number>>, controller?: AbortController): void {
    const call: Call = { index: this.calls.length, take, need, at: this.#timers.now(), controller, ended: false };
    this.calls.push(call);
    promise.then(
      (value) => {
        this.#served(call, value);
      },
      (error: unknown) => {
        this.#failed(call, error);
      },
    );
  }

  get waiting(): Call[] {
    return this.calls.filter((call) => !call.ended);
  }

  #served(call: Call, value: number | IdRange<number>): void {
    call.ended = true;
    const ids = value instanceof IdRange ? value.toArray() : [value];
    const what = `call #${call.index} (${call.take ? `take(${call.need})` : "next()"})`;
    if (ids.length !== call.need) this.broken.push(`${what} got ${ids.length} IDs`);
    const first = ids[0] as number;
    const last = ids[ids.length - 1] as number;
    for (const [i, id] of ids.entries()) {
      if (i > 0 && id !== (ids[i - 1] as number) + 1) this.broken.push(`${what} got IDs not in a row: ${ids.join(",")}`);
      if (this.#handed.has(id)) this.broken.push(`${what} got ID ${id}, handed out before`);
      if (!this.#delivered.some(([lo, hi]) => lo <= id && id <= hi)) {
        this.broken.push(`${what} got ID ${id}, from no block the service answered with the size asked for`);
      }
      if (this.#untold?.some(([lo, hi]) => lo <= id && id <= hi)) {
        this.broken.push(`${what} got ID ${id}, of a block after the counter moved back, before a caller was told`);
      }
      this.#handed.add(id);
    }
    for (const other of this.calls) {
      if (other.ids === undefined) continue;
      const [lo, hi] = other.ids;
      if ((other.index < call.index && hi >= first) || (other.index > call.index && lo <= last)) {
        this.broken.push(`${what} got ${first}..${last}, out of call order with call #${other.index}'s ${lo}..${hi}`);
      }
    }
    call.ids = [first, last];
    this.#highest = Math.max(this.#highest, last);
  }

  #failed(call: Call, error: unknown): void {
    call.ended = true;
    const name = error instanceof Error ? error.name : String(error);
    const what = `call #${call.index} (${call.take ? `take(${call.need})` : "next()"}) told ${name}`;
    if (!FAILURES.has(name)) this.broken.push(`${what}: ${String(error)}`);
    if (name === "SequenceClosed" && !this.closed) this.broken.push(`${what} before any close()`);
    if (name === "AbortError" && call.controller?.signal.aborted !== true) this.broken.push(`${what}, never aborted`);
    if (name === "CounterMovedBack") {
      if (this.#movedBack === 0) this.broken.push(`${what}, and no block overlapped one answered before`);
      this.#untold = null;
    }
    const deadline = call.at + this.#waitTimeout;
    if (error instanceof Error && error.message.startsWith("no block for") && this.#timers.now() < deadline) {
      this.broken.push(`${what} at ${this.#timers.now()} s, before its deadline ${deadline} s`);
    }
    if (name === "SequenceClosed" || name === "AbortError") return;
    // What is held: the IDs of the blocks delivered above the highest handed out.
    const runs = this.#heldRuns();
    const longest = Math.max(0, ...runs.map(([lo, hi]) => hi - lo + 1));
    if (longest >= call.need) {
      this.broken.push(`${what} while ${runs.map(([lo, hi]) => `${lo}..${hi}`).join(", ")} were held`);
    }
  }

  /** The IDs held, as runs of IDs in a row. */
  #heldRuns(): [number, number][] {
    const runs: [number, number][] = [];
    const blocks = [...this.#delivered].sort((a, b) => a[0] - b[0]);
    for (const [lo, hi] of blocks) {
      const from = Math.max(lo, this.#highest + 1);
      if (from > hi) continue;
      const previous = runs[runs.length - 1];
      if (previous !== undefined && previous[1] + 1 === from) previous[1] = hi;
      else runs.push([from, hi]);
    }
    return runs;
  }

  /** After a step: no call waits past its deadline, the service saw nothing wrong, and once closed every ID is accounted for. */
  check(step: string): void {
    const now = this.#timers.now();
    for (const call of this.waiting) {
      if (call.at + this.#waitTimeout <= now) {
        this.broken.push(`call #${call.index} still waits at ${now} s, past its deadline ${call.at + this.#waitTimeout} s`);
      }
    }
    this.broken.push(...this.#service.complaints.splice(0));
    this.#checkBound();
    if (this.closed) {
      const taken = this.#service.taken;
      const unused = this.#seq.unusedIds ?? 0;
      const undelivered = this.#service.undelivered;
      if (taken !== this.#handed.size + unused + undelivered) {
        this.broken.push(
          `the service took ${taken} IDs; handed out ${this.#handed.size} + unused ${unused} + ` +
            `not yet answered ${undelivered} = ${this.#handed.size + unused + undelivered}`,
        );
      }
    }
    if (this.broken.length > 0) throw new Error(`after ${step}:\n  ${this.broken.join("\n  ")}`);
  }

  /**
   * The request on the network asks for no more than the start bound allows
   * now: since it was made nothing has landed and what is held has only
   * shrunk, so the bound allows at least what it allowed then.
   */
  #checkBound(): void {
    const sizer = this.#seq.sizer;
    const waiting = Math.max(0, ...this.waiting.filter((call) => call.take).map((call) => call.need));
    if (sizer.taken !== this.#landed) {
      // A block landed: the next request is for the takes waiting now, or those waiting later.
      this.#landed = sizer.taken;
      this.#window = waiting;
    }
    this.#window = Math.max(this.#window, waiting);
    if (this.closed || this.#service.capacityRefused || sizer.taken === 0) return;
    // Of the IDs of the blocks that landed, those not handed out (held, or
    // passed over) are at most those handed out: used - (taken - used).
    const used = this.#handed.size;
    const allowed = Math.max(sizer.minimum, 2 * used - sizer.taken, this.#window);
    for (const request of this.#service.onNetwork) {
      if (request.count > allowed) {
        this.broken.push(`a block request for ${request.count} IDs, with ${sizer.taken} taken and ${used} handed out`);
      }
    }
  }

  /** Watch a close() just called. */
  close(index: number, promise: Promise<number>): void {
    const during = this.#closing;
    const resolved = promise.then((unused) => {
      if (unused !== this.#seq.unusedIds) this.broken.push(`close #${index} resolved to ${unused}, unusedIds is ${this.#seq.unusedIds}`);
      return unused;
    });
    if (during !== undefined) {
      void Promise.all([during, resolved]).then(([first, second]) => {
        if (first !== second) this.broken.push(`close #${index}, called during another, resolved to ${second}, that one to ${first}`);
      });
    }
    this.#closing = resolved;
    void resolved.then(() => {
      if (this.#closing === resolved) this.#closing = undefined;
    });
  }
}
