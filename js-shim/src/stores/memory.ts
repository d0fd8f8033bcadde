/**
 * The memory store: the store contract's semantics in plain maps, for unit tests. Not durable,
 * one process. Every operation runs synchronously inside its promise, so two claims can never
 * interleave; transactions are serialised per database and undo their own writes on rollback.
 * Jobs appended in an open transaction are invisible to everything else until it commits;
 * operator writes made in one are visible at once (and undone on rollback).
 * @module
 */
import { PostboxError } from '../errors.js';
import { checkOutboxName } from '../name.js';
import type {
  DependencyStore, DependencyView, DependentChange, ParentTally, SettledIds,
  AppendInput, AppendRow, ApplyOperateInput, AttemptView, BacklogCount, ClaimedJob, ClaimedJobs, ClaimInput, ExpiredLeaseQuery, HandoffQuery, HeartbeatInput, JobFilter,
  JobLaneRef, JobPage, JobStatus, JobView, ListJobsQuery, NextDueQuery, OperateLockInput, OperateTarget, OutboxStore, RetentionInput, SettleInput, ThrottledKind,
} from './contract.js';
import { attemptView, checkLimit, createdRow, decodeCursor, emptyCounts, encodeCursor, fairOrder, fairPick, limitedFairOrder, tenantScope } from './shared.js';

interface AttemptRecord {
  seq: number;
  startedAt: number;
  leaseExpiresAt: number | null;
  finishedAt: number | null;
  outcome: string | null;
  errorCode: string | null;
  errorMessage: string | null;
}

interface Row {
  id: string;
  kind: string;
  lane: string;
  status: JobStatus;
  payload: unknown;
  tenantKey: string | null;
  dedupeKey: string | null;
  correlationId: string | null;
  metadata: Record<string, unknown> | null;
  dueAt: number;
  createdAt: number;
  updatedAt: number;
  versionTs: number | null;
  maxAttempts: number | null;
  priority: number;
  /** Claims order by dueAt - boostMs (the core's boost for the priority). */
  boostMs: number;
  traceContext: string | null;
  attempts: number;
  attemptSeq: number;
  crashes: number;
  streakCode: string | null;
  streak: number;
  lastErrorCode: string | null;
  lastErrorMessage: string | null;
  leaseExpiresAt: number | null;
  /** The lease of a running attempt an operator's cancel ended: its slot is held until then. */
  heldUntil: number | null;
  finishedAt: number | null;
  nudgeSentAt: number | null;
  replayedAt: number | null;
  log: AttemptRecord[];
  /** Its parents (dependencies), as linked; a parent retention deleted stays named here and counts as finished. */
  parents: string[];
  /** Parents not yet finished, while `waiting`. */
  waitingOn: number;
  /** What a parent ending dead or cancelled does to it (the core's name); null without parents. */
  onParentFailure: 'cancel' | 'release' | null;
  /** How its parents ended (as migration 0013's columns): all, dead, cancelled; null without parents. */
  tally: { total: number; dead: number; cancelled: number } | null;
  /** A batch's completion job (as migration 0017's column). */
  completesBatch: boolean;
  /** The transaction that appended it, until that commits: nothing else sees the row before. */
  tx: MemoryTx | null;
}

interface Tables {
  rows: Map<string, Row>;
  /** `<tenant scope>\0<dedupe key>` → the id holding it. */
  dedupe: Map<string, string>;
  /** Schedule name → its latest handled occurrence (epoch ms). */
  scheduleRuns: Map<string, number>;
}

/**
 * What memory stores share, as outboxes share one PostgreSQL database: give two
 * {@link MemoryOutboxStore}s with different names the same database and they stay isolated
 * from each other, as named outboxes do.
 */
export class MemoryOutboxDatabase {
  readonly #outboxes = new Map<string | null, Tables>();
  #tail: Promise<unknown> = Promise.resolve();

  /** @internal The tables of one outbox. */
  tables(name: string | null): Tables {
    let t = this.#outboxes.get(name);
    if (!t) this.#outboxes.set(name, (t = { rows: new Map(), dedupe: new Map(), scheduleRuns: new Map() }));
    return t;
  }

  /** @internal Waits for the transactions before this one; resolves to the release. */
  lock(): Promise<() => void> {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const turn = this.#tail.then(() => release);
    this.#tail = held;
    return turn;
  }
}

/** A transaction of the memory store: what to undo on rollback. */
class MemoryTx {
  /** Rows appended here (removed on rollback). */
  readonly inserted: { tables: Tables; row: Row }[] = [];
  /** Rows as they were before this transaction first changed or deleted them. */
  readonly before = new Map<string, { tables: Tables; row: Row }>();
  #done = false;

  constructor(readonly database: MemoryOutboxDatabase) {}

  touch(tables: Tables, row: Row): void {
    if (row.tx === this || this.before.has(row.id)) return;
    this.before.set(row.id, { tables, row: cloneRow(row) });
  }

  check(): void {
    if (this.#done) throw new PostboxError('transaction_closed', 'the memory store transaction has ended: use the handle only inside its callback');
  }

  commit(): void {
    this.#done = true;
    for (const { row } of this.inserted) row.tx = null;
  }

  rollback(): void {
    this.#done = true;
    for (const { tables, row } of this.inserted) {
      tables.rows.delete(row.id);
      if (row.dedupeKey !== null && tables.dedupe.get(dedupeIndex(row.tenantKey, row.dedupeKey)) === row.id) tables.dedupe.delete(dedupeIndex(row.tenantKey, row.dedupeKey));
    }
    for (const { tables: t, row } of this.before.values()) {
      t.rows.set(row.id, row);
      if (row.dedupeKey !== null) t.dedupe.set(dedupeIndex(row.tenantKey, row.dedupeKey), row.id);
    }
  }
}

/** Options of {@link MemoryOutboxStore}. */
export interface MemoryOutboxStoreOptions {
  /** The outbox's name (as `createOutbox({ name })`); default the default outbox. */
  name?: string | null;
  /** Share one database between stores (named outboxes); default a database of its own. */
  database?: MemoryOutboxDatabase;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * An outbox's storage in memory, with the same semantics as the PostgreSQL store: for unit tests
 * of code that enqueues, claims or inspects, and as a reference for store authors. The handle
 * arguments (`db`) are ignored; inside `transaction`, pass the `tx` it gives to `append` and
 * the operator methods so their writes commit or roll back with it.
 */
export class MemoryOutboxStore implements OutboxStore<unknown, unknown> {
  readonly name: string | null;
  /** The database this store's outbox lives in. */
  readonly database: MemoryOutboxDatabase;
  readonly #t: Tables;

  constructor(options: MemoryOutboxStoreOptions = {}) {
    this.name = checkOutboxName(options.name, 'MemoryOutboxStore: name');
    this.database = options.database ?? new MemoryOutboxDatabase();
    this.#t = this.database.tables(this.name);
  }

  async transaction<T>(_db: unknown, fn: (tx: unknown) => Promise<T>): Promise<T> {
    const release = await this.database.lock();
    const tx = new MemoryTx(this.database);
    try {
      const result = await fn(tx);
      tx.commit();
      return result;
    } catch (error) {
      // The callback's error is the one that matters, whatever the undo does.
      try {
        tx.rollback();
      } catch {
        // ignored: see above
      }
      throw error;
    } finally {
      release();
    }
  }

  async append(tx: unknown, input: AppendInput): Promise<AppendRow[]> {
    const own = this.#tx(tx);
    if (!input || !Array.isArray(input.items)) throw new PostboxError('invalid_input', 'append: items must be an array');
    // Everything is checked before anything is written, as one statement would fail whole.
    const ids = new Set<string>();
    const parsed = input.items.map((item, i) => {
      if (typeof item?.id !== 'string' || !UUID.test(item.id)) throw new PostboxError('invalid_id', `append: items[${i}].id is not a UUID`);
      if (this.#t.rows.has(item.id) || ids.has(item.id)) throw new PostboxError('duplicate_id', `append: a job with id ${item.id} already exists`);
      ids.add(item.id);
      return { payload: parseJson(item.payloadJson, `items[${i}].payloadJson`), metadata: item.metadataJson === null ? null : (parseJson(item.metadataJson, `items[${i}].metadataJson`) as Record<string, unknown> | null) };
    });
    return input.items.map((item, i) => {
      const { payload, metadata } = parsed[i]!;
      if (item.dedupeKey !== null) {
        const holderId = this.#t.dedupe.get(dedupeIndex(item.tenantKey, item.dedupeKey));
        const holder = holderId === undefined ? undefined : this.#t.rows.get(holderId);
        if (holder) {
          return {
            id: holder.id, kind: holder.kind, created: false, samePayload: jsonEqual(holder.payload, payload), sameMaxAttempts: holder.maxAttempts === item.maxAttempts,
            sameMetadata: jsonEqual(holder.metadata, metadata), sameCorrelationId: holder.correlationId === item.correlationId,
            samePriority: holder.priority === (item.priority ?? 0), sameOnParentFailure: holder.onParentFailure === (item.parents?.onParentFailure ?? null),
            holderParents: [...holder.parents],
          };
        }
      }
      const row: Row = {
        id: item.id, kind: input.kind, lane: input.lane, status: item.parents?.status ?? 'pending', payload, tenantKey: item.tenantKey, dedupeKey: item.dedupeKey,
        correlationId: item.correlationId, metadata, dueAt: item.dueAt, createdAt: input.now, updatedAt: input.now, versionTs: input.versionTs,
        maxAttempts: item.maxAttempts, priority: item.priority ?? 0, boostMs: item.boostMs ?? 0, traceContext: input.traceContext ?? null, attempts: 0, attemptSeq: 0, crashes: 0, streakCode: null, streak: 0, lastErrorCode: item.parents?.code ?? null, lastErrorMessage: null,
        leaseExpiresAt: null, heldUntil: null, finishedAt: item.parents?.status === 'cancelled' ? input.now : null, nudgeSentAt: null, replayedAt: null, log: [], parents: [],
        waitingOn: item.parents?.waitingOn ?? 0, onParentFailure: item.parents?.onParentFailure ?? null, tx: own,
        tally: item.parents ? { total: item.parents.total, dead: item.parents.dead, cancelled: item.parents.cancelled } : null,
        completesBatch: item.parents?.batch === true,
      };
      this.#t.rows.set(row.id, row);
      if (row.dedupeKey !== null) this.#t.dedupe.set(dedupeIndex(row.tenantKey, row.dedupeKey), row.id);
      own?.inserted.push({ tables: this.#t, row });
      return createdRow(row.id, row.kind);
    });
  }

  async claim(_db: unknown, input: ClaimInput): Promise<ClaimedJobs> {
    return this.#claim(input, null);
  }

  async settle(_db: unknown, input: SettleInput): Promise<SettledIds> {
    return this.#settle(input);
  }

  async settleThenClaim(_db: unknown, settle: SettleInput, claim: ClaimInput): Promise<{ settled: SettledIds; claimed: ClaimedJobs }> {
    // As in one statement: the claim sees the jobs the settle touched as they were (running),
    // and the children it released as they were (waiting).
    const settled = this.#settle(settle);
    const skip = new Set([...settle.items.map((s) => s.id), ...(settled.released ?? []).map((r) => r.id)]);
    return { settled, claimed: this.#claim(claim, skip) };
  }

  async heartbeat(_db: unknown, input: HeartbeatInput): Promise<string[]> {
    const out: string[] = [];
    for (const b of input.beats) {
      const row = this.#visible(b.id);
      if (!row || row.status !== 'running' || row.attemptSeq !== b.attemptSeq || row.leaseExpiresAt === null || row.leaseExpiresAt <= input.now) continue;
      row.leaseExpiresAt = b.leaseExpiresAt;
      const attempt = openAttempt(row);
      if (attempt) attempt.leaseExpiresAt = b.leaseExpiresAt;
      out.push(row.id);
    }
    return out;
  }

  async listExpiredLeases(_db: unknown, query: ExpiredLeaseQuery): Promise<ClaimedJob[]> {
    return this.#rows()
      .filter((r) => r.status === 'running' && r.leaseExpiresAt !== null && r.leaseExpiresAt < query.now && query.kinds.includes(r.kind) !== (query.unregistered === true))
      .sort((a, b) => a.leaseExpiresAt! - b.leaseExpiresAt!)
      .slice(0, query.limit)
      .map(claimed);
  }

  async nextDue(_db: unknown, query: NextDueQuery): Promise<number | null> {
    let next: number | null = null;
    for (const r of this.#rows()) {
      if (waiting(r) && r.lane === query.lane && query.kinds.includes(r.kind) && versionFits(r, query.versionCutoff) && (next === null || r.dueAt < next)) next = r.dueAt;
    }
    return next;
  }

  async lockForOperate(tx: unknown, input: OperateLockInput): Promise<OperateTarget[]> {
    const own = this.#tx(tx);
    const scoped = 'tenantKey' in input && input.tenantKey !== undefined;
    const out: OperateTarget[] = [];
    for (const id of new Set(input.ids)) {
      const row = this.#visible(id, own);
      if (!row || (scoped && row.tenantKey !== input.tenantKey)) continue;
      const rejoins = input.withParents === true && row.status === 'cancelled' && row.lastErrorCode === PARENT_FAILED;
      out.push({ id: row.id, kind: row.kind, lane: row.lane, status: row.status, code: row.lastErrorCode, parents: rejoins ? this.#rejoinCounts(row, new Set(input.ids.map((i) => i.toLowerCase())), own) : null });
    }
    return out;
  }

  async applyOperate(tx: unknown, input: ApplyOperateInput): Promise<OperateTarget[]> {
    const own = this.#tx(tx);
    const { now } = input;
    const out: OperateTarget[] = [];
    // What each replayed job was before: its waiting children had counted that end.
    const replayed = new Map<string, JobStatus>();
    for (const w of input.writes) {
      const row = this.#visible(w.id, own);
      if (!row) continue;
      own?.touch(this.#t, row);
      if (w.budget !== null) replayed.set(row.id, row.status);
      if (w.closeAttempt !== null) {
        // Its handler may still be running: its slot stays held until the lease would have ended.
        if (row.status === 'running') row.heldUntil = row.leaseExpiresAt;
        const attempt = row.log.find((a) => a.seq === row.attemptSeq && a.finishedAt === null);
        if (attempt) Object.assign(attempt, { finishedAt: now, outcome: w.closeAttempt, errorCode: w.reason });
      }
      row.status = w.status;
      if (w.dueAt !== null) row.dueAt = w.dueAt;
      if (w.budget) Object.assign(row, { attempts: w.budget.attempts, crashes: w.budget.crashes, streak: w.budget.streak, streakCode: null, replayedAt: now });
      if (w.recordReason) row.lastErrorCode = w.reason;
      row.leaseExpiresAt = null;
      // Only a replay the core sent back to its parents leaves a job waiting.
      row.waitingOn = w.waitingOn ?? 0;
      row.finishedAt = w.finished ? now : null;
      row.updatedAt = now;
      out.push({ id: row.id, kind: row.kind, lane: row.lane, status: row.status });
    }
    this.#childEffects(out, now, own);
    this.#revive(replayed, now, own);
    return out;
  }

  async eraseTenant(tx: unknown, tenantKey: string): Promise<number> {
    const own = this.#tx(tx);
    let n = 0;
    for (const row of [...this.#t.rows.values()]) {
      if (row.tenantKey !== tenantKey || (row.tx !== null && row.tx !== own)) continue;
      own?.touch(this.#t, row);
      this.#delete(row);
      n++;
    }
    return n;
  }

  async deleteFinished(_db: unknown, input: RetentionInput): Promise<number> {
    const doomed = this.#rows()
      .filter((r) => r.finishedAt !== null && (r.status === 'succeeded' ? r.finishedAt < input.succeededBefore : (r.status === 'dead' || r.status === 'cancelled') && r.finishedAt < input.deadBefore))
      .slice(0, input.limit);
    for (const row of doomed) this.#delete(row);
    return doomed.length;
  }

  async listDueForHandoff(_db: unknown, query: HandoffQuery): Promise<JobLaneRef[]> {
    return this.#rows()
      .filter((r) => waiting(r) && r.dueAt <= query.now && r.lane === query.lane && query.kinds.includes(r.kind) && (r.nudgeSentAt === null || r.nudgeSentAt < query.nudgedBefore))
      .sort((a, b) => a.dueAt - b.dueAt)
      .slice(0, query.limit)
      .map((r) => ({ id: r.id, kind: r.kind, lane: r.lane }));
  }

  async countActive(_db: unknown): Promise<BacklogCount[]> {
    const counts = new Map<string, BacklogCount>();
    for (const r of this.#rows()) {
      if (r.status !== 'pending' && r.status !== 'retrying' && r.status !== 'running') continue;
      const key = `${r.kind}\0${r.lane}\0${r.status}`;
      const row = counts.get(key) ?? { kind: r.kind, lane: r.lane, status: r.status, count: 0 };
      row.count++;
      counts.set(key, row);
    }
    return [...counts.values()];
  }

  async countUnregistered(_db: unknown, query: { dueBefore: number; kinds: readonly string[] }): Promise<{ kind: string; count: number }[]> {
    const counts = new Map<string, number>();
    for (const r of this.#rows()) {
      if (waiting(r) && r.dueAt < query.dueBefore && !query.kinds.includes(r.kind)) counts.set(r.kind, (counts.get(r.kind) ?? 0) + 1);
    }
    return [...counts].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([kind, count]) => ({ kind, count }));
  }

  async lastScheduleRuns(_db: unknown, names: readonly string[]): Promise<Map<string, number>> {
    const runs = new Map<string, number>();
    for (const name of names) {
      const at = this.#t.scheduleRuns.get(name);
      if (at !== undefined) runs.set(name, at);
    }
    return runs;
  }

  async recordScheduleRun(_db: unknown, input: { name: string; at: number; now: number }): Promise<void> {
    this.#t.scheduleRuns.set(input.name, Math.max(this.#t.scheduleRuns.get(input.name) ?? input.at, input.at));
  }

  async recordNudges(_db: unknown, input: { now: number; ids: readonly string[] }): Promise<void> {
    for (const id of input.ids) {
      const row = this.#visible(id);
      if (row) row.nudgeSentAt = input.now;
    }
  }

  async getJob(_db: unknown, query: { id: string; tenantKey?: string | null }): Promise<JobView | null> {
    const row = this.#visible(query.id);
    return row && (query.tenantKey === undefined || row.tenantKey === query.tenantKey) ? view(row) : null;
  }

  async listJobs(_db: unknown, query: ListJobsQuery): Promise<JobPage> {
    const limit = checkLimit(query.limit);
    const desc = query.order === 'desc';
    let rows = this.#rows().filter((r) => matches(r, query));
    if (query.cursor) {
      const at = decodeCursor(query.cursor);
      rows = rows.filter((r) => compareKey(r, at) * (desc ? -1 : 1) > 0);
    }
    rows.sort((a, b) => compareKey(a, [b.createdAt, b.id]) * (desc ? -1 : 1));
    const jobs = rows.slice(0, limit);
    const last = rows.length > limit ? jobs[limit - 1] : undefined;
    return { jobs: jobs.map(view), nextCursor: last ? encodeCursor(last.createdAt, last.id) : null };
  }

  async countJobs(_db: unknown, filter: JobFilter): Promise<Record<JobStatus, number>> {
    const counts = emptyCounts();
    for (const r of this.#rows()) if (matches(r, filter)) counts[r.status]++;
    return counts;
  }

  async listAttempts(_db: unknown, query: { jobId: string }): Promise<AttemptView[]> {
    const row = this.#visible(query.jobId);
    return row ? row.log.map((a) => attemptView(a.seq, a.outcome, a.errorCode, a.errorMessage, a.startedAt, a.finishedAt)) : [];
  }

  /** The handle as this store's transaction, or `null` (autocommit) for anything else. */
  #tx(tx: unknown): MemoryTx | null {
    if (!(tx instanceof MemoryTx)) return null;
    if (tx.database !== this.database) throw new PostboxError('invalid_db', 'a transaction of another memory database');
    tx.check();
    return tx;
  }

  /** Committed rows (plus the caller's own uncommitted ones). */
  #rows(own: MemoryTx | null = null): Row[] {
    const out: Row[] = [];
    for (const r of this.#t.rows.values()) if (r.tx === null || r.tx === own) out.push(r);
    return out;
  }

  #visible(id: string, own: MemoryTx | null = null): Row | undefined {
    const row = this.#t.rows.get(id);
    return row && (row.tx === null || row.tx === own) ? row : undefined;
  }

  #delete(row: Row): void {
    this.#t.rows.delete(row.id);
    if (row.dedupeKey !== null && this.#t.dedupe.get(dedupeIndex(row.tenantKey, row.dedupeKey)) === row.id) this.#t.dedupe.delete(dedupeIndex(row.tenantKey, row.dedupeKey));
  }

  #claim(input: ClaimInput, skip: ReadonlySet<string> | null): ClaimedJobs {
    const { now } = input;
    const leaseOf = new Map(input.kinds.map((k, i) => [k, input.leaseMs[i]!]));
    const targets = input.targets ? new Set(input.targets.map((t) => `${t.id}\0${t.kind}`)) : null;
    let picked = this.#rows().filter(
      (r) => waiting(r) && r.dueAt <= now && r.lane === input.lane && leaseOf.has(r.kind) && versionFits(r, input.versionCutoff) && !skip?.has(r.id) &&
        (targets === null || targets.has(`${r.id}\0${r.kind}`)),
    );
    if (!targets) picked.sort((a, b) => a.dueAt - a.boostMs - (b.dueAt - b.boostMs) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const room = this.#room(input);
    const due = picked;
    let fairAfter: string | null | undefined;
    if (room) {
      // A kind limited per tenant takes its tenants' first jobs first, each within its tenant's
      // room; with fair share, every limited kind does (within the kind's room).
      const fairLimited = input.fair !== undefined && !targets;
      const tenantRoom = this.#tenantRoom(input);
      const round = new Map<Row, number>();
      const seen = new Map<string, number>();
      for (const r of picked) if (tenantRoom.limited.has(r.kind) || (fairLimited && room.has(r.kind))) round.set(r, seen.set(slotKey(r), (seen.get(slotKey(r)) ?? 0) + 1).get(slotKey(r))!);
      const rank = (r: Row) => r.dueAt - r.boostMs;
      const order = [...picked].sort((a, b) => (round.get(a) ?? 0) - (round.get(b) ?? 0) || rank(a) - rank(b) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      const take = (r: Row) => {
        if (!room.has(r.kind)) return true;
        if (room.get(r.kind)! <= 0) return false;
        if (tenantRoom.limited.has(r.kind)) {
          if ((tenantRoom.room.get(slotKey(r)) ?? 0) <= 0) return false;
          tenantRoom.room.set(slotKey(r), tenantRoom.room.get(slotKey(r))! - 1);
        }
        room.set(r.kind, room.get(r.kind)! - 1);
        return true;
      };
      const taken = new Set(order.filter(take));
      picked = picked.filter((r) => taken.has(r));
      if (fairLimited) {
        // The kinds without limits: a fair pick among their due jobs; then every pick's first round first.
        const fair = fairPick(picked.filter((r) => !room.has(r.kind)), (r) => tenantScope(r.tenantKey), Math.max(0, input.limit), input.fair!);
        const chosen = new Set(fair.picked);
        picked = limitedFairOrder(picked.filter((r) => room.has(r.kind) || chosen.has(r)), new Set(room.keys()), (r) => r.kind,
          (r) => tenantScope(r.tenantKey), rank, (r) => r.id, input.fair!.weights);
        fairAfter = fair.fairAfter;
      }
    }
    if (input.fair && !targets && !room) {
      const rank = (r: Row) => r.dueAt - r.boostMs;
      const fair = fairPick(picked, (r) => tenantScope(r.tenantKey), Math.max(0, input.limit), input.fair);
      picked = fairOrder(fair.picked, fair.visited, (r) => tenantScope(r.tenantKey), rank, (r) => r.id, input.fair.weights);
      fairAfter = fair.fairAfter;
    }
    picked = picked.slice(0, Math.max(0, input.limit));
    const jobs: ClaimedJobs = picked.map((row) => {
      row.status = 'running';
      row.attemptSeq += 1;
      row.updatedAt = now;
      row.leaseExpiresAt = now + leaseOf.get(row.kind)!;
      row.log.push({ seq: row.attemptSeq, startedAt: now, leaseExpiresAt: row.leaseExpiresAt, finishedAt: null, outcome: null, errorCode: null, errorMessage: null });
      return claimed(row);
    });
    if (fairAfter !== undefined) jobs.fairAfter = fairAfter;
    if (input.limits) {
      // Kinds with due jobs left and no room after this claim; a rate's next free start.
      const after = this.#room(input)!;
      const tenantAfter = this.#tenantRoom(input);
      const left = due.filter((r) => r.status !== 'running' && after.has(r.kind));
      const throttled: ThrottledKind[] = [...new Set(left.filter((r) => after.get(r.kind)! <= 0).map((r) => r.kind))].map((kind) => {
        const i = input.limits!.kinds.indexOf(kind);
        const [slots, hold] = [input.limits!.rateSlots[i]!, input.limits!.rateHoldMs[i]!];
        const starts = this.#startsSince(kind, now - hold);
        return { kind, retryAt: slots > 0 && starts.length >= slots ? Math.min(...starts) + hold : null };
      });
      // A kind with room whose due jobs' tenants have none.
      for (const r of left) {
        if (after.get(r.kind)! > 0 && tenantAfter.limited.has(r.kind) && (tenantAfter.room.get(slotKey(r)) ?? 0) <= 0 && !throttled.some((t) => t.kind === r.kind)) {
          throttled.push({ kind: r.kind, retryAt: null, tenant: true });
        }
      }
      jobs.throttled = throttled;
    }
    return jobs;
  }

  /** Each limited kind's room: its concurrency less its jobs on a live lease, its rate slots less its starts in the hold; the smaller. */
  #room(input: ClaimInput): Map<string, number> | null {
    if (!input.limits) return null;
    const room = new Map<string, number>();
    input.limits.kinds.forEach((kind, i) => {
      const [c, r, hold] = [input.limits!.concurrency[i]!, input.limits!.rateSlots[i]!, input.limits!.rateHoldMs[i]!];
      const running = this.#rows().filter((row) => row.kind === kind && holdsSlot(row, input.now)).length;
      room.set(kind, Math.min(c > 0 ? c - running : Infinity, r > 0 ? r - this.#startsSince(kind, input.now - hold).length : Infinity));
    });
    return room;
  }

  /** Kinds limited per tenant, and each (kind, tenant scope)'s room: the limit less its jobs on a live lease. */
  #tenantRoom(input: ClaimInput): { limited: Set<string>; room: Map<string, number> } {
    const limited = new Map<string, number>();
    input.limits?.kinds.forEach((kind, i) => input.limits!.tenantConcurrency[i]! > 0 && limited.set(kind, input.limits!.tenantConcurrency[i]!));
    const room = new Map<string, number>();
    for (const row of this.#rows()) {
      if (!limited.has(row.kind) || !waiting(row) && !holdsSlot(row, input.now)) continue;
      if (!room.has(slotKey(row))) room.set(slotKey(row), limited.get(row.kind)!);
      if (holdsSlot(row, input.now)) room.set(slotKey(row), room.get(slotKey(row))! - 1);
    }
    return { limited: new Set(limited.keys()), room };
  }

  /** When the kind's attempts started, of those after `since`. */
  #startsSince(kind: string, since: number): number[] {
    return this.#rows().filter((row) => row.kind === kind).flatMap((row) => row.log.filter((a) => a.startedAt > since).map((a) => a.startedAt));
  }

  #settle(input: SettleInput): SettledIds {
    const { now } = input;
    const out: SettledIds = [];
    const done = new Set<string>();
    for (const s of input.items) {
      const row = this.#visible(s.id);
      // Fenced by the claiming attempt; a recovery (crash) also by a lease that has run out.
      if (!row || done.has(s.id) || row.status !== 'running' || row.attemptSeq !== s.attemptSeq) continue;
      if (s.outcome === 'crash' && !(row.leaseExpiresAt !== null && row.leaseExpiresAt < now)) continue;
      Object.assign(row, {
        status: s.status, attempts: s.attempts, crashes: s.crashes, streakCode: s.streakCode, streak: s.streak, lastErrorCode: s.errorCode,
        lastErrorMessage: s.errorMessage, leaseExpiresAt: null, finishedAt: s.finished ? now : null, updatedAt: now,
      });
      if (s.dueAt !== null) row.dueAt = s.dueAt;
      const attempt = row.log.find((a) => a.seq === s.attemptSeq && a.finishedAt === null);
      if (attempt) Object.assign(attempt, { finishedAt: now, outcome: s.outcome, errorCode: s.errorCode, errorMessage: s.errorMessage });
      done.add(s.id);
      out.push(s.id);
    }
    const released = this.#childEffects(out.map((id) => this.#t.rows.get(id)!), now, null);
    if (released.length > 0) out.released = released;
    return out;
  }

  /** Children of `parents`, as `own` sees them. */
  #childrenOf(parent: string, own: MemoryTx | null): Row[] {
    return this.#rows(own).filter((r) => r.parents.includes(parent));
  }

  /**
   * Jobs that just ended (as the PostgreSQL store's childEffectsCtes): a failed one cancels its
   * waiting 'cancel' children, recursively; any other end counts one off each waiting child,
   * which falls due at once when none is left.
   */
  #childEffects(ended: readonly { id: string; status: JobStatus }[], now: number, own: MemoryTx | null): DependentChange[] {
    const released: DependentChange[] = [];
    const queue = ended.filter((e) => FINAL.has(e.status)).map((e) => ({ id: e.id, status: e.status }));
    for (let next = queue.shift(); next; next = queue.shift()) {
      const failed = next.status !== 'succeeded';
      for (const child of this.#childrenOf(next.id, own)) {
        if (child.status !== 'waiting') continue;
        own?.touch(this.#t, child);
        child.updatedAt = now;
        if (failed && child.onParentFailure === 'cancel') {
          Object.assign(child, { status: 'cancelled', lastErrorCode: PARENT_FAILED, finishedAt: now, waitingOn: 0 });
          queue.push({ id: child.id, status: 'cancelled' });
        } else {
          // A fresh object, not a mutation: a transaction's rollback restores the row's fields as they were.
          if (child.tally) child.tally = { ...child.tally, dead: child.tally.dead + (next.status === 'dead' ? 1 : 0), cancelled: child.tally.cancelled + (next.status === 'cancelled' ? 1 : 0) };
          if (--child.waitingOn > 0) continue;
          Object.assign(child, { status: 'pending', waitingOn: 0, dueAt: Math.max(child.dueAt, now) });
          released.push({ id: child.id, kind: child.kind, lane: child.lane, status: 'pending' });
        }
      }
    }
    return released;
  }

  /**
   * Replayed jobs (with the status each had) bring back the children their failure cancelled,
   * and a waiting 'release' child that had counted a replayed or revived job's end counts it
   * unfinished again (as revivedChildrenCtes).
   */
  #revive(replayedWas: ReadonlyMap<string, JobStatus>, now: number, own: MemoryTx | null): void {
    if (replayedWas.size === 0) return;
    const replayed = [...replayedWas.keys()];
    const replay = new Set(replayed);
    const reopened = new Map(replayedWas);
    const failedForItself = (p: Row | undefined) => p !== undefined && !replay.has(p.id) && (p.status === 'dead' || (p.status === 'cancelled' && p.lastErrorCode !== PARENT_FAILED));
    const queue = [...replayed];
    for (let next = queue.shift(); next; next = queue.shift()) {
      for (const child of this.#childrenOf(next, own)) {
        if (child.status !== 'cancelled' || child.lastErrorCode !== PARENT_FAILED) continue;
        if (child.parents.some((id) => failedForItself(this.#visible(id, own)))) continue;
        own?.touch(this.#t, child);
        const waitingOn = child.parents.filter((id) => {
          const p = this.#visible(id, own);
          return p !== undefined && (p.status !== 'succeeded' || replay.has(id));
        }).length;
        Object.assign(child, { status: 'waiting', finishedAt: null, lastErrorCode: null, updatedAt: now, waitingOn });
        reopened.set(child.id, 'cancelled');
        queue.push(child.id);
      }
    }
    for (const [id, was] of reopened) {
      if (was !== 'dead' && was !== 'cancelled') continue;
      for (const child of this.#childrenOf(id, own)) {
        if (child.status !== 'waiting' || child.onParentFailure !== 'release' || reopened.has(child.id)) continue;
        own?.touch(this.#t, child);
        child.waitingOn++;
        if (child.tally) child.tally = { ...child.tally, dead: child.tally.dead - (was === 'dead' ? 1 : 0), cancelled: child.tally.cancelled - (was === 'cancelled' ? 1 : 0) };
        child.updatedAt = now;
      }
    }
  }

  /** A replayed child's parents (as jobLockForOperate counts them): failed and not replayed by `ids`, and open or reopened by them. */
  #rejoinCounts(child: Row, ids: ReadonlySet<string>, own: MemoryTx | null): { failed: number; open: number } {
    let failed = 0;
    let open = 0;
    for (const id of child.parents) {
      const p = this.#visible(id, own);
      if (!p) continue;
      const ended = p.status === 'dead' || p.status === 'cancelled';
      if (ended && !ids.has(p.id)) failed++;
      else if (!FINAL.has(p.status) || ended) open++;
    }
    return { failed, open };
  }

  /** The parent ends as a child's wait sees them: whether one failed, and how many have not ended. */
  #parentsState(child: Row, own: MemoryTx | null): { failed: boolean; open: number; dead: number; cancelled: number } {
    let open = 0;
    let dead = 0;
    let cancelled = 0;
    for (const id of child.parents) {
      const p = this.#visible(id, own);
      if (!p) continue;
      if (p.status === 'dead') dead++;
      else if (p.status === 'cancelled') cancelled++;
      else if (!FINAL.has(p.status)) open++;
    }
    return { failed: dead + cancelled > 0, open, dead, cancelled };
  }

  /** Ends a child's wait: cancelled by a failed parent (its policy 'cancel'), else due. */
  #endWait(child: Row, failed: boolean, now: number): void {
    if (failed && child.onParentFailure === 'cancel') Object.assign(child, { status: 'cancelled', lastErrorCode: PARENT_FAILED, finishedAt: now, waitingOn: 0 });
    else Object.assign(child, { status: 'pending', waitingOn: 0, dueAt: Math.max(child.dueAt, now) });
    child.updatedAt = now;
  }

  /** Job dependencies kept in the rows: each child names its parents. */
  readonly dependencies: DependencyStore<unknown, unknown> = {
    parentStates: async (tx, refs) => {
      const own = this.#tx(tx);
      return refs.map((r) => {
        const row = this.#visible(r.id.toLowerCase(), own);
        return row !== undefined && row.tenantKey === r.tenantKey ? row.status : null;
      });
    },
    addEdges: async (tx, edges) => {
      const own = this.#tx(tx);
      for (const e of edges) {
        const child = this.#visible(e.child, own);
        if (!child || child.parents.includes(e.parent)) continue;
        own?.touch(this.#t, child);
        child.parents = [...child.parents, e.parent];
      }
    },
    parentTally: async (_db, id) => {
      const child = this.#visible(id.toLowerCase(), null);
      if (!child?.tally) return null;
      const byStatus: ParentTally['byStatus'] = {};
      for (const pid of child.parents) {
        const p = this.#visible(pid, null);
        if (p) byStatus[p.status] = (byStatus[p.status] ?? 0) + 1;
      }
      return { ...child.tally, byStatus };
    },
    openBatchMembers: async (_db, id) => {
      const child = this.#visible(id.toLowerCase(), null);
      if (!child?.completesBatch) return null;
      return child.parents.filter((pid) => {
        const p = this.#visible(pid, null);
        return p !== undefined && !FINAL.has(p.status);
      });
    },
    resolveWaiting: async (_db, input) => {
      const changed: DependentChange[] = [];
      // The limit counts only jobs the check can release: those still waiting on open parents are passed over.
      const releasable = this.#rows()
        .filter((r) => r.status === 'waiting')
        .map((child) => ({ child, parents: this.#parentsState(child, null) }))
        .filter(({ parents }) => parents.open === 0)
        .sort((a, b) => a.child.updatedAt - b.child.updatedAt)
        .slice(0, input.limit);
      for (const { child, parents: { failed, dead, cancelled } } of releasable) {
        // Counted afresh from the parents still kept, never below what the settles counted (as jobResolveWaiting).
        if (child.tally) child.tally = { total: child.tally.total, dead: Math.max(child.tally.dead, dead), cancelled: Math.max(child.tally.cancelled, cancelled) };
        this.#endWait(child, failed, input.now);
        changed.push({ id: child.id, kind: child.kind, lane: child.lane, status: child.status });
      }
      return changed;
    },
    dependencies: async (_db, id, limit) => {
      const ref = (r: Row | undefined, rid: string): DependencyView => ({ id: rid, kind: r?.kind ?? null, status: r?.status ?? null });
      const row = this.#visible(id);
      const parents = (row?.parents ?? []).map((p) => ref(this.#visible(p), p)).sort((a, b) => (a.id < b.id ? -1 : 1));
      const children = this.#childrenOf(id, null).map((c) => ref(c, c.id)).sort((a, b) => (a.id < b.id ? -1 : 1));
      return { parents: parents.slice(0, limit), children: children.slice(0, limit) };
    },
  };
}

/** The statuses that end a job. */
const FINAL: ReadonlySet<JobStatus> = new Set(['succeeded', 'dead', 'cancelled']);
/** The code of a child cancelled by its parent's failure (the core's kParentFailedCode). */
const PARENT_FAILED = 'parent_failed';

const waiting = (r: Row) => r.status === 'pending' || r.status === 'retrying';
/** Holds a concurrency slot: running on a live lease, or ended by an operator's cancel before its lease would have. */
const holdsSlot = (r: Row, now: number) => (r.status === 'running' && r.leaseExpiresAt! > now) || (r.heldUntil !== null && r.heldUntil > now);
const versionFits = (r: Row, cutoff: number | null) => r.versionTs === null || r.versionTs <= (cutoff ?? Number.MAX_SAFE_INTEGER);
const openAttempt = (r: Row) => r.log.find((a) => a.seq === r.attemptSeq && a.finishedAt === null);
const dedupeIndex = (tenantKey: string | null, dedupeKey: string) => `${tenantKey === null ? 'n' : `t:${tenantKey}`}\0${dedupeKey}`;

/** (created, id) order, as the PostgreSQL store pages. */
function compareKey(r: Row, [createdAt, id]: readonly [number, string]): number {
  return r.createdAt - createdAt || (r.id < id ? -1 : r.id > id ? 1 : 0);
}

function matches(r: Row, f: JobFilter): boolean {
  const t = (d: Date | undefined) => d?.getTime();
  if (f.tenantKey !== undefined && r.tenantKey !== f.tenantKey) return false;
  if (f.status && r.status !== f.status) return false;
  if (f.kind && r.kind !== f.kind) return false;
  if (f.correlationId && r.correlationId !== f.correlationId) return false;
  if (f.createdAtOrAfter && r.createdAt < t(f.createdAtOrAfter)!) return false;
  if (f.createdAfter && r.createdAt <= t(f.createdAfter)!) return false;
  if (f.createdBefore && r.createdAt >= t(f.createdBefore)!) return false;
  if (f.finishedAfter && (r.finishedAt === null || r.finishedAt <= t(f.finishedAfter)!)) return false;
  if (f.finishedBefore && (r.finishedAt === null || r.finishedAt >= t(f.finishedBefore)!)) return false;
  return true;
}

function claimed(r: Row): ClaimedJob {
  return {
    id: r.id, kind: r.kind, lane: r.lane, payload: structuredClone(r.payload), tenant_key: r.tenantKey, correlation_id: r.correlationId,
    metadata: structuredClone(r.metadata), attempts: r.attempts, attempt_seq: r.attemptSeq, crashes: r.crashes, streak_code: r.streakCode,
    streak: r.streak, max_attempts: r.maxAttempts, last_error_code: r.lastErrorCode, last_error_message: r.lastErrorMessage,
    lease_expires_ms: r.leaseExpiresAt!, trace_context: r.traceContext, created_ms: r.createdAt,
    parents_total: r.tally?.total ?? null, parents_dead: r.tally?.dead ?? null, parents_cancelled: r.tally?.cancelled ?? null,
  };
}

function view(r: Row): JobView {
  return {
    id: r.id, kind: r.kind, lane: r.lane, status: r.status, payload: structuredClone(r.payload), tenantKey: r.tenantKey, dedupeKey: r.dedupeKey,
    correlationId: r.correlationId, metadata: structuredClone(r.metadata), attempts: r.attempts, crashes: r.crashes,
    lastErrorCode: r.lastErrorCode, lastErrorMessage: r.lastErrorMessage, dueAt: new Date(r.dueAt), createdAt: new Date(r.createdAt),
    finishedAt: r.finishedAt === null ? null : new Date(r.finishedAt),
  };
}

function cloneRow(r: Row): Row {
  return { ...r, payload: structuredClone(r.payload), metadata: structuredClone(r.metadata), log: r.log.map((a) => ({ ...a })) };
}

function parseJson(text: unknown, what: string): unknown {
  if (typeof text !== 'string') throw new PostboxError('invalid_input', `append: ${what} must be JSON text`);
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new PostboxError('invalid_input', `append: ${what} is not valid JSON: ${String(error)}`);
  }
}

/** Equality of JSON values as PostgreSQL's jsonb sees it: object key order does not count. */
function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((x, i) => jsonEqual(x, bb[i]));
  }
  const ak = Object.keys(a);
  const bo = b as Record<string, unknown>;
  return ak.length === Object.keys(bo).length && ak.every((k) => Object.hasOwn(bo, k) && jsonEqual((a as Record<string, unknown>)[k], bo[k]));
}
/** A job's per-tenant slot pool: its kind and tenant scope. */
const slotKey = (r: Row) => `${r.kind}\0${tenantScope(r.tenantKey)}`;
