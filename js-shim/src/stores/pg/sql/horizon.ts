/**
 * What holds back the database's xmin horizon (so VACUUM cannot remove newer dead rows), read
 * the same way by health (inspect/health.ts) and by the sweep's index compaction.
 * @module
 */

/**
 * Something that holds back this database's xmin horizon, so no dead row newer than it can be
 * vacuumed: `xidAge` is how many transactions behind it is; `ageMs` how long it has held
 * it, where PostgreSQL knows (not for a slot).
 *
 * - `session`: a session of this database (or a physical standby's WAL sender, whose
 *   `hot_standby_feedback` holds back every database) with a snapshot (`backend_xmin`) or a
 *   transaction id (`backend_xid`); `ageMs` is since its transaction began. Without
 *   `pg_read_all_stats` (e.g. the `pg_monitor` role) PostgreSQL hides other roles' sessions'
 *   details, so this may miss them. Autovacuum workers are left out: PostgreSQL 14 and later
 *   ignore their snapshots when it vacuums.
 * - `prepared`: a prepared transaction (`PREPARE TRANSACTION`) of this database, held until
 *   `COMMIT PREPARED` or `ROLLBACK PREPARED`.
 * - `slot`: a physical replication slot (it holds back every database) or a logical slot of
 *   this database, by its `xmin` or else its `catalog_xmin`.
 */
export type HorizonHolder =
  | { kind: 'session'; pid: number; xidAge: number; ageMs: number | null; state: string | null; applicationName: string | null; backendType: string | null }
  | { kind: 'prepared'; gid: string; xidAge: number; ageMs: number | null; owner: string | null }
  | { kind: 'slot'; slotName: string; slotType: 'physical' | 'logical'; active: boolean; xidAge: number; ageMs: null };

export const jsonList = (v: unknown): any[] => (typeof v === 'string' ? JSON.parse(v) : (v as any[]) ?? []);
export const ageOrNull = (v: unknown) => (v === null || v === undefined ? null : Math.max(Number(v), 0));

/**
 * The body of a CTE listing the oldest holder of this database's xmin horizon of each kind
 * (columns kind, id, xid_age, age_ms, a, b, c); {@link horizonHolders} reads its `json_agg`.
 * age() of a transaction id is in transactions; the three kinds are one UNION ALL, so a check
 * costs one round trip and sees one instant. Ages are clamped at 0 (here, as greatest() would
 * turn a NULL into 0): a session that began after this transaction's now() is a few ms in the
 * future, and a transaction id assigned since then a few ahead.
 */
export const HORIZON_HOLDERS = `       (SELECT 'session' AS kind, pid::text AS id, greatest(age(coalesce(backend_xmin, backend_xid)), 0) AS xid_age,
               round(extract(epoch FROM now() - xact_start) * 1000)::bigint AS age_ms,
               state AS a, application_name AS b, backend_type AS c
          FROM pg_stat_activity
         WHERE pid <> pg_backend_pid() AND coalesce(backend_xmin, backend_xid) IS NOT NULL
           AND backend_type IS DISTINCT FROM 'autovacuum worker'
           AND (datid = (SELECT oid FROM pg_database WHERE datname = current_database())
                OR (datid IS NULL AND backend_type = 'walsender'))
         ORDER BY 3 DESC LIMIT 1)
       UNION ALL
       (SELECT 'prepared', gid, greatest(age(transaction), 0), round(extract(epoch FROM now() - prepared) * 1000)::bigint, owner::text, NULL, NULL
          FROM pg_prepared_xacts WHERE database = current_database()
         ORDER BY 3 DESC LIMIT 1)
       UNION ALL
       (SELECT 'slot', slot_name::text, greatest(age(coalesce(xmin, catalog_xmin)), 0), NULL, slot_type, active::text, NULL
          FROM pg_replication_slots
         WHERE coalesce(xmin, catalog_xmin) IS NOT NULL AND (slot_type = 'physical' OR database = current_database())
         ORDER BY 3 DESC LIMIT 1)
`;

/** The holders a {@link HORIZON_HOLDERS} CTE's `json_agg` lists. */
export function horizonHolders(value: unknown): HorizonHolder[] {
  return jsonList(value).map((h): HorizonHolder => {
    const xidAge = Number(h.xid_age);
    if (h.kind === 'session') {
      return { kind: 'session', pid: Number(h.id), xidAge, ageMs: ageOrNull(h.age_ms), state: h.a ?? null, applicationName: h.b || null, backendType: h.c ?? null };
    }
    if (h.kind === 'prepared') return { kind: 'prepared', gid: h.id, xidAge, ageMs: ageOrNull(h.age_ms), owner: h.a ?? null };
    return { kind: 'slot', slotName: h.id, slotType: h.a === 'logical' ? 'logical' : 'physical', active: h.b === 'true', xidAge, ageMs: null };
  });
}
