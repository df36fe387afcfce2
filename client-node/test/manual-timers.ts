/**
 * Time a test moves by hand (the Sequence's `timers` option): the clock
 * stands still until `advance()`, timers run in the order they are due, and
 * the prefetch's "next turn" runs when the test lets things settle. So what
 * a test checks depends on what it did, never on the machine's speed.
 */

import type { Timers } from "../src/index.js";

interface Timer {
  readonly due: number;
  readonly order: number;
  readonly callback: () => void;
}

/** Every promise job queued so far, and those they queue, has run (a real turn of the event loop). */
export function turn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

export class ManualTimers implements Timers {
  #now = 0;
  #order = 0;
  #timers: Timer[] = [];
  #soon: (() => void)[] = [];

  now(): number {
    return this.#now;
  }

  after(seconds: number, callback: () => void): () => void {
    const timer = { due: this.#now + Math.max(0, seconds), order: this.#order++, callback };
    this.#timers.push(timer);
    return () => {
      this.#timers = this.#timers.filter((t) => t !== timer);
    };
  }

  soon(callback: () => void): void {
    this.#soon.push(callback);
  }

  /** Timers waiting (for a test that checks none is left behind). */
  get pending(): number {
    return this.#timers.length;
  }

  /** Run everything due now (next-turn callbacks, timers at or before now), and what that starts, until nothing is left. */
  async settle(): Promise<void> {
    for (let rounds = 0; ; rounds++) {
      if (rounds > 10_000) throw new Error("still busy after 10,000 rounds: something re-arms itself without time passing");
      await turn();
      const soon = this.#soon.splice(0);
      for (const callback of soon) callback();
      const due = this.#next(this.#now);
      if (due !== undefined) this.#run(due);
      if (soon.length === 0 && due === undefined) return;
    }
  }

  /** Move the clock `seconds` on, running each timer at its moment, in order. */
  async advance(seconds: number): Promise<void> {
    const target = this.#now + seconds;
    await this.settle();
    for (let timer = this.#next(target); timer !== undefined; timer = this.#next(target)) {
      this.#now = Math.max(this.#now, timer.due);
      this.#run(timer);
      await this.settle();
    }
    this.#now = target;
    await this.settle();
  }

  #next(until: number): Timer | undefined {
    let first: Timer | undefined;
    for (const timer of this.#timers) {
      if (timer.due <= until && (first === undefined || timer.due < first.due || (timer.due === first.due && timer.order < first.order))) {
        first = timer;
      }
    }
    return first;
  }

  #run(timer: Timer): void {
    this.#timers = this.#timers.filter((t) => t !== timer);
    timer.callback();
  }
}
