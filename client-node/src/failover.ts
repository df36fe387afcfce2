/**
 * Several regional endpoints of one idblocks deployment set (RegionCount K,
 * one stack per region), used as one backend: blocks come from one region
 * until it is unavailable, then from the next (the Python client's
 * failover.py).
 *
 * Moving on is safe because each region hands out only its own residue
 * modulo K: a request that region A may have applied (its answer lost) and
 * that region B then answers costs the IDs of A's block (a gap), never a
 * duplicate.
 */

import { HttpBackend, type HttpBackendOptions } from "./backend.js";
import type { AllocateOptions, Backend, Block } from "./block.js";
import { ServiceUnavailable } from "./errors.js";

export class FailoverBackend implements Backend {
  readonly backends: readonly Backend[];
  #current = 0;
  /** How often a request moved on to another region. */
  failovers = 0;

  constructor(backends: Iterable<Backend>) {
    this.backends = [...backends];
    if (this.backends.length === 0) throw new RangeError("FailoverBackend needs at least one backend");
  }

  /**
   * One HttpBackend per endpoint, each with `options` (auth, timeout, retry).
   * Its RetryPolicy's deadline is how long an endpoint is given before the
   * next one is tried.
   */
  static over(endpoints: Iterable<string>, options: HttpBackendOptions = {}): FailoverBackend {
    return new FailoverBackend([...endpoints].map((endpoint) => new HttpBackend(endpoint, options)));
  }

  get current(): Backend {
    return this.backends[this.#current] as Backend;
  }

  /**
   * A block from the current region, else from the next ones in turn;
   * ServiceUnavailable once every region has failed this request. Anything
   * else a region answers (exhausted, bad request, a refused region
   * configuration) is raised at once: another region would not make it right.
   *
   * A region that answers after refusing some attempts for capacity is hot,
   * not down: its block is returned and nothing moves. Only a request it gave
   * up on moves on, as any unavailability does (each region has its own
   * counter item); the refusals of every region tried are added to what is
   * returned, so that the Sequence backs off.
   */
  async allocate(counter: string, count: number, options: AllocateOptions): Promise<Block> {
    const first = this.#current;
    const size = this.backends.length;
    let failure: ServiceUnavailable | undefined;
    let refusals = 0;
    // The shortest pause every region asked for; none if one did not ask.
    let pause: number | undefined = Infinity;
    // Whether no region has ever answered: then neither has the whole.
    let neverAnswered = true;
    for (let offset = 0; offset < size; offset++) {
      const index = (first + offset) % size;
      let block: Block;
      try {
        block = await (this.backends[index] as Backend).allocate(counter, count, options);
      } catch (error) {
        if (!(error instanceof ServiceUnavailable)) throw error;
        failure = error;
        refusals += error.capacityRefusals;
        neverAnswered &&= error.neverAnswered;
        pause = error.retryAfter === undefined || pause === undefined ? undefined : Math.min(pause, error.retryAfter);
        continue;
      }
      if (offset) {
        // Later requests start where this one succeeded.
        this.#current = index;
        this.failovers += 1;
      }
      return refusals ? { ...block, capacityRefusals: block.capacityRefusals + refusals } : block;
    }
    throw new ServiceUnavailable(`every region is unavailable; the last said: ${failure?.message}`, {
      capacityRefusals: refusals,
      cause: failure,
      retryAfter: pause,
      neverAnswered,
    });
  }
}
