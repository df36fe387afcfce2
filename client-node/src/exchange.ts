/**
 * The exchange: one request to the API, on Node's own fetch, retried while
 * retrying can help (RetryPolicy: jittered back-off, Retry-After obeyed,
 * bounded by attempts and by time), its answer mapped to a JSON body or to
 * the error the client raises.
 *
 * A network error after the request went out, or a 500, leaves its outcome
 * unknown; it is retried only when repeating is harmless (`retryUnknown`). A
 * request that never left (refused, no such host) is always safe to retry.
 *
 * Until anything has answered at the endpoint (`Contact`), a connection
 * refused or a host name that does not resolve is a wrong address or a
 * server not started: waiting cures neither, so the request is tried only
 * `RetryPolicy.firstContactAttempts` times (once, by default) and the caller
 * hears where the connection failed at once. Once the endpoint has answered,
 * the same failures are an outage, retried as any network error. An https://
 * endpoint whose server answers in plain HTTP (the dev server) is a wrong
 * scheme, never an outage: a ConfigurationError at the first attempt, saying
 * the http:// URL to use.
 */

import type { Auth } from "./auth.js";
import { COUNTER_MOVED_BACK, ConfigurationError, ServiceUnavailable, errorFor } from "./errors.js";
import { type Json, errorOf, jsonOf, writeJson } from "./parse.js";
import { RETRY_STATUSES, type RetryPolicy, SERVER_ERROR, parseRetryAfter } from "./retry.js";

// The package's version (package.json), written out: reading package.json at
// run time would tie the module to where dist/ sits. tests/infra/test_release.py
// holds the two together.
export const USER_AGENT = "idblocks-client-node/1.0.0";

/** What a backend knows of its endpoint: whether anything has answered there yet (set by the exchange). */
export interface Contact {
  answered: boolean;
}

/** Where and how requests are sent: what HttpBackend is built with. */
export interface ExchangeSettings {
  readonly endpoint: string;
  readonly auth: Auth;
  readonly retry: RetryPolicy;
  /** Seconds one attempt may take, answer included. */
  readonly timeout: number;
  /** The endpoint's, shared by every request to it. */
  readonly contact: Contact;
}

/** An answer, whatever its status. */
interface Reply {
  status: number;
  text: string;
  retryAfter: string | null;
}

/**
 * No answer: why, whether the request may have reached the service, and
 * whether nothing is there at all (refused, or no such host).
 */
interface NoReply {
  failure: string;
  sent: boolean;
  nothingThere: boolean;
  error: unknown;
}

/**
 * Send, retrying what can be retried; the JSON body, and how many attempts
 * were refused for capacity before the answer (a ServiceUnavailable carries
 * that count too). Anything else the service answered is raised as the
 * matching ServiceError.
 */
export async function exchange(
  settings: ExchangeSettings,
  method: string,
  path: string,
  body: Json | undefined,
  idempotencyKey: string | undefined,
  retryUnknown: boolean,
): Promise<[Json, number]> {
  const url = settings.endpoint + path;
  const data = body === undefined ? undefined : writeJson(body);
  const headers: Record<string, string> = { accept: "application/json", "user-agent": USER_AGENT };
  if (data !== undefined) headers["content-type"] = "application/json";
  if (idempotencyKey !== undefined) headers["idempotency-key"] = idempotencyKey;
  const policy = settings.retry;
  const started = policy.clock();
  let failure = "no attempt made";
  let serverErrors = 0;
  let refusals = 0;
  let unreached = 0;
  let attempt = 0;
  let retryAfter: number | undefined;
  for (; attempt < policy.attempts; attempt++) {
    // Signed for each attempt (a signature is good for minutes); its
    // errors (MissingCredentials) are not the network's.
    const signed = { ...headers, ...(await settings.auth.headers(method, url, data)) };
    const reply = await attemptOnce(settings, method, url, data, signed);
    retryAfter = undefined;
    if ("failure" in reply) {
      if (answeredInPlainHttp(reply.error)) {
        throw new ConfigurationError(`${method} ${path}: ${plainHttp(settings.endpoint)}`, { cause: reply.error });
      }
      failure = reply.failure;
      if (reply.sent && !retryUnknown) {
        throw new ServiceUnavailable(`${failure} (the request may have been applied)`, {
          capacityRefusals: refusals,
          cause: reply.error,
        });
      }
      if (reply.nothingThere && !settings.contact.answered && ++unreached >= policy.firstContactAttempts) {
        throw new ServiceUnavailable(
          `${method} ${path} failed after ${attempt + 1} attempt(s) to an address that has never answered: ${failure}`,
          { capacityRefusals: refusals, neverAnswered: true, cause: reply.error },
        );
      }
    } else {
      settings.contact.answered = true;
      if (reply.status < 300 && reply.status >= 200) return [jsonOf(reply.text, reply.status, method, path), refusals];
      const [code, message] = errorOf(reply.status, reply.text);
      if (capacityRefusal(reply.status, code)) refusals += 1;
      // A counter that moved back answers the same to every try: told at once.
      if (reply.status === SERVER_ERROR && retryUnknown && code !== COUNTER_MOVED_BACK) {
        serverErrors += 1;
        if (serverErrors === policy.serverErrorAttempts) {
          throw new ServiceUnavailable(
            `${method} ${path} answered ${code}: ${message} (HTTP 500) ${serverErrors} times` +
              (method === "POST" ? " (the request may have been applied)" : ""),
            { capacityRefusals: refusals },
          );
        }
      } else if (!retryable(reply.status, code)) {
        throw errorFor(reply.status, code, message);
      }
      failure = `${code}: ${message} (HTTP ${reply.status})`;
      retryAfter = parseRetryAfter(reply.retryAfter, policy.now());
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
    { capacityRefusals: refusals, retryAfter },
  );
}

/** One attempt: the answer, or why there was none. */
async function attemptOnce(
  settings: ExchangeSettings,
  method: string,
  url: string,
  data: string | undefined,
  headers: Record<string, string>,
): Promise<Reply | NoReply> {
  try {
    const response = await fetch(url, {
      method,
      headers,
      ...(data !== undefined ? { body: data } : {}),
      redirect: "manual",
      signal: AbortSignal.timeout(settings.timeout * 1000),
    });
    return { status: response.status, text: await response.text(), retryAfter: response.headers.get("retry-after") };
  } catch (error) {
    // fetch failed, timed out, or the answer broke off while being read.
    const code = connectFailure(error);
    if (code !== undefined) {
      const nothingThere = NOTHING_THERE.has(code);
      return { failure: cannotConnect(settings.endpoint, error, code), sent: false, nothingThere, error };
    }
    return { failure: `${describe(error)} talking to ${settings.endpoint}`, sent: true, nothingThere: false, error };
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

// Of those, the ones that say nothing is there: refused, or a name with no
// address. EAI_AGAIN (a resolver that did not answer) and a timeout may pass.
const NOTHING_THERE = new Set(["ECONNREFUSED", "ENOTFOUND"]);

/** The code of a connection that could not be made, if that is how `error` failed. */
function connectFailure(error: unknown): string | undefined {
  const cause = error instanceof Error ? (error.cause as { code?: unknown } | undefined) : undefined;
  return typeof cause?.code === "string" && NEVER_SENT.has(cause.code) ? cause.code : undefined;
}

/**
 * Where the connection was tried and why it failed; on this machine, the
 * likely cause: the dev server is not running (the Python client's words).
 */
function cannotConnect(endpoint: string, error: unknown, code: string): string {
  const reason = error instanceof Error && error.cause instanceof Error ? error.cause.message : code;
  let message = `cannot connect to ${endpoint} (${reason})`;
  if (loopback(new URL(endpoint).hostname)) {
    message += "; nothing is listening there: is the dev server running? (`make dev` starts it)";
  }
  return message;
}

/**
 * Whether a TLS handshake failed because the server answered in plain HTTP:
 * OpenSSL reads the answer's first bytes ("HTTP/1.x ...") as a record of no
 * TLS version, wrong version number.
 */
function answeredInPlainHttp(error: unknown): boolean {
  const cause = error instanceof Error ? (error.cause as { code?: unknown } | undefined) : undefined;
  return cause?.code === "ERR_SSL_WRONG_VERSION_NUMBER";
}

/**
 * What to tell the caller of an https:// endpoint whose server speaks plain
 * HTTP: the http:// URL of the same port (443 when the endpoint names none,
 * where the server answered). The Python client's words.
 */
function plainHttp(endpoint: string): string {
  const url = new URL(endpoint);
  const instead = `http://${url.hostname}:${url.port || "443"}${url.pathname.replace(/\/$/, "")}`;
  return `the server at ${endpoint} answered in plain HTTP, not TLS: use ${instead}`;
}

function loopback(host: string): boolean {
  return host === "localhost" || host === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
  return `${error.name} ${error.message}${cause}`;
}
