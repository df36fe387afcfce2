export {
  type AllocateOptions,
  ApiKeyAuth,
  type Auth,
  type AwsCredentials,
  type Backend,
  type Block,
  blockLength,
  checkName,
  type CreateOptions,
  HttpBackend,
  type HttpBackendOptions,
  IamAuth,
  type IamAuthOptions,
  type Json,
  type JsonObject,
  newKey,
  NoAuth,
} from "./backend.js";
export {
  AuthError,
  Conflict,
  CounterExhausted,
  CounterNotFound,
  errorFor,
  IdBlocksError,
  InvalidName,
  InvalidRequest,
  MissingCredentials,
  MissingRegion,
  SequenceClosed,
  ServiceError,
  ServiceUnavailable,
  UnexpectedResponse,
  UnsafeId,
} from "./errors.js";
export { FailoverBackend } from "./failover.js";
export { parseRetryAfter, RetryPolicy, type RetryOptions } from "./retry.js";
export { CLOSE_ATTEMPTS, CLOSE_TIMEOUT, IdRange, Sequence, type SequenceOptions } from "./sequence.js";
export { BlockSizer, DEFAULT_MAX_BATCH, MAX_RUNWAY, prefetchTail, smoothedLatency } from "./sizing.js";
