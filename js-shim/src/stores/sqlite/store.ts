/**
 * The SQLite outbox store: the `OutboxStore` contract over a {@link SqliteDriver}, shared by
 * the D1 and Durable Object stores. Each operation is one batch of statements run atomically,
 * with no JavaScript between them (D1 cannot do otherwise), so the two databases run the same
 * SQL and differ only in their driver and their transaction.
 * @module
 */
import { PostboxError } from '../../errors.js';
import { attemptView, checkLimit, createdRow, decodeCursor, emptyCounts, encodeCursor, fairOrder, limitedFairOrder, tenantScope } from '../shared.js';
import type {
  AppendInput, AppendRow, ApplyOperateInput, AttemptView, BacklogCount, ClaimedJob, ClaimedJobs, ClaimInput, DependencyEdge, DependencyStore,
  DependencyView, DependentChange, ExpiredLeaseQuery, HandoffQuery, SettledIds,
  HeartbeatInput, JobFilter, JobLaneRef, JobPage, JobStatus, JobView, ListJobsQuery, NextDueQuery, OperateLockInput,
  OperateTarget, OperateWrite, OutboxStore, RetentionInput, SettleInput,
} from '../contract.js';
import type { SqliteDriver, SqlRow, SqlStatement, SqlValue } from './driver.js';
import { migrateSqlite, sqliteTablePrefix } from './schema.js';
import { JOB_VIEW_COLUMNS, sqliteSql, type SqliteSql } from './statements.js';

/** A planned write: its statements, and how to read their rows. */
export interface SqlitePlan<T> {
  statements: SqlStatement[];
  read(results: readonly SqlRow[][]): T;
}

/**
 * The most JSON (in UTF-16 units, times 3 for the worst-case UTF-8) one append statement binds.
 * D1 and Durable Objects cap a string parameter at 2 MB; a longer list is split into several
 * statements of the same batch, still one atomic write.
 */
const APPEND_CHUNK_BYTES = 1_500_000;

/** What `lockForOperate` read, so `applyOperate` writes only over that state. */
export interface OperateSeen {
  kind: string;
  lane: string;
  status: string;
  seq: number;
}

/**
 * The SQLite store. `Db` is the handle operations run on, `Tx` the handle inside `transaction`;
 * the subclasses (D1, Durable Object) say how a handle becomes a driver and what a transaction is.
 */
export abstract class SqliteOutboxStore<Db, Tx = Db> implements OutboxStore<Db, Tx> {
  readonly name: string | null;
  /** The outbox's table prefix: `outbox_` or `outbox_<name>_`. */
  readonly tablePrefix: string;
  /** The outbox's statements. */
  readonly sql: SqliteSql;
  /** Per handle, what the last `lockForOperate` read of each job (D1 holds no lock, so the write checks it). */
  readonly #seen = new WeakMap<object, Map<string, OperateSeen>>();


  constructor(options: { name?: string | null } = {}) {
    this.tablePrefix = sqliteTablePrefix(options.name);
    this.name = options.name ?? null;
    this.sql = sqliteSql(this.tablePrefix);
  }

  /** The driver that runs statements on `handle`. */
  protected abstract driver(handle: Db | Tx): SqliteDriver;

  abstract transaction<T>(db: Db, fn: (tx: Tx) => Promise<T>): Promise<T>;

  /** Creates or updates the outbox's tables (idempotent); returns the migration versions applied. */
  migrate(db: Db): Promise<number[]> {
    return migrateSqlite(this.driver(db), this.name);
  }

  /** Runs statements on `handle` as one atomic batch. */
  protected exec(handle: Db | Tx, statements: SqlStatement[]): Promise<SqlRow[][]> {
    return this.driver(handle).batch(statements);
  }

  async #one(handle: Db | Tx, sql: string, params: SqlValue[]): Promise<SqlRow[]> {
    const [rows] = await this.exec(handle, [{ sql, params }]);
    return rows ?? [];
  }

  // ---- append ------------------------------------------------------------------------------

  /** An append as statements and a reader of their rows (one statement pair per chunk of items). */
  planAppend(input: AppendInput): SqlitePlan<AppendRow[]> {
    checkAppend(input);
    const chunks = chunkItems(input);
    const statements: SqlStatement[] = [];
    for (const json of chunks.map((c) => c.json)) {
      statements.push({ sql: this.sql.appendInsert, params: [json, input.kind, input.lane, input.now, input.versionTs, input.traceContext ?? null] });
      statements.push({ sql: this.sql.appendHolders, params: [json] });
    }
    return {
      statements,
      read: (results) => {
        const rows: AppendRow[] = [];
        chunks.forEach((chunk, c) => {
          const holders = new Map<number, SqlRow>();
          for (const r of results[2 * c + 1] ?? []) holders.set(Number(r.ord), r);
          chunk.items.forEach((item, i) => {
            if (item.dedupeKey === null) {
              rows.push(createdRow(item.id, input.kind));
              return;
            }
            const holder = holders.get(i);
            if (!holder) throw new PostboxError('store_error', `append: no job holds dedupe key ${JSON.stringify(item.dedupeKey)} after the insert`);
            const created = holder.id === item.id;
            rows.push({
              id: String(holder.id),
              kind: String(holder.kind),
              created,
              samePayload: created || jsonEqual(JSON.parse(String(holder.payload)), JSON.parse(item.payloadJson)),
              sameMaxAttempts: created || (holder.max_attempts === null ? null : Number(holder.max_attempts)) === item.maxAttempts,
              sameMetadata: created || jsonEqual(parseJson(holder.metadata ?? null), item.metadataJson === null ? null : JSON.parse(item.metadataJson)),
              sameCorrelationId: created || str(holder.correlation_id) === item.correlationId,
              samePriority: created || Number(holder.priority) === (item.priority ?? 0),
              sameOnParentFailure: created || str(holder.on_parent_failure) === (item.parents?.onParentFailure ?? null),
              ...(created ? {} : { holderParents: JSON.parse(String(holder.parents ?? '[]')) as string[] }),
            });
          });
        });
        return rows;
      },
    };
  }

  async append(tx: Tx, input: AppendInput): Promise<AppendRow[]> {
    const plan = this.planAppend(input);
    if (input.items.length === 0) return [];
    return plan.read(await this.exec(tx, plan.statements));
  }

  // ---- claim and settle --------------------------------------------------------------------

  #claimStatements(input: ClaimInput, exclude: readonly string[]): SqlStatement[] {
    checkClaim(input);
    const leases: Record<string, number> = {};
    input.kinds.forEach((kind, i) => (leases[kind] = input.leaseMs[i]!));
    const params: SqlValue[] = [input.now, input.lane, JSON.stringify(leases), input.limit, input.versionCutoff, JSON.stringify(exclude)];
    let targets: string | null = null;
    if (input.targets) {
      const byId: Record<string, string> = {};
      for (const t of input.targets) byId[t.id] = t.kind;
      targets = JSON.stringify(byId);
    }
    if (input.limits) {
      const l = input.limits;
      const limits: Record<string, [number, number, number, number]> = {};
      l.kinds.forEach((kind, i) => (limits[kind] = [l.concurrency[i]!, l.rateSlots[i]!, l.rateHoldMs[i]!, l.tenantConcurrency[i]!]));
      const json = JSON.stringify(limits);
      return [
        // With fair share (a due claim), the limited claim goes round the tenants too (statements.ts).
        { sql: this.sql.claimLimited, params: [...params, targets, json, input.fair && targets === null ? 1 : 0, input.fair?.weights ? JSON.stringify(input.fair.weights) : null] },
        { sql: this.sql.openAttempts, params: [input.now] },
        { sql: this.sql.throttledKinds, params: [input.now, input.lane, json, input.versionCutoff, targets] },
      ];
    }
    if (input.fair && targets === null) {
      const fair = [...params, input.fair.tenants, input.fair.after, input.fair.weights ? JSON.stringify(input.fair.weights) : null];
      return [{ sql: this.sql.fairVisited, params: fair.slice(0, 8) }, { sql: this.sql.claimFair, params: fair }, { sql: this.sql.openAttempts, params: [input.now] }];
    }
    if (targets !== null) params.push(targets);
    return [{ sql: targets === null ? this.sql.claimDue : this.sql.claimTargets, params }, { sql: this.sql.openAttempts, params: [input.now] }];
  }

  /**
   * Claimed rows from a claim's batch results (`results`, from the claim's first statement on):
   * a limited claim's carry its throttled kinds (the batch's third result); a fair claim's come
   * in the claim's order, with where the next one starts (its first result lists the scopes).
   */
  #claimed(results: readonly (SqlRow[] | undefined)[], input: ClaimInput): ClaimedJobs {
    if (input.fair && !input.limits && !input.targets) {
      const visited = (results[0] ?? []).map((r) => String(r.scope));
      const rows = fairOrder(results[1] ?? [], visited, (r) => tenantScope(str(r.tenant_key)), (r) => Number(r.due_ms) - Number(r.boost_ms), (r) => String(r.id), input.fair.weights);
      const jobs: ClaimedJobs = toClaimed(rows, false);
      jobs.fairAfter = visited.length > 0 && visited.length >= Math.min(input.fair.tenants, input.limit) ? visited[visited.length - 1]! : null;
      return jobs;
    }
    // A fair claim of a limited lane hands its jobs over round by round, as it picked them.
    const rows = input.fair && input.limits && !input.targets
      ? limitedFairOrder(results[0] ?? [], new Set(input.limits.kinds), (r) => String(r.kind), (r) => tenantScope(str(r.tenant_key)),
        (r) => Number(r.due_ms) - Number(r.boost_ms), (r) => String(r.id), input.fair.weights)
      : results[0] ?? [];
    const jobs: ClaimedJobs = toClaimed(rows, input.targets === undefined && !(input.fair && input.limits));
    if (input.limits) {
      jobs.throttled = (results[2] ?? []).map((r) => ({ kind: String(r.kind), retryAt: r.retry_at === null ? null : Number(r.retry_at), ...(Number(r.tenant) === 1 ? { tenant: true } : {}) }));
    }
    return jobs;
  }

  /** A settle's statements: the attempts, the jobs, then what the jobs' ends do to their waiting children. */
  #settleStatements(input: SettleInput): SqlStatement[] {
    const items = JSON.stringify(input.items.map((s) => ({ ...s, finished: s.finished ? 1 : 0 })));
    return [
      { sql: this.sql.settleAttempts, params: [input.now, items] },
      { sql: this.sql.settleJobs, params: [input.now, items] },
      ...this.#endedStatements(input.now, items),
    ];
  }

  /**
   * What jobs that may have just ended (`rows`, a JSON array with their ids) do to their waiting
   * children: their ends counted in (edges marked with this batch's token), then applied. The
   * second statement's rows are the children written.
   */
  #endedStatements(now: number, rows: string): SqlStatement[] {
    const token = crypto.randomUUID();
    return [
      { sql: this.sql.deps.markEnded, params: [now, rows, token] },
      { sql: this.sql.deps.applyEnded, params: [now, rows, token] },
    ];
  }

  /** The settled ids of a settle's results (from its first statement on), with the children it released. */
  #settled(results: readonly (SqlRow[] | undefined)[]): SettledIds {
    const out: SettledIds = (results[1] ?? []).map((r) => String(r.id));
    const released = changes(results[3]).filter((c) => c.status === 'pending');
    if (released.length > 0) out.released = released;
    return out;
  }

  async claim(db: Db, input: ClaimInput): Promise<ClaimedJobs> {
    if (input.limit <= 0 || input.kinds.length === 0 || input.targets?.length === 0) return [];
    return this.#claimed(await this.exec(db, this.#claimStatements(input, [])), input);
  }

  async settle(db: Db, input: SettleInput): Promise<SettledIds> {
    if (input.items.length === 0) return [];
    return this.#settled(await this.exec(db, this.#settleStatements(input)));
  }

  async settleThenClaim(db: Db, settle: SettleInput, claim: ClaimInput): Promise<{ settled: SettledIds; claimed: ClaimedJobs }> {
    const claiming = claim.limit > 0 && claim.kinds.length > 0 && claim.targets?.length !== 0;
    if (!claiming) return { settled: await this.settle(db, settle), claimed: [] };
    if (settle.items.length === 0) return { settled: [], claimed: await this.claim(db, claim) };
    // The claim never takes a job this settle touches (the contract; one statement on PostgreSQL).
    const exclude = settle.items.map((s) => s.id);
    const settling = this.#settleStatements(settle);
    const results = await this.exec(db, [...settling, ...this.#claimStatements(claim, exclude)]);
    return { settled: this.#settled(results), claimed: this.#claimed(results.slice(settling.length), claim) };
  }

  async heartbeat(db: Db, input: HeartbeatInput): Promise<string[]> {
    if (input.beats.length === 0) return [];
    const beats = JSON.stringify(input.beats);
    const results = await this.exec(db, [
      { sql: this.sql.heartbeatAttempts, params: [input.now, beats] },
      { sql: this.sql.heartbeatJobs, params: [input.now, beats] },
    ]);
    return (results[1] ?? []).map((r) => String(r.id));
  }

  async listExpiredLeases(db: Db, query: ExpiredLeaseQuery): Promise<ClaimedJob[]> {
    if (query.limit <= 0 || (query.kinds.length === 0 && !query.unregistered)) return [];
    const statement = query.unregistered ? this.sql.listExpiredUnregistered : this.sql.listExpiredLeases;
    return toClaimed(await this.#one(db, statement, [query.now, JSON.stringify(query.kinds), query.limit]), false);
  }

  async nextDue(db: Db, query: NextDueQuery): Promise<number | null> {
    if (query.kinds.length === 0) return null;
    const [row] = await this.#one(db, this.sql.nextDue, [query.lane, JSON.stringify(query.kinds), query.versionCutoff]);
    return row?.due === null || row?.due === undefined ? null : Number(row.due);
  }

  // ---- operators ---------------------------------------------------------------------------

  async lockForOperate(tx: Tx, input: OperateLockInput): Promise<OperateTarget[]> {
    if (input.ids.length === 0) return [];
    const anyTenant = input.tenantKey === undefined ? 1 : 0;
    const rows = await this.#one(tx, this.sql.lockForOperate, [JSON.stringify(input.ids), anyTenant, input.tenantKey ?? null, input.withParents ? 1 : 0]);
    const seen = this.seenOf(tx);
    for (const r of rows) seen.set(String(r.id), { kind: String(r.kind), lane: String(r.lane), status: String(r.status), seq: Number(r.attempt_seq) });
    return rows.map((r) => ({
      id: String(r.id), kind: String(r.kind), lane: String(r.lane), status: r.status as JobStatus, code: r.code === null ? null : String(r.code),
      parents: r.parents === null || r.parents === undefined ? null : (JSON.parse(String(r.parents)) as { failed: number; open: number }),
    }));
  }

  async applyOperate(tx: Tx, input: ApplyOperateInput): Promise<OperateTarget[]> {
    if (input.writes.length === 0) return [];
    const seen = this.seenOf(tx);
    const writes = input.writes.map((w) => {
      const from = seen.get(w.id);
      // A write for a job this handle did not read is not applied (its fence matches nothing).
      return { ...budgetColumns(w), finished: w.finished ? 1 : 0, recordReason: w.recordReason ? 1 : 0, fromStatus: from?.status ?? null, fromSeq: from?.seq ?? null };
    });
    const json = JSON.stringify(writes);
    const results = await this.exec(tx, this.operateStatements(input.now, json));
    for (const w of input.writes) seen.delete(w.id);
    return (results[1] ?? []).map((r) => ({ id: String(r.id), kind: String(r.kind), lane: String(r.lane), status: r.status as JobStatus }));
  }

  /**
   * An operator write's statements (`writes` as the SQLite statements read them): the attempts,
   * the jobs, what a cancel does to waiting children, and the children a replay brings back.
   */
  protected operateStatements(now: number, writes: string): SqlStatement[] {
    return [
      { sql: this.sql.operateAttempts, params: [now, writes] },
      { sql: this.sql.operateJobs, params: [now, writes] },
      ...this.#endedStatements(now, writes),
      { sql: this.sql.deps.uncount, params: [now, writes] },
      { sql: this.sql.deps.uncountMarks, params: [now, writes] },
      { sql: this.sql.deps.reviveMarks, params: [now, writes] },
      { sql: this.sql.deps.revive, params: [now, writes] },
    ];
  }

  /** What `lockForOperate` read with `handle`, by job id. */
  protected seenOf(handle: Db | Tx): Map<string, OperateSeen> {
    const key = handle as object;
    let seen = this.#seen.get(key);
    if (!seen) this.#seen.set(key, (seen = new Map()));
    return seen;
  }

  async eraseTenant(tx: Tx, tenantKey: string): Promise<number> {
    if (typeof tenantKey !== 'string') throw new PostboxError('invalid_input', 'eraseTenant: tenantKey must be a string');
    const results = await this.exec(tx, this.eraseStatements(tenantKey));
    return results[2]?.length ?? 0;
  }

  /** The statements erasing a tenant's jobs, with their attempts and edges; the last returns the jobs. */
  protected eraseStatements(tenantKey: string): SqlStatement[] {
    return [
      { sql: this.sql.eraseTenantAttempts, params: [tenantKey] },
      { sql: this.sql.eraseTenantEdges, params: [tenantKey] },
      { sql: this.sql.eraseTenantJobs, params: [tenantKey] },
    ];
  }

  async deleteFinished(db: Db, input: RetentionInput): Promise<number> {
    if (input.limit <= 0) return 0;
    const params = [input.succeededBefore, input.deadBefore, input.limit];
    const results = await this.exec(db, [
      { sql: this.sql.deleteFinishedAttempts, params },
      { sql: this.sql.deleteFinishedEdges, params },
      { sql: this.sql.deleteFinishedJobs, params },
    ]);
    return results[2]?.length ?? 0;
  }

  async listDueForHandoff(db: Db, query: HandoffQuery): Promise<JobLaneRef[]> {
    if (query.kinds.length === 0 || query.limit <= 0) return [];
    const rows = await this.#one(db, this.sql.listDueForHandoff, [query.now, query.lane, JSON.stringify(query.kinds), query.limit, query.nudgedBefore]);
    return rows.map((r) => ({ id: String(r.id), kind: String(r.kind), lane: String(r.lane) }));
  }

  async countActive(db: Db): Promise<BacklogCount[]> {
    const rows = await this.#one(db, this.sql.countActive, []);
    return rows.map((r) => ({ kind: String(r.kind), lane: String(r.lane), status: String(r.status) as BacklogCount['status'], count: Number(r.count) }));
  }

  async countUnregistered(db: Db, query: { dueBefore: number; kinds: readonly string[] }): Promise<{ kind: string; count: number }[]> {
    const rows = await this.#one(db, this.sql.countUnregistered, [query.dueBefore, JSON.stringify(query.kinds)]);
    return rows.map((r) => ({ kind: String(r.kind), count: Number(r.count) }));
  }

  async recordNudges(db: Db, input: { now: number; ids: readonly string[] }): Promise<void> {
    if (input.ids.length === 0) return;
    await this.#one(db, this.sql.recordNudges, [input.now, JSON.stringify(input.ids)]);
  }

  // ---- inspection --------------------------------------------------------------------------

  async getJob(db: Db, query: { id: string; tenantKey?: string | null }): Promise<JobView | null> {
    const params: SqlValue[] = [query.id];
    const [row] = await this.#one(db, `SELECT ${JOB_VIEW_COLUMNS} FROM ${this.sql.job} WHERE id = ?1 AND ${tenantFilter(query.tenantKey, params)}`, params);
    return row ? toView(row) : null;
  }

  async listJobs(db: Db, query: ListJobsQuery): Promise<JobPage> {
    const limit = checkLimit(query.limit);
    const order = query.order === 'desc' ? 'DESC' : 'ASC';
    const params: SqlValue[] = [];
    let sql = `SELECT ${JOB_VIEW_COLUMNS} FROM ${this.sql.job} WHERE ${where(query, params)}`;
    if (query.cursor !== undefined) {
      const [createdMs, id] = decodeCursor(query.cursor);
      params.push(createdMs, id);
      sql += ` AND (created_at, id) ${order === 'ASC' ? '>' : '<'} (?${params.length - 1}, ?${params.length})`;
    }
    params.push(limit + 1);
    sql += ` ORDER BY created_at ${order}, id ${order} LIMIT ?${params.length}`;
    const rows = await this.#one(db, sql, params);
    const jobs = rows.slice(0, limit).map(toView);
    const last = rows.length > limit ? rows[limit - 1] : undefined;
    return { jobs, nextCursor: last ? encodeCursor(Number(last.created_at), String(last.id)) : null };
  }

  async countJobs(db: Db, filter: JobFilter): Promise<Record<JobStatus, number>> {
    const params: SqlValue[] = [];
    const rows = await this.#one(db, `SELECT status, count(*) AS n FROM ${this.sql.job} WHERE ${where(filter, params)} GROUP BY status`, params);
    const counts = emptyCounts();
    for (const r of rows) counts[r.status as JobStatus] = Number(r.n);
    return counts;
  }

  async listAttempts(db: Db, query: { jobId: string }): Promise<AttemptView[]> {
    const rows = await this.#one(db, this.sql.listAttempts, [query.jobId]);
    return rows.map((r) =>
      attemptView(Number(r.seq), str(r.outcome), str(r.error_code), str(r.error_message), Number(r.started_at), r.finished_at === null ? null : Number(r.finished_at)),
    );
  }

  // ---- dependencies ------------------------------------------------------------------------

  /** Job dependencies in the job_edge table (dependencies.ts); D1 reads and queues inside its transactions (d1/index.ts). */
  readonly dependencies: DependencyStore<Db, Tx> = {
    parentStates: (tx, refs) => this.parentStates(tx, refs),
    addEdges: (tx, edges) => this.addEdges(tx, edges),
    resolveWaiting: async (db, input) => changes(await this.#one(db, this.sql.deps.resolveWaiting, [input.now, input.limit])),
    dependencies: async (db, id, limit) => {
      const rows = await this.#one(db, this.sql.deps.dependencies, [id, limit]);
      const side = (name: string): DependencyView[] =>
        rows.filter((r) => r.side === name).map((r) => ({ id: String(r.id), kind: str(r.kind), status: str(r.status) as JobStatus | null }));
      return { parents: side('parent'), children: side('child') };
    },
    parentTally: async (db, id) => {
      const [row] = await this.#one(db, this.sql.deps.parentTally, [id]);
      if (!row || row.total === null) return null;
      return { total: Number(row.total), dead: Number(row.dead), cancelled: Number(row.cancelled), byStatus: row.by_status === null ? {} : JSON.parse(String(row.by_status)) };
    },
    openBatchMembers: async (db, id) => {
      const rows = await this.#one(db, this.sql.deps.openBatchMembers, [id]);
      return rows.length === 0 ? null : (JSON.parse(String(rows[0]!.ids)) as string[]);
    },
  };

  /** Each named parent's status in its naming item's tenant scope, as committed (`null`: not found there). */
  protected async parentStates(tx: Db | Tx, refs: readonly { id: string; tenantKey: string | null }[]): Promise<(JobStatus | null)[]> {
    const found = new Map<number, JobStatus>();
    for (let i = 0; i < refs.length; i += EDGE_CHUNK) {
      const chunk = refs.slice(i, i + EDGE_CHUNK);
      for (const r of await this.#one(tx, this.sql.deps.parentStates, [JSON.stringify(chunk)])) found.set(i + Number(r.ord), r.status as JobStatus);
    }
    return refs.map((_, i) => found.get(i) ?? null);
  }

  /** The statements linking `edges`, in chunks that keep each parameter under the databases' cap. */
  protected edgeStatements(edges: readonly DependencyEdge[]): SqlStatement[] {
    const statements: SqlStatement[] = [];
    for (let i = 0; i < edges.length; i += EDGE_CHUNK) {
      const chunk = edges.slice(i, i + EDGE_CHUNK).map((e) => ({ parent: e.parent, child: e.child, ended: e.parentEnded ? 1 : 0 }));
      statements.push({ sql: this.sql.deps.addEdges, params: [JSON.stringify(chunk)] });
    }
    return statements;
  }

  protected async addEdges(tx: Db | Tx, edges: readonly DependencyEdge[]): Promise<void> {
    if (edges.length > 0) await this.exec(tx, this.edgeStatements(edges));
  }

  // ---- schedules ---------------------------------------------------------------------------

  /** Each named schedule's latest handled occurrence (epoch ms). */
  async lastScheduleRuns(db: Db, names: readonly string[]): Promise<Map<string, number>> {
    if (names.length === 0) return new Map();
    const rows = await this.#one(db, this.sql.scheduleLastRuns, [JSON.stringify(names)]);
    return new Map(rows.map((r) => [String(r.name), Number(r.last_at)]));
  }

  /** Records an occurrence as handled; never moves a schedule's record back. */
  async recordScheduleRun(db: Db, input: { name: string; at: number; now: number }): Promise<void> {
    await this.#one(db, this.sql.scheduleRecord, [input.name, input.at, input.now]);
  }
}

// ---- helpers -------------------------------------------------------------------------------

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Bad input is refused before anything is written, with a typed error naming the item. */
function checkAppend(input: AppendInput): void {
  if (typeof input?.kind !== 'string' || typeof input.lane !== 'string' || !Array.isArray(input.items)) {
    throw new PostboxError('invalid_input', 'append: kind and lane must be strings and items an array');
  }
  if (!Number.isSafeInteger(input.now) || (input.versionTs !== null && !Number.isSafeInteger(input.versionTs))) {
    throw new PostboxError('invalid_input', 'append: now and versionTs must be integers (epoch ms)');
  }
  input.items.forEach((item, i) => {
    if (typeof item?.id !== 'string' || !UUID.test(item.id)) throw new PostboxError('invalid_id', `append: items[${i}].id must be a UUID`);
    if (!Number.isSafeInteger(item.dueAt)) throw new PostboxError('invalid_input', `append: items[${i}].dueAt must be an integer (epoch ms)`);
    for (const [field, text] of [['payloadJson', item.payloadJson], ['metadataJson', item.metadataJson ?? 'null']] as const) {
      try {
        if (typeof text !== 'string') throw new Error('not text');
        JSON.parse(text);
      } catch {
        throw new PostboxError('invalid_input', `append: items[${i}].${field} must be JSON text`);
      }
    }
  });
}

function checkClaim(input: ClaimInput): void {
  if (!Number.isSafeInteger(input.now) || typeof input.lane !== 'string' || !Number.isInteger(input.limit)) {
    throw new PostboxError('invalid_input', 'claim: now and limit must be integers and lane a string');
  }
  if (input.kinds.length !== input.leaseMs.length) throw new PostboxError('invalid_input', 'claim: kinds and leaseMs must be parallel arrays');
  if (!input.leaseMs.every((ms) => Number.isFinite(ms) && ms > 0)) throw new PostboxError('invalid_input', 'claim: every leaseMs must be a positive number');
}

/** Splits an append's items into chunks whose JSON stays under the parameter cap. */
function chunkItems(input: AppendInput): { items: AppendInput['items']; json: string }[] {
  const chunks: { items: AppendInput['items']; json: string }[] = [];
  let current: AppendInput['items'][number][] = [];
  let size = 0;
  const flush = () => {
    if (current.length === 0) return;
    chunks.push({
      items: current,
      json: JSON.stringify(current.map((i) => ({
        id: i.id, payload: i.payloadJson, tenantKey: i.tenantKey, dedupeKey: i.dedupeKey, correlationId: i.correlationId,
        metadata: i.metadataJson, dueAt: i.dueAt, maxAttempts: i.maxAttempts, ...(i.priority ? { priority: i.priority, boostMs: i.boostMs ?? 0 } : {}),
        ...(i.parents ? {
          depStatus: i.parents.status, waitingOn: i.parents.waitingOn, onParentFailure: i.parents.onParentFailure, depCode: i.parents.code,
          parentsTotal: i.parents.total, parentsDead: i.parents.dead, parentsCancelled: i.parents.cancelled, ...(i.parents.batch ? { batch: 1 } : {}),
        } : {}),
      }))),
    });
    current = [];
    size = 0;
  };
  for (const item of input.items) {
    const itemSize = 3 * (item.payloadJson.length + (item.metadataJson?.length ?? 0) + (item.dedupeKey?.length ?? 0) +
      (item.tenantKey?.length ?? 0) + (item.correlationId?.length ?? 0)) + 200;
    if (size + itemSize > APPEND_CHUNK_BYTES) flush();
    current.push(item);
    size += itemSize;
  }
  flush();
  return chunks;
}

/** An operator write as the SQLite statements read it: the budget's numbers as columns (null: the counters stay). */
export function budgetColumns(w: OperateWrite) {
  const { budget, ...rest } = w;
  return { ...rest, budgetAttempts: budget?.attempts ?? null, budgetCrashes: budget?.crashes ?? null, budgetStreak: budget?.streak ?? null };
}

/** JSON values equal as values: key order and spacing do not count (PostgreSQL's jsonb equality). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((v, i) => jsonEqual(v, bb[i]));
  }
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && jsonEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

const parseJson = (v: SqlValue) => (v === null ? null : JSON.parse(String(v)));
const numberOrNull = (v: SqlValue | undefined) => (v === null || v === undefined ? null : Number(v));

/** Jobs a dependency statement wrote, as the contract's changes. */
const changes = (rows: readonly SqlRow[] | undefined): DependentChange[] =>
  (rows ?? []).map((r) => ({ id: String(r.id), kind: String(r.kind), lane: String(r.lane), status: r.status as JobStatus }));

/** Parent references or edges per statement: about 100 bytes each, far under the 2 MB a parameter may hold. */
const EDGE_CHUNK = 10_000;
const str = (v: SqlValue | undefined) => (v === null || v === undefined ? null : String(v));

/** Claimed rows as the contract's `ClaimedJob`; a due claim's oldest first (RETURNING has no order). */
function toClaimed(rows: SqlRow[], byDue: boolean): ClaimedJob[] {
  if (byDue) rows = [...rows].sort((a, b) => Number(a.due_ms) - Number(a.boost_ms) - (Number(b.due_ms) - Number(b.boost_ms)) || (String(a.id) < String(b.id) ? -1 : 1));
  return rows.map((r) => ({
    id: String(r.id),
    kind: String(r.kind),
    lane: String(r.lane),
    payload: parseJson(r.payload!),
    tenant_key: str(r.tenant_key),
    correlation_id: str(r.correlation_id),
    metadata: parseJson(r.metadata ?? null),
    attempts: Number(r.attempts),
    attempt_seq: Number(r.attempt_seq),
    crashes: Number(r.crashes),
    streak_code: str(r.streak_code),
    streak: Number(r.streak),
    max_attempts: r.max_attempts === null ? null : Number(r.max_attempts),
    last_error_code: str(r.last_error_code),
    last_error_message: str(r.last_error_message),
    lease_expires_ms: Number(r.lease_expires_ms),
    trace_context: str(r.trace_context),
    created_ms: Number(r.created_ms),
    parents_total: numberOrNull(r.parents_total),
    parents_dead: numberOrNull(r.parents_dead),
    parents_cancelled: numberOrNull(r.parents_cancelled),
  }));
}

function toView(r: SqlRow): JobView {
  return {
    id: String(r.id), kind: String(r.kind), lane: String(r.lane), status: r.status as JobStatus, payload: parseJson(r.payload!),
    tenantKey: str(r.tenant_key), dedupeKey: str(r.dedupe_key), correlationId: str(r.correlation_id), metadata: parseJson(r.metadata ?? null),
    attempts: Number(r.attempts), crashes: Number(r.crashes), lastErrorCode: str(r.last_error_code), lastErrorMessage: str(r.last_error_message),
    dueAt: new Date(Number(r.due_at)), createdAt: new Date(Number(r.created_at)), finishedAt: r.finished_at === null ? null : new Date(Number(r.finished_at)),
  };
}

/** Tenant scope: omitted means any tenant; `null` only jobs without one. */
function tenantFilter(tenantKey: string | null | undefined, params: SqlValue[]): string {
  if (tenantKey === undefined) return '1';
  params.push(tenantKey);
  return `tenant_scope = COALESCE('t:' || ?${params.length}, 'n')`;
}

function where(filter: JobFilter, params: SqlValue[]): string {
  const parts = [tenantFilter(filter.tenantKey, params)];
  const add = (sql: string, value: SqlValue) => {
    params.push(value);
    parts.push(sql.replace('?', `?${params.length}`));
  };
  const ms = (d: Date, what: string) => {
    if (!(d instanceof Date) || Number.isNaN(d.getTime())) throw new PostboxError('invalid_input', `${what} must be a valid Date`);
    return d.getTime();
  };
  if (filter.status) add('status = ?', filter.status);
  if (filter.kind) add('kind = ?', filter.kind);
  if (filter.correlationId) add('correlation_id = ?', filter.correlationId);
  if (filter.createdAtOrAfter) add('created_at >= ?', ms(filter.createdAtOrAfter, 'createdAtOrAfter'));
  if (filter.createdAfter) add('created_at > ?', ms(filter.createdAfter, 'createdAfter'));
  if (filter.createdBefore) add('created_at < ?', ms(filter.createdBefore, 'createdBefore'));
  if (filter.finishedAfter) add('finished_at > ?', ms(filter.finishedAfter, 'finishedAfter'));
  if (filter.finishedBefore) add('finished_at < ?', ms(filter.finishedBefore, 'finishedBefore'));
  return parts.join(' AND ');
}
