// An outbox's numeric options, checked and defaulted by the core: shared by createOutbox and
// createSqliteOutbox (in a module of its own so the SQLite entry points do not load the
// PostgreSQL runtime).
import { isCoreError, type Core } from '../core/core.js';
import { PostboxError } from '../errors.js';
import type { FairShareOption } from '../config.js';

/**
 * The fair claim's weights by tenant scope (`t:<key>`, as the stores key scopes), from the
 * outbox's `fairShare`; `null` when it names none.
 */
export function fairWeightsByScope(fair: FairShareOption | undefined): Record<string, number> | null {
  if (typeof fair !== 'object' || !fair.weights) return null;
  const out: Record<string, number> = {};
  for (const [tenant, weight] of Object.entries(fair.weights)) out[`t:${tenant}`] = weight;
  return Object.keys(out).length > 0 ? out : null;
}

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
  options: { concurrency?: number; lanes?: number; handlerSessions?: number; operationTimeoutMs?: number; maxPayloadBytes?: number; fairShare?: FairShareOption },
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
  const fair = options.fairShare;
  if (fair !== undefined && typeof fair !== 'boolean' && (typeof fair !== 'object' || fair === null)) {
    throw new PostboxError('invalid_config', `${who}: options: fairShare must be true, false or { weights }`);
  }
  // The weights go as they are (a non-integer is the core's to refuse, naming the tenant).
  const weights = typeof fair === 'object' ? (fair.weights ?? null) : null;
  const out = core.callText('claim', JSON.stringify({ op: 'outbox', ...numbers, ...(weights === null ? {} : { fairWeights: weights }) }));
  // The core's refusal names the option and its range: passed on as it is.
  if (isCoreError(out)) throw new PostboxError('invalid_config', `${who}: ${out.error.message}`);
  return out as OutboxConfig;
}

