import type { EnqueueRefusal } from './types.js';

/** Why a webhook was refused. */
export type WebhookRejection =
  /** `webhook-id`, `webhook-timestamp` or `webhook-signature` is absent (`missing` names them). */
  | 'missing_headers'
  /** `webhook-timestamp` is not whole seconds. */
  | 'invalid_timestamp'
  /** Older than the tolerance: possibly a replayed capture. */
  | 'timestamp_too_old'
  /** Newer than the tolerance: a clock far off, or forged. */
  | 'timestamp_too_new'
  /** No `v1` signature matches any of the secrets for this id, timestamp and body. */
  | 'no_matching_signature';

/** The codes of the core's error documents (docs/ABI.md), passed on as they are. */
export type CoreErrorCode = 'invalid_json' | 'invalid_input' | 'invalid_policy' | 'invalid_cron' | 'invalid_message' | 'unknown_op' | 'too_large';

/**
 * Every `code` a {@link PostboxError} carries. The type is the list: the constructor refuses
 * (at compile time) a literal code missing from it, so the list cannot fall behind the code.
 */
export type PostboxErrorCode =
  | CoreErrorCode
  /** Options, job or schedule definitions, names: wrong before anything runs. */
  | 'invalid_config' | 'invalid_job' | 'invalid_schedule' | 'invalid_secret' | 'invalid_db' | 'invalid_id' | 'duplicate_id' | 'missing_dependency'
  /** An operator action or a tenant scope the job refuses. */
  | 'invalid_state' | 'wrong_tenant'
  /** The database: unreachable, too old, too slow, or a statement that failed. */
  | 'connection_failed' | 'unsupported_server' | 'timeout' | 'deadline_exceeded' | 'store_error' | 'enqueue_failed' | 'transaction_conflict'
  /** `ctx.db` and heartbeats used after their attempt, transaction or session ended, or a lease lost. */
  | 'attempt_closed' | 'transaction_closed' | 'session_closed' | 'heartbeat_failed' | 'heartbeat_in_transaction' | 'transaction_open' | 'lease_lost' | 'not_idle'
  /** A capability the outbox's store does not have (`ctx.db` on a D1 or Durable Object store). */
  | 'unsupported'
  /** The core itself: a build that does not match, out of memory, a trap. */
  | 'core_mismatch' | 'core_oom' | 'core_trap'
  /** A webhook endpoint's state could not be read or kept. */
  | 'webhook_endpoint'
  /** `EnqueueRefusedError` (`strictEnqueue`): the refusal's status. */
  | EnqueueRefusal['status']
  /** `WebhookVerificationError`: why a delivery was rejected. */
  | WebhookRejection;

/** A literal code must be a {@link PostboxErrorCode}; a `string` (from a core error document) passes. */
type Checked<C extends string> = string extends C ? C : C extends PostboxErrorCode ? C : PostboxErrorCode;

/**
 * The one error class Postbox throws. `code` is stable and machine-readable: one of
 * {@link PostboxErrorCode}.
 */
export class PostboxError<C extends string = PostboxErrorCode> extends Error {
  readonly code: PostboxErrorCode;
  constructor(code: Checked<C>, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PostboxError';
    // A code that is not a literal came from a core error document: one of CoreErrorCode.
    this.code = code as PostboxErrorCode;
  }
}

/**
 * Thrown by `enqueue` and `enqueueMany` under `strictEnqueue: true` when a job is refused
 * (`invalid_payload` or `dedupe_conflict`), so the caller's transaction rolls back. For
 * `enqueueMany`, `index` is the first refused item's position in the list.
 */
export class EnqueueRefusedError extends PostboxError {
  readonly result: EnqueueRefusal;
  readonly index: number | undefined;
  constructor(result: EnqueueRefusal, index?: number) {
    super(result.status, index === undefined ? `enqueue refused: ${result.status}` : `enqueueMany refused items[${index}]: ${result.status}`);
    this.name = 'EnqueueRefusedError';
    this.result = result;
    this.index = index;
  }
}

/** A thrown value as text: an Error's message, a string as it is, anything else as JSON. */
export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  try {
    return typeof error === 'string' ? error : JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}
