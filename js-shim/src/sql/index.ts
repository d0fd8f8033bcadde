/**
 * `postbox/sql`: the schema as data, and a migrator.
 *
 * `migrations/NNNN_name.sql` at the repository root is the one source of truth; the build
 * (`scripts/gen-sql.mjs`) embeds it as {@link OUTBOX_MIGRATIONS}, since a Worker has no file
 * system. Apply it with {@link migrate}, or hand the statements to your own migration tool.
 *
 * @module
 */
import { PostboxError } from '../errors.js';
import { OUTBOX_MIGRATIONS, type OutboxMigration } from '../generated/migrations.js';

export { OUTBOX_MIGRATIONS, type OutboxMigration };

/** The smallest PostgreSQL `server_version_num` Postbox supports (14.0). */
export const MIN_SERVER_VERSION_NUM = 140000;

/**
 * The key of the transaction-scoped advisory lock every migration transaction takes first:
 * the ASCII bytes of `postbox` read as a big-endian integer. Concurrent migrators queue on it.
 */
export const MIGRATION_LOCK_KEY = '31647739056123768';

/** Where applied migrations are recorded, one row per version. */
export const MIGRATION_TABLE = 'outbox.schema_migration';

/**
 * What {@link migrate} needs: anything with node-postgres's `query(text, values)` shape
 * (`pg.Client`, `pg.PoolClient`, …). It must be one session: the migrator runs
 * `BEGIN` … `COMMIT` through it, so do not pass a `pg.Pool`.
 */
export interface MigrationClient {
  query(text: string, values?: unknown[]): Promise<{ rows: any[] }>;
}

/** Options of {@link migrate}. The schema is fixed (`outbox`) for now. */
export interface MigrateOptions {
  /** Reserved: a configurable schema is not supported yet. */
  schema?: never;
}

/** What {@link migrate} did. */
export interface MigrateResult {
  /** Versions this call applied, ascending; empty when the database was up to date. */
  applied: number[];
}

/** Thrown by {@link migrate} for a server older than PostgreSQL 14. `code` is `unsupported_server`. */
export class UnsupportedServerError extends PostboxError {
  /** The server's `server_version_num`, e.g. `130012`. */
  readonly serverVersionNum: number;
  constructor(serverVersionNum: number, serverVersion: string) {
    super(
      'unsupported_server',
      `Postbox needs PostgreSQL 14 or newer; this server is ${serverVersion} (server_version_num ${serverVersionNum})`,
    );
    this.name = 'UnsupportedServerError';
    this.serverVersionNum = serverVersionNum;
  }
}

/**
 * Applies the pending migrations of {@link OUTBOX_MIGRATIONS} in version order.
 *
 * - Each migration runs in its own transaction together with its row in
 *   `outbox.schema_migration (version int primary key, name text, applied_at timestamptz)`,
 *   so a migration is either fully applied and recorded, or not at all.
 * - Every transaction first takes `pg_advisory_xact_lock(MIGRATION_LOCK_KEY)`, then creates the
 *   schema and tracking table if needed and checks whether the version is recorded. Two
 *   migrators running at once therefore apply each migration exactly once: the second waits
 *   for the first's commit, then sees the row and skips.
 * - Refuses servers older than PostgreSQL 14 ({@link UnsupportedServerError}) before changing
 *   anything.
 * - Works through Hyperdrive's transaction pooling: no session state outlives a transaction.
 *
 * On failure the current migration's transaction is rolled back and the error is rethrown;
 * migrations committed earlier in the same call stay applied.
 *
 * @param client one database session (not a pool).
 * @param _opts reserved.
 * @returns the versions applied by this call.
 */
export async function migrate(client: MigrationClient, _opts: MigrateOptions = {}): Promise<MigrateResult> {
  const { rows } = await client.query(
    "SELECT current_setting('server_version_num') AS num, current_setting('server_version') AS version",
  );
  const num = Number(rows[0]?.num);
  if (!Number.isFinite(num) || num < MIN_SERVER_VERSION_NUM) {
    throw new UnsupportedServerError(num, String(rows[0]?.version ?? 'unknown'));
  }

  const applied: number[] = [];
  for (const migration of OUTBOX_MIGRATIONS) {
    await client.query('BEGIN');
    try {
      await client.query(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`);
      await ensureMigrationTable(client);
      const done = await client.query(`SELECT 1 FROM ${MIGRATION_TABLE} WHERE version = $1`, [migration.version]);
      if (done.rows.length > 0) {
        await client.query('COMMIT');
        continue;
      }
      for (const statement of migration.statements) await client.query(statement);
      await client.query(`INSERT INTO ${MIGRATION_TABLE} (version, name, applied_at) VALUES ($1, $2, now())`, [
        migration.version,
        migration.name,
      ]);
      await client.query('COMMIT');
      applied.push(migration.version);
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      if (err instanceof Error) {
        err.message = `migration ${migration.version} (${migration.name}) failed: ${err.message}`;
      }
      throw err;
    }
  }
  return { applied };
}

/** Creates the schema and tracking table unless they exist. Call under the advisory lock. */
async function ensureMigrationTable(client: MigrationClient): Promise<void> {
  const { rows } = await client.query(`SELECT to_regclass('${MIGRATION_TABLE}') IS NOT NULL AS present`);
  if (rows[0]?.present === true || rows[0]?.present === 't') return;
  await client.query('CREATE SCHEMA IF NOT EXISTS outbox');
  await client.query(
    `CREATE TABLE IF NOT EXISTS ${MIGRATION_TABLE} (
       version    integer     PRIMARY KEY,
       name       text        NOT NULL,
       applied_at timestamptz NOT NULL DEFAULT now()
     )`,
  );
}
