/**
 * The outbox store on Cloudflare D1. D1 has no interactive transactions: its one atomic unit is
 * `db.batch([...])`. So an enqueue that must commit with the application's write is ONE batch:
 * the app's prepared statements followed by the append's ({@link D1OutboxStore.appendStatements}),
 * or the same through {@link D1OutboxStore.transaction}, which gathers both into one batch.
 *
 * @example
 * ```ts
 * import { createD1OutboxStore } from 'postbox/d1';
 * const store = createD1OutboxStore();
 * await store.migrate(env.DB);
 * const append = store.appendStatements(env.DB, { kind: 'email.welcome', lane: 'default', now: Date.now(), versionTs: null,
 *   items: [{ id: crypto.randomUUID(), payloadJson: JSON.stringify({ userId }), tenantKey: null, dedupeKey: `welcome:${userId}`,
 *             correlationId: null, metadataJson: null, dueAt: Date.now(), maxAttempts: null }] });
 * const results = await env.DB.batch([env.DB.prepare('INSERT INTO users (id) VALUES (?1)').bind(userId), ...append.statements]);
 * const [row] = append.read(results.slice(1));
 * ```
 * @module
 */
import { PostboxError } from '../errors.js';
import type { AppendBatch, AppendInput, AppendRow } from '../store/contract.js';
import { d1Driver, d1Statement, type D1Like, type D1StatementLike, type SqliteDriver, type SqlRow, type SqlStatement } from '../sqlite/driver.js';
import { migrateSqlite, sqliteMigrations, sqliteTablePrefix, type SqliteMigration } from '../sqlite/schema.js';
import { SqliteOutboxStore } from '../sqlite/store.js';

export { d1Driver, sqliteMigrations, sqliteTablePrefix, type D1Like, type D1StatementLike, type SqliteDriver, type SqliteMigration };
export { jsonEqual } from '../sqlite/store.js';
export { createSqliteOutbox, type EnqueueStatements, type SqliteOutbox, type SqliteOutboxOptions, type SqliteRunReport } from '../sqlite/outbox.js';

/** One queued entry of a D1 transaction's batch. */
type Entry = { app: D1StatementLike } | { store: SqlStatement };

/**
 * The handle inside {@link D1OutboxStore.transaction}: a batch being gathered. Add your own
 * writes with {@link D1Transaction.add}; appends made with it join the same batch, which runs
 * (all or nothing) when the callback returns. Reads made with it run at once.
 */
export class D1Transaction {
  readonly db: D1Like;
  /** @internal */ readonly entries: Entry[] = [];
  /** @internal */ readonly waiting: { from: number; count: number; resolve: (rows: SqlRow[][]) => void; reject: (e: unknown) => void }[] = [];
  /** @internal */ state: 'open' | 'committing' | 'done' = 'open';
  /** @internal */ misuse: PostboxError | null = null;
  /** The results of the app's own statements, in the order added, once the batch has run. */
  results: unknown[] | null = null;

  constructor(db: D1Like) {
    this.db = db;
  }

  /** Adds the application's own prepared statements to the batch (in order, before or between appends). */
  add(...statements: D1StatementLike[]): void {
    if (this.state !== 'open') throw new PostboxError('invalid_state', 'D1Transaction.add: the transaction has already run');
    for (const app of statements) this.entries.push({ app });
  }
}

/**
 * A promise of an append's rows inside a D1 transaction. They exist only once the batch has run,
 * after the callback returns; awaiting them inside the callback would wait forever, so it fails
 * at once with `PostboxError('invalid_state')` and the transaction writes nothing. (A subclass,
 * because `await` on a plain native promise never calls an overridden `then`.)
 */
class DeferredRows<T> extends Promise<T> {
  static override get [Symbol.species](): PromiseConstructor {
    return Promise;
  }
  tx: D1Transaction | undefined;

  override then<A = T, B = never>(
    onFulfilled?: ((value: T) => A | PromiseLike<A>) | null,
    onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    const tx = this.tx;
    if (tx && tx.state === 'open') {
      tx.misuse ??= new PostboxError(
        'invalid_state',
        'D1: an append inside transaction() is written with the batch when the callback returns, so its rows cannot be awaited inside the callback; await them after transaction() resolves, or use appendStatements() in your own db.batch()',
      );
      return Promise.reject(tx.misuse).then(onFulfilled, onRejected);
    }
    return super.then(onFulfilled, onRejected);
  }
}

function deferredRows<T>(tx: D1Transaction, executor: (resolve: (v: T) => void, reject: (e: unknown) => void) => void): Promise<T> {
  const rows = new DeferredRows<T>(executor);
  // A rolled-back append nobody awaited is no unhandled rejection.
  Promise.prototype.then.call(rows, undefined, () => undefined);
  rows.tx = tx;
  return rows;
}

/** The D1 store. `Db` is the D1 binding; `Tx` the batch a {@link D1OutboxStore.transaction} gathers. */
export class D1OutboxStore extends SqliteOutboxStore<D1Like, D1Transaction | D1Like> {
  protected driver(handle: D1Like | D1Transaction): SqliteDriver {
    return d1Driver(handle instanceof D1Transaction ? handle.db : handle);
  }

  /** Inside a {@link D1Transaction}, the append joins its batch and its rows resolve after the batch has run. */
  override append(tx: D1Like | D1Transaction, input: AppendInput): Promise<AppendRow[]> {
    if (!(tx instanceof D1Transaction)) return super.append(tx, input);
    if (tx.state !== 'open') return Promise.reject(new PostboxError('invalid_state', 'D1: append on a transaction that has already run'));
    const plan = this.planAppend(input);
    const from = tx.entries.length;
    for (const store of plan.statements) tx.entries.push({ store });
    return deferredRows<AppendRow[]>(tx, (resolve, reject) =>
      tx.waiting.push({
        from,
        count: plan.statements.length,
        resolve: (results) => {
          try {
            resolve(input.items.length === 0 ? [] : plan.read(results));
          } catch (error) {
            reject(error);
          }
        },
        reject,
      }),
    );
  }

  /**
   * Runs `fn`, then ONE `db.batch` of everything it gathered: the statements it `add`ed and
   * its appends, in order, all or none. If `fn` throws, nothing is written and its error
   * rejects. Appends' rows resolve after the batch (await them after this resolves). Other
   * operations on the handle (reads, operator writes, which are fenced on their own) run at once.
   */
  async transaction<T>(db: D1Like, fn: (tx: D1Transaction | D1Like) => Promise<T>): Promise<T> {
    const tx = new D1Transaction(db);
    let result: T;
    try {
      result = await fn(tx);
      if (tx.misuse) throw tx.misuse;
    } catch (error) {
      tx.state = 'done';
      for (const w of tx.waiting) w.reject(new PostboxError('rolled_back', 'the transaction was not written: its callback failed', { cause: error }));
      throw error;
    }
    tx.state = 'committing';
    let rows: unknown[];
    try {
      rows = tx.entries.length === 0 ? [] : await db.batch(tx.entries.map((e) => ('app' in e ? e.app : d1Statement(db, e.store))));
    } catch (error) {
      tx.state = 'done';
      for (const w of tx.waiting) w.reject(error);
      throw error;
    }
    tx.state = 'done';
    tx.results = rows.filter((_, i) => 'app' in tx.entries[i]!);
    for (const w of tx.waiting) {
      w.resolve(rows.slice(w.from, w.from + w.count).map((r) => ((r as { results?: unknown[] }).results ?? []) as SqlRow[]));
    }
    return result;
  }

  /**
   * The append as prepared statements for your own `db.batch([...yours, ...statements])`; pass
   * the results of `statements` (in order: `results.slice(yours.length)`) to `read`.
   */
  appendStatements(db: D1Like, input: AppendInput): AppendBatch<D1StatementLike> {
    const plan = this.planAppend(input);
    return {
      statements: plan.statements.map((s) => d1Statement(db, s)),
      read: (results): AppendRow[] =>
        input.items.length === 0 ? [] : plan.read(results.map((r) => ((r as { results?: unknown[] }).results ?? []) as SqlRow[])),
    };
  }
}

/** Options of {@link createD1OutboxStore}. */
export interface D1OutboxStoreOptions {
  /** A named outbox keeps its own tables (`outbox_<name>_job`, …); default: the default outbox (`outbox_job`, …). */
  name?: string | null;
}

/** A D1 outbox store. Throws `PostboxError('invalid_config')` for an invalid name. */
export function createD1OutboxStore(options: D1OutboxStoreOptions = {}): D1OutboxStore {
  return new D1OutboxStore(options);
}

/** Creates or updates an outbox's tables in a D1 database (idempotent); returns the migration versions applied. */
export function migrateD1(db: D1Like, options: D1OutboxStoreOptions = {}): Promise<number[]> {
  return migrateSqlite(d1Driver(db), options.name);
}
