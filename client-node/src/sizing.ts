/**
 * How big a block to ask for, and when to ask: the policy of the Python
 * client's sequence.py (BlockSizer, prefetch_tail, smoothed_latency), by the
 * same names and with the same numbers, so that both clients decide alike.
 * Times are in seconds, as there.
 *
 * Two rules keep what a process skips when it stops in proportion to what it
 * used. While a sequence is young, a block request never brings what it
 * holds above what it has used (the start bound: a process that stops at any
 * moment has skipped at most as many IDs as it used, give or take its first
 * block), and the next block is asked for late enough that it can still be
 * nearly as big as everything taken before it (so sizes still about double
 * per block). Once a sequence has used a runway's worth at its rate, neither
 * rule binds and the sizes are the rate's. And `drain()`, for a process
 * about to stop, sizes every block from then on for DRAIN_RUNWAY seconds.
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

/** The first block a Sequence asks for, unless told otherwise: a process that takes one ID and stops skips at most 15. */
export const INITIAL_BLOCK = 16;

/**
 * How many seconds of IDs a draining sequence's blocks hold: about one block
 * while a load balancer takes a process out of service, short enough that
 * little is left when it stops, long enough (with prefetchTail's two request
 * latencies) that the next block is on its way in time.
 */
export const DRAIN_RUNWAY = 0.5;

/**
 * While young, the next block is asked for when at most this share of all
 * the IDs taken is left (BlockSizer.youngTail), so that the start bound
 * still lets it be 15/16 of them: from a first block of 16, about 1.94 times
 * as many taken per block (11 requests to 10,000 IDs taken as fast as they
 * can be).
 */
export const YOUNG_TAIL_SHARE = 1 / 32;

/**
 * How many IDs of a block of `size` are still unused when the next block is
 * requested: the `prefetchAt` share, or, when a request takes longer than
 * that share lasts, two requests' worth at `rate` IDs/s (the block sizer's
 * estimate) and `latency` seconds (smoothedLatency's); never more than the
 * block, nor than `most` (BlockSizer.youngTail(): a young sequence that
 * asked earlier could only ask for less).
 */
export function prefetchTail(
  size: number,
  prefetchAt: number,
  rate: number | null,
  latency: number | null,
  most: number | null = null,
): number {
  let tail = Math.ceil(size * prefetchAt);
  if (rate && latency) tail = Math.max(tail, Math.ceil(rate * latency * 2));
  if (most !== null) tail = Math.min(tail, most);
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
 *
 * The start bound (`boundedStart`; off, the sizes of idblocks 1.0, for
 * comparisons): `nextSize(held)` is at most what was used (the IDs taken,
 * told by `landed`, less those still held) less what is held, and at least
 * `minimum`; the first block is `initial`. So what is held never exceeds
 * what was used, however soon the client stops; it stops binding once a
 * runway's worth has been used, and is lifted by the first capacity refusal
 * (a hot counter cannot afford the dozen small requests it costs: sizes then
 * grow maxGrowth times a block). `drain()`: from then on the runway is
 * DRAIN_RUNWAY (capacity refusals still lengthen it), for a process about
 * to stop.
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
  /** The start bound applies until a capacity refusal: a hot counter cannot afford the many small requests it costs. */
  bounded: boolean;
  /** IDs of the blocks that landed */
  taken = 0;
  draining = false;

  constructor(
    initial: number,
    minimum: number,
    maximum: number,
    runway: number,
    maxGrowth = 8.0,
    maxRunway?: number,
    options: { boundedStart?: boolean } = {},
  ) {
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
    this.bounded = options.boundedStart ?? true;
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
      this.bounded = false;
      // Bounded exponent: past 2**64 every runway is at maxRunway anyway.
      this.currentRunway = Math.min(this.maxRunway, this.currentRunway * 2 ** Math.min(refusals, 64));
    }
  }

  /** A block of `count` IDs landed: they are taken. */
  landed(count: number): void {
    this.taken += count;
  }

  /** The process is about to stop: size blocks for DRAIN_RUNWAY seconds from now on (or the runway, if shorter). */
  drain(): void {
    this.draining = true;
    this.currentRunway = Math.min(this.currentRunway, DRAIN_RUNWAY);
  }

  /**
   * No block has run out yet, and `used` IDs were used between the first
   * demand (demandFrom) and `now`: that is the rate, for a sequence drained
   * before it knew one (its first block given by the caller, say).
   */
  firstRate(used: number, now: number): void {
    if (this.rate === null && this.#since !== null) this.observe(used, now - this.#since);
  }

  /**
   * The most IDs a block just started may still hold when the next is asked
   * for (prefetchTail's `most`), while the start bound could make that next
   * block smaller than the sizes asked for now: few enough that it need not,
   * or YOUNG_TAIL_SHARE of the IDs taken (this block included), at least
   * one. null when the bound cannot bind (fixed sizes, or the bound off).
   */
  youngTail(): number | null {
    const wanted = this.#wanted();
    if (!this.bounded || this.minimum >= wanted) return null;
    return Math.max(1, Math.ceil(this.taken * YOUNG_TAIL_SHARE), Math.floor((this.taken - wanted) / 2));
  }

  /** The size the rate asks for now: a runway's worth, growing at most maxGrowth times on the last, within minimum and maximum. */
  #wanted(): number {
    if (this.rate === null) return this.last;
    const wanted = Math.min(this.rate * this.currentRunway, this.last * this.maxGrowth);
    return Math.trunc(Math.min(this.maximum, Math.max(this.minimum, wanted)));
  }

  /** The size of the next block, with `held` IDs of those taken not handed out now (held, or passed over). */
  nextSize(held = 0): number {
    this.last = this.#wanted();
    return this.withinStartBound(this.last, held);
  }

  /**
   * `size`, or less while the start bound applies: with `held` IDs of those
   * taken not handed out, what is then not handed out is at most what was used.
   */
  withinStartBound(size: number, held: number): number {
    if (this.bounded && this.taken) {
      // used - held, where used = taken - held: what is not handed out after
      // this block lands is at most what was used before it.
      return Math.min(size, Math.max(this.minimum, this.taken - 2 * held));
    }
    return size;
  }

  cap(maximum: number): void {
    this.maximum = Math.max(this.minimum, Math.min(this.maximum, maximum));
    this.last = Math.min(this.last, this.maximum);
  }
}
