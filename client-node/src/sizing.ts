/**
 * How big a block to ask for, and when to ask: the policy of the Python
 * client's sequence.py (BlockSizer, prefetch_tail, smoothed_latency), by the
 * same names and with the same numbers, so that both clients decide alike.
 * Times are in seconds, as there.
 */

/** The service's default MaxBatchSize. */
export const DEFAULT_MAX_BATCH = 1_000_000;

/**
 * The longest a block is sized to last, by default, however hot the counter:
 * blocks of a few minutes let a fleet of 10^4 busy clients share one
 * counter's ~1,000 writes/s (clients / runway writes/s) with room to spare,
 * and a client stopping leaves at most that long's worth of IDs unused.
 */
export const MAX_RUNWAY = 300.0;

/**
 * How many IDs of a block of `size` are still unused when the next block is
 * requested: the `prefetchAt` share, or, when a request takes longer than
 * that share lasts, two requests' worth at `rate` IDs/s (the block sizer's
 * estimate) and `latency` seconds (smoothedLatency's); never more than the
 * block.
 */
export function prefetchTail(size: number, prefetchAt: number, rate: number | null, latency: number | null): number {
  let tail = Math.ceil(size * prefetchAt);
  if (rate && latency) tail = Math.max(tail, Math.ceil(rate * latency * 2));
  return Math.min(tail, size);
}

/** The moving average of block request latency a Sequence keeps, after a request that took `seconds` (retries included). */
export function smoothedLatency(previous: number | null, seconds: number): number {
  return previous === null ? seconds : 0.5 * previous + 0.5 * seconds;
}

/**
 * How many IDs to ask for next: enough for `runway` seconds at the
 * consumption rate seen so far (a moving average), growing at most
 * `maxGrowth` times per block so one burst does not over-reserve.
 *
 * The runway lengthens when the counter is hot: every capacity refusal a
 * block request met (`contended`) doubles it, up to `maxRunway` (`runway`
 * itself when undefined). A fleet of clients costs the counter about
 * clients / runway writes a second, so a fleet too big for the counter's
 * ~1,000 writes/s needs longer runways, and each client learns it from the
 * refusals it meets. The runway never shortens again: a fleet that was too
 * big a minute ago still is. What it costs is bigger blocks, and more IDs
 * unused when the client stops.
 */
export class BlockSizer {
  readonly minimum: number;
  maximum: number;
  readonly runway: number;
  readonly maxGrowth: number;
  readonly maxRunway: number;
  /** runway, lengthened by capacity refusals */
  currentRunway: number;
  last: number;
  /** IDs per second */
  rate: number | null = null;
  /** where the interval the next observation covers begins */
  #since: number | null = null;

  constructor(initial: number, minimum: number, maximum: number, runway: number, maxGrowth = 8.0, maxRunway?: number) {
    if (!(Number.isSafeInteger(minimum) && Number.isSafeInteger(initial) && Number.isSafeInteger(maximum))) {
      throw new RangeError("block sizes must be integers");
    }
    if (!(1 <= minimum && minimum <= initial && initial <= maximum)) {
      throw new RangeError("block sizes must satisfy 1 <= minBlock <= initialBlock <= maxBlock");
    }
    if (!(runway > 0)) throw new RangeError("runway must be positive");
    if (maxRunway === undefined) maxRunway = runway;
    else if (!(maxRunway >= runway)) throw new RangeError(`maxRunway (${maxRunway}) must be at least runway (${runway})`);
    this.minimum = minimum;
    this.maximum = maximum;
    this.runway = runway;
    this.maxGrowth = maxGrowth;
    this.maxRunway = maxRunway;
    this.currentRunway = runway;
    this.last = initial;
  }

  /** IDs are wanted from `now` on (a block is asked for); the first interval measured starts here, not when that block arrives. */
  demandFrom(now: number): void {
    this.#since ??= now;
  }

  /**
   * A block of `consumed` IDs ran out at `now`. Its interval runs from where
   * the previous block ran out, not from when this one arrived: demand that
   * waited for it in between was drained from it at once, and a block
   * emptied at once by waiting callers measures the rate they arrived at,
   * not the speed of memory.
   */
  blockFinished(consumed: number, now: number): void {
    const since = this.#since ?? now;
    this.observe(consumed, now - since);
    this.#since = now;
  }

  /** A block of `consumed` IDs lasted `seconds`. */
  observe(consumed: number, seconds: number): void {
    if (consumed <= 0) return;
    const sample = consumed / Math.max(seconds, 1e-6);
    this.rate = this.rate === null ? sample : 0.5 * this.rate + 0.5 * sample;
  }

  /**
   * The last block request was refused `refusals` times for capacity
   * (answered in the end or not): double the runway for each, up to
   * maxRunway. Each refusal counts, not each request: a request refused
   * again and again meets a counter far over its budget.
   */
  contended(refusals: number): void {
    if (refusals > 0) {
      // Bounded exponent: past 2**64 every runway is at maxRunway anyway.
      this.currentRunway = Math.min(this.maxRunway, this.currentRunway * 2 ** Math.min(refusals, 64));
    }
  }

  nextSize(): number {
    if (this.rate !== null) {
      let wanted = this.rate * this.currentRunway;
      wanted = Math.min(wanted, this.last * this.maxGrowth);
      this.last = Math.trunc(Math.min(this.maximum, Math.max(this.minimum, wanted)));
    }
    return this.last;
  }

  cap(maximum: number): void {
    this.maximum = Math.max(this.minimum, Math.min(this.maximum, maximum));
    this.last = Math.min(this.last, this.maximum);
  }
}
