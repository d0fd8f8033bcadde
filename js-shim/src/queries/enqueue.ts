import { ts } from './time.js';

/**
 * JobInsert: one statement per enqueue. Inserts, or finds the job that already holds the
 * dedupe key in the same tenant scope. Returns no row only when a concurrent transaction
 * inserted the key after this statement's snapshot; then `JobFindByDedupe` finds it.
 */
export const JOB_INSERT = `
WITH ins AS (
  INSERT INTO outbox.job (id, kind, lane, status, payload, tenant_key, dedupe_key, correlation_id, metadata,
                          due_at, created_at, updated_at, version_ts)
  VALUES ($1, $2, $3, 'pending', $4::jsonb, $5, $6, $7, $8::jsonb, ${ts('$9')}, ${ts('$10')}, ${ts('$10')}, $11)
  ON CONFLICT (tenant_scope, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
  RETURNING id, kind
)
SELECT id, kind, true AS created FROM ins
UNION ALL
SELECT id, kind, false AS created FROM outbox.job
 WHERE $6::text IS NOT NULL AND dedupe_key = $6 AND tenant_scope = COALESCE('t:' || $5::text, 'n')
   AND NOT EXISTS (SELECT 1 FROM ins)`;

/** JobFindByDedupe: the job holding a dedupe key in a tenant scope. */
export const JOB_FIND_BY_DEDUPE = `
SELECT id, kind, false AS created FROM outbox.job
 WHERE dedupe_key = $1 AND tenant_scope = COALESCE('t:' || $2::text, 'n')`;
