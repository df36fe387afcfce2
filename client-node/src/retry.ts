/** When to try a request again, and how long to wait first (the Python client's retry.py). */

import { setTimeout as sleepFor } from "node:timers/promises";

/**
 * Statuses that say "not now" rather than "no": throttled, or the service
 * (or DynamoDB behind it) briefly unavailable.
 */
export const RETRY_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);

/**
 * A 500 is an error the service did not expect. Repeating the request is
 * safe only when repeating cannot take a second block (an Idempotency-Key, a
 * read, a raise-only write), and worth a few tries only: a bug answers the
 * same way.
 */
export const SERVER_ERROR = 500;

export interface RetryOptions {
  attempts?: number;
  /** Seconds. */
  base?: number;
  /** Seconds. */
  cap?: number;
  /** Seconds since the first attempt. */
  deadline?: number;
  serverErrorAttempts?: number;
  /**
   * Attempts while nothing has answered at the endpoint yet and the
   * connection is refused or the host name does not resolve (1: said at once).
   */
  firstContactAttempts?: number;
  sleep?: (seconds: number) => Promise<void>;
  /** Monotonic seconds. */
  clock?: () => number;
  /** Wall-clock seconds since the epoch: Retry-After may be an HTTP date. */
  now?: () => number;
  random?: () => number;
}

export function monotonic(): number {
  return performance.now() / 1000;
}

/**
 * Exponential backoff with full jitter, bounded by attempts and by time.
 *
 * The wait before retry k (k = 1, 2, ...) is uniform in [0, min(cap, base * 2**k)],
 * and never shorter than a Retry-After the service sent. A wait that would
 * end past `deadline` (seconds since the first attempt) is not waited: the
 * request fails instead. A 500 is tried at most `serverErrorAttempts` times,
 * and only when repeating the request is harmless.
 *
 * Until anything has answered at the endpoint, a connection refused or a
 * host name that does not resolve is tried `firstContactAttempts` times
 * (once: a wrong address, or a server not started, is said at once); after
 * that, as any network error. A process that starts before its server does
 * may raise it to wait for the server.
 */
export class RetryPolicy {
  readonly attempts: number;
  readonly base: number;
  readonly cap: number;
  readonly deadline: number;
  readonly serverErrorAttempts: number;
  readonly firstContactAttempts: number;
  readonly sleep: (seconds: number) => Promise<void>;
  readonly clock: () => number;
  readonly now: () => number;
  readonly random: () => number;

  constructor(options: RetryOptions = {}) {
    this.attempts = options.attempts ?? 8;
    this.base = options.base ?? 0.05;
    this.cap = options.cap ?? 5.0;
    this.deadline = options.deadline ?? 30.0;
    this.serverErrorAttempts = options.serverErrorAttempts ?? 3;
    this.firstContactAttempts = options.firstContactAttempts ?? 1;
    this.sleep = options.sleep ?? ((seconds) => sleepFor(seconds * 1000));
    this.clock = options.clock ?? monotonic;
    this.now = options.now ?? (() => Date.now() / 1000);
    this.random = options.random ?? Math.random;
    if (!(this.attempts >= 1 && this.serverErrorAttempts >= 1 && this.firstContactAttempts >= 1)) {
      throw new RangeError("attempts, serverErrorAttempts and firstContactAttempts must be at least 1");
    }
    if (!(this.base >= 0 && this.cap >= 0 && this.deadline >= 0)) {
      throw new RangeError("base, cap and deadline must not be negative");
    }
  }

  delay(retry: number, retryAfter?: number): number {
    const wait = this.random() * Math.min(this.cap, this.base * 2 ** retry);
    return retryAfter === undefined ? wait : Math.max(wait, retryAfter);
  }
}

/**
 * Seconds to wait from a Retry-After header: delay-seconds ("120") or an
 * HTTP date ("Wed, 21 Oct 2026 07:28:00 GMT", measured from `now`, wall-clock
 * seconds). A date already past means no wait; anything unreadable, undefined.
 */
export function parseRetryAfter(value: string | null | undefined, now: number = Date.now() / 1000): number | undefined {
  if (!value) return undefined;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text);
  // An HTTP date starts with its day's name; anything else (a negative or
  // odd number, which Date.parse might read as a year) is unreadable.
  if (!/^[A-Za-z]/.test(text)) return undefined;
  const when = Date.parse(text);
  if (Number.isNaN(when)) return undefined;
  return Math.max(0, when / 1000 - now);
}
