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
 *
 * The parts: held.ts (the IDs held and how they are handed out),
 * requests.ts (the block request and what its answers mean), waiters.ts
 * (the callers waiting, their deadlines), timers.ts (where time comes from).
 */

import type { Backend, Block } from "./block.js";
import { CounterMovedBack, SequenceClosed, ServiceUnavailable } from "./errors.js";
import { HeldIds, type IdRange } from "./held.js";
import { type BlockRequest, BlockRequests, type Failure } from "./requests.js";
import { BlockSizer, DEFAULT_MAX_BATCH, INITIAL_BLOCK, MAX_RUNWAY, smoothedLatency } from "./sizing.js";
import { type Timers, nodeTimers, within } from "./timers.js";
import { type Waiter, Waiters } from "./waiters.js";

/**
 * How long close() waits, by default, for a block request on the network to
 * be answered, so that the block it brings is counted: HttpBackend's default
 * timeout for one request. Seconds.
 */
export const CLOSE_TIMEOUT = 10.0;

/** How many times close() asks for a request whose answer was lost (the backend retries within each), while its timeout lasts. */
export const CLOSE_ATTEMPTS = 3;

export interface SequenceOptions {
  prefetch?: boolean;
  /** Fixes every block's size (no adapting), except that take(n) asks for at least n. */
  blockSize?: number;
  /**
   * The first block's size (by default INITIAL_BLOCK, 16, within minBlock and
   * maxBlock); later ones adapt to the rate, and while the sequence is young
   * never bring what it holds above what it has used (sizing.ts), so give it
   * when the count or rate is known.
   */
  initialBlock?: number;
  minBlock?: number;
  maxBlock?: number;
  /** Seconds a block should last; each capacity refusal doubles it, up to maxRunway. */
  runway?: number;
  /** Seconds; by default MAX_RUNWAY, or runway if that is longer. */
  maxRunway?: number;
  /** The share of a block still unused when the next one is requested; grows by itself when requests take longer than that share lasts. */
  prefetchAt?: number;
  /** Seconds a call waits for a block, of any length (Infinity: no limit); a block request's own retries are bounded by the backend's RetryPolicy. */
  waitTimeout?: number;
  /** The service's MaxBatchSize: the largest take(n). */
  maxBatch?: number;
  /** Monotonic seconds, for measuring the rate; by default `timers.now`. */
  clock?: () => number;
  /** Hand out bigint IDs, for counters whose IDs pass Number.MAX_SAFE_INTEGER. */
  bigint?: boolean;
  /** Where time comes from (deadlines, timers, the prefetch's turn); Node's own by default. For tests. */
  timers?: Timers;
}

/** How a call may stop waiting before its IDs come. */
export interface WaitOptions {
  /** Aborting it rejects the call with the signal's reason, if it still waits (no ID is lost). */
  signal?: AbortSignal;
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
  /** Set by close(): IDs of the blocks taken that were never handed out; blocks landing later add to it. */
  unusedIds: number | undefined = undefined;

  readonly #timers: Timers;
  readonly #held: HeldIds;
  readonly #requests: BlockRequests;
  readonly #waiters = new Waiters();
  #inflight: Promise<void> | null = null; // the pending request on the network
  #lastError: Error | null = null; // how the last request failed, if it did: the cause of a timeout
  // A counter that moved back, that no caller waiting was told: told to the next that needs a block.
  #untold: Error | null = null;
  #prefetchSoon = false;
  #closed = false;
  #closing: Promise<number> | null = null;

  constructor(backend: Backend, counter: string, options: SequenceOptions = {}) {
    let { minBlock = 1, maxBlock = 1_000_000 } = options;
    let initialBlock = options.initialBlock ?? Math.min(Math.max(INITIAL_BLOCK, minBlock), maxBlock);
    if (options.blockSize !== undefined) initialBlock = minBlock = maxBlock = options.blockSize;
    const prefetchAt = options.prefetchAt ?? 0.5;
    if (!(prefetchAt >= 0 && prefetchAt <= 1)) throw new RangeError("prefetchAt must be between 0 and 1");
    const maxBatch = options.maxBatch ?? DEFAULT_MAX_BATCH;
    if (!(Number.isSafeInteger(maxBatch) && maxBatch >= 1)) {
      throw new RangeError(`maxBatch must be a positive integer, not ${String(maxBatch)}`);
    }
    const waitTimeout = options.waitTimeout ?? 60.0;
    if (!(waitTimeout >= 0)) throw new RangeError(`waitTimeout must be a number of seconds, 0 or more, not ${String(waitTimeout)}`);
    const runway = options.runway ?? 5.0;
    this.backend = backend;
    this.counter = counter;
    this.prefetch = options.prefetch ?? true;
    this.prefetchAt = prefetchAt;
    this.waitTimeout = waitTimeout;
    this.maxBatch = maxBatch;
    this.#timers = options.timers ?? nodeTimers;
    const timers = this.#timers;
    this.clock = options.clock ?? (() => timers.now());
    this.bigint = options.bigint ?? false;
    this.sizer = new BlockSizer(initialBlock, minBlock, maxBlock, runway, 8.0, options.maxRunway ?? Math.max(MAX_RUNWAY, runway));
    this.#held = new HeldIds({
      bigint: this.bigint,
      prefetch: this.prefetch,
      prefetchAt,
      sizer: this.sizer,
      clock: this.clock,
      markPassed: () => {
        this.#requestPrefetch();
      },
    });
    this.#requests = new BlockRequests(this.sizer, maxBatch);
  }

  // -- handing out ---------------------------------------------------------

  /** The next ID; waits on the network only when every fetched ID is used up. */
  next(options?: WaitOptions): Promise<Id> {
    const held = this.#held;
    if (held.pos < held.limit && options === undefined) return Promise.resolve(held.idAt(held.pos++) as Id);
    return this.#wait(1, false, options) as Promise<Id>;
  }

  /**
   * `n` consecutive IDs, above every ID handed out before. They come from
   * what is held when it covers `n`; else from a block of at least `n`
   * (fetched if need be), and the IDs still held below it are then skipped,
   * counted in `unusedIds`: handing them out afterwards would go backwards.
   * `n` up to `maxBatch`; more is a RangeError before anything is asked of
   * the service.
   */
  take(n: number, options?: WaitOptions): Promise<IdRange<Id>> {
    if (!(Number.isSafeInteger(n) && n >= 1)) {
      return Promise.reject(new RangeError(`n must be a positive integer, not ${String(n)}`));
    }
    if (n > this.maxBatch) {
      return Promise.reject(new RangeError(`n must be at most maxBatch (${this.maxBatch}), not ${n}`));
    }
    this.#requests.takeHint = n;
    return this.#wait(n, true, options) as Promise<IdRange<Id>>;
  }

  #wait(need: number, take: boolean, options: WaitOptions | undefined): Promise<unknown> {
    if (this.#closed) return Promise.reject(new SequenceClosed(`Sequence('${this.counter}') is closed`));
    const signal = options?.signal;
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    if (this.#waiters.length === 0) {
      const got = take ? this.#held.tryTake(need) : this.#held.tryNext();
      if (got !== undefined) {
        this.#reveal();
        return Promise.resolve(got);
      }
    }
    return new Promise((resolve, reject) => {
      const deadline = this.#timers.now() + this.waitTimeout;
      this.#waiters.add({ need, take, deadline }, resolve, reject, signal, () => {
        this.#serve();
      });
      this.#serve();
    });
  }

  /** next() may hand out directly only while nobody waits. */
  #reveal(): void {
    const nobody = this.#waiters.length === 0;
    this.#held.reveal(nobody && !this.#closed);
    if (nobody) this.#waiters.disarm();
  }

  // -- waiting ---------------------------------------------------------------

  /**
   * Serve the waiting callers in order from what is held. One that cannot be
   * served is sent a request (if none is on the network, and the service has
   * not asked for a pause), then told `failure` if that is final for it, or
   * ServiceUnavailable once its deadline has passed; then the next is looked
   * at. So no caller is told CounterExhausted, or any failure, while IDs it
   * could be given are held.
   */
  #serve(failure?: Failure<Waiter>): void {
    const held = this.#held;
    const waiters = this.#waiters;
    const now = this.#timers.now();
    for (let head = waiters.head; head !== undefined; head = waiters.head) {
      const got = head.take ? held.tryTake(head.need) : held.tryNext();
      if (got !== undefined) {
        waiters.resolveHead(got);
        continue;
      }
      if (failure?.finalFor(head)) {
        if (failure.error === this.#untold) this.#untold = null;
        waiters.rejectHead(failure.error);
        continue;
      }
      if (this.#untold !== null) {
        // Told before any block is asked for again.
        waiters.rejectHead(this.#untold);
        this.#untold = null;
        continue;
      }
      const gated = now < this.#requests.notBefore;
      if (this.#inflight === null && !gated) void this.#send(this.#requests.forNeed(head.need, this.clock(), this.#held.notHandedOut), head);
      if (head.deadline <= now || (this.#inflight === null && head.deadline < this.#requests.notBefore)) {
        waiters.rejectHead(this.#timedOut(now));
        continue;
      }
      break;
    }
    // Those further back that the failure is final for: what is held cannot
    // serve them either, as they need more than the first in line.
    if (failure) waiters.rejectWhere((waiter) => failure.finalFor(waiter), failure.error);
    this.#reveal();
    const head = waiters.head;
    if (head === undefined) return;
    const resume = this.#inflight === null ? Math.min(head.deadline, this.#requests.notBefore) : head.deadline;
    waiters.arm(this.#timers, resume, () => {
      this.#serve();
    });
  }

  #timedOut(now: number): ServiceUnavailable {
    const cause = this.#lastError ?? undefined;
    const options = cause ? { cause } : {};
    if (this.#inflight === null && now < this.#requests.notBefore) {
      const wait = this.#requests.notBefore - now;
      return new ServiceUnavailable(
        `the service asked for no request for '${this.counter}' in the next ${wait.toFixed(3)} s, ` +
          `past this call's wait of ${this.waitTimeout} s`,
        { ...options, retryAfter: wait },
      );
    }
    return new ServiceUnavailable(`no block for '${this.counter}' within ${this.waitTimeout} s`, options);
  }

  // -- fetching --------------------------------------------------------------

  /** A block is fetched ahead, on the event loop's next turn: never inside a caller's next(). */
  #requestPrefetch(): void {
    if (!this.prefetch || this.#closed || this.#held.hasReady || this.#inflight || this.#prefetchSoon) return;
    this.#prefetchSoon = true;
    this.#timers.soon(() => {
      this.#prefetchSoon = false;
      // A counter that moved back is told first, to the next caller that needs a block.
      const ready = this.#closed || this.#held.hasReady || this.#inflight !== null || this.#untold !== null;
      if (!ready && this.#timers.now() >= this.#requests.notBefore) {
        void this.#send(this.#requests.forNeed(1, this.clock(), this.#held.notHandedOut));
      }
    });
  }

  /** Send `request` for `owner` (none for a prefetch or a close); settled when its answer is. */
  #send(request: BlockRequest, owner?: Waiter): Promise<void> {
    const started = this.#timers.now();
    let answer: Promise<Block>;
    try {
      answer = this.backend.allocate(this.counter, request.size, { idempotencyKey: request.key });
    } catch (error) {
      answer = Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    const settled = answer
      .then(
        (block) => block as Block | Error,
        (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
      )
      .then((outcome) => {
        this.#inflight = null;
        this.#settle(request, outcome, this.#timers.now() - started, owner);
      });
    this.#inflight = settled;
    return settled;
  }

  #settle(request: BlockRequest, outcome: Block | Error, seconds: number, owner: Waiter | undefined): void {
    const now = this.#timers.now();
    const answer = this.#requests.answer(request, outcome, owner, { bigint: this.bigint, counter: this.counter, now });
    if (answer.unusable !== undefined) this.#refuse(answer.unusable);
    if (answer.failure?.error instanceof CounterMovedBack) this.#untold = answer.failure.error;
    if (answer.block !== undefined) {
      this.requests += 1;
      this.sizer.landed(answer.block.length);
      this.#lastError = null;
      this.#held.latency = smoothedLatency(this.#held.latency, seconds);
      if (this.#closed) this.unusedIds = (this.unusedIds ?? 0) + answer.block.length; // counted, not used
      else this.#held.add(answer.block);
    }
    if (answer.failure !== undefined) this.#lastError = answer.failure.error;
    this.#serve(answer.failure);
  }

  /** An answer of `count` IDs not handed out: after close, in unusedIds; before, counted there when it comes. */
  #refuse(count: number): void {
    if (this.#closed) this.unusedIds = (this.unusedIds ?? 0) + count;
    else this.#held.refuse(count);
  }

  // -- lifecycle -------------------------------------------------------------

  /**
   * The process is about to stop: from now on, blocks are sized for a short
   * runway (DRAIN_RUNWAY, about half a second at the rate IDs are used) while
   * the Sequence goes on serving; IDs already held are handed out first, and
   * close works as before. Called as early as the process knows it will stop
   * while it still serves (a preStop hook, a SIGTERM before a grace period),
   * it leaves about half a second's worth of IDs held at the stop (at most a
   * second's) instead of up to 1.5 runways' worth. Waits for nothing and
   * sends nothing; calling it again, or once closed, changes nothing.
   */
  drain(): void {
    this.sizer.drain();
  }

  /** Whether drain() was called. */
  get draining(): boolean {
    return this.sizer.draining;
  }

  /**
   * Stop prefetching and hand out nothing more; every waiting caller gets
   * SequenceClosed. Resolves to, and keeps in `unusedIds`, how many IDs of
   * the blocks taken were never handed out. A block request on the network
   * is waited for up to `timeout` seconds (any length); a block that lands
   * later still adds to `unusedIds`. A request whose answer was lost is
   * asked again with its key (so it takes nothing new if it had been
   * applied), up to CLOSE_ATTEMPTS times while `timeout` lasts, so that the
   * block it took is counted too.
   *
   * Any number of calls account for the same IDs: a close called while
   * another runs resolves when that one does, to the same count; a close
   * called after one that ran out of time goes on where it stopped (waits
   * for the request still out, asks again for a lost answer) and resolves to
   * the total.
   */
  close(timeout: number = CLOSE_TIMEOUT): Promise<number> {
    if (!(timeout >= 0)) {
      return Promise.reject(new RangeError(`timeout must be a number of seconds, 0 or more, not ${String(timeout)}`));
    }
    if (this.#closing !== null) return this.#closing;
    if (!this.#closed) {
      this.#closed = true;
      this.#waiters.rejectWhere(() => true, new SequenceClosed(`Sequence('${this.counter}') is closed`));
      this.unusedIds = this.#held.countUnused();
      this.#reveal();
    }
    const closing = this.#finishClose(timeout);
    this.#closing = closing;
    void closing.then(() => {
      if (this.#closing === closing) this.#closing = null;
    });
    return closing;
  }

  async #finishClose(timeout: number): Promise<number> {
    const timers = this.#timers;
    const deadline = timers.now() + timeout;
    for (let attempt = 0; ; attempt++) {
      if (this.#inflight) await within(timers, this.#inflight, deadline - timers.now());
      const pending = this.#requests.pending;
      if (timeout <= 0 || this.#inflight || pending === null || attempt >= CLOSE_ATTEMPTS) break;
      if (attempt && timers.now() >= deadline) break;
      // Still on the network at the deadline: the loop's first check ends it.
      await within(timers, this.#send(pending), deadline - timers.now());
    }
    return this.unusedIds ?? 0;
  }

  get closed(): boolean {
    return this.#closed;
  }

  toString(): string {
    return `Sequence('${this.counter}', requests=${this.requests}, closed=${this.#closed})`;
  }
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
