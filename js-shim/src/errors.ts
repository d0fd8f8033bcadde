import type { EnqueueRefusal } from './types.js';

/**
 * The one error class Postbox throws. `code` is stable and machine-readable:
 * `invalid_job`, `invalid_schedule`, `unknown_kind`, `core_error` codes from the core
 * (`invalid_input`, `invalid_policy`, `invalid_cron`, …), `connection_failed`, `timeout`.
 */
export class PostboxError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PostboxError';
    this.code = code;
  }
}

/**
 * Thrown by `enqueue` under `strictEnqueue: true` when the job is refused
 * (`invalid_payload` or `dedupe_conflict`), so the caller's transaction rolls back.
 */
export class EnqueueRefusedError extends PostboxError {
  readonly result: EnqueueRefusal;
  constructor(result: EnqueueRefusal) {
    super(result.status, `enqueue refused: ${result.status}`);
    this.name = 'EnqueueRefusedError';
    this.result = result;
  }
}
