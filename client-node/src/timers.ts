/**
 * Where a Sequence's time comes from: the monotonic clock, timers of any
 * length, and the event loop's next turn. Node's own, by default; a test
 * passes its own (a clock it moves by hand), so that nothing it checks
 * depends on the machine's speed.
 */

import { MAX_TIMER_SECONDS } from "./config.js";
import { monotonic } from "./retry.js";

export interface Timers {
  /** Monotonic seconds. */
  now(): number;
  /**
   * Call `callback` once, `seconds` from now (any length; Infinity is never);
   * returns what cancels it. `keepAlive`: the timer keeps the process alive.
   */
  after(seconds: number, callback: () => void, keepAlive: boolean): () => void;
  /** Call `callback` on the event loop's next turn, without keeping the process alive. */
  soon(callback: () => void): void;
}

/**
 * Node's timers. A timer longer than Node keeps (2^31 - 1 ms, 24.8 days,
 * which Node would turn into 1 ms) is kept as a chain of shorter ones.
 */
export const nodeTimers: Timers = {
  now: monotonic,
  after(seconds: number, callback: () => void, keepAlive: boolean): () => void {
    const due = monotonic() + seconds;
    let handle: NodeJS.Timeout | undefined;
    const arm = (): void => {
      const left = due - monotonic();
      handle = left > MAX_TIMER_SECONDS ? setTimeout(arm, MAX_TIMER_SECONDS * 1000) : setTimeout(callback, Math.max(0, left) * 1000);
      if (!keepAlive) handle.unref();
    };
    arm();
    return () => {
      clearTimeout(handle);
    };
  },
  soon(callback: () => void): void {
    setImmediate(callback).unref();
  },
};

/** `work`, or nothing once `seconds` have passed, whichever comes first. */
export async function within(timers: Timers, work: Promise<unknown>, seconds: number): Promise<void> {
  if (!(seconds > 0)) return;
  let cancel: (() => void) | undefined;
  const timeUp = new Promise<void>((resolve) => {
    cancel = timers.after(seconds, resolve, true);
  });
  try {
    await Promise.race([work, timeUp]);
  } finally {
    cancel?.();
  }
}
