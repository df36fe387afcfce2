/**
 * Talking to the idblocks API over HTTP (the Python client's backend.py).
 *
 * `HttpBackend` covers every route: block requests (next, batch) here, the
 * admin operations in admin.ts, every request through the exchange
 * (exchange.ts: retries, error mapping). Block requests always carry an
 * Idempotency-Key, kept across the retries of one request, so a retry after
 * a lost response gets the block that was already taken instead of a second
 * one. Throttling, 502-504 and network errors are retried with jittered
 * backoff (RetryPolicy), and so is a 500 when repeating the request is
 * harmless; everything else is raised as the matching ServiceError.
 *
 * The endpoint, the timeout and the auth's settings are checked when it is
 * built (ConfigurationError, MissingRegion); counter names before anything
 * is sent (InvalidName); a 2xx whose body is not what the route promises is
 * an UnexpectedResponse. IDs are read from the JSON text exactly: an ID
 * above 2^53 - 1 arrives as a bigint, never rounded.
 */

import {
  type CreateOptions,
  type ListOptions,
  type RequestOptions,
  type UpdateChanges,
  createCounter,
  deleteCounter,
  getCounter,
  listCounters,
  updateCounter,
} from "./admin.js";
import { type Auth, NoAuth } from "./auth.js";
import { type AllocateOptions, type Backend, type Block, newKey } from "./block.js";
import { checkEndpoint, checkTimeout } from "./config.js";
import { ConfigurationError, UnsafeId } from "./errors.js";
import { type Contact, exchange } from "./exchange.js";
import { type Json, type JsonObject, blockOf, integerField, pathName } from "./parse.js";
import { RetryPolicy } from "./retry.js";

export interface HttpBackendOptions {
  auth?: Auth;
  /** Seconds one attempt may take, answer included: above 0, at most 24.8 days. */
  timeout?: number;
  retry?: RetryPolicy;
}

export class HttpBackend implements Backend {
  readonly endpoint: string;
  readonly auth: Auth;
  readonly retry: RetryPolicy;
  readonly timeout: number;
  /** Whether anything has answered at the endpoint yet. */
  readonly contact: Contact = { answered: false };

  constructor(endpoint: string, options: HttpBackendOptions = {}) {
    this.endpoint = checkEndpoint(endpoint);
    this.timeout = checkTimeout(options.timeout ?? 10.0);
    this.auth = options.auth ?? new NoAuth();
    if (typeof this.auth.headers !== "function") {
      throw new ConfigurationError("auth must be an Auth (NoAuth, ApiKeyAuth, IamAuth): it has no headers()");
    }
    this.auth.prepare?.(this.endpoint);
    this.retry = options.retry ?? new RetryPolicy();
  }

  // block requests ------------------------------------------------------

  /** POST /counters/{counter}/batch. Safe to call again with the same key. */
  async allocate(counter: string, count: number, options?: Partial<AllocateOptions>): Promise<Block> {
    const path = `/counters/${pathName(counter)}/batch`;
    const [body, refusals] = await exchange(this, "POST", path, { count }, options?.idempotencyKey ?? newKey(), true);
    return blockOf(body, path, refusals);
  }

  /** POST /counters/{counter}/next: one ID, a number (UnsafeId above 2^53 - 1). */
  async next(counter: string, options?: Partial<AllocateOptions>): Promise<number> {
    const path = `/counters/${pathName(counter)}/next`;
    const body = await this.request("POST", path, undefined, { idempotencyKey: options?.idempotencyKey ?? newKey() });
    const id = integerField(body, "id", path);
    if (id > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new UnsafeId(`${counter} answered ID ${id}, above Number.MAX_SAFE_INTEGER`);
    }
    return Number(id);
  }

  // administration (admin.ts) -------------------------------------------

  create(name: string, options: CreateOptions = {}): Promise<JsonObject> {
    return createCounter(this.#requester, name, options);
  }

  get(name: string): Promise<JsonObject> {
    return getCounter(this.#requester, name);
  }

  /** A page of counters; `deleted: true` lists deleted ones too, with the marks they keep. */
  list(options: ListOptions = {}): Promise<JsonObject> {
    return listCounters(this.#requester, options);
  }

  /**
   * PUT: move next forward, change the cache setting, or both. Service
   * environments holding cached blocks see it once those drain or expire.
   */
  update(name: string, changes: UpdateChanges): Promise<JsonObject> {
    return updateCounter(this.#requester, name, changes);
  }

  delete(name: string): Promise<void> {
    return deleteCounter(this.#requester, name);
  }

  readonly #requester = (method: string, path: string, body?: Json, options?: RequestOptions): Promise<Json> =>
    this.request(method, path, body, options);

  /**
   * Send, retrying what can be retried; return the JSON body or raise.
   *
   * A network error after the request went out, or a 500, leaves its outcome
   * unknown; it is retried only when repeating is harmless:
   * `retryUnknownOutcome`, by default true for GET and PUT (reads and
   * raise-only writes) and for anything with an Idempotency-Key.
   */
  async request(method: string, path: string, body?: Json, options: RequestOptions = {}): Promise<Json> {
    const retryUnknown =
      options.retryUnknownOutcome ?? (options.idempotencyKey !== undefined || method === "GET" || method === "PUT");
    return (await exchange(this, method, path, body, options.idempotencyKey, retryUnknown))[0];
  }
}
