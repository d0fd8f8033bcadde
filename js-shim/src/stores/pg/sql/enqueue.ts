import { ts } from './time.js';

/** The ids of job `j`'s parents, as its edges name them (a held key's holder, compared with a repeat). */
const parentsOf = (s: string, j: string) => `ARRAY(SELECT e.parent_id::text FROM ${s}.job_edge e WHERE e.child_id = ${j}.id)`;

/**
 * JobInsertOne: a list of one, in a statement far cheaper to plan than JobInsertMany's (about
 * half the time of a local round trip). Inserts, or finds the job that already holds the
 * dedupe key in the same tenant scope and, field by field, whether it holds this request's
 * payload (jsonb equality), retry budget, metadata (jsonb equality) and correlation id (SQL NULL
 * for none, so IS NOT DISTINCT FROM); `$16`..`$22` its parents as the core decided
 * (AppendParents: status, waiting count, parent-failure effect, code, and the tally: all, dead,
 * cancelled), or nulls; `$23` true for a batch's completion (else null; a batch's completion is
 * always appended alone, so JobInsertMany has no such column). Returns no row only when a concurrent transaction
 * inserted the key after this statement's snapshot (then JobFindByDedupeMany finds it).
 */
export const jobInsertOne = (s: string) => `
WITH ins AS (
  INSERT INTO ${s}.job (id, kind, lane, status, payload, tenant_key, dedupe_key, correlation_id, metadata,
                          due_at, created_at, updated_at, version_ts, max_attempts, trace_context, priority, boost_ms, on_parent_failure,
                          waiting_on, last_error_code, finished_at, parents_total, parents_dead, parents_cancelled, completes_batch)
  VALUES ($1, $2, $3, COALESCE($16::text, 'pending'), $4::jsonb, $5, $6, $7, $8::jsonb, ${ts('$9')}, ${ts('$10')},
          ${ts('$10')}, $11, $12::int, $13::text, $14::smallint, $15::int, $18::text, COALESCE($17::int, 0), $19::text,
          CASE WHEN $16::text = 'cancelled' THEN ${ts('$10')} END, $20::int, $21::int, $22::int, $23::bool)
  ON CONFLICT (tenant_scope, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
  RETURNING id, kind
)
SELECT id, kind, true AS created, true AS same_payload, true AS same_max_attempts, true AS same_metadata, true AS same_correlation_id,
       true AS same_priority, true AS same_on_parent_failure, NULL::text[] AS holder_parents FROM ins
UNION ALL
SELECT h.id, h.kind, false AS created, h.payload = $4::jsonb AS same_payload, h.max_attempts IS NOT DISTINCT FROM $12::int AS same_max_attempts,
       h.metadata IS NOT DISTINCT FROM $8::jsonb AS same_metadata, h.correlation_id IS NOT DISTINCT FROM $7::text AS same_correlation_id,
       h.priority = $14::smallint AS same_priority, h.on_parent_failure IS NOT DISTINCT FROM $18::text AS same_on_parent_failure,
       ${parentsOf(s, 'h')} AS holder_parents
  FROM ${s}.job h
 WHERE $6::text IS NOT NULL AND h.dedupe_key = $6 AND h.tenant_scope = COALESCE('t:' || $5::text, 'n')
   AND NOT EXISTS (SELECT 1 FROM ins)`;

/** The INSERT of JobInsertMany's items that pass `filter`. */
const insertItems = (s: string, filter: string) => `
  INSERT INTO ${s}.job (id, kind, lane, status, payload, tenant_key, dedupe_key, correlation_id, metadata,
                          due_at, created_at, updated_at, version_ts, max_attempts, trace_context, priority, boost_ms, on_parent_failure,
                          waiting_on, last_error_code, finished_at, parents_total, parents_dead, parents_cancelled)
  SELECT id, $8, $9, COALESCE(dep_status, 'pending'), payload, tenant_key, dedupe_key, correlation_id,
         NULLIF(metadata, 'null'::jsonb), ${ts('due_ms')}, ${ts('$10')}, ${ts('$10')}, $11, max_attempts, $13::text, priority, boost_ms, on_parent_failure,
         COALESCE(waiting_on, 0), dep_code, CASE WHEN dep_status = 'cancelled' THEN ${ts('$10')} END, parents_total, parents_dead, parents_cancelled
    FROM item WHERE ${filter}`;

/**
 * JobInsertMany: one statement for a whole list of jobs of one kind (one job is a list of one).
 * The per-item columns come as JSON arrays, parallel by position: `$1` ids, `$2` payloads,
 * `$3` tenant keys, `$4` dedupe keys, `$5` correlation ids, `$6` metadata, `$7` due times
 * (epoch ms); then `$8` kind, `$9` lane, `$10` now, `$11` version timestamp; `$12` the jobs' own
 * retry budgets (null: the kind's); `$13` the list's trace context (null: none); `$14`
 * priorities and `$15` boosts (JSON arrays, or null when no item has a priority: 0 for all);
 * `$16`..`$22` each item's parents as the core decided (AppendParents: status, waiting count,
 * parent-failure effect, code, all, dead, cancelled; JSON arrays, or null when no item has parents). (A JSON array
 * costs the client one JSON.stringify, where node-postgres' array literals cost far more.)
 *
 * Items without a dedupe key go in with a plain INSERT (cheaper than ON CONFLICT's speculative
 * insertion). Items with one go in in list order, so among items sharing a key in one tenant
 * scope the first is inserted and the later ones skip against it (ON CONFLICT sees this
 * statement's own rows). Returns a row only for each item NOT inserted (`ord` from 1): the job
 * holding its key, inserted here by an earlier item or already committed, and, field by field,
 * whether it holds the item's payload, retry budget, metadata and correlation id (as
 * JobInsertOne compares them). `id` is null only
 * when a concurrent transaction inserted the key after this statement's snapshot; then
 * JobFindByDedupeMany finds it.
 */
export const jobInsertMany = (s: string) => `
WITH item AS (
  SELECT t.id::uuid AS id, t.payload, t.tenant_key, t.dedupe_key, t.correlation_id, t.metadata, t.due_ms::bigint AS due_ms,
         t.max_attempts::int AS max_attempts, t.ord, COALESCE('t:' || t.tenant_key, 'n') AS tenant_scope,
         COALESCE(t.priority::smallint, 0) AS priority, COALESCE(t.boost_ms::int, 0) AS boost_ms,
         t.dep_status, t.waiting_on::int AS waiting_on, t.on_parent_failure, t.dep_code,
         t.parents_total::int AS parents_total, t.parents_dead::int AS parents_dead, t.parents_cancelled::int AS parents_cancelled
    FROM ROWS FROM (jsonb_array_elements_text($1::jsonb), jsonb_array_elements($2::jsonb), jsonb_array_elements_text($3::jsonb),
                    jsonb_array_elements_text($4::jsonb), jsonb_array_elements_text($5::jsonb), jsonb_array_elements($6::jsonb),
                    jsonb_array_elements_text($7::jsonb), jsonb_array_elements_text($12::jsonb),
                    jsonb_array_elements_text($14::jsonb), jsonb_array_elements_text($15::jsonb), jsonb_array_elements_text($16::jsonb),
                    jsonb_array_elements_text($17::jsonb), jsonb_array_elements_text($18::jsonb), jsonb_array_elements_text($19::jsonb),
                    jsonb_array_elements_text($20::jsonb), jsonb_array_elements_text($21::jsonb), jsonb_array_elements_text($22::jsonb))
         WITH ORDINALITY AS t(id, payload, tenant_key, dedupe_key, correlation_id, metadata, due_ms, max_attempts, priority, boost_ms,
                              dep_status, waiting_on, on_parent_failure, dep_code, parents_total, parents_dead, parents_cancelled, ord)
), plain AS (${insertItems(s, 'dedupe_key IS NULL')}
), keyed AS (${insertItems(s, 'dedupe_key IS NOT NULL ORDER BY ord')}
  ON CONFLICT (tenant_scope, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
  RETURNING id, kind, tenant_scope, dedupe_key, payload, max_attempts, metadata, correlation_id, priority, on_parent_failure
)
SELECT i.ord, COALESCE(f.id, h.id) AS id, COALESCE(f.kind, h.kind) AS kind, COALESCE(f.payload, h.payload) = i.payload AS same_payload,
       -- Nullable columns: the earlier item's (f) when there is one, else the committed job's.
       CASE WHEN f.id IS NULL THEN h.max_attempts ELSE f.max_attempts END IS NOT DISTINCT FROM i.max_attempts AS same_max_attempts,
       CASE WHEN f.id IS NULL THEN h.metadata ELSE f.metadata END IS NOT DISTINCT FROM NULLIF(i.metadata, 'null'::jsonb) AS same_metadata,
       CASE WHEN f.id IS NULL THEN h.correlation_id ELSE f.correlation_id END IS NOT DISTINCT FROM i.correlation_id AS same_correlation_id,
       COALESCE(f.priority, h.priority) = i.priority AS same_priority,
       CASE WHEN f.id IS NULL THEN h.on_parent_failure ELSE f.on_parent_failure END IS NOT DISTINCT FROM i.on_parent_failure AS same_on_parent_failure,
       -- An earlier item's parents are the call's own (its edges come after): the engine has them.
       CASE WHEN f.id IS NULL AND h.id IS NOT NULL THEN ${parentsOf(s, 'h')} END AS holder_parents
  FROM item i
  LEFT JOIN keyed f ON f.dedupe_key = i.dedupe_key AND f.tenant_scope = i.tenant_scope
  LEFT JOIN ${s}.job h ON f.id IS NULL AND h.dedupe_key IS NOT NULL
                        AND h.dedupe_key = i.dedupe_key AND h.tenant_scope = i.tenant_scope
 WHERE i.dedupe_key IS NOT NULL AND f.id IS DISTINCT FROM i.id`;

/**
 * JobFindByDedupeMany: the jobs holding dedupe keys[] ($1) in tenant scopes (keys[] $2), by
 * `ord`, and whether each one holds the item's payload (JSON texts[] $3), retry budget (int[]
 * $4), metadata (JSON texts[] $5, NULL for none), correlation id (texts[] $6), priority (int[]
 * $7) and parent-failure effect (texts[] $8), compared as JobInsertOne compares them, with the
 * holder's parents.
 */
export const jobFindByDedupeMany = (s: string) => `
SELECT t.ord, j.id, j.kind, j.payload = t.payload::jsonb AS same_payload,
       j.max_attempts IS NOT DISTINCT FROM t.max_attempts AS same_max_attempts,
       j.metadata IS NOT DISTINCT FROM t.metadata::jsonb AS same_metadata,
       j.correlation_id IS NOT DISTINCT FROM t.correlation_id AS same_correlation_id,
       j.priority = t.priority AS same_priority, j.on_parent_failure IS NOT DISTINCT FROM t.on_parent_failure AS same_on_parent_failure,
       ${parentsOf(s, 'j')} AS holder_parents
  FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::text[], $6::text[], $7::int[], $8::text[])
       WITH ORDINALITY AS t(dedupe_key, tenant_key, payload, max_attempts, metadata, correlation_id, priority, on_parent_failure, ord)
  JOIN ${s}.job j ON j.dedupe_key = t.dedupe_key AND j.tenant_scope = COALESCE('t:' || t.tenant_key, 'n')`;
