/**
 * What a Sequence needs from a backend: one call that hands out a block, and
 * the block it answers (HttpBackend, FailoverBackend and MemoryBackend are
 * such backends; a test may write its own).
 */

import { randomUUID } from "node:crypto";

/**
 * IDs `start`, `start + step`, ... up to `end`, both included. `step` is the
 * service's RegionCount: 1 (consecutive IDs) in a single region, K when K
 * regions each hand out their own residue modulo K. `capacityRefusals`
 * counts the attempts of the request for this block that the service
 * refused for capacity (429, 503) before answering it: the counter is hot.
 */
export interface Block {
  readonly start: bigint;
  readonly end: bigint;
  readonly step: bigint;
  readonly capacityRefusals: number;
}

export function blockLength(block: Block): number {
  return Number((block.end - block.start) / block.step + 1n);
}

export interface AllocateOptions {
  idempotencyKey: string;
}

/** What a Sequence needs: one call that hands out a block. */
export interface Backend {
  allocate(counter: string, count: number, options: AllocateOptions): Promise<Block>;
}

/** A new Idempotency-Key, drawn when a request is made (never before a fork or a snapshot). */
export function newKey(): string {
  return randomUUID().replaceAll("-", "");
}
