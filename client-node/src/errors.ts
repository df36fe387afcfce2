/**
 * What the client raises: the Python client's errors, by the same names.
 * Every error from the service carries its HTTP status and the service's
 * error code and message; the few the client raises before sending anything
 * (a name the service would refuse, no credentials or no region for SigV4)
 * carry status 0 and the code the service would use.
 */

/** Base of everything this package raises. */
export class IdBlocksError extends Error {
  override name = "IdBlocksError";
}

/** The service answered with an error that retrying will not fix. */
export class ServiceError extends IdBlocksError {
  override name = "ServiceError";
  readonly status: number;
  readonly code: string;
  readonly detail: string;

  constructor(status: number, code: string, message: string) {
    super(`${code}: ${message}` + (status ? ` (HTTP ${status})` : ""));
    this.status = status;
    this.code = code;
    this.detail = message;
  }
}

/** 400/415/422: the request itself is wrong. */
export class InvalidRequest extends ServiceError {
  override name = "InvalidRequest";
}

/** A counter name the service's rule refuses, found before sending (status 0, code invalid_name). */
export class InvalidName extends InvalidRequest {
  override name = "InvalidName";
  constructor(message: string) {
    super(0, "invalid_name", message);
  }
}

/**
 * 401/403: not authenticated, or not allowed; or, with status 0, SigV4 has
 * no credentials or no region (see the subclasses), found before sending.
 */
export class AuthError extends ServiceError {
  override name = "AuthError";
}

/** IamAuth found no AWS credentials anywhere in the AWS SDK's chain. */
export class MissingCredentials extends AuthError {
  override name = "MissingCredentials";
  constructor(message: string) {
    super(0, "missing_credentials", message);
  }
}

/** IamAuth cannot tell which region to sign for. */
export class MissingRegion extends AuthError {
  override name = "MissingRegion";
  constructor(message: string) {
    super(0, "missing_region", message);
  }
}

/** 404: no such counter (and the service does not auto-create). */
export class CounterNotFound extends ServiceError {
  override name = "CounterNotFound";
}

/** 409: the counter's state forbids the request (see `code`). */
export class Conflict extends ServiceError {
  override name = "Conflict";
}

/** 409 counter_exhausted: the counter has reached its max. */
export class CounterExhausted extends Conflict {
  override name = "CounterExhausted";
}

/** The code of a counter that moved back, from the service (HTTP 500) or found by a Sequence (status 0). */
export const COUNTER_MOVED_BACK = "counter_moved_back";

/**
 * The counter handed out IDs it had handed out before: its stored state
 * moved back (its table restored from a backup, say). The service answers it
 * (HTTP 500 counter_moved_back) when a fresh allocation comes back at or
 * below what the same function environment had already taken, and hands out
 * nothing. A Sequence raises it (status 0, the same code) when a block
 * overlaps the IDs it was given before from that counter and region, and
 * hands out none of that block. Never retried: until the counter is above
 * its old high-water mark again, what it hands out may have been handed out
 * before.
 */
export class CounterMovedBack extends ServiceError {
  override name = "CounterMovedBack";
}

/**
 * The service could not be reached, or kept answering 429/5xx, for as long
 * as the retry policy allows. `capacityRefusals` counts the attempts it
 * refused for capacity (429, 503): a counter or a service too busy for the
 * load, not an endpoint that is down. `retryAfter`: the seconds the service
 * asked the client to wait (Retry-After) before trying again, when its last
 * answer said so; a Sequence sends nothing for that counter before then.
 * `neverAnswered`: nothing has ever answered at the endpoint and the
 * connection found nothing there (refused, or no such host): a wrong address
 * or a server not started, said at once rather than retried.
 */
export class ServiceUnavailable extends IdBlocksError {
  override name = "ServiceUnavailable";
  readonly capacityRefusals: number;
  readonly retryAfter: number | undefined;
  readonly neverAnswered: boolean;

  constructor(
    message: string,
    options: { capacityRefusals?: number; retryAfter?: number | undefined; neverAnswered?: boolean; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.capacityRefusals = options.capacityRefusals ?? 0;
    this.retryAfter = options.retryAfter;
    this.neverAnswered = options.neverAnswered ?? false;
  }
}

/**
 * The service answered 2xx with a body this client cannot read (not JSON, or
 * without the fields the route promises). Not a ServiceError: the request may
 * have been applied, so a keyed request keeps its key for another try.
 */
export class UnexpectedResponse extends IdBlocksError {
  override name = "UnexpectedResponse";
}

/**
 * What the client was configured with cannot work: an endpoint that is not
 * an http(s) URL a request can go to, a timeout out of range, a malformed
 * region, a credential source that is not one. Raised when the object is
 * built, before any request: a wrong setting never looks like an outage. An
 * https:// endpoint whose server answers in plain HTTP is one too, raised
 * at the first request (which is what shows it), at once, never retried.
 */
export class ConfigurationError extends IdBlocksError {
  override name = "ConfigurationError";
}

/** The Sequence was closed; it hands out nothing more. */
export class SequenceClosed extends IdBlocksError {
  override name = "SequenceClosed";
}

/**
 * A block holds IDs above Number.MAX_SAFE_INTEGER (2^53 - 1), which a
 * `number` cannot hold exactly, and the Sequence was not asked for bigint
 * IDs. The block is counted in `unusedIds`; nothing of it is handed out.
 */
export class UnsafeId extends IdBlocksError {
  override name = "UnsafeId";
}

export function errorFor(status: number, code: string, message: string): ServiceError {
  if (code === COUNTER_MOVED_BACK) return new CounterMovedBack(status, code, message);
  if (status === 401 || status === 403) return new AuthError(status, code, message);
  if (status === 404) return new CounterNotFound(status, code, message);
  if (status === 409) {
    return code === "counter_exhausted"
      ? new CounterExhausted(status, code, message)
      : new Conflict(status, code, message);
  }
  if (status >= 400 && status < 500) return new InvalidRequest(status, code, message);
  return new ServiceError(status, code, message);
}
