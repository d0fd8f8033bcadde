/**
 * The outbox store on Cloudflare D1. D1 has no interactive transactions: its one atomic unit is
 * `db.batch([...])`. So an enqueue that must commit with the application's write is ONE batch:
 * the app's prepared statements followed by the append's ({@link D1OutboxStore.appendStatements}),
 * or the same through {@link D1OutboxStore.transaction}, which gathers both into one batch.
 *
 * A {@link D1OutboxStore.transaction} is optimistic: what it reads runs at once; what it writes
 * (the app's statements, appends, operator writes, erasures) waits for ONE batch when the
 * callback returns, headed by guards that fail the whole batch if what the writes were decided
 * on (a dedupe key's holder, a job's status and attempt) changed meanwhile. Its writes' results
 * are known before the batch runs (an append's rows, the jobs an operator write takes), so the
 * callback can await them; if the batch's guards fail, it rejects with
 * `PostboxError('transaction_conflict')` and nothing was written.
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
import type { AppendBatch, AppendInput, AppendRow, ApplyOperateInput, DependencyEdge, JobStatus, OperateTarget } from '../stores/contract.js';
import { d1Driver, d1Statement, type D1Like, type D1StatementLike, type SqliteDriver, type SqlRow, type SqlStatement } from '../stores/sqlite/driver.js';
import { migrateSqlite, sqliteMigrations, sqliteTablePrefix, type SqliteMigration } from '../stores/sqlite/schema.js';
import { budgetColumns, jsonEqual, SqliteOutboxStore } from '../stores/sqlite/store.js';
import { createdRow } from '../stores/shared.js';

export { d1Driver, sqliteMigrations, sqliteTablePrefix, type D1Like, type D1StatementLike, type SqliteDriver, type SqliteMigration };
export { jsonEqual } from '../stores/sqlite/store.js';
// The outbox over this store: createSqliteOutbox and its types.
export * from '../sqlite-outbox.js';

/** One queued entry of a D1 transaction's batch. */
type Entry = { app: D1PreparedStatement } | { store: SqlStatement };

/** A dedupe key held within a transaction, by an append not yet written. */
interface PendingHolder {
  id: string;
  kind: string;
  payloadJson: string;
  maxAttempts: number | null;
  metadataJson: string | null;
  correlationId: string | null;
  priority: number;
  onParentFailure: string | null;
  /** Its parents: the stored edges of a committed holder; a pending one's are in `D1Transaction.parents`. */
  parents?: string[];
}

/**
 * The handle inside {@link D1OutboxStore.transaction}: a batch being gathered. Add your own
 * writes with {@link D1Transaction.add}; the store's writes made with it join the same batch,
 * which runs (all or nothing) when the callback returns. Reads made with it run at once and see
 * what is committed, not this transaction's own pending writes.
 */
export class D1Transaction {
  readonly db: D1Database;
  /** @internal */ readonly entries: Entry[] = [];
  /** @internal */ readonly holders = new Map<string, PendingHolder>();
  /** @internal The parents of jobs its appends created, by child id, as their edges queued in the batch name them. */
  readonly parents = new Map<string, string[]>();
  /** @internal Jobs its appends created, by id: their status as written and tenant scope (a later enqueue of it may name them as parents). */
  readonly jobs = new Map<string, { status: JobStatus; scope: string }>();
  /** @internal */ state: 'open' | 'done' = 'open';
  /** @internal Store writes begun with it and not yet queued. */ inflight = 0;
  /** The results of the app's own statements, in the order added, once the batch has run. */
  results: unknown[] | null = null;

  constructor(db: D1Database) {
    this.db = db;
  }

  /** Adds the application's own prepared statements to the batch (in order, before or between the store's writes). */
  add(...statements: D1PreparedStatement[]): void {
    this.#open();
    for (const app of statements) this.entries.push({ app });
  }

  /** @internal */
  queue(statements: SqlStatement[]): void {
    this.#open();
    for (const store of statements) this.entries.push({ store });
  }

  #open(): void {
    if (this.state !== 'open') throw new PostboxError('invalid_state', 'D1Transaction: the transaction has already run');
  }
}

const CONFLICT = /postbox_conflict/;

/** Counts a store write on `tx` until it has queued its statements (or failed). */
async function tracked<T>(tx: D1Transaction, write: () => Promise<T>): Promise<T> {
  tx.inflight++;
  try {
    return await write();
  } finally {
    tx.inflight--;
  }
}
const scopeOf = (tenantKey: string | null) => (tenantKey === null ? 'n' : `t:${tenantKey}`);

/** The D1 store. `Db` is the D1 binding; `Tx` the batch a {@link D1OutboxStore.transaction} gathers (or the binding itself). */
export class D1OutboxStore extends SqliteOutboxStore<D1Database, D1Transaction | D1Database> {
  protected driver(handle: D1Database | D1Transaction): SqliteDriver {
    return d1Driver(handle instanceof D1Transaction ? handle.db : handle);
  }

  /**
   * Inside a {@link D1Transaction}: the rows are decided now from the committed holders of the
   * items' dedupe keys (and the transaction's own earlier appends); the insert joins the batch
   * behind a guard that those holders are still the same.
   */
  override async append(tx: D1Database | D1Transaction, input: AppendInput): Promise<AppendRow[]> {
    if (!(tx instanceof D1Transaction)) return super.append(tx, input);
    return tracked(tx, () => this.#appendIn(tx, input));
  }

  async #appendIn(tx: D1Transaction, input: AppendInput): Promise<AppendRow[]> {
    const plan = this.planAppend(input);
    if (input.items.length === 0) return [];
    const reads = plan.statements.filter((s) => s.sql === this.sql.appendHolders);
    const committed = new Map<string, SqlRow>();
    const results = await this.exec(tx, reads);
    const chunkStarts: number[] = [];
    let offset = 0;
    for (const read of reads) {
      chunkStarts.push(offset);
      offset += (JSON.parse(String(read.params[0])) as unknown[]).length;
    }
    results.forEach((rows, c) => {
      for (const r of rows) committed.set(String(chunkStarts[c]! + Number(r.ord)), r);
    });
    const expect: { key: string; scope: string; holder: string | null }[] = [];
    const rows = input.items.map((item, i): AppendRow => {
      const created = createdRow(item.id, input.kind);
      if (item.dedupeKey === null) return created;
      const scope = scopeOf(item.tenantKey);
      const slot = `${scope}\u0000${item.dedupeKey}`;
      const pending = tx.holders.get(slot);
      const row = committed.get(String(i));
      const holder: PendingHolder | undefined = pending ?? (row ? {
        id: String(row.id), kind: String(row.kind), payloadJson: String(row.payload), maxAttempts: row.max_attempts === null ? null : Number(row.max_attempts),
        metadataJson: row.metadata === null ? null : String(row.metadata), correlationId: row.correlation_id === null ? null : String(row.correlation_id),
        priority: Number(row.priority), onParentFailure: row.on_parent_failure === null ? null : String(row.on_parent_failure),
        parents: JSON.parse(String(row.parents ?? '[]')) as string[],
      } : undefined);
      if (!pending) expect.push({ key: item.dedupeKey, scope, holder: holder?.id ?? null });
      if (holder) {
        const json = (text: string | null) => (text === null ? null : JSON.parse(text));
        return {
          id: holder.id, kind: holder.kind, created: false, samePayload: jsonEqual(JSON.parse(holder.payloadJson), JSON.parse(item.payloadJson)),
          sameMaxAttempts: holder.maxAttempts === item.maxAttempts, sameMetadata: jsonEqual(json(holder.metadataJson), json(item.metadataJson)),
          sameCorrelationId: holder.correlationId === item.correlationId,
          samePriority: holder.priority === (item.priority ?? 0), sameOnParentFailure: holder.onParentFailure === (item.parents?.onParentFailure ?? null),
          holderParents: holder.parents ?? tx.parents.get(holder.id.toLowerCase()) ?? [],
        };
      }
      tx.holders.set(slot, {
        id: item.id, kind: input.kind, payloadJson: item.payloadJson, maxAttempts: item.maxAttempts, metadataJson: item.metadataJson, correlationId: item.correlationId,
        priority: item.priority ?? 0, onParentFailure: item.parents?.onParentFailure ?? null,
      });
      return created;
    });
    rows.forEach((row, i) => {
      if (row.created) tx.jobs.set(row.id.toLowerCase(), { status: input.items[i]!.parents?.status ?? 'pending', scope: scopeOf(input.items[i]!.tenantKey) });
    });
    tx.queue([
      ...(expect.length === 0 ? [] : [{ sql: this.sql.guardHolders, params: [JSON.stringify(expect)] }]),
      ...plan.statements.filter((s) => s.sql === this.sql.appendInsert),
    ]);
    return rows;
  }

  /**
   * Inside a {@link D1Transaction}: the jobs written are those `lockForOperate` read with it;
   * the writes join the batch behind a guard that each is still in the state read.
   */
  override async applyOperate(tx: D1Database | D1Transaction, input: ApplyOperateInput): Promise<OperateTarget[]> {
    if (!(tx instanceof D1Transaction)) return super.applyOperate(tx, input);
    const seen = this.seenOf(tx);
    const writes = input.writes.filter((w) => seen.has(w.id));
    if (writes.length === 0) return [];
    const json = JSON.stringify(writes.map((w) => ({ ...budgetColumns(w), fromStatus: seen.get(w.id)!.status, fromSeq: seen.get(w.id)!.seq })));
    tx.queue([
      { sql: this.sql.guardStates, params: [JSON.stringify(writes.map((w) => ({ id: w.id, status: seen.get(w.id)!.status, seq: seen.get(w.id)!.seq })))] },
      ...this.operateStatements(input.now, json),
    ]);
    const out = writes.map((w) => ({ id: w.id, kind: seen.get(w.id)!.kind, lane: seen.get(w.id)!.lane, status: w.status }));
    for (const w of writes) seen.delete(w.id);
    return out;
  }

  /** Inside a {@link D1Transaction}: counted now; the deletes join the batch behind a guard that the count still holds. */
  override async eraseTenant(tx: D1Database | D1Transaction, tenantKey: string): Promise<number> {
    if (!(tx instanceof D1Transaction)) return super.eraseTenant(tx, tenantKey);
    return tracked(tx, () => this.#eraseIn(tx, tenantKey));
  }

  async #eraseIn(tx: D1Transaction, tenantKey: string): Promise<number> {
    if (typeof tenantKey !== 'string') throw new PostboxError('invalid_input', 'eraseTenant: tenantKey must be a string');
    const [rows] = await this.exec(tx, [{ sql: `SELECT count(*) AS n FROM ${this.sql.job} WHERE tenant_key = ?1`, params: [tenantKey] }]);
    const n = Number(rows?.[0]?.n ?? 0);
    tx.queue([{ sql: this.sql.guardTenantCount, params: [tenantKey, n] }, ...this.eraseStatements(tenantKey)]);
    return n;
  }

  /**
   * Inside a {@link D1Transaction}: a parent this transaction's appends created is found as it
   * was written; the others are read as committed. Like PostgreSQL's READ COMMITTED, nothing
   * guards what was read: a parent that ends before the batch commits leaves its child waiting
   * for the sweep's check, as a settle racing the enqueue does there.
   */
  protected override async parentStates(tx: D1Database | D1Transaction, refs: readonly { id: string; tenantKey: string | null }[]): Promise<(JobStatus | null)[]> {
    if (!(tx instanceof D1Transaction)) return super.parentStates(tx, refs);
    const pending = refs.map((r) => {
      const job = tx.jobs.get(r.id.toLowerCase());
      return job && job.scope === scopeOf(r.tenantKey) ? job.status : undefined;
    });
    const rest = refs.filter((_, i) => pending[i] === undefined);
    const committed = rest.length > 0 ? await super.parentStates(tx, rest) : [];
    let n = 0;
    return pending.map((p) => p ?? committed[n++] ?? null);
  }

  /** Inside a {@link D1Transaction}: the edges join its batch, after the appends that wrote their children. */
  protected override async addEdges(tx: D1Database | D1Transaction, edges: readonly DependencyEdge[]): Promise<void> {
    if (!(tx instanceof D1Transaction)) return super.addEdges(tx, edges);
    for (const e of edges) {
      const child = e.child.toLowerCase();
      tx.parents.set(child, [...(tx.parents.get(child) ?? []), e.parent.toLowerCase()]);
    }
    if (edges.length > 0) tx.queue(this.edgeStatements(edges));
  }

  /**
   * Runs `fn`, then ONE `db.batch` of every write it made with `tx`: its own statements
   * (`tx.add`) and the store's, in order, all or none. If `fn` throws, nothing is written and
   * its error rejects. If a guard finds that what a write was decided on has changed, the batch
   * rolls back and this rejects with `PostboxError('transaction_conflict')`: run it again.
   */
  async transaction<T>(db: D1Database, fn: (tx: D1Transaction | D1Database) => Promise<T>): Promise<T> {
    const tx = new D1Transaction(db);
    let result: T;
    try {
      result = await fn(tx);
      if (tx.inflight > 0) {
        throw new PostboxError('invalid_state', 'D1: a write made with the transaction was not awaited inside its callback; nothing was written');
      }
    } finally {
      tx.state = 'done';
    }
    if (tx.entries.length === 0) return result;
    let rows: unknown[];
    try {
      rows = await db.batch(tx.entries.map((e) => ('app' in e ? e.app : (d1Statement(db, e.store) as D1PreparedStatement))));
    } catch (error) {
      if (CONFLICT.test(String((error as Error)?.message ?? error)) || CONFLICT.test(String((error as { cause?: Error })?.cause?.message))) {
        throw new PostboxError('transaction_conflict', 'D1: what this transaction read changed before it committed; nothing was written, run it again', { cause: error });
      }
      throw error;
    }
    tx.results = rows.filter((_, i) => 'app' in tx.entries[i]!);
    return result;
  }

  /**
   * The append as prepared statements for your own `db.batch([...yours, ...statements])`; pass
   * the results of `statements` (in order: `results.slice(yours.length)`) to `read`.
   */
  appendStatements(db: D1Database, input: AppendInput): AppendBatch<D1PreparedStatement> {
    const plan = this.planAppend(input);
    return {
      statements: plan.statements.map((s) => d1Statement(db, s) as D1PreparedStatement),
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
export function migrateD1(db: D1Database, options: D1OutboxStoreOptions = {}): Promise<number[]> {
  return migrateSqlite(d1Driver(db), options.name);
}
