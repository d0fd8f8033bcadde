// An outbox's numeric options, checked and defaulted by the core: shared by createOutbox and
// createSqliteOutbox (in a module of its own so the SQLite entry points do not load the
// PostgreSQL runtime).
import { isCoreError, type Core } from '../core/core.js';
import { PostboxError } from '../errors.js';

/** An outbox's numeric options after the core checked and defaulted them. */
export interface OutboxConfig {
  concurrency: number;
  lanes: number;
  /** Connections an invocation may open for handlers' ctx.db (0: ctx.db runs on the lane's session). */
  handlerSessions: number;
  operationTimeoutMs: number;
  maxPayloadBytes: number;
  maxQueueDelayMs: number;
  maxKeyChars: number;
}

/**
 * @internal An outbox's numeric options, checked and defaulted by the core (pb_claim outbox);
 * a bad one is `invalid_config`, its message prefixed with `who`.
 */
export function outboxConfig(
  core: Core,
  options: { concurrency?: number; lanes?: number; handlerSessions?: number; operationTimeoutMs?: number; maxPayloadBytes?: number },
  who = 'createOutbox',
): OutboxConfig {
  const numbers: Record<string, unknown> = {
    concurrency: options.concurrency,
    lanes: options.lanes,
    handlerSessions: options.handlerSessions,
    operationTimeoutMs: options.operationTimeoutMs,
    maxPayloadBytes: options.maxPayloadBytes,
  };
  // Anything but an integer (NaN and ±Infinity would become JSON null, the default) goes as
  // -1, below every bound, so the core's refusal names the field's range.
  for (const [name, value] of Object.entries(numbers)) if (value !== undefined && !Number.isInteger(value)) numbers[name] = -1;
  const out = core.callText('claim', JSON.stringify({ op: 'outbox', ...numbers }));
  // The core's refusal names the option and its range: passed on as it is.
  if (isCoreError(out)) throw new PostboxError('invalid_config', `${who}: ${out.error.message}`);
  return out as OutboxConfig;
}

