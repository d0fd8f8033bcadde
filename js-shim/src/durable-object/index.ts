/**
 * The outbox store in a Durable Object's own SQLite database (`ctx.storage.sql`). The job table
 * lives beside the application's tables, so an enqueue commits with the app's write:
 * {@link DurableObjectOutboxStore.transaction} runs both in one storage transaction, and inside
 * `ctx.storage.transactionSync(() => …)` every statement, the append's too, is one transaction.
 * A Durable Object's `alarm()` can stand in for the cron sweep (see the README).
 *
 * @example
 * ```ts
 * import { createDurableObjectOutboxStore } from 'postbox/durable-object';
 * const store = createDurableObjectOutboxStore();
 * // in the constructor: ctx.blockConcurrencyWhile(() => store.migrate(ctx.storage));
 * await store.transaction(this.ctx.storage, async (tx) => {
 *   tx.sql.exec('INSERT INTO users (id) VALUES (?)', userId);
 *   await store.append(tx, { kind: 'email.welcome', lane: 'default', now: Date.now(), versionTs: null, items: [...] });
 * });
 * ```
 * @module
 */
import { durableObjectDriver, type DurableObjectSqlStorage, type SqliteDriver } from '../stores/sqlite/driver.js';
import { migrateSqlite, sqliteMigrations, sqliteTablePrefix, type SqliteMigration } from '../stores/sqlite/schema.js';
import { SqliteOutboxStore } from '../stores/sqlite/store.js';

export { durableObjectDriver, sqliteMigrations, sqliteTablePrefix, type DurableObjectSqlStorage, type SqliteDriver, type SqliteMigration };
export { jsonEqual } from '../stores/sqlite/store.js';
// The outbox over this store: createSqliteOutbox and its types.
export * from '../sqlite-outbox.js';

/** `ctx.storage` of a SQLite-backed Durable Object. */
export type DurableObjectStorageLike = DurableObjectStorage;

/** The Durable Object store: operations run on `ctx.storage`, inside a transaction as outside. */
export class DurableObjectOutboxStore extends SqliteOutboxStore<DurableObjectStorage> {
  protected driver(handle: DurableObjectStorage): SqliteDriver {
    return durableObjectDriver(handle as unknown as DurableObjectSqlStorage);
  }

  /**
   * Runs `fn` in one storage transaction (`ctx.storage.transaction`): the app's `tx.sql.exec`
   * writes and every append made with `tx` commit together, or, if `fn` throws, none does and
   * its error rejects.
   */
  transaction<T>(storage: DurableObjectStorage, fn: (tx: DurableObjectStorage) => Promise<T>): Promise<T> {
    return storage.transaction(() => fn(storage));
  }
}

/** Options of {@link createDurableObjectOutboxStore}. */
export interface DurableObjectOutboxStoreOptions {
  /** A named outbox keeps its own tables (`outbox_<name>_job`, …); default: the default outbox (`outbox_job`, …). */
  name?: string | null;
}

/** A Durable Object outbox store. Throws `PostboxError('invalid_config')` for an invalid name. */
export function createDurableObjectOutboxStore(options: DurableObjectOutboxStoreOptions = {}): DurableObjectOutboxStore {
  return new DurableObjectOutboxStore(options);
}

/** Creates or updates an outbox's tables in a Durable Object's storage (idempotent); returns the versions applied. */
export function migrateDurableObject(storage: DurableObjectStorage, options: DurableObjectOutboxStoreOptions = {}): Promise<number[]> {
  return migrateSqlite(durableObjectDriver(storage as unknown as DurableObjectSqlStorage), options.name);
}
