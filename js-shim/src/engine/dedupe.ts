/**
 * A held dedupe key, from the store's per-field comparison to the result the caller sees: the
 * core decides `exists` or a conflict and which field it names; this module only carries the
 * flags there and the verdict back. Shared by every outbox (PostgreSQL and SQLite).
 * @module
 */
import type { AppendRow } from '../stores/contract.js';
import type { EnqueueResult } from '../types.js';

/** What the core answers for one held key (pb_enqueue, `{"op":"dedupe"}`). */
export type DedupeVerdict =
  | { status: 'exists' }
  | { status: 'dedupe_conflict'; reason: 'kind' | 'payload' | 'maxAttempts' | 'metadata' | 'correlationId' | 'priority' | 'dependsOn' | 'onParentFailure' };

/**
 * The core's input item for a row whose key was held, for an item of `kind` whose parents
 * resolve to `parents` (ids) and whose holder's parents are `holderParents` (null: unknown,
 * which is never the same).
 */
export function dedupeItem(row: AppendRow, kind: string, parents: readonly string[], holderParents: readonly string[] | null) {
  return {
    sameKind: row.kind === kind, samePayload: row.samePayload, sameMaxAttempts: row.sameMaxAttempts,
    sameMetadata: row.sameMetadata, sameCorrelationId: row.sameCorrelationId, samePriority: row.samePriority === true,
    sameParents: holderParents !== null && sameIds(parents, holderParents), sameOnParentFailure: row.sameOnParentFailure === true,
  };
}

/** The same set of job ids (UUIDs, any case). */
function sameIds(a: readonly string[], b: readonly string[]): boolean {
  const left = new Set(a.map((id) => id.toLowerCase()));
  const right = new Set(b.map((id) => id.toLowerCase()));
  return left.size === right.size && [...left].every((id) => right.has(id));
}

/** The result of an item whose key `row` held, as the core judged it. */
export function heldResult(row: AppendRow, verdict: DedupeVerdict): EnqueueResult {
  if (verdict.status === 'exists') return { status: 'exists', id: row.id, kind: row.kind };
  // Another kind's job is not named by id: the key's holder belongs to someone else's code.
  if (verdict.reason === 'kind') return { status: 'dedupe_conflict', reason: 'kind', existingKind: row.kind };
  return { status: 'dedupe_conflict', reason: verdict.reason, id: row.id };
}
