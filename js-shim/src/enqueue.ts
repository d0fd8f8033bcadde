import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { Core } from './core/core.js';
import { isCoreError } from './core/core.js';
import { EnqueueRefusedError, PostboxError } from './errors.js';
import { JOB_FIND_BY_DEDUPE, JOB_INSERT } from './queries/enqueue.js';
import type { EnqueueOptions, EnqueueResult, JobDefinition, Queryable } from './types.js';

/** What the core said about an enqueue: when it is due and how to nudge it. */
export interface EnqueueDecision {
  ok: true;
  payloadBytes: number;
  dueAt: number;
  nudge: boolean;
  delaySeconds: number;
}

/** A created job plus the nudge the core asked for. */
export interface EnqueueOutcome {
  result: EnqueueResult;
  nudge?: { id: string; kind: string; lane: string; delaySeconds: number };
}

export interface EnqueueEnv {
  core: Core;
  now: number;
  maxPayloadBytes: number;
  hasQueue: boolean;
  versionTs: number | null;
  generateId: () => string;
  strict: boolean;
}

/** Validates with the job's schema, asks the core, then writes the job in one statement. */
export async function enqueueJob<P>(
  env: EnqueueEnv,
  q: Queryable,
  job: JobDefinition<P>,
  opts: EnqueueOptions<P>,
): Promise<EnqueueOutcome> {
  const refuse = (result: Exclude<EnqueueResult, { status: 'created' | 'exists' }>): EnqueueOutcome => {
    if (env.strict) throw new EnqueueRefusedError(result);
    return { result };
  };
  if (!opts || typeof opts !== 'object') throw new PostboxError('invalid_input', 'enqueue: options with a `payload` are required');

  const validated = await job.payload['~standard'].validate(opts.payload);
  if (validated.issues) return refuse({ status: 'invalid_payload', issues: validated.issues.map(toIssue) });

  let payloadJson: string | undefined;
  try {
    payloadJson = JSON.stringify(validated.value);
  } catch (error) {
    return refuse({ status: 'invalid_payload', issues: [{ message: `payload is not JSON-serialisable: ${String(error)}` }] });
  }
  if (payloadJson === undefined) return refuse({ status: 'invalid_payload', issues: [{ message: 'payload is not JSON-serialisable' }] });

  const delayMs = opts.delayMs ?? 0;
  if (typeof delayMs !== 'number' || !Number.isSafeInteger(delayMs)) {
    throw new PostboxError('invalid_input', `enqueue: delayMs must be an integer, got ${String(delayMs)}`);
  }
  const input = `{"now":${env.now},"delayMs":${delayMs},"maxPayloadBytes":${env.maxPayloadBytes},"maxQueueDelayMs":86400000,"hasQueue":${env.hasQueue},"payload":${payloadJson}}`;
  const decision = env.core.callText('enqueue', input) as EnqueueDecision | { ok: false; issues: { code: string; message: string }[] } | { error: { code: string; message: string } };
  if (isCoreError(decision)) throw new PostboxError(decision.error.code, `enqueue: ${decision.error.message}`);
  if (!decision.ok) return refuse({ status: 'invalid_payload', issues: decision.issues.map((i) => ({ message: i.message })) });

  checkOptionalText('dedupeKey', opts.dedupeKey);
  checkOptionalText('tenantKey', opts.tenantKey);
  checkOptionalText('correlationId', opts.correlationId);
  const tenantKey = opts.tenantKey ?? null;
  const dedupeKey = opts.dedupeKey ?? null;
  const id = env.generateId();
  const params = [
    id, job.kind, job.lane, payloadJson, tenantKey, dedupeKey, opts.correlationId ?? null,
    opts.metadata === undefined ? null : JSON.stringify(opts.metadata), decision.dueAt, env.now, env.versionTs,
  ];
  let rows = (await q.query(JOB_INSERT, params)).rows;
  if (rows.length === 0 && dedupeKey !== null) rows = (await q.query(JOB_FIND_BY_DEDUPE, [dedupeKey, tenantKey])).rows;
  const row = rows[0] as { id: string; kind: string; created: boolean } | undefined;
  if (!row) throw new PostboxError('enqueue_failed', `enqueue: no job row for ${job.kind}`);
  if (row.kind !== job.kind) return refuse({ status: 'dedupe_conflict', reason: 'kind', existingKind: row.kind });
  if (!row.created) return { result: { status: 'exists', id: row.id, kind: row.kind } };
  const result: EnqueueResult = { status: 'created', id: row.id, kind: row.kind };
  return decision.nudge ? { result, nudge: { id: row.id, kind: row.kind, lane: job.lane, delaySeconds: decision.delaySeconds } } : { result };
}

function checkOptionalText(name: string, value: unknown): void {
  if (value === undefined || value === null) return;
  if (typeof value !== 'string' || value.length === 0 || value.length > 1024) {
    throw new PostboxError('invalid_input', `enqueue: ${name} must be a non-empty string of at most 1024 characters`);
  }
}

function toIssue(issue: StandardSchemaV1.Issue) {
  return issue.path ? { message: issue.message, path: issue.path } : { message: issue.message };
}
