/**
 * Talking to the idblocks API over HTTP (the Python client's backend.py).
 *
 * `HttpBackend` covers every route, on Node's own fetch. Block requests
 * (next, batch) always carry an Idempotency-Key, kept across the retries of
 * one request, so a retry after a lost response gets the block that was
 * already taken instead of a second one. Throttling, 502-504 and network
 * errors are retried with jittered backoff (RetryPolicy), and so is a 500
 * when repeating the request is harmless; everything else is raised as the
 * matching ServiceError.
 *
 * Counter names are checked against the service's rule before anything is
 * sent (InvalidName); a 2xx whose body is not what the route promises is an
 * UnexpectedResponse. IDs are read from the JSON text exactly: an ID above
 * 2^53 - 1 arrives as a bigint, never rounded.
 */

import { randomUUID } from "node:crypto";

import { parse as parseJson, parseNumberAndBigInt, stringify as stringifyJson } from "lossless-json";

import {
  InvalidName,
  MissingCredentials,
  MissingRegion,
  ServiceUnavailable,
  UnexpectedResponse,
  UnsafeId,
  errorFor,
} from "./errors.js";
import { RETRY_STATUSES, RetryPolicy, SERVER_ERROR, parseRetryAfter } from "./retry.js";

export const USER_AGENT = "idblocks-client-node/0.1";

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

export function newKey(): string {
  return randomUUID().replaceAll("-", "");
}

// -- authentication ------------------------------------------------------------

/**
 * Headers that authenticate one request. An Auth may also have
 * `prepare(endpoint)`, which HttpBackend calls once, to refuse at
 * construction what would make every request fail.
 */
export interface Auth {
  headers(method: string, url: string, body: string | undefined): Promise<Record<string, string>> | Record<string, string>;
  prepare?(endpoint: string): void;
}

export class NoAuth implements Auth {
  headers(): Record<string, string> {
    return {};
  }
}

/** ClientAuth API_KEY: the key in x-api-key. */
export class ApiKeyAuth implements Auth {
  readonly #key: string;

  constructor(apiKey: string) {
    if (!apiKey) throw new RangeError("apiKey is empty");
    this.#key = apiKey;
  }

  headers(): Record<string, string> {
    return { "x-api-key": this.#key };
  }
}

export const NO_CREDENTIALS =
  "no AWS credentials for SigV4: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY " +
  "(and AWS_SESSION_TOKEN for temporary ones), or AWS_PROFILE to a profile in " +
  "~/.aws/config or ~/.aws/credentials, or run where an IAM role provides them (Lambda, ECS, EC2)";
export const NO_REGION =
  "no AWS region for SigV4: the endpoint is not an execute-api URL that names one; " +
  "pass region, or set AWS_REGION or AWS_DEFAULT_REGION";

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}

export interface IamAuthOptions {
  region?: string;
  /** Where credentials come from; by default the AWS SDK's chain (fromNodeProviderChain). */
  credentials?: () => Promise<AwsCredentials>;
  /** The signing time, for tests; the clock by default. */
  signingDate?: () => Date;
}

/**
 * ClientAuth AWS_IAM (and the admin routes): SigV4 for execute-api with the
 * AWS SDK's own signer, and credentials from the SDK's usual chain
 * (environment, SSO, profile, web identity, container and instance roles),
 * which keeps what it found and renews expiring credentials itself.
 *
 * The SDK is loaded on the first signed request, so a caller with an API key
 * or no auth never loads it. No credentials anywhere is MissingCredentials,
 * raised by that first request (and told to every caller waiting for its
 * block); no region for the endpoint is MissingRegion, raised when
 * HttpBackend is built.
 */
export class IamAuth implements Auth {
  readonly #region: string | undefined;
  readonly #signingDate: (() => Date) | undefined;
  #credentials: (() => Promise<AwsCredentials>) | undefined;
  #signer: Promise<typeof import("@smithy/signature-v4")> | undefined;
  #sha256: Promise<typeof import("@aws-crypto/sha256-js")> | undefined;

  constructor(options: IamAuthOptions = {}) {
    this.#region = options.region;
    this.#credentials = options.credentials;
    this.#signingDate = options.signingDate;
  }

  regionFor(url: string): string {
    // Lambda and most AWS tools set AWS_REGION; the CLI's profiles, AWS_DEFAULT_REGION.
    const region =
      this.#region || regionOf(url) || process.env["AWS_REGION"] || process.env["AWS_DEFAULT_REGION"];
    if (!region) throw new MissingRegion(NO_REGION);
    return region;
  }

  prepare(endpoint: string): void {
    this.regionFor(endpoint);
  }

  async #credentialsNow(): Promise<AwsCredentials> {
    if (this.#credentials === undefined) {
      const { fromNodeProviderChain } = await import("@aws-sdk/credential-providers");
      // Built once: the chain caches what it found and refreshes it before it expires.
      this.#credentials ??= fromNodeProviderChain();
    }
    try {
      return await this.#credentials();
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new MissingCredentials(`${reason}; ${NO_CREDENTIALS}`);
    }
  }

  async headers(method: string, url: string, body: string | undefined): Promise<Record<string, string>> {
    this.#signer ??= import("@smithy/signature-v4");
    this.#sha256 ??= import("@aws-crypto/sha256-js");
    const [{ SignatureV4 }, { Sha256 }, credentials] = await Promise.all([
      this.#signer,
      this.#sha256,
      this.#credentialsNow(),
    ]);
    const target = new URL(url);
    const signer = new SignatureV4({
      service: "execute-api",
      region: this.regionFor(url),
      credentials,
      sha256: Sha256,
    });
    const query: Record<string, string> = {};
    target.searchParams.forEach((value, key) => {
      query[key] = value;
    });
    const headers: Record<string, string> = { host: target.host };
    if (body !== undefined) headers["content-type"] = "application/json";
    const signed = await signer.sign(
      {
        method,
        protocol: target.protocol,
        hostname: target.hostname,
        ...(target.port ? { port: Number(target.port) } : {}),
        path: target.pathname,
        query,
        headers,
        ...(body !== undefined ? { body } : {}),
      },
      this.#signingDate ? { signingDate: this.#signingDate() } : {},
    );
    // fetch sets Host itself, from the same URL.
    const { host: _host, ...rest } = signed.headers;
    return rest;
  }
}

function regionOf(url: string): string | undefined {
  const match = /^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com$/.exec(new URL(url).hostname);
  return match?.[1];
}

// -- the API -------------------------------------------------------------------

export type Json = null | boolean | number | bigint | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export interface HttpBackendOptions {
  auth?: Auth;
  /** Seconds one attempt may take, answer included. */
  timeout?: number;
  retry?: RetryPolicy;
}

export interface RequestOptions {
  idempotencyKey?: string;
  retryUnknownOutcome?: boolean;
}

export interface CreateOptions {
  start?: number | bigint;
  max?: number | bigint;
  /** How many IDs each service environment takes at a time for next (the service's default is 1). */
  cache?: number;
}

export class HttpBackend implements Backend {
  readonly endpoint: string;
  readonly auth: Auth;
  readonly retry: RetryPolicy;
  readonly timeout: number;

  constructor(endpoint: string, options: HttpBackendOptions = {}) {
    let url: URL | undefined;
    try {
      url = new URL(endpoint);
    } catch {
      url = undefined;
    }
    if (!url || !(url.protocol === "http:" || url.protocol === "https:") || !url.hostname) {
      throw new RangeError(`endpoint must be an http(s) URL, not ${JSON.stringify(endpoint)}`);
    }
    this.endpoint = endpoint.replace(/\/+$/, "");
    this.auth = options.auth ?? new NoAuth();
    this.auth.prepare?.(this.endpoint);
    this.retry = options.retry ?? new RetryPolicy();
    this.timeout = options.timeout ?? 10.0;
  }

  // block requests ------------------------------------------------------

  /** POST /counters/{counter}/batch. Safe to call again with the same key. */
  async allocate(counter: string, count: number, options?: Partial<AllocateOptions>): Promise<Block> {
    const path = `/counters/${pathName(counter)}/batch`;
    const [body, refusals] = await this.#send("POST", path, { count }, options?.idempotencyKey ?? newKey(), true);
    const start = integerField(body, "start", path);
    const end = integerField(body, "end", path);
    // A service from before regions existed sends no step: its blocks are consecutive.
    const step = isObject(body) && "step" in body ? integerField(body, "step", path) : 1n;
    if (end < start) throw new UnexpectedResponse(`POST ${path} answered the empty block [${start}, ${end}]`);
    if (step < 1n || (end - start) % step !== 0n) {
      throw new UnexpectedResponse(`POST ${path} answered a block [${start}, ${end}] that step ${step} does not fit`);
    }
    return { start, end, step, capacityRefusals: refusals };
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

  // administration ------------------------------------------------------

  async create(name: string, options: CreateOptions = {}): Promise<JsonObject> {
    const body: JsonObject = { name: checkName(name) };
    if (options.start !== undefined) body["start"] = options.start;
    if (options.max !== undefined) body["max"] = options.max;
    if (options.cache !== undefined) body["cache"] = options.cache;
    return object(await this.request("POST", "/admin/counters", body, { retryUnknownOutcome: false }), "create");
  }

  async get(name: string): Promise<JsonObject> {
    return object(await this.request("GET", `/admin/counters/${pathName(name)}`), "get");
  }

  async list(options: { limit?: number; cursor?: string } = {}): Promise<JsonObject> {
    const query = new URLSearchParams();
    if (options.limit !== undefined) query.set("limit", String(options.limit));
    if (options.cursor !== undefined) query.set("cursor", options.cursor);
    const path = "/admin/counters" + (query.size ? `?${query.toString()}` : "");
    const page = object(await this.request("GET", path), "list");
    const cursor = page["cursor"];
    if (!Array.isArray(page["counters"]) || !(cursor === undefined || cursor === null || typeof cursor === "string")) {
      throw new UnexpectedResponse(`list answered without a counters list and a cursor: ${excerpt(page)}`);
    }
    return page;
  }

  /**
   * PUT: move next forward, change the cache setting, or both. Service
   * environments holding cached blocks see it once those drain or expire.
   */
  async update(name: string, changes: { next?: number | bigint; cache?: number }): Promise<JsonObject> {
    const body: JsonObject = {};
    if (changes.next !== undefined) body["next"] = changes.next;
    if (changes.cache !== undefined) body["cache"] = changes.cache;
    if (Object.keys(body).length === 0) throw new RangeError("update needs next, cache or both");
    // Raise-only or setting a value, so repeating it is harmless.
    return object(await this.request("PUT", `/admin/counters/${pathName(name)}`, body), "update");
  }

  async delete(name: string): Promise<void> {
    await this.request("DELETE", `/admin/counters/${pathName(name)}`, undefined, { retryUnknownOutcome: false });
  }

  // the one place requests are made ----------------------------------------

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
    return (await this.#send(method, path, body, options.idempotencyKey, retryUnknown))[0];
  }

  /**
   * request(), and how many attempts were refused for capacity before the
   * answer (a ServiceUnavailable carries that count too).
   */
  async #send(
    method: string,
    path: string,
    body: Json | undefined,
    idempotencyKey: string | undefined,
    retryUnknown: boolean,
  ): Promise<[Json, number]> {
    const url = this.endpoint + path;
    const data = body === undefined ? undefined : stringifyJson(body);
    const headers: Record<string, string> = { accept: "application/json", "user-agent": USER_AGENT };
    if (data !== undefined) headers["content-type"] = "application/json";
    if (idempotencyKey !== undefined) headers["idempotency-key"] = idempotencyKey;
    const policy = this.retry;
    const started = policy.clock();
    let failure = "no attempt made";
    let serverErrors = 0;
    let refusals = 0;
    let attempt = 0;
    for (; attempt < policy.attempts; attempt++) {
      let retryAfter: number | undefined;
      let answer: { status: number; text: string; retryAfter: string | null } | undefined;
      // Signed for each attempt (a signature is good for minutes); its
      // errors (MissingCredentials) are not the network's.
      const signed = { ...headers, ...(await this.auth.headers(method, url, data)) };
      try {
        const response = await fetch(url, {
          method,
          headers: signed,
          ...(data !== undefined ? { body: data } : {}),
          redirect: "manual",
          signal: AbortSignal.timeout(this.timeout * 1000),
        });
        answer = { status: response.status, text: await response.text(), retryAfter: response.headers.get("retry-after") };
      } catch (error) {
        // fetch failed, timed out, or the answer broke off while being read.
        failure = `${describe(error)} talking to ${this.endpoint}`;
        if (!neverSent(error) && !retryUnknown) {
          throw new ServiceUnavailable(`${failure} (the request may have been applied)`, {
            capacityRefusals: refusals,
            cause: error,
          });
        }
      }
      if (answer !== undefined) {
        if (answer.status < 300 && answer.status >= 200) return [jsonOf(answer.text, answer.status, method, path), refusals];
        const [code, message] = errorOf(answer.status, answer.text);
        if (capacityRefusal(answer.status, code)) refusals += 1;
        if (answer.status === SERVER_ERROR && retryUnknown) {
          serverErrors += 1;
          if (serverErrors === policy.serverErrorAttempts) {
            throw new ServiceUnavailable(
              `${method} ${path} answered ${code}: ${message} (HTTP 500) ${serverErrors} times` +
                (method === "POST" ? " (the request may have been applied)" : ""),
              { capacityRefusals: refusals },
            );
          }
        } else if (!retryable(answer.status, code)) {
          throw errorFor(answer.status, code, message);
        }
        failure = `${code}: ${message} (HTTP ${answer.status})`;
        retryAfter = parseRetryAfter(answer.retryAfter, policy.now());
      }
      if (attempt + 1 === policy.attempts) break;
      const wait = policy.delay(attempt + 1, retryAfter);
      if (policy.clock() - started + wait > policy.deadline) {
        if (retryAfter !== undefined && retryAfter === wait) {
          failure += `; asked to retry after ${wait} s, past the ${policy.deadline} s deadline`;
        }
        break;
      }
      await policy.sleep(wait);
    }
    throw new ServiceUnavailable(
      `${method} ${path} failed after ${Math.min(attempt + 1, policy.attempts)} attempt(s): ${failure}`,
      { capacityRefusals: refusals },
    );
  }
}

/**
 * 409 request_in_progress: the same request (same Idempotency-Key) is still
 * running; asking again soon gets its answer.
 */
function retryable(status: number, code: string): boolean {
  return RETRY_STATUSES.has(status) || (status === 409 && code === "request_in_progress");
}

/**
 * Throttled (by the stage or the account), or the service's own answer when
 * the counter's item refused the write: too much load for the capacity,
 * which a longer runway eases. A 502/504 or an API Gateway 503 without the
 * service's code says nothing about load.
 */
function capacityRefusal(status: number, code: string): boolean {
  return status === 429 || (status === 503 && code === "service_unavailable");
}

// The request never left: nothing can have been applied, so it is always safe to retry.
const NEVER_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT"]);

function neverSent(error: unknown): boolean {
  const cause = error instanceof Error ? (error.cause as { code?: unknown } | undefined) : undefined;
  return typeof cause?.code === "string" && NEVER_SENT.has(cause.code);
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
  return `${error.name} ${error.message}${cause}`;
}

/**
 * The service's counter name rule (NAME_PATTERN in the service's rules.py),
 * repeated here so that a name it refuses is refused before anything is
 * sent: "." and ".." above all, which URL handling would collapse into
 * another path (/counters/./batch is /counters/batch).
 */
const NAME_RE =
  /^(?:[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}|\.[A-Za-z0-9_-][A-Za-z0-9_.-]{0,126}|\.\.[A-Za-z0-9_.-]{1,126})$/;

/**
 * `name` if the service accepts it as a counter name: 1-128 characters of
 * A-Z a-z 0-9 _ . -, and not "." or "..". Else InvalidName.
 */
export function checkName(name: unknown): string {
  if (typeof name !== "string" || !NAME_RE.test(name)) {
    throw new InvalidName(
      "counter name must be 1-128 characters of A-Z, a-z, 0-9, '_', '.' or '-', " +
        `and not '.' or '..', not ${typeof name === "string" ? JSON.stringify(name) : String(name)}`,
    );
  }
  return name;
}

function pathName(name: string): string {
  return encodeURIComponent(checkName(name));
}

function excerpt(data: unknown): string {
  const text = typeof data === "string" ? data : (stringifyJson(data) ?? String(data));
  return text.length > 120 ? `${text.slice(0, 120)}...` : text;
}

function readJson(text: string): Json {
  return parseJson(text, null, parseNumberAndBigInt) as Json;
}

function jsonOf(text: string, status: number, method: string, path: string): Json {
  if (!text) return null;
  try {
    return readJson(text);
  } catch {
    throw new UnexpectedResponse(`${method} ${path} answered HTTP ${status} with a body that is not JSON: ${excerpt(text)}`);
  }
}

function isObject(body: Json): body is JsonObject {
  return typeof body === "object" && body !== null && !Array.isArray(body);
}

function object(body: Json, what: string): JsonObject {
  if (!isObject(body)) throw new UnexpectedResponse(`${what} answered ${excerpt(body)}, not a JSON object`);
  return body;
}

function integerField(body: Json, field: string, path: string): bigint {
  const value = isObject(body) ? body[field] : undefined;
  if (typeof value === "bigint") return value;
  if (typeof value === "number" && Number.isSafeInteger(value)) return BigInt(value);
  throw new UnexpectedResponse(`POST ${path} answered without an integer '${field}': ${excerpt(body)}`);
}

function errorOf(status: number, text: string): [string, string] {
  let body: Json = null;
  try {
    body = readJson(text);
  } catch {
    body = null;
  }
  if (isObject(body) && isObject(body["error"] ?? null)) {
    const error = body["error"] as JsonObject;
    return [textOf(error["code"], "error"), textOf(error["message"], "")];
  }
  // API Gateway's own errors (auth, throttling, unknown route) look like {"message": "..."}
  const message = isObject(body) ? body["message"] : undefined;
  return [`http_${status}`, textOf(message, "") || text.slice(0, 200)];
}

function textOf(value: Json | undefined, fallback: string): string {
  if (typeof value === "string") return value;
  return value === undefined || value === null ? fallback : (stringifyJson(value) ?? fallback);
}
