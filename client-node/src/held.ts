/**
 * The IDs a Sequence holds and how they are handed out: the current block
 * (with the fetched blocks that continue it, one run), the blocks fetched
 * and not started, where each block's prefetch mark lies, and the IDs passed
 * over. Nothing here waits or sends: every method runs to its end.
 */

import type { BlockSizer } from "./sizing.js";
import { prefetchTail } from "./sizing.js";

/** A block as a Sequence holds it. */
export interface Held {
  readonly start: bigint;
  readonly step: bigint;
  readonly length: number;
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

export interface HeldOptions {
  bigint: boolean;
  prefetch: boolean;
  prefetchAt: number;
  sizer: BlockSizer;
  /** Monotonic seconds, for the sizer. */
  clock: () => number;
  /** The mark is passed: the next block may be fetched. */
  markPassed: () => void;
}

export class HeldIds {
  // What next() reads: IDs pos up to limit of the current run are handed out
  // as they are. limit is #end, or pos while callers wait (nobody jumps the queue).
  pos = 0;
  limit = 0;
  /** IDs passed over by take(), or in blocks never handed out. */
  skipped = 0;
  /** Of those, the IDs of answers refused (never held). */
  refused = 0;
  /** The smoothed latency of block requests, for the prefetch point. */
  latency: number | null = null;

  readonly #options: HeldOptions;
  readonly #bigint: boolean; // read once: idAt is next()'s hot path
  #base = 0; // the run's first ID and step, as numbers
  #step = 1;
  #bigBase = 0n; // and as bigints, with `bigint`
  #bigStep = 1n;
  #run: Held | null = null; // the current block, with ready blocks that continued it
  #end = 0; // where the current part ends: #mark, then the run's length
  #mark = 0; // where the next block is requested
  #sized = 0; // the length of the block the sizer measures (0: none)
  #ready: Held[] = []; // fetched, not started

  constructor(options: HeldOptions) {
    this.#options = options;
    this.#bigint = options.bigint;
  }

  /** The i-th ID of the run. */
  idAt(i: number): number | bigint {
    return this.#bigint ? this.#bigBase + BigInt(i) * this.#bigStep : this.#base + i * this.#step;
  }

  /** How many IDs are held: what is left of the run, and the blocks fetched and not started. */
  get count(): number {
    const left = this.#run === null ? 0 : this.#run.length - this.pos;
    return this.#ready.reduce((total, block) => total + block.length, left);
  }

  /**
   * How many IDs of the blocks taken were not handed out: held, or passed
   * over by take(); not those of answers refused, which were never held.
   * What the start bound weighs against what was used (sizing.ts).
   */
  get notHandedOut(): number {
    return this.count + this.skipped - this.refused;
  }

  /** An answer of `count` IDs is not handed out (the wrong size, or IDs the Sequence was given before): unused, and never held. */
  refuse(count: number): void {
    this.skipped += count;
    this.refused += count;
  }

  /** Whether a fetched block waits to be started (then no prefetch is needed). */
  get hasReady(): boolean {
    return this.#ready.length > 0;
  }

  add(block: Held): void {
    this.#ready.push(block);
  }

  /** next() may hand out directly only while nobody waits (`open`). */
  reveal(open: boolean): void {
    this.limit = open ? this.#end : this.pos;
  }

  /** The next held ID, moving to the next part or block; undefined when nothing is held. */
  tryNext(): number | bigint | undefined {
    for (;;) {
      if (this.pos < this.#end) return this.idAt(this.pos++);
      const run = this.#run;
      if (run !== null && this.#end < run.length) {
        // The mark is passed: the rest of the block is handed out while the next comes.
        this.#end = run.length;
        this.#options.markPassed();
        continue;
      }
      this.#finishBlock();
      const block = this.#ready.shift();
      if (block === undefined) return undefined;
      this.#startBlock(block);
    }
  }

  /** `n` consecutive held IDs, or undefined when what is held has no `n` in a row. */
  tryTake(n: number): IdRange<number | bigint> | undefined {
    for (;;) {
      const run = this.#run;
      const from = this.#stretchFrom(n);
      if (from < 0) return undefined;
      if (from === 0 && run !== null) {
        // The run, with the fetched blocks that continue it, holds n.
        let held = run.length - this.pos;
        let length = run.length;
        let joined = 0;
        for (; held < n; joined++) {
          const block = this.#ready[joined] as Held;
          held += block.length;
          length += block.length;
        }
        for (let i = 0; i < joined; i++) {
          this.#finishBlock(); // the block before is used up as far as sizing goes
          this.#sized = (this.#ready.shift() as Held).length;
        }
        this.#run = { start: run.start, step: run.step, length };
        return this.#carve(n);
      }
      // The stretch starts at fetched block `from`: everything held below it
      // is passed over, so that nothing handed out after this range lies
      // under it; then it is the run.
      const below = this.#ready.slice(0, from - 1).reduce((total, block) => total + block.length, 0);
      this.skipped += (run === null ? 0 : run.length - this.pos) + below;
      this.#run = null;
      this.pos = this.#end = this.#mark = 0;
      this.#finishBlock();
      this.#ready.splice(0, from - 1);
      this.#startBlock(this.#ready.shift() as Held);
    }
  }

  /**
   * Where the first stretch of held IDs in a row, `n` or more, begins: 0 for
   * the run (what is left of it), i for the i-th fetched block; -1 if none.
   * Blocks that continue each other (usual when one client uses a counter)
   * make one stretch.
   */
  #stretchFrom(n: number): number {
    let start = -1;
    let total = 0;
    let previous: Held | null = null;
    for (let i = this.#run === null ? 1 : 0; i <= this.#ready.length; i++) {
      const block = i === 0 ? (this.#run as Held) : (this.#ready[i - 1] as Held);
      const length = i === 0 ? block.length - this.pos : block.length;
      const continues =
        previous !== null && block.step === previous.step && block.start === previous.start + BigInt(previous.length) * previous.step;
      if (continues) {
        total += length;
      } else {
        start = i;
        total = length;
      }
      if (total >= n) return start;
      previous = block;
    }
    return -1;
  }

  /** The first `n` IDs left in the run; the rest stays to be drawn. */
  #carve(n: number): IdRange<number | bigint> {
    const run = this.#run as Held;
    const first = this.pos;
    this.pos += n;
    if (this.pos >= this.#mark) {
      this.#end = run.length;
      this.#options.markPassed();
    } else {
      this.#end = this.#mark;
    }
    return new IdRange(this.idAt(first), this.#bigint ? run.step : Number(run.step), n);
  }

  #finishBlock(): void {
    if (this.#sized > 0) {
      this.#options.sizer.blockFinished(this.#sized, this.#options.clock());
      this.#sized = 0;
    }
  }

  #startBlock(block: Held): void {
    const { prefetch, prefetchAt, sizer } = this.#options;
    this.#run = block;
    this.#sized = block.length;
    this.pos = 0;
    this.#base = Number(block.start);
    this.#step = Number(block.step);
    this.#bigBase = block.start;
    this.#bigStep = block.step;
    // The later part is what is left when the next block is requested.
    const split = block.length - prefetchTail(block.length, prefetchAt, sizer.rate, this.latency, sizer.youngTail());
    if (prefetch && split > 0) {
      this.#mark = this.#end = split;
    } else {
      this.#mark = this.#end = block.length;
      this.#options.markPassed();
    }
  }

  /** How many IDs are held or were passed over; from here on nothing is held. */
  countUnused(): number {
    const unused = this.count + this.skipped;
    this.#run = null;
    this.pos = this.limit = this.#end = this.#mark = this.skipped = this.refused = 0;
    this.#ready = [];
    return unused;
  }
}
