/**
 * A Sequence's block request: how big the next one is, and what its answer
 * means for the one after and for the callers waiting on it. A request, once
 * made, is kept (key and count) until the service answers it; one answered
 * with a refusal of its size lowers the sizes that follow; a Retry-After
 * holds the next request back. Nothing here waits or sends.
 */

import { type Block, blockLength, newKey } from "./block.js";
import {
  COUNTER_MOVED_BACK,
  CounterExhausted,
  CounterMovedBack,
  InvalidRequest,
  ServiceError,
  ServiceUnavailable,
  UnsafeId,
} from "./errors.js";
import type { Held } from "./held.js";
import type { BlockSizer } from "./sizing.js";

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** A block request: fixed when first made, repeated as is until answered. */
export interface BlockRequest {
  readonly key: string;
  readonly size: number;
}

/** How a request failed, and for which waiting callers (by what they need) that is the last word. */
export interface Failure<Caller> {
  readonly error: Error;
  finalFor(caller: Caller): boolean;
}

/** What an answer brings: a block to hand out, IDs to count as unused, or a failure. */
export interface Answer<Caller> {
  block?: Held;
  unusable?: number;
  failure?: Failure<Caller>;
}

/**
 * Refusals of a size (too large, or more than the counter has left) still
 * let a smaller request through.
 */
function sizeRefusal(error: unknown): boolean {
  return error instanceof CounterExhausted || (error instanceof InvalidRequest && error.code === "invalid_count");
}

export class BlockRequests {
  /** Made, not answered yet. */
  pending: BlockRequest | null = null;
  /** Monotonic seconds before which no request is sent: the service's Retry-After. */
  notBefore = -Infinity;
  /** The last take(n): blocks are asked for at least that. */
  takeHint = 0;
  readonly #sizer: BlockSizer;
  readonly #maxBatch: number;
  #ceiling: number; // lowered when the service refuses a size as too large
  #room: number | null = null; // at most what the counter seems to have left
  // The highest ID of every block answered, by region (its step and residue): a block at or below it is refused.
  readonly #highest = new Map<string, bigint>();

  constructor(sizer: BlockSizer, maxBatch: number) {
    this.#sizer = sizer;
    this.#maxBatch = maxBatch;
    this.#ceiling = maxBatch;
  }

  /**
   * The pending request, or a new one for at least `need` IDs (made at
   * `now`, with `held` IDs of those taken not handed out: held, or passed
   * over; and a key drawn now).
   */
  forNeed(need: number, now: number, held: number): BlockRequest {
    if (this.pending !== null) return this.pending;
    // Drained before a block ran out: what was used so far is the rate.
    if (this.#sizer.draining) this.#sizer.firstRate(this.#sizer.taken - held, now);
    // At least the last take(n), as far as the start bound allows.
    const hint = this.#sizer.withinStartBound(Math.min(this.takeHint, this.#sizer.maximum), held);
    let wanted = Math.max(this.#sizer.nextSize(held), hint);
    wanted = Math.min(wanted, this.#ceiling, this.#maxBatch);
    if (this.#room !== null) wanted = Math.min(wanted, this.#room);
    this.pending = { key: newKey(), size: Math.max(need, wanted) };
    this.#sizer.demandFrom(now);
    return this.pending;
  }

  /**
   * What `outcome` (a Block, or what the backend raised) means for
   * `request`, sent for `owner` (none for a prefetch) and answered at `now`.
   * A request without an answer stays pending, key and count, for the next
   * try; an answered one makes way for a new one.
   */
  answer<Caller extends { readonly need: number }>(
    request: BlockRequest,
    outcome: Block | Error,
    owner: Caller | undefined,
    options: { bigint: boolean; counter: string; now: number },
  ): Answer<Caller> {
    if (!(outcome instanceof Error) || outcome instanceof ServiceUnavailable) {
      // Answered after capacity refusals, or failed with them.
      this.#sizer.contended(outcome.capacityRefusals);
    }
    if (!(outcome instanceof Error)) {
      this.pending = null;
      const length = blockLength(outcome);
      const movedBack = this.#movedBack(outcome, options.counter);
      if (movedBack !== undefined) return { unusable: length, failure: { error: movedBack, finalFor: () => true } };
      if (length !== request.size) {
        const error = new ServiceError(500, "bad_block", `asked for ${request.size} IDs, the service answered with ${length}`);
        return { unusable: length, failure: { error, finalFor: () => true } };
      }
      if (!options.bigint && outcome.end > MAX_SAFE) {
        const error = new UnsafeId(
          `'${options.counter}' answered the block [${outcome.start}, ${outcome.end}], above Number.MAX_SAFE_INTEGER ` +
            "(2^53 - 1): ask for bigint IDs (new Sequence(backend, counter, { bigint: true }))",
        );
        return { unusable: length, failure: { error, finalFor: () => true } };
      }
      this.#room = null;
      return { block: { start: outcome.start, step: outcome.step, length } };
    }
    if (outcome instanceof ServiceUnavailable) {
      // No answer: the request may have been applied. Told to the caller it
      // was sent for; those waiting on it send it again, unless the service
      // asked for a pause.
      if (outcome.retryAfter !== undefined) this.notBefore = options.now + outcome.retryAfter;
      return { failure: { error: outcome, finalFor: (caller) => caller === owner } };
    }
    if (!(outcome instanceof ServiceError)) {
      // Anything else the backend raised: no answer either (the request is
      // kept), but nothing says another try would go better.
      return { failure: { error: outcome, finalFor: () => true } };
    }
    this.pending = null;
    const size = request.size;
    if (sizeRefusal(outcome) && size > 1) {
      // Too large for the service, or for what the counter has left:
      // smaller requests may still go through.
      const smaller = Math.max(1, Math.floor(size / 2));
      if (outcome instanceof InvalidRequest) {
        this.#ceiling = Math.min(this.#ceiling, smaller);
        this.#sizer.cap(this.#ceiling);
      } else {
        // Until a block comes: an admin may raise the counter's max.
        this.#room = this.#room === null ? smaller : Math.min(this.#room, smaller);
      }
    }
    const final = sizeRefusal(outcome) ? (caller: Caller) => caller.need >= size : () => true;
    return { failure: { error: outcome, finalFor: final } };
  }

  /**
   * CounterMovedBack if `block` starts at or below the highest ID of the
   * blocks answered before from its region: the counter gave out again IDs it
   * gave this Sequence (a region's IDs only increase, and another region's
   * are of another residue). Either way its end is from now on the highest
   * it must lie above.
   */
  #movedBack(block: Block, counter: string): CounterMovedBack | undefined {
    const region = `${block.step}:${block.start % block.step}`;
    const highest = this.#highest.get(region);
    this.#highest.set(region, highest === undefined || block.end > highest ? block.end : highest);
    if (highest === undefined || block.start > highest) return undefined;
    return new CounterMovedBack(
      0,
      COUNTER_MOVED_BACK,
      `'${counter}' answered the block [${block.start}, ${block.end}] (step ${block.step}), at or below ${highest}, ` +
        "the highest ID of the blocks this Sequence was given before: the counter moved back (restored from a backup?); " +
        "none of that block is handed out",
    );
  }
}
