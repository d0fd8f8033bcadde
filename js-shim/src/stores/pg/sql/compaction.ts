/**
 * Index compaction's SQL (the sweep's compact step; the core decides, migration 0007 explains
 * why): the facts, the baselines, and the concurrent rebuilds and drops, which take no lock that
 * blocks a claim, settle or enqueue.
 * @module
 */
import type { CompactionFacts, IndexCompaction } from '../../contract.js';
import type { Queryable } from '../../../types.js';
import { HORIZON_HOLDERS, horizonHolders, jsonList } from './horizon.js';
import { ms, ts } from './time.js';

/** The tables whose rows every job rewrites: their indexes are the ones a held horizon bloats. */
const CHURNING_TABLES = ['job', 'attempt'];

/** Index compaction of the outbox in `schema` (unquoted, compared as a value; `ident` as written in SQL). */
export function pgIndexCompaction(schema: string, ident: string): IndexCompaction<Queryable> {
  const quoted = (name: string) => `${ident}."${name.replaceAll('"', '""')}"`;
  return {
    async compactionFacts(db): Promise<CompactionFacts> {
      const { rows } = await db.query(
        `WITH i AS (
           SELECT c.relname AS name, x.indisvalid AS valid, pg_relation_size(c.oid) AS bytes,
                  b.baseline_bytes, ${ms('b.rebuilt_at')} AS rebuilt_ms
             FROM pg_index x
             JOIN pg_class c ON c.oid = x.indexrelid
             JOIN pg_class t ON t.oid = x.indrelid
             JOIN pg_namespace n ON n.oid = t.relnamespace
             LEFT JOIN ${ident}.index_baseline b ON b.name = c.relname
            WHERE n.nspname = $1 AND t.relname = ANY($2::text[])
         ), t AS (
           SELECT c.relname AS name, pg_relation_size(c.oid) / current_setting('block_size')::int AS pages,
                  pg_stat_get_live_tuples(c.oid) AS rows, greatest(round(c.reltuples), 0)::bigint AS "statsRows",
                  c.reltuples >= 0 AS "hasStatistics"
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = $1 AND c.relname = ANY($2::text[]) AND c.relkind = 'r'
         ), h AS (
${HORIZON_HOLDERS}         )
         SELECT (SELECT coalesce(json_agg(i ORDER BY i.name), '[]') FROM i) AS indexes,
                (SELECT coalesce(json_agg(t ORDER BY t.name), '[]') FROM t) AS tables,
                (SELECT coalesce(json_agg(h ORDER BY h.xid_age DESC), '[]') FROM h) AS horizon`,
        [schema, CHURNING_TABLES],
      );
      const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));
      return {
        indexes: jsonList(rows[0]?.indexes).map((i) => ({
          name: String(i.name), valid: i.valid === true, bytes: Number(i.bytes), baselineBytes: num(i.baseline_bytes), rebuiltAt: num(i.rebuilt_ms),
        })),
        tables: jsonList(rows[0]?.tables).map((t) => ({
          name: String(t.name), pages: Number(t.pages), rows: Number(t.rows), statsRows: Number(t.statsRows), hasStatistics: t.hasStatistics === true,
        })),
        horizon: horizonHolders(rows[0]?.horizon),
      };
    },

    async analyzeTable(db, name): Promise<boolean> {
      // Asked first: the server skips an ANALYZE it may not run with a warning, not an error.
      const { rows } = await db.query(
        `SELECT pg_has_role(c.relowner, 'USAGE')
                OR COALESCE(CASE WHEN current_setting('server_version_num')::int >= 170000 THEN has_table_privilege(c.oid, 'MAINTAIN') END, false) AS may
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`,
        [schema, name],
      );
      if (rows[0]?.may !== true) return false;
      await db.query(`ANALYZE ${quoted(name)}`);
      return true;
    },

    async recordIndexBaselines(db, now, indexes): Promise<void> {
      if (indexes.length === 0) return;
      await db.query(
        `INSERT INTO ${ident}.index_baseline (name, baseline_bytes, updated_at)
         SELECT name, bytes, ${ts('$3')} FROM unnest($1::text[], $2::bigint[]) AS r(name, bytes)
         ON CONFLICT (name) DO UPDATE SET baseline_bytes = EXCLUDED.baseline_bytes, updated_at = EXCLUDED.updated_at`,
        [indexes.map((i) => i.name), indexes.map((i) => i.bytes), now],
      );
    },

    async rebuildIndex(db, name, rebuiltAt): Promise<void> {
      // The try's time first: a rebuild that fails (refused for want of privilege, cut off by
      // the invocation's deadline) still starts the core's cooldown, so no sweep repeats it.
      await db.query(
        `INSERT INTO ${ident}.index_baseline (name, rebuilt_at, updated_at) VALUES ($1, ${ts('$2')}, ${ts('$2')})
         ON CONFLICT (name) DO UPDATE SET rebuilt_at = EXCLUDED.rebuilt_at, updated_at = EXCLUDED.updated_at`,
        [name, rebuiltAt],
      );
      // Not in a transaction (REINDEX CONCURRENTLY refuses one).
      await db.query(`REINDEX INDEX CONCURRENTLY ${quoted(name)}`);
      // Done: the next look records what the rebuilt index holds. A failed one keeps the old
      // baseline, so the bloat is still measured against it after the cooldown.
      await db.query(`UPDATE ${ident}.index_baseline SET baseline_bytes = NULL WHERE name = $1`, [name]);
    },

    async dropIndex(db, name): Promise<void> {
      await db.query(`DROP INDEX CONCURRENTLY IF EXISTS ${quoted(name)}`);
    },
  };
}
