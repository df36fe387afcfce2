/**
 * The service as the model-based test plays it: it keeps the service's
 * contract (blocks never overlap and come in order; a key sent again gets
 * the block it took the first time, however the service answers now; a
 * count above MaxBatchSize, or more than the counter has left, is refused)
 * and answers each block request only when the test says how. Its counter
 * can move back (a table restored from an earlier backup): it then hands
 * out again IDs it handed out before. It also complains of what a client
 * must never do: two block requests on the network at once, or a key sent
 * again with another count.
 */

import {
  type AllocateOptions,
  type Backend,
  type Block,
  CounterExhausted,
  InvalidRequest,
  ServiceUnavailable,
  UnexpectedResponse,
  blockLength,
} from "../../src/index.js";

/** How the service answers the block request on the network. */
export type Reply =
  /** The block asked for. */
  | { kind: "block" }
  /** The block, after refusing one attempt for capacity. */
  | { kind: "throttled" }
  /** The block is taken; the answer is lost (ServiceUnavailable). */
  | { kind: "lost" }
  /** The block is taken; the answer cannot be read (UnexpectedResponse). */
  | { kind: "garbled" }
  /** Nothing taken: 503 for capacity. */
  | { kind: "refused" }
  /** Nothing taken: 503 with a Retry-After. */
  | { kind: "retryAfter"; seconds: number }
  /** A block is taken and answered, of `by` IDs fewer (or more) than asked. */
  | { kind: "wrongSize"; by: number };

interface Request {
  readonly count: number;
  readonly key: string;
  readonly resolve: (block: Block) => void;
  readonly reject: (error: Error) => void;
}

interface Taken {
  readonly count: number;
  readonly block: Block;
  delivered: boolean;
}

export class ModelService implements Backend {
  /** The counter's next ID (other clients take from it too). */
  next = 1n;
  /** Block requests on the network, oldest first. */
  readonly onNetwork: Request[] = [];
  readonly complaints: string[] = [];
  /** Whether an answer told the client of a capacity refusal (which lifts its start bound). */
  capacityRefused = false;
  /**
   * Told each block answered: whether the client may hand it out (the size
   * asked for, above every block answered before), and whether it overlaps
   * one answered before (the counter moved back).
   */
  onDelivered: (block: Block, usable: boolean, movedBack: boolean) => void = () => undefined;
  /** The highest ID of the blocks answered. */
  #highest = 0n;
  readonly #max: bigint;
  readonly #maxBatch: number;
  readonly #byKey = new Map<string, Taken>();

  constructor(max: number, maxBatch: number) {
    this.#max = BigInt(max);
    this.#maxBatch = maxBatch;
  }

  allocate(_counter: string, count: number, options: AllocateOptions): Promise<Block> {
    const key = options.idempotencyKey;
    if (this.onNetwork.length > 0) this.complaints.push(`a second block request (count ${count}) while one was on the network`);
    const earlier = this.#byKey.get(key);
    if (earlier !== undefined && earlier.count !== count) {
      this.complaints.push(`key ${key} sent again with count ${count}, first with ${earlier.count}`);
    }
    return new Promise((resolve, reject) => this.onNetwork.push({ count, key, resolve, reject }));
  }

  /** IDs the client's block requests took. */
  get taken(): number {
    let total = 0;
    for (const taken of this.#byKey.values()) total += blockLength(taken.block);
    return total;
  }

  /** IDs taken whose block never reached the client (lost answers, answers still on the network). */
  get undelivered(): number {
    let total = 0;
    for (const taken of this.#byKey.values()) if (!taken.delivered) total += blockLength(taken.block);
    return total;
  }

  /** Another client takes `count` IDs: the client's next block does not continue its last. */
  othersTake(count: number): void {
    this.next += BigInt(count);
  }

  /** The counter moves back `by` IDs (not below 1), as a table restored from an earlier backup. */
  moveBack(by: number): void {
    this.next = this.next - BigInt(by) >= 1n ? this.next - BigInt(by) : 1n;
  }

  /** Answer the oldest request on the network as `reply` says; false if there is none. */
  answer(reply: Reply): boolean {
    const request = this.onNetwork.shift();
    if (request === undefined) return false;
    if (reply.kind === "refused" || reply.kind === "retryAfter" || reply.kind === "throttled") this.capacityRefused = true;
    if (reply.kind === "refused") {
      request.reject(new ServiceUnavailable("503 service_unavailable", { capacityRefusals: 1 }));
      return true;
    }
    if (reply.kind === "retryAfter") {
      request.reject(new ServiceUnavailable("503, Retry-After", { capacityRefusals: 1, retryAfter: reply.seconds }));
      return true;
    }
    let taken = this.#byKey.get(request.key);
    if (taken === undefined) {
      const { count } = request;
      if (count > this.#maxBatch) {
        request.reject(new InvalidRequest(400, "invalid_count", `count must be at most ${this.#maxBatch}`));
        return true;
      }
      const size = reply.kind !== "wrongSize" ? count : count > reply.by ? count - reply.by : count + reply.by;
      const end = this.next + BigInt(size) - 1n;
      if (end > this.#max) {
        request.reject(new CounterExhausted(409, "counter_exhausted", "the counter is exhausted"));
        return true;
      }
      taken = { count, block: { start: this.next, end, step: 1n, capacityRefusals: 0 }, delivered: false };
      this.next = end + 1n;
      this.#byKey.set(request.key, taken);
    }
    if (reply.kind === "lost") {
      request.reject(new ServiceUnavailable("the answer was lost"));
    } else if (reply.kind === "garbled") {
      request.reject(new UnexpectedResponse("an answer the client cannot read"));
    } else {
      taken.delivered = true;
      const movedBack = taken.block.start <= this.#highest;
      if (taken.block.end > this.#highest) this.#highest = taken.block.end;
      this.onDelivered(taken.block, blockLength(taken.block) === request.count && !movedBack, movedBack);
      request.resolve(reply.kind === "throttled" ? { ...taken.block, capacityRefusals: 1 } : taken.block);
    }
    return true;
  }
}
