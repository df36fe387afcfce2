/**
 * Sequence: IDs of one counter, handed out from memory (the Python client's
 * sequence.py, for one thread and many awaiting callers).
 *
 * The IDs come in blocks (POST /counters/{name}/batch). While IDs are held,
 * `next()` hands one out without waiting on anything: a comparison and an
 * addition, then an already-resolved promise. JavaScript runs one caller at
 * a time, so no lock is needed; what needs care is the callers that wait.
 * They wait in one queue, in the order they called, and are served from it
 * in that order; while anyone waits, no later call can jump ahead. So IDs
 * and ranges are handed out in call order, each above every one handed out
 * before.
 *
 * Each block is served in two parts. When the first runs out, the next block
 * is requested in the background (prefetch), so in steady state the network
 * is never waited on. Blocks are requested one at a time, and a block
 * request, once made, is repeated with the same count and Idempotency-Key
 * until the service answers it, whichever caller sends it again; so a lost
 * response costs no IDs, and every block is above the one before.
 *
 * Block sizes adapt (BlockSizer): each is sized to last `runway` seconds at
 * the measured rate, within [minBlock, maxBlock]; a block request the
 * service refused for capacity (the counter is hot) lengthens the runway, up
 * to `maxRunway`.
 */

import { type Backend, type Block, blockLength, newKey } from "./backend.js";
import {
  CounterExhausted,
  IdBlocksError,
  InvalidRequest,
  SequenceClosed,
  ServiceError,
  ServiceUnavailable,
  UnsafeId,
} from "./errors.js";
import { monotonic } from "./retry.js";
import { BlockSizer, DEFAULT_MAX_BATCH, MAX_RUNWAY, prefetchTail, smoothedLatency } from "./sizing.js";

/**
 * How long close() waits, by default, for a block request on the network to
 * be answered, so that the block it brings is counted: HttpBackend's default
 * timeout for one request. Seconds.
 */
export const CLOSE_TIMEOUT = 10.0;

/** How many times close() asks for a request whose answer was lost (the backend retries within each), while its timeout lasts. */
export const CLOSE_ATTEMPTS = 3;

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

export interface SequenceOptions {
  prefetch?: boolean;
  /** Fixes every block's size (no adapting), except that take(n) asks for at least n. */
  blockSize?: number;
  initialBlock?: number;
  minBlock?: number;
  maxBlock?: number;
  /** Seconds a block should last; each capacity refusal doubles it, up to maxRunway. */
  runway?: number;
  /** Seconds; by default MAX_RUNWAY, or runway if that is longer. */
  maxRunway?: number;
  /** The share of a block still unused when the next one is requested; grows by itself when requests take longer than that share lasts. */
  prefetchAt?: number;
  /** Seconds a call waits for a block; a block request's own retries are bounded by the backend's RetryPolicy. */
  waitTimeout?: number;
  /** The service's MaxBatchSize: the largest take(n). */
  maxBatch?: number;
  /** Monotonic seconds, for measuring the rate. */
  clock?: () => number;
  /** Hand out bigint IDs, for counters whose IDs pass Number.MAX_SAFE_INTEGER. */
  bigint?: boolean;
}

/** `length` consecutive IDs of a block: `start`, `start + step`, ... */
export class IdRange<Id extends number | bigint> implements Iterable<Id> {
  readonly start: Id;
  readonly step: Id;
  readonly length: number;

  constructor(start: Id, step: Id, length: number) {
    this.start = start;
    this.step = step;
    this.length = length;
  }

  /** The i-th ID (0-based). */
  at(i: number): Id {
    if (!(Number.isSafeInteger(i) && i >= 0 && i < this.length)) throw new RangeError(`index ${i} is outside 0..${this.length - 1}`);
    const { start, step } = this as IdRange<number | bigint>;
    return (typeof start === "bigint" ? start + BigInt(i) * (step as bigint) : start + i * (step as number)) as Id;
  }

  get last(): Id {
    return this.at(this.length - 1);
  }

  *[Symbol.iterator](): Iterator<Id> {
    for (let i = 0; i < this.length; i++) yield this.at(i);
  }

  toArray(): Id[] {
    return [...this];
  }
}

/** A block as a Sequence holds it. */
interface Held {
  readonly start: bigint;
  readonly step: bigint;
  readonly length: number;
}

/** A block request: fixed when first made, repeated as is until answered. */
interface BlockRequest {
  readonly key: string;
  readonly size: number;
}

/** A call waiting for IDs: one (next) or `need` consecutive ones (take). */
interface Waiter {
  readonly need: number;
  readonly take: boolean;
  readonly deadline: number;
  readonly resolve: (value: never) => void;
  readonly reject: (error: Error) => void;
}

/**
 * Refusals of a size (too large, or more than the counter has left) still
 * let a smaller request through.
 */
function sizeRefusal(error: unknown): boolean {
  return error instanceof CounterExhausted || (error instanceof InvalidRequest && error.code === "invalid_count");
}

/** Whether a caller needing `need` IDs can hope for nothing better after `error` answered a request for `size`. */
function finalFor(error: Error, size: number, need: number): boolean {
  if (error instanceof ServiceUnavailable) return false;
  return !sizeRefusal(error) || need >= size;
}

class SequenceImpl<Id extends number | bigint> {
  readonly backend: Backend;
  readonly counter: string;
  readonly prefetch: boolean;
  readonly prefetchAt: number;
  readonly waitTimeout: number;
  readonly maxBatch: number;
  readonly clock: () => number;
  readonly bigint: boolean;
  readonly sizer: BlockSizer;
  /** Block requests that succeeded. */
  requests = 0;
  /** Set by close(): IDs of the blocks taken that were never handed out. */
  unusedIds: number | undefined = undefined;

  // What next() reads: IDs #pos up to #limit of the current run are handed out
  // as they are. #limit is #end, or #pos while callers wait (nobody jumps the queue).
  #pos = 0;
  #limit = 0;
  #base = 0; // the run's first ID and step, as numbers
  #step = 1;
  #bigBase = 0n; // and as bigints, with `bigint`
  #bigStep = 1n;

  #run: Held | null = null; // the current block, with ready blocks that continued it
  #end = 0; // where the current part ends: #mark, then the run's length
  #mark = 0; // where the next block is requested
  #sized = 0; // the length of the block the sizer measures (0: none)
  #ready: Held[] = []; // fetched, not started
  #pending: BlockRequest | null = null; // made, not answered yet
  #inflight: Promise<void> | null = null; // the pending request on the network
  #failure: Error | null = null; // how the last request failed, if it did
  #waiters: Waiter[] = [];
  #timer: NodeJS.Timeout | null = null;
  #prefetchSoon = false;
  #skipped = 0; // IDs passed over by take(), or in blocks never handed out
  #ceiling: number; // lowered when the service refuses a size as too large
  #room: number | null = null; // at most what the counter seems to have left
  #takeHint = 0; // the last take(n): blocks are asked for at least that
  #latency: number | null = null;
  #closed = false;

  constructor(backend: Backend, counter: string, options: SequenceOptions = {}) {
    let { initialBlock = 100, minBlock = 1, maxBlock = 1_000_000 } = options;
    if (options.blockSize !== undefined) initialBlock = minBlock = maxBlock = options.blockSize;
    const prefetchAt = options.prefetchAt ?? 0.5;
    if (!(prefetchAt >= 0 && prefetchAt <= 1)) throw new RangeError("prefetchAt must be between 0 and 1");
    const maxBatch = options.maxBatch ?? DEFAULT_MAX_BATCH;
    if (!(Number.isSafeInteger(maxBatch) && maxBatch >= 1)) {
      throw new RangeError(`maxBatch must be a positive integer, not ${String(maxBatch)}`);
    }
    const runway = options.runway ?? 5.0;
    this.backend = backend;
    this.counter = counter;
    this.prefetch = options.prefetch ?? true;
    this.prefetchAt = prefetchAt;
    this.waitTimeout = options.waitTimeout ?? 60.0;
    this.maxBatch = maxBatch;
    this.clock = options.clock ?? monotonic;
    this.bigint = options.bigint ?? false;
    this.sizer = new BlockSizer(initialBlock, minBlock, maxBlock, runway, 8.0, options.maxRunway ?? Math.max(MAX_RUNWAY, runway));
    this.#ceiling = maxBatch;
  }

  // -- handing out ---------------------------------------------------------

  /** The next ID; waits on the network only when every fetched ID is used up. */
  next(): Promise<Id> {
    if (this.#pos < this.#limit) {
      const i = this.#pos++;
      return Promise.resolve((this.bigint ? this.#bigBase + BigInt(i) * this.#bigStep : this.#base + i * this.#step) as Id);
    }
    return this.#wait(1, false) as Promise<Id>;
  }

  /**
   * `n` consecutive IDs, above every ID handed out before. They come from
   * what is held when it covers `n`; else from a block of at least `n`
   * (fetched if need be), and the IDs still held below it are then skipped,
   * counted in `unusedIds`: handing them out afterwards would go backwards.
   * `n` up to `maxBatch`; more is a RangeError before anything is asked of
   * the service.
   */
  take(n: number): Promise<IdRange<Id>> {
    if (!(Number.isSafeInteger(n) && n >= 1)) {
      return Promise.reject(new RangeError(`n must be a positive integer, not ${String(n)}`));
    }
    if (n > this.maxBatch) {
      return Promise.reject(new RangeError(`n must be at most maxBatch (${this.maxBatch}), not ${n}`));
    }
    this.#takeHint = n;
    return this.#wait(n, true) as Promise<IdRange<Id>>;
  }

  #wait(need: number, take: boolean): Promise<Id | IdRange<Id>> {
    if (this.#closed) return Promise.reject(new SequenceClosed(`Sequence('${this.counter}') is closed`));
    if (this.#waiters.length === 0) {
      const got = take ? this.#tryTake(need) : this.#tryNext();
      if (got !== undefined) {
        this.#reveal();
        return Promise.resolve(got);
      }
    }
    return new Promise<Id | IdRange<Id>>((resolve, reject) => {
      this.#waiters.push({ need, take, deadline: monotonic() + this.waitTimeout, resolve, reject });
      this.#serve();
    });
  }

  #idAt(i: number): Id {
    return (this.bigint ? this.#bigBase + BigInt(i) * this.#bigStep : this.#base + i * this.#step) as Id;
  }

  /** The next held ID, moving to the next part or block; undefined when nothing is held. */
  #tryNext(): Id | undefined {
    for (;;) {
      if (this.#pos < this.#end) return this.#idAt(this.#pos++);
      const run = this.#run;
      if (run !== null && this.#end < run.length) {
        // The mark is passed: the rest of the block is handed out while the next comes.
        this.#end = run.length;
        this.#requestPrefetch();
        continue;
      }
      this.#finishBlock();
      const block = this.#ready.shift();
      if (block === undefined) return undefined;
      this.#startBlock(block);
    }
  }

  /** `n` consecutive held IDs, or undefined when no held block can give them. */
  #tryTake(n: number): IdRange<Id> | undefined {
    for (;;) {
      const run = this.#run;
      let held = run === null ? 0 : run.length - this.#pos;
      // Blocks that continue this one (usual when one client uses a counter) make one run with it.
      let joined = 0;
      let length = run === null ? 0 : run.length;
      while (run !== null && held < n && joined < this.#ready.length) {
        const block = this.#ready[joined] as Held;
        if (block.step !== run.step || block.start !== run.start + BigInt(length) * run.step) break;
        held += block.length;
        length += block.length;
        joined += 1;
      }
      if (run !== null && held >= n) {
        for (let i = 0; i < joined; i++) {
          this.#finishBlock(); // the block before is used up as far as sizing goes
          this.#sized = (this.#ready.shift() as Held).length;
        }
        this.#run = { start: run.start, step: run.step, length };
        return this.#carve(n);
      }
      const big = this.#ready.findIndex((block) => block.length >= n);
      if (big < 0) return undefined;
      // Everything held below that block is passed over, so that nothing
      // handed out after this range lies under it.
      this.#skipped += held + this.#ready.slice(joined, big).reduce((total, block) => total + block.length, 0);
      this.#run = null;
      this.#pos = this.#end = this.#mark = 0;
      this.#finishBlock();
      this.#ready.splice(0, big);
      this.#startBlock(this.#ready.shift() as Held);
    }
  }

  /** The first `n` IDs left in the run; the rest stays to be drawn. */
  #carve(n: number): IdRange<Id> {
    const run = this.#run as Held;
    const first = this.#pos;
    this.#pos += n;
    if (this.#pos >= this.#mark) {
      this.#end = run.length;
      this.#requestPrefetch(); // the mark is passed
    } else {
      this.#end = this.#mark;
    }
    return new IdRange<Id>(this.#idAt(first), (this.bigint ? run.step : Number(run.step)) as Id, n);
  }

  /** next() may hand out directly only while nobody waits. */
  #reveal(): void {
    this.#limit = this.#waiters.length || this.#closed ? this.#pos : this.#end;
    if (this.#waiters.length === 0 && this.#timer !== null) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
  }

  // -- block boundaries ------------------------------------------------------

  #finishBlock(): void {
    if (this.#sized > 0) {
      this.sizer.blockFinished(this.#sized, this.clock());
      this.#sized = 0;
    }
  }

  #startBlock(block: Held): void {
    this.#run = block;
    this.#sized = block.length;
    this.#pos = 0;
    this.#base = Number(block.start);
    this.#step = Number(block.step);
    this.#bigBase = block.start;
    this.#bigStep = block.step;
    // The later part is what is left when the next block is requested.
    const split = block.length - prefetchTail(block.length, this.prefetchAt, this.sizer.rate, this.#latency);
    if (this.prefetch && split > 0) {
      this.#mark = this.#end = split;
    } else {
      this.#mark = this.#end = block.length;
      this.#requestPrefetch();
    }
  }

  /** A block is fetched ahead, on the event loop's next turn: never inside a caller's next(). */
  #requestPrefetch(): void {
    if (!this.prefetch || this.#closed || this.#ready.length || this.#inflight || this.#prefetchSoon) return;
    this.#prefetchSoon = true;
    setImmediate(() => {
      this.#prefetchSoon = false;
      if (!this.#closed && !this.#ready.length && !this.#inflight) void this.#fetch(1);
    }).unref();
  }

  // -- waiting ---------------------------------------------------------------

  /**
   * Serve the waiting callers in order from what is held, then, if any still
   * waits and no request is on the network, send one for the first of them.
   */
  #serve(): void {
    while (this.#waiters.length) {
      const waiter = this.#waiters[0] as Waiter;
      const got = waiter.take ? this.#tryTake(waiter.need) : this.#tryNext();
      if (got === undefined) break;
      this.#waiters.shift();
      waiter.resolve(got as never);
    }
    this.#reveal();
    if (this.#waiters.length === 0) return;
    this.#armTimer();
    if (!this.#inflight) void this.#fetch((this.#waiters[0] as Waiter).need, this.#waiters[0]);
  }

  /**
   * Callers still waiting at their deadline are told ServiceUnavailable; the
   * request goes on. The timer keeps the process alive while someone waits
   * (the backend may hold no handle of its own), and only then.
   */
  #armTimer(): void {
    if (this.#timer !== null || this.#waiters.length === 0) return;
    const wait = Math.max(0, (this.#waiters[0] as Waiter).deadline - monotonic());
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#expire(monotonic());
      this.#armTimer();
    }, wait * 1000 + 1);
  }

  #expire(now: number): void {
    const kept: Waiter[] = [];
    for (const waiter of this.#waiters) {
      if (waiter.deadline <= now) {
        const cause = this.#failure ?? undefined;
        waiter.reject(
          new ServiceUnavailable(`no block for '${this.counter}' within ${this.waitTimeout} s`, cause ? { cause } : {}),
        );
      } else {
        kept.push(waiter);
      }
    }
    this.#waiters = kept;
    this.#reveal();
  }

  #rejectWhere(error: Error, which: (waiter: Waiter) => boolean): void {
    const kept: Waiter[] = [];
    for (const waiter of this.#waiters) {
      if (which(waiter)) waiter.reject(error);
      else kept.push(waiter);
    }
    this.#waiters = kept;
  }

  // -- fetching --------------------------------------------------------------

  #sizeFor(need: number): number {
    let wanted = Math.max(this.sizer.nextSize(), Math.min(this.#takeHint, this.sizer.maximum));
    wanted = Math.min(wanted, this.#ceiling, this.maxBatch);
    if (this.#room !== null) wanted = Math.min(wanted, this.#room);
    return Math.max(need, wanted);
  }

  /**
   * Send the pending request, or a new one for at least `need` IDs. `owner`
   * is the caller it is sent for (none for a prefetch): a failure that
   * retrying may fix is told to it, and the others send the request again.
   */
  #fetch(need: number, owner?: Waiter, onlyPending = false): Promise<void> {
    let request = this.#pending;
    if (request === null) {
      if (onlyPending) return Promise.resolve();
      request = this.#pending = { key: newKey(), size: this.#sizeFor(need) };
      this.sizer.demandFrom(this.clock());
    }
    const sent = request;
    const started = monotonic();
    const settled = this.backend
      .allocate(this.counter, sent.size, { idempotencyKey: sent.key })
      .then(
        (block) => block as Block | Error,
        (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
      )
      .then((outcome) => {
        this.#inflight = null;
        this.#settle(sent, outcome, monotonic() - started, owner);
      });
    this.#inflight = settled;
    return settled;
  }

  #settle(request: BlockRequest, outcome: Block | Error, seconds: number, owner: Waiter | undefined): void {
    if (!(outcome instanceof Error) || outcome instanceof ServiceUnavailable) {
      // Answered after capacity refusals, or failed with them.
      this.sizer.contended(outcome.capacityRefusals);
    }
    let error: Error;
    if (!(outcome instanceof Error)) {
      this.#pending = null;
      const length = blockLength(outcome);
      if (length !== request.size) {
        this.#skip(length);
        error = new ServiceError(500, "bad_block", `asked for ${request.size} IDs, the service answered with ${length}`);
      } else if (!this.bigint && outcome.end > MAX_SAFE) {
        this.#skip(length);
        error = new UnsafeId(
          `'${this.counter}' answered the block [${outcome.start}, ${outcome.end}], above Number.MAX_SAFE_INTEGER ` +
            "(2^53 - 1): ask for bigint IDs (new Sequence(backend, counter, { bigint: true }))",
        );
      } else {
        this.#failure = null;
        this.#landed({ start: outcome.start, step: outcome.step, length }, seconds);
        return;
      }
    } else if (!(outcome instanceof ServiceError)) {
      // No answer (ServiceUnavailable, or anything else the backend raised):
      // the request may have been applied, so it is kept, key and count, for
      // the next try.
      this.#failure = outcome;
      if (outcome instanceof ServiceUnavailable) {
        // Told to the caller it was sent for; those waiting on it try again
        // themselves, until their deadline.
        this.#rejectWhere(outcome, (waiter) => waiter === owner);
        this.#expire(monotonic());
      } else {
        this.#rejectWhere(outcome, () => true);
      }
      this.#serve();
      return;
    } else {
      error = outcome;
    }
    this.#pending = null; // answered: the next request is a new one
    if (sizeRefusal(error) && request.size > 1) {
      // Too large for the service, or for what the counter has left:
      // smaller requests may still go through.
      const smaller = Math.max(1, Math.floor(request.size / 2));
      if (error instanceof InvalidRequest) {
        this.#ceiling = Math.min(this.#ceiling, smaller);
        this.sizer.cap(this.#ceiling);
      } else {
        // Until a block comes: an admin may raise the counter's max.
        this.#room = this.#room === null ? smaller : Math.min(this.#room, smaller);
      }
    }
    this.#failure = error;
    this.#rejectWhere(error, (waiter) => finalFor(error, request.size, waiter.need));
    this.#serve();
  }

  #skip(length: number): void {
    if (this.unusedIds !== undefined) this.unusedIds += length;
    else this.#skipped += length;
  }

  #landed(block: Held, seconds: number): void {
    this.requests += 1;
    this.#room = null;
    this.#latency = smoothedLatency(this.#latency, seconds);
    if (this.unusedIds !== undefined) {
      this.unusedIds += block.length; // closed meanwhile: it is counted, not used
    } else {
      this.#ready.push(block);
      this.#serve();
    }
  }

  // -- lifecycle -------------------------------------------------------------

  /**
   * Stop prefetching and hand out nothing more; every waiting caller gets
   * SequenceClosed. Resolves to, and keeps in `unusedIds`, how many IDs of
   * the blocks taken were never handed out. A block request on the network
   * is waited for up to `timeout` seconds; a block that lands later still
   * adds to `unusedIds`. A request whose answer was lost is asked again with
   * its key (so it takes nothing new if it had been applied), up to
   * CLOSE_ATTEMPTS times while `timeout` lasts, so that the block it took is
   * counted too.
   */
  async close(timeout: number = CLOSE_TIMEOUT): Promise<number> {
    if (this.#closed) return this.unusedIds ?? 0;
    this.#closed = true;
    this.#rejectWhere(new SequenceClosed(`Sequence('${this.counter}') is closed`), () => true);
    this.#reveal();
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    const deadline = monotonic() + timeout;
    for (let attempt = 0; ; attempt++) {
      if (this.#inflight) await this.#within(this.#inflight, deadline - monotonic());
      if (timeout <= 0 || this.#inflight || this.#pending === null || attempt >= CLOSE_ATTEMPTS) break;
      if (attempt && monotonic() >= deadline) break;
      // Still on the network at the deadline: the loop's first check ends it.
      await this.#within(this.#fetch(1, undefined, true), deadline - monotonic());
    }
    return this.#countUnused();
  }

  async #within(work: Promise<void>, seconds: number): Promise<void> {
    if (seconds <= 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([work, new Promise<void>((resolve) => (timer = setTimeout(resolve, seconds * 1000)))]);
    clearTimeout(timer);
  }

  #countUnused(): number {
    const unused =
      (this.#run === null ? 0 : this.#run.length - this.#pos) +
      this.#ready.reduce((total, block) => total + block.length, 0) +
      this.#skipped;
    this.#run = null;
    this.#pos = this.#limit = this.#end = this.#mark = 0;
    this.#ready = [];
    this.unusedIds = unused;
    return unused;
  }

  get closed(): boolean {
    return this.#closed;
  }

  toString(): string {
    return `Sequence('${this.counter}', requests=${this.requests}, closed=${this.#closed})`;
  }
}

/** Whether `error` is one of this package's own (for a caller's catch). */
export function isIdBlocksError(error: unknown): error is IdBlocksError {
  return error instanceof IdBlocksError;
}

export interface SequenceConstructor {
  new (backend: Backend, counter: string, options: SequenceOptions & { bigint: true }): SequenceImpl<bigint>;
  new (backend: Backend, counter: string, options?: SequenceOptions & { bigint?: false }): SequenceImpl<number>;
}

/**
 * IDs of one counter, handed out from memory: `await seq.next()`,
 * `await seq.take(n)`, `await seq.close()`. Numbers by default; with
 * `{ bigint: true }`, bigints.
 */
export const Sequence = SequenceImpl as SequenceConstructor;
export type Sequence<Id extends number | bigint = number> = SequenceImpl<Id>;
