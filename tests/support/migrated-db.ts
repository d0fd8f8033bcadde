// The set-up most Node-side test files share: one real PostgreSQL server per file, a database
// with Postbox's migrations applied, and a pool on it, stopped after the file's tests.
import { after, before, beforeEach } from 'node:test';
import pg from 'pg';
import { migrate } from '../../js-shim/src/sql/index.ts';
import { startPostgres, type PgServer } from './postgres.ts';

export interface MigratedDb {
  server: PgServer;
  /** The database's connection URL (with a password). */
  url: string;
  pool: pg.Pool;
}

/**
 * Registers the file's hooks and returns the database, filled in once `before` has run.
 * `setup` runs once after the migrations (extra tables); `resetEachTest` empties outbox.job
 * (and, by cascade, attempts) before each test.
 */
export function useMigratedDb(
  name: string,
  opts: { max?: number; setup?: (client: pg.PoolClient) => Promise<void>; resetEachTest?: boolean } = {},
): MigratedDb {
  const db = {} as MigratedDb;
  before(async () => {
    db.server = await startPostgres();
    db.url = await db.server.createDatabase(name);
    db.pool = new pg.Pool({ connectionString: db.url, max: opts.max ?? 3 });
    const client = await db.pool.connect();
    try {
      await migrate(client);
      await opts.setup?.(client);
    } finally {
      client.release();
    }
  });
  after(async () => {
    await db.pool?.end();
    await db.server?.stop();
  });
  if (opts.resetEachTest) {
    beforeEach(async () => {
      await db.pool.query('DELETE FROM outbox.job');
    });
  }
  return db;
}
