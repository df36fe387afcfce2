/**
 * The callers waiting for IDs, in the order they called, with their
 * deadlines, the one timer that looks at those deadlines, and the abort
 * signals that let a caller stop waiting. Whom to serve, and with what, is
 * the Sequence's to decide; each caller here ends exactly once (given its IDs,
 * or told why not), and leaves the queue when it does.
 */

import type { Timers } from "./timers.js";

/** A call waiting for IDs: one (next) or `need` consecutive ones (take). */
export interface Waiter {
  readonly need: number;
  readonly take: boolean;
  /** Monotonic seconds. */
  readonly deadline: number;
}

interface Entry extends Waiter {
  readonly resolve: (value: never) => void;
  readonly reject: (error: unknown) => void;
  readonly signal: AbortSignal | undefined;
  readonly onAbort: () => void;
}

export class Waiters {
  #queue: Entry[] = [];
  #cancelTimer: (() => void) | null = null;
  #due = Infinity;

  get length(): number {
    return this.#queue.length;
  }

  get head(): Waiter | undefined {
    return this.#queue[0];
  }

  /**
   * A caller waits, last in line, until its promise is settled here. An abort
   * of `signal` takes it out of the line, rejected with the signal's reason,
   * and `aborted` is called: the line has changed.
   */
  add(
    waiter: Waiter,
    resolve: (value: never) => void,
    reject: (error: unknown) => void,
    signal: AbortSignal | undefined,
    aborted: () => void,
  ): void {
    const entry: Entry = {
      ...waiter,
      resolve,
      reject,
      signal,
      onAbort: () => {
        const at = this.#queue.indexOf(entry);
        if (at < 0) return;
        this.#queue.splice(at, 1);
        reject((signal as AbortSignal).reason);
        aborted();
      },
    };
    signal?.addEventListener("abort", entry.onAbort, { once: true });
    this.#queue.push(entry);
  }

  resolveHead(value: unknown): void {
    const entry = this.#queue.shift() as Entry;
    entry.signal?.removeEventListener("abort", entry.onAbort);
    entry.resolve(value as never);
  }

  rejectHead(error: unknown): void {
    const entry = this.#queue.shift() as Entry;
    entry.signal?.removeEventListener("abort", entry.onAbort);
    entry.reject(error);
  }

  /** Every waiting caller `which` picks is told `error`; the others keep their places. */
  rejectWhere(which: (waiter: Waiter) => boolean, error: unknown): void {
    const kept: Entry[] = [];
    for (const entry of this.#queue) {
      if (which(entry)) {
        entry.signal?.removeEventListener("abort", entry.onAbort);
        entry.reject(error);
      } else {
        kept.push(entry);
      }
    }
    this.#queue = kept;
  }

  /**
   * Call `callback` at `due` (monotonic seconds), or earlier if a timer for
   * an earlier moment is already set: it looks again then. The timer keeps
   * the process alive while someone waits (the backend may hold no handle
   * of its own), and only then.
   */
  arm(timers: Timers, due: number, callback: () => void): void {
    if (this.#cancelTimer !== null && this.#due <= due) return;
    this.disarm();
    this.#due = due;
    this.#cancelTimer = timers.after(
      due - timers.now(),
      () => {
        this.#cancelTimer = null;
        this.#due = Infinity;
        callback();
      },
      true,
    );
  }

  disarm(): void {
    this.#cancelTimer?.();
    this.#cancelTimer = null;
    this.#due = Infinity;
  }
}
