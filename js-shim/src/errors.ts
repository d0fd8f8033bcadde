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
