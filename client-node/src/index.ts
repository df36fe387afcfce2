export { type CreateOptions, type ListOptions, type UpdateChanges } from "./admin.js";
export {
  ApiKeyAuth,
  type Auth,
  type AwsCredentials,
  IamAuth,
  type IamAuthOptions,
  NoAuth,
} from "./auth.js";
export { HttpBackend, type HttpBackendOptions } from "./backend.js";
export { type AllocateOptions, type Backend, type Block, blockLength, newKey } from "./block.js";
export {
  AuthError,
  ConfigurationError,
  Conflict,
  CounterExhausted,
  CounterMovedBack,
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
export { IdRange } from "./held.js";
export { checkName, type Json, type JsonObject } from "./parse.js";
export { parseRetryAfter, RetryPolicy, type RetryOptions } from "./retry.js";
export { CLOSE_ATTEMPTS, CLOSE_TIMEOUT, Sequence, type SequenceOptions, type WaitOptions } from "./sequence.js";
export {
  BlockSizer,
  DEFAULT_MAX_BATCH,
  DRAIN_RUNWAY,
  INITIAL_BLOCK,
  MAX_RUNWAY,
  prefetchTail,
  smoothedLatency,
  YOUNG_TAIL_SHARE,
} from "./sizing.js";
export { nodeTimers, type Timers } from "./timers.js";
