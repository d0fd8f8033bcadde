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
import { OUTBOX_MIGRATION_FRAGMENTS, OUTBOX_MIGRATIONS, type OutboxMigration } from '../generated/migrations.js';
import { checkOutboxName, outboxSchemaName, schemaIdent } from '../name.js';

export { OUTBOX_MIGRATIONS, type OutboxMigration };
export { OUTBOX_NAME_PATTERN, outboxSchemaName } from '../name.js';

/** The smallest PostgreSQL `server_version_num` Postbox supports (14.0). */
export const MIN_SERVER_VERSION_NUM = 140000;

/**
 * The key of the transaction-scoped advisory lock every migration transaction takes first:
 * the ASCII bytes of `postbox` read as a big-endian integer. Concurrent migrators queue on it.
 */
export const MIGRATION_LOCK_KEY = '31647739056123768';

/** Where the default outbox's applied migrations are recorded, one row per version. */
export const MIGRATION_TABLE = 'outbox.schema_migration';

/**
 * The advisory lock key of an outbox's migrations: {@link MIGRATION_LOCK_KEY} for the default
 * outbox; for a named one, a 64-bit FNV-1a hash of its schema name, so migrators of different
 * outboxes do not wait for each other. A decimal string (a bigint does not fit a JS number).
 */
export function migrationLockKey(name?: string | null): string {
  const checked = checkOutboxName(name);
  if (checked === null) return MIGRATION_LOCK_KEY;
  let hash = 0xcbf29ce484222325n;
  for (const byte of new TextEncoder().encode(outboxSchemaName(checked))) {
    hash = BigInt.asUintN(64, (hash ^ BigInt(byte)) * 0x100000001b3n);
  }
  return BigInt.asIntN(64, hash).toString();
}

/** Where an outbox's applied migrations are recorded: `outbox.schema_migration`, or its own schema's. */
export function migrationTable(name?: string | null): string {
  return `${schemaIdent(checkOutboxName(name))}.schema_migration`;
}

const namedMigrations = new Map<string, readonly OutboxMigration[]>();

/**
 * The migrations of an outbox: {@link OUTBOX_MIGRATIONS} itself for the default one (no name);
 * for a named one, the same migrations naming its schema `outbox_<name>` (quoted) wherever
 * the files name `outbox`, for your own migration tool. Built once per name. Throws
 * `PostboxError('invalid_config')` for an invalid name.
 *
 * @example
 * ```ts
 * for (const m of outboxMigrations('billing')) for (const s of m.statements) await client.query(s);
 * ```
 */
export function outboxMigrations(name?: string | null): readonly OutboxMigration[] {
  const checked = checkOutboxName(name, 'outboxMigrations: name');
  if (checked === null) return OUTBOX_MIGRATIONS;
  const hit = namedMigrations.get(checked);
  if (hit) return hit;
  const ident = schemaIdent(checked);
  const migrations = OUTBOX_MIGRATIONS.map((m, i): OutboxMigration => {
    const statements = OUTBOX_MIGRATION_FRAGMENTS[i]!.map((pieces) => pieces.join(ident));
    return Object.freeze({ version: m.version, name: m.name, sql: `${statements.join(';\n\n')};\n`, statements: Object.freeze(statements) });
  });
  const frozen = Object.freeze(migrations);
  namedMigrations.set(checked, frozen);
  return frozen;
}

/**
 * What {@link migrate} needs: anything with node-postgres's `query(text, values)` shape
 * (`pg.Client`, `pg.PoolClient`, …). It must be one session: the migrator runs
 * `BEGIN` … `COMMIT` through it, so do not pass a `pg.Pool`.
 */
export interface MigrationClient {
  query(text: string, values?: unknown[]): Promise<{ rows: any[] }>;
}

/** Options of {@link migrate}. */
export interface MigrateOptions {
  /**
   * A named outbox (`createOutbox({ name })`): creates and migrates its schema `outbox_<name>`,
   * with its own `schema_migration` table and advisory lock. Default: the default outbox, schema `outbox`.
   */
  name?: string;
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
 * A named outbox (`{ name }`) gets the same, in its own schema: `outbox_<name>.schema_migration`
 * and the lock key {@link migrationLockKey}(name).
 *
 * @param client one database session (not a pool).
 * @param opts `name`: the named outbox to migrate (default: the default outbox).
 * @returns the versions applied by this call.
 */
export async function migrate(client: MigrationClient, opts: MigrateOptions = {}): Promise<MigrateResult> {
  const name = checkOutboxName(opts?.name, 'migrate: name');
  const migrations = outboxMigrations(name);
  const lockKey = migrationLockKey(name);
  const table = migrationTable(name);
  const { rows } = await client.query(
    "SELECT current_setting('server_version_num') AS num, current_setting('server_version') AS version",
  );
  const num = Number(rows[0]?.num);
  if (!Number.isFinite(num) || num < MIN_SERVER_VERSION_NUM) {
    throw new UnsupportedServerError(num, String(rows[0]?.version ?? 'unknown'));
  }

  const applied: number[] = [];
  for (const migration of migrations) {
    await client.query('BEGIN');
    try {
      await client.query(`SELECT pg_advisory_xact_lock(${lockKey})`);
      await ensureMigrationTable(client, name);
      const done = await client.query(`SELECT 1 FROM ${table} WHERE version = $1`, [migration.version]);
      if (done.rows.length > 0) {
        await client.query('COMMIT');
        continue;
      }
      for (const statement of migration.statements) await client.query(statement);
      await client.query(`INSERT INTO ${table} (version, name, applied_at) VALUES ($1, $2, now())`, [
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
async function ensureMigrationTable(client: MigrationClient, name: string | null): Promise<void> {
  const table = migrationTable(name);
  // to_regclass parses its text as SQL would: the quoted schema of a named outbox included.
  const { rows } = await client.query('SELECT to_regclass($1) IS NOT NULL AS present', [table]);
  if (rows[0]?.present === true || rows[0]?.present === 't') return;
  await client.query(`CREATE SCHEMA IF NOT EXISTS ${schemaIdent(name)}`);
  await client.query(
    `CREATE TABLE IF NOT EXISTS ${table} (
       version    integer     PRIMARY KEY,
       name       text        NOT NULL,
       applied_at timestamptz NOT NULL DEFAULT now()
     )`,
  );
}
