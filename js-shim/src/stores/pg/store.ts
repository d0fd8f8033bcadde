/**
 * The PostgreSQL store: the outbox's SQL (js-shim/src/queries) behind the store contract. One
 * statement per operation, as before the contract existed: settle and claim go together, a list
 * of jobs goes in one INSERT. The hot statements are named, so the server plans them once per
 * session. Operations run on the handle the caller passes: a lane session's client for the
 * runtime, any node-postgres client (or pool, for `transaction`) for others.
 * @module
 */
import { runTransaction, type TransactionalDb } from './db.js';
import { PostboxError } from '../../errors.js';
import type { AttemptView, JobFilter, JobView } from '../contract.js';
import { outboxSql, type OutboxSql } from './sql/index.js';
import { claimedFromArray } from './sql/claim.js';
import { pgIndexCompaction } from './sql/compaction.js';
import { run } from './sql/statement.js';
import { ms, ts } from './sql/time.js';
import type { BacklogCount, JobStatus, LaneDb, Queryable } from '../../types.js';
import type {
  DependencyStore, DependencyView, DependentChange, ParentTally, SettledIds,
  AppendInput, AppendRow, ApplyOperateInput, ClaimedJob, ClaimedJobs, ClaimInput, ClaimLimits, ExpiredLeaseQuery, HandoffQuery, HeartbeatInput, IndexCompaction, JobLaneRef, JobPage, StoredWebhookEndpoint, WebhookEndpointStore,
  ListJobsQuery, NextDueQuery, OperateLockInput, OperateTarget, OutboxStore, RetentionInput, SettleInput,
} from '../contract.js';
import { attemptLedger } from './sql/attempts.js';
import { attemptView, checkLimit, createdRow, decodeCursor, emptyCounts, encodeCursor } from '../shared.js';

/** A row of the INSERT for an item NOT inserted: its key's holder (`id` null: raced, see `append`). */
interface NotInserted {
  ord: string | number;
  id: string | null;
  kind: string | null;
  same_payload: boolean | null;
  same_max_attempts: boolean | null;
  same_metadata: boolean | null;
  same_correlation_id: boolean | null;
  same_priority: boolean | null;
  same_on_parent_failure: boolean | null;
  holder_parents: string[] | null;
}

/** A held key's row as append returns it: the holder and, field by field, whether it is this request. */
const heldRow = (r: NotInserted): AppendRow => ({
  id: r.id!, kind: r.kind!, created: false, samePayload: r.same_payload === true, sameMaxAttempts: r.same_max_attempts === true,
  sameMetadata: r.same_metadata === true, sameCorrelationId: r.same_correlation_id === true, samePriority: r.same_priority === true,
  sameOnParentFailure: r.same_on_parent_failure === true, holderParents: r.holder_parents,
});

const JOB_COLUMNS = `id, kind, lane, status, payload, tenant_key, dedupe_key, correlation_id, metadata, attempts, crashes,
  last_error_code, last_error_message, ${ms('due_at')} AS due_ms, ${ms('created_at')} AS created_ms, ${ms('finished_at')} AS finished_ms`;

/**
 * An outbox's storage in PostgreSQL (schema `outbox`, or `outbox_<name>`); get one with
 * {@link postgresOutboxStore}. `Db` is a client whose `query` also takes a named query config
 * (node-postgres `Client` / `PoolClient`); `transaction` also takes a `Pool`, a drizzle database
 * or a Kysely instance.
 */
export class PostgresOutboxStore implements OutboxStore<LaneDb, Queryable> {
  /** The outbox's statements (its schema). */
  readonly sql: OutboxSql;
  /** Rebuilds of the indexes a held horizon bloated (the sweep's compact step). */
  readonly compaction: IndexCompaction<Queryable>;
  /** Webhook endpoints' breaker state (table webhook_endpoint). */
  readonly webhookEndpoints: WebhookEndpointStore<Queryable>;
  /** Job dependencies (table job_edge, sql/dependencies.ts). */
  readonly dependencies: DependencyStore<Queryable, Queryable>;
  readonly runsUserCode = true;
  readonly #heartbeatMany: string;

  constructor(name?: string | null) {
    this.sql = outboxSql(name);
    const s = this.sql.ident;
    this.compaction = pgIndexCompaction(this.sql.schema, s);
    this.webhookEndpoints = pgWebhookEndpoints(this.sql);
    this.dependencies = pgDependencies(this.sql);
    // Several beats in one statement; a single beat keeps the named statement the runtime uses.
    // A live lease means running (job_running_has_lease); by primary key, as the settle (sql/settle.ts).
    this.#heartbeatMany = `UPDATE ${s}.job j SET lease_expires_at = ${ts('b.lease_ms')}
  FROM unnest($1::uuid[], $2::int[], $3::bigint[]) AS b(id, seq, lease_ms)
 WHERE j.id = ANY($1::uuid[]) AND j.id = b.id AND j.attempt_seq = b.seq AND j.lease_expires_at > ${ts('$4')}
RETURNING j.id`;
  }

  get name(): string | null {
    return this.sql.name;
  }

  transaction<T>(db: TransactionalDb, fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return runTransaction(db, (q) => fn(q));
  }

  /**
   * One INSERT for the list (a cheaper-to-plan one for a list of one); a second statement only
   * when a concurrent transaction committed one of the keys after the INSERT's snapshot.
   */
  async append(tx: Queryable, input: AppendInput): Promise<AppendRow[]> {
    const { items } = input;
    let notInserted: NotInserted[];
    if (items.length === 0) return [];
    if (items.length === 1) {
      const w = items[0]!;
      const { rows } = await tx.query(this.sql.insertOne, [
        w.id, input.kind, input.lane, w.payloadJson, w.tenantKey, w.dedupeKey, w.correlationId, w.metadataJson, w.dueAt, input.now, input.versionTs,
        w.maxAttempts, input.traceContext ?? null, w.priority ?? 0, w.boostMs ?? 0,
        w.parents?.status ?? null, w.parents?.waitingOn ?? null, w.parents?.onParentFailure ?? null, w.parents?.code ?? null,
        w.parents?.total ?? null, w.parents?.dead ?? null, w.parents?.cancelled ?? null, w.parents?.batch === true ? true : null,
      ]);
      const row = rows[0] as (NotInserted & { created: boolean }) | undefined;
      notInserted = row?.created ? [] : [row ? { ...row, ord: 1 } : {
        ord: 1, id: null, kind: null, same_payload: null, same_max_attempts: null, same_metadata: null, same_correlation_id: null, same_priority: null, same_on_parent_failure: null, holder_parents: null,
      }];
    } else {
      // A batch's completion is always appended alone (runBatch), by JobInsertOne.
      if (items.some((w) => w.parents?.batch)) throw new PostboxError('enqueue_failed', 'enqueue: a batch completion must be appended alone');
      // JSON arrays: one JSON.stringify each, where node-postgres' array literals cost far more.
      const column = <T>(pick: (w: AppendInput['items'][number]) => T) => JSON.stringify(items.map(pick));
      notInserted = (
        await tx.query(this.sql.insertMany, [
          column((w) => w.id),
          `[${items.map((w) => w.payloadJson).join(',')}]`,
          column((w) => w.tenantKey),
          column((w) => w.dedupeKey),
          column((w) => w.correlationId),
          `[${items.map((w) => w.metadataJson ?? 'null').join(',')}]`,
          column((w) => w.dueAt),
          input.kind,
          input.lane,
          input.now,
          input.versionTs,
          column((w) => w.maxAttempts),
          input.traceContext ?? null,
          // Priorities only when an item has one: a list without sends no arrays for them.
          ...(items.some((w) => w.priority) ? [column((w) => w.priority ?? 0), column((w) => w.boostMs ?? 0)] : [null, null]),
          // Parents only when an item has some: a list without sends no arrays for them.
          ...(items.some((w) => w.parents)
            ? (['status', 'waitingOn', 'onParentFailure', 'code', 'total', 'dead', 'cancelled'] as const).map((f) => column((w) => w.parents?.[f] ?? null))
            : [null, null, null, null, null, null, null]),
        ])
      ).rows;
    }
    // Every item went in under its own id, except those the statement names.
    const out: AppendRow[] = items.map((w) => createdRow(w.id, input.kind));
    const raced: number[] = [];
    for (const r of notInserted) {
      const i = Number(r.ord) - 1;
      if (r.id === null) raced.push(i);
      else out[i] = heldRow(r);
    }
    if (raced.length > 0) {
      const found = await tx.query(this.sql.findByDedupeMany, [
        raced.map((i) => items[i]!.dedupeKey), raced.map((i) => items[i]!.tenantKey), raced.map((i) => items[i]!.payloadJson),
        raced.map((i) => items[i]!.maxAttempts), raced.map((i) => items[i]!.metadataJson), raced.map((i) => items[i]!.correlationId),
        raced.map((i) => items[i]!.priority ?? 0), raced.map((i) => items[i]!.parents?.onParentFailure ?? null),
      ]);
      if (found.rows.length !== raced.length) throw new PostboxError('enqueue_failed', `enqueue: no job row for a ${input.kind} job`);
      for (const r of found.rows as NotInserted[]) out[raced[Number(r.ord) - 1]!] = heldRow(r);
    }
    return out;
  }

  async claim(db: LaneDb, input: ClaimInput): Promise<ClaimedJobs> {
    if (input.limits) {
      await this.#ensureSlots(db, input.limits);
      const statement = input.targets ? this.sql.limited.claimTargets : input.fair ? this.sql.limitedFair.claimDue : this.sql.limited.claimDue;
      return this.#limitedAnswer((await run(db, statement, [input.now, ...claimArgs(input)])).rows[0]);
    }
    if (isFair(input)) return fairAnswer((await run(db, this.sql.fair.claimDue, [input.now, ...claimArgs(input)])).rows[0]);
    const set = input.traced ? this.sql.traced : this.sql;
    const statement = input.targets ? set.claimTargets : set.claimDue;
    return (await run(db, statement, [input.now, ...claimArgs(input)])).rows as ClaimedJob[];
  }

  async settle(db: LaneDb, input: SettleInput): Promise<SettledIds> {
    const out = (await run(db, this.sql.settleBatch, [input.now, ...settleColumns(input)])).rows[0];
    return withReleased(out.settled as string[], out.released);
  }

  async settleThenClaim(db: LaneDb, settle: SettleInput, claim: ClaimInput): Promise<{ settled: SettledIds; claimed: ClaimedJobs }> {
    // One `now` for both halves: the statement has one $1.
    if (settle.now !== claim.now) throw new PostboxError('invalid_input', 'settleThenClaim: the settle and the claim must share one now');
    if (isFair(claim)) {
      const out = (await run(db, this.sql.fair.settleThenClaimDue, [settle.now, ...settleColumns(settle), ...claimArgs(claim)])).rows[0];
      return { settled: withReleased(out.settled as string[], out.released), claimed: fairAnswer(out) };
    }
    if (claim.limits) await this.#ensureSlots(db, claim.limits);
    const set = claim.limits ? this.sql.limited : claim.traced ? this.sql.traced : this.sql;
    const statement = claim.targets ? set.settleThenClaimTargets : claim.limits && claim.fair ? this.sql.limitedFair.settleThenClaimDue : set.settleThenClaimDue;
    const out = (await run(db, statement, [settle.now, ...settleColumns(settle), ...claimArgs(claim)])).rows[0];
    return {
      settled: withReleased(out.settled as string[], out.released),
      claimed: claim.limits ? this.#limitedAnswer(out) : (out.claimed as unknown[][]).map(claimedFromArray),
    };
  }

  /**
   * Slot rows a limited kind's claims take, created once per store and limit (a deploy that
   * raises a limit adds slots). A kind a claim finds throttled is checked again by the next
   * claim, so slot rows deleted meanwhile (a restore, an operator) are made again.
   */
  readonly #slotsReady = new Set<string>();
  async #ensureSlots(db: LaneDb, limits: ClaimLimits): Promise<void> {
    const kinds: string[] = [];
    const pools: string[] = [];
    const counts: number[] = [];
    limits.kinds.forEach((kind, i) => {
      for (const [pool, n] of [['c', limits.concurrency[i]!], ['r', limits.rateSlots[i]!]] as const) {
        if (n > 0 && !this.#slotsReady.has(`${pool}:${n}:${kind}`)) kinds.push(kind), pools.push(pool), counts.push(n);
      }
    });
    if (kinds.length === 0) return;
    await run(db, this.sql.kindSlotsEnsure, [kinds, pools, counts]);
    kinds.forEach((kind, i) => this.#slotsReady.add(`${pools[i]}:${counts[i]}:${kind}`));
  }

  /** A limited claim's answer (sql/limits.ts): the claimed jobs, carrying the throttled kinds. */
  #limitedAnswer(row: { claimed: unknown[][]; throttled: { kind: string; retryAt: number | string | null; tenant: boolean }[]; tenant_after: string | null; fair_after?: string | null }): ClaimedJobs {
    const jobs: ClaimedJobs = row.claimed.map(claimedFromArray);
    jobs.throttled = row.throttled.map((t) => ({ kind: t.kind, retryAt: t.retryAt === null ? null : Number(t.retryAt), ...(t.tenant ? { tenant: true } : {}) }));
    jobs.tenantAfter = row.tenant_after;
    if (row.fair_after !== undefined) jobs.fairAfter = row.fair_after;
    for (const t of jobs.throttled) for (const key of [...this.#slotsReady]) if (key.endsWith(`:${t.kind}`)) this.#slotsReady.delete(key);
    return jobs;
  }

  async heartbeat(db: LaneDb, input: HeartbeatInput): Promise<string[]> {
    const { beats } = input;
    if (beats.length === 0) return [];
    if (beats.length === 1) {
      const b = beats[0]!;
      const { rows } = await run(db, this.sql.heartbeat, [b.id, b.attemptSeq, b.leaseExpiresAt, input.now]);
      return rows.map((r: { id: string }) => r.id);
    }
    const { rows } = await db.query(this.#heartbeatMany, [beats.map((b) => b.id), beats.map((b) => b.attemptSeq), beats.map((b) => b.leaseExpiresAt), input.now]);
    return rows.map((r: { id: string }) => r.id);
  }

  async listExpiredLeases(db: LaneDb, query: ExpiredLeaseQuery): Promise<ClaimedJob[]> {
    const statement = query.unregistered ? this.sql.listExpiredUnregistered : this.sql.listExpiredLeases;
    return (await run(db, statement, [query.now, query.kinds, query.limit])).rows as ClaimedJob[];
  }

  async nextDue(db: Queryable, query: NextDueQuery): Promise<number | null> {
    // Unnamed: the test kit reads it on whatever handle it was given.
    const due = (await db.query(this.sql.nextDue.text, [query.lane, query.kinds, query.versionCutoff])).rows[0]?.due;
    return due === null || due === undefined ? null : Number(due);
  }

  async lockForOperate(tx: Queryable, input: OperateLockInput): Promise<OperateTarget[]> {
    const anyTenant = !('tenantKey' in input) || input.tenantKey === undefined;
    return (await tx.query(this.sql.lockForOperate, [input.ids, anyTenant, anyTenant ? null : input.tenantKey ?? null, input.withParents === true])).rows as OperateTarget[];
  }

  async applyOperate(tx: Queryable, input: ApplyOperateInput): Promise<OperateTarget[]> {
    const w = input.writes;
    if (w.length === 0) return [];
    const { rows } = await tx.query(this.sql.applyOperate, [
      input.now, w.map((x) => x.id), w.map((x) => x.status), w.map((x) => x.dueAt),
      w.map((x) => x.budget?.attempts ?? null), w.map((x) => x.budget?.crashes ?? null), w.map((x) => x.budget?.streak ?? null), w.map((x) => x.reason), w.map((x) => x.closeAttempt),
      w.map((x) => x.finished), w.map((x) => x.recordReason), w.map((x) => x.waitingOn ?? null),
    ]);
    return rows as OperateTarget[];
  }

  async eraseTenant(tx: Queryable, tenantKey: string): Promise<number> {
    return (await tx.query(this.sql.eraseTenant, [tenantKey])).rowCount ?? 0;
  }

  /** The waiting children of `ids` not among them, locked until `tx` ends (see jobLockOrphans). */
  async lockOrphans(tx: Queryable, ids: readonly string[]): Promise<OperateTarget[]> {
    if (ids.length === 0) return [];
    return (await tx.query(this.sql.lockOrphans, [ids])).rows as OperateTarget[];
  }

  /** Deletes only `ids`, and of them only the tenant's jobs, in one statement; returns how many. */
  async eraseTenantIds(tx: Queryable, tenantKey: string, ids: readonly string[]): Promise<number> {
    if (ids.length === 0) return 0;
    return (await tx.query(this.sql.eraseTenantIds, [tenantKey, ids])).rowCount ?? 0;
  }

  async lastScheduleRuns(db: Queryable, names: readonly string[]): Promise<Map<string, number>> {
    const { rows } = await run(db as LaneDb, this.sql.scheduleLastRuns, [names]);
    return new Map(rows.map((r: { name: string; last_at: string }) => [r.name, Number(r.last_at)]));
  }

  async recordScheduleRun(db: Queryable, input: { name: string; at: number; now: number }): Promise<void> {
    await run(db as LaneDb, this.sql.scheduleRecord, [input.name, input.at, input.now]);
  }

  async deleteFinished(db: Queryable, input: RetentionInput): Promise<number> {
    return (await db.query(this.sql.deleteFinished, [input.succeededBefore, input.deadBefore, input.limit])).rowCount ?? 0;
  }

  async listDueForHandoff(db: Queryable, query: HandoffQuery): Promise<JobLaneRef[]> {
    return (await db.query(this.sql.listDueForHandoff, [query.now, query.lane, query.kinds, query.limit, query.nudgedBefore])).rows as JobLaneRef[];
  }

  async countActive(db: Queryable): Promise<BacklogCount[]> {
    return (await db.query(this.sql.countActive)).rows as BacklogCount[];
  }

  async countUnregistered(db: Queryable, query: { dueBefore: number; kinds: readonly string[] }): Promise<{ kind: string; count: number }[]> {
    return (await db.query(this.sql.countUnregistered, [query.dueBefore, query.kinds])).rows as { kind: string; count: number }[];
  }

  async recordNudges(db: Queryable, input: { now: number; ids: readonly string[] }): Promise<void> {
    await db.query(this.sql.recordNudges, [input.now, input.ids]);
  }

  async getJob(db: Queryable, query: { id: string; tenantKey?: string | null }): Promise<JobView | null> {
    const params: unknown[] = [query.id];
    const { rows } = await db.query(`SELECT ${JOB_COLUMNS} FROM ${this.sql.ident}.job WHERE id = $1 AND ${tenantFilter(query.tenantKey, params)}`, params);
    return rows[0] ? toView(rows[0]) : null;
  }

  async listJobs(db: Queryable, query: ListJobsQuery): Promise<JobPage> {
    const limit = checkLimit(query.limit);
    const order = query.order === 'desc' ? 'DESC' : 'ASC';
    const params: unknown[] = [];
    let text = `SELECT ${JOB_COLUMNS} FROM ${this.sql.ident}.job WHERE ${where(query, params)}`;
    if (query.cursor) {
      const [createdMs, id] = decodeCursor(query.cursor);
      params.push(createdMs, id);
      text += ` AND (created_at, id) ${order === 'ASC' ? '>' : '<'} (to_timestamp($${params.length - 1}::bigint / 1000.0), $${params.length}::uuid)`;
    }
    params.push(limit + 1);
    text += ` ORDER BY created_at ${order}, id ${order} LIMIT $${params.length}`;
    const { rows } = await db.query(text, params);
    const jobs = rows.slice(0, limit).map(toView);
    const last = rows.length > limit ? rows[limit - 1] : undefined;
    return { jobs, nextCursor: last ? encodeCursor(Number(last.created_ms), last.id) : null };
  }

  async countJobs(db: Queryable, filter: JobFilter): Promise<Record<JobStatus, number>> {
    const params: unknown[] = [];
    const { rows } = await db.query(`SELECT status, count(*)::int AS n FROM ${this.sql.ident}.job WHERE ${where(filter, params)} GROUP BY status`, params);
    const counts = emptyCounts();
    for (const r of rows) counts[r.status as JobStatus] = r.n;
    return counts;
  }

  async listAttempts(db: Queryable, query: { jobId: string }): Promise<AttemptView[]> {
    const { rows } = await db.query(
      // Ended attempts as the ledger has them (sql/attempts.ts); a running one is its job's (migration 0006).
      `SELECT seq, outcome, error_code, error_message, ${ms('started_at')} AS started_ms, ${ms('finished_at')} AS finished_ms
         FROM ${attemptLedger(this.sql.ident)} a WHERE job_id = $1
       UNION ALL
       SELECT j.attempt_seq, NULL, NULL, NULL, ${ms('j.started_at')}, NULL
         FROM ${this.sql.ident}.job j
        WHERE j.id = $1 AND j.status = 'running' AND j.started_at IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM ${this.sql.ident}.attempt a WHERE a.job_id = j.id AND a.seq = j.attempt_seq)
       ORDER BY 1`,
      [query.jobId],
    );
    return rows.map((r: any) => attemptView(r.seq, r.outcome, r.error_code, r.error_message, Number(r.started_ms), r.finished_ms === null ? null : Number(r.finished_ms)));
  }
}

const stores = new Map<string | null, PostgresOutboxStore>();

/**
 * The PostgreSQL store of the outbox `name` (`undefined` / `null`: the default outbox), cached.
 * Throws `PostboxError('invalid_config')` for an invalid name. Its schema must be migrated
 * (`migrate(client, { name })`).
 */
export function postgresOutboxStore(name?: string | null): PostgresOutboxStore {
  const sql = outboxSql(name);
  let store = stores.get(sql.name);
  if (!store) stores.set(sql.name, (store = new PostgresOutboxStore(sql.name)));
  return store;
}

/** The claim's parameters after `now` (sql/claim.ts). */
function claimArgs(c: ClaimInput): unknown[] {
  const args: unknown[] = [c.lane, c.kinds, c.leaseMs, c.limit, c.versionCutoff];
  if (c.targets) args.push(c.targets.map((t) => t.id), c.targets.map((t) => t.kind));
  if (c.limits) {
    const l = c.limits;
    args.push(l.kinds, l.concurrency, l.rateSlots, l.rateHoldMs, l.tenantConcurrency, l.tenantVisits ?? 0);
    // A nudged claim visits its targets' tenants, not a rotation: it has no place to start after.
    if (!c.targets) args.push(c.tenantAfter ?? null);
    // With fair share, the pick among the lane's kinds without limits (sql/limits.ts).
    if (!c.targets && c.fair) args.push(c.fair.tenants, c.fair.after, c.fair.weights ? JSON.stringify(c.fair.weights) : null);
  }
  else if (isFair(c)) args.push(c.fair!.tenants, c.fair!.after, c.fair!.weights ? JSON.stringify(c.fair!.weights) : null);
  return args;
}

/** Whether a claim takes the fair statements (sql/fair.ts): a due claim of an outbox with fair share, in a lane without limits. */
const isFair = (c: ClaimInput) => c.fair !== undefined && !c.targets && !c.limits;

/** A fair claim's answer: the claimed jobs in the claim's order, carrying where the next claim starts. */
function fairAnswer(row: { claimed: unknown[][]; fair_after: string | null }): ClaimedJobs {
  const jobs: ClaimedJobs = row.claimed.map(claimedFromArray);
  jobs.fairAfter = row.fair_after;
  return jobs;
}



/** The 12 parallel arrays of a settle statement, after `now` (sql/settle.ts). */
function settleColumns(input: SettleInput): string[] {
  const items = input.items;
  // Array literals written here, not by node-postgres: the drain sends twelve arrays per
  // settlement batch, and its generic per-element conversion was a tenth of the drain's CPU.
  return [
    plainArray(items, (w) => w.id), plainArray(items, (w) => w.attemptSeq), textArray(items, (w) => w.status),
    plainArray(items, (w) => w.dueAt), plainArray(items, (w) => w.attempts), plainArray(items, (w) => w.crashes),
    textArray(items, (w) => w.streakCode), plainArray(items, (w) => w.streak), textArray(items, (w) => w.errorCode),
    textArray(items, (w) => w.errorMessage), plainArray(items, (w) => w.finished), textArray(items, (w) => w.outcome),
  ];
}

/**
 * A PostgreSQL array literal of values that never need quoting: uuids, whole numbers and
 * booleans (`true`/`false`); null is NULL.
 */
export function plainArray<T>(items: readonly T[], pick: (item: T) => string | number | boolean | null): string {
  let out = '{';
  for (let i = 0; i < items.length; i++) {
    const v = pick(items[i]!);
    if (i > 0) out += ',';
    out += v === null ? 'NULL' : String(v);
  }
  return out + '}';
}

const NEEDS_ESCAPE = /["\\]/;

/** A PostgreSQL array literal of texts: each quoted, `"` and `\` escaped; null is NULL. */
export function textArray<T>(items: readonly T[], pick: (item: T) => string | null): string {
  let out = '{';
  for (let i = 0; i < items.length; i++) {
    const v = pick(items[i]!);
    if (i > 0) out += ',';
    out += v === null ? 'NULL' : NEEDS_ESCAPE.test(v) ? `"${v.replace(/["\\]/g, '\\$&')}"` : `"${v}"`;
  }
  return out + '}';
}

/** A tenant filter on `column` (a job's tenant_scope, qualified when the statement joins): omitted means any tenant, `null` only jobs without one. */
export function tenantFilter(tenantKey: string | null | undefined, params: unknown[], column = 'tenant_scope'): string {
  if (tenantKey === undefined) return 'TRUE';
  params.push(tenantKey);
  return `${column} = COALESCE('t:' || $${params.length}::text, 'n')`;
}

function where(filter: JobFilter, params: unknown[]): string {
  const parts = [tenantFilter(filter.tenantKey, params)];
  const add = (sql: string, value: unknown) => {
    params.push(value);
    parts.push(sql.replace('?', `$${params.length}`));
  };
  if (filter.status) add('status = ?', filter.status);
  if (filter.kind) add('kind = ?', filter.kind);
  if (filter.correlationId) add('correlation_id = ?', filter.correlationId);
  if (filter.createdAtOrAfter) add('created_at >= ?', filter.createdAtOrAfter.toISOString());
  if (filter.createdAfter) add('created_at > ?', filter.createdAfter.toISOString());
  if (filter.createdBefore) add('created_at < ?', filter.createdBefore.toISOString());
  if (filter.finishedAfter) add('finished_at > ?', filter.finishedAfter.toISOString());
  if (filter.finishedBefore) add('finished_at < ?', filter.finishedBefore.toISOString());
  return parts.join(' AND ');
}

function toView(r: any): JobView {
  return {
    id: r.id, kind: r.kind, lane: r.lane, status: r.status, payload: r.payload, tenantKey: r.tenant_key, dedupeKey: r.dedupe_key,
    correlationId: r.correlation_id, metadata: r.metadata, attempts: r.attempts, crashes: r.crashes,
    lastErrorCode: r.last_error_code, lastErrorMessage: r.last_error_message,
    dueAt: new Date(Number(r.due_ms)), createdAt: new Date(Number(r.created_ms)), finishedAt: r.finished_ms === null ? null : new Date(Number(r.finished_ms)),
  };
}

/** The PostgreSQL store's webhook endpoints, over the outbox's statements. */
function pgWebhookEndpoints(sql: OutboxSql): WebhookEndpointStore<Queryable> {
  const num = (v: unknown) => (v === null ? null : Number(v));
  return {
    async readEndpoint(db, id, now): Promise<StoredWebhookEndpoint | null> {
      const row = (await db.query(sql.webhookEndpointGet, [id, now])).rows[0];
      if (!row) return null;
      return { state: { state: row.state, failures: row.failures, openedAt: num(row.opened_ms), failingSince: num(row.failing_ms) }, version: String(row.version) };
    },
    async writeEndpoint(db, { id, state, reason, now, version }): Promise<boolean> {
      const { rows } = await db.query(sql.webhookEndpointSet, [id, state.state, state.failures, state.openedAt, state.failingSince, reason, now, version]);
      return rows.length > 0;
    },
  };
}

/** Job dependencies over the outbox's statements (sql/dependencies.ts). */
function pgDependencies(sql: OutboxSql): DependencyStore<Queryable, Queryable> {
  return {
    async parentStates(tx, refs) {
      if (refs.length === 0) return [];
      const { rows } = await tx.query(sql.parentStates, [refs.map((r) => r.id), refs.map((r) => r.tenantKey)]);
      const states = new Map(rows.map((r: { ord: string; status: JobStatus }) => [Number(r.ord), r.status]));
      return refs.map((_, i) => states.get(i + 1) ?? null);
    },
    async addEdges(tx, edges) {
      if (edges.length === 0) return;
      await tx.query(sql.addEdges, [edges.map((e) => e.parent), edges.map((e) => e.child)]);
    },
    async resolveWaiting(db, input) {
      return (await db.query(sql.resolveWaiting, [input.now, input.limit])).rows as DependentChange[];
    },
    async dependencies(db, id, limit) {
      const { rows } = await db.query(sql.dependencies, [id, limit]);
      const side = (name: string): DependencyView[] => rows.filter((r: { side: string }) => r.side === name).map((r: DependencyView) => ({ id: r.id, kind: r.kind, status: r.status }));
      return { parents: side('parent'), children: side('child') };
    },
    async parentTally(db, id) {
      const row = (await db.query(sql.parentTally, [id])).rows[0] as { total: number | null; dead: number; cancelled: number; by_status: ParentTally['byStatus'] } | undefined;
      return row && row.total !== null ? { total: row.total, dead: row.dead, cancelled: row.cancelled, byStatus: row.by_status } : null;
    },
    async openBatchMembers(db, id) {
      const { rows } = await db.query(sql.openBatchMembers, [id]);
      return rows.length === 0 ? null : (rows[0] as { ids: string[] }).ids;
    },
  };
}

/** Settled ids with the children their settle released (`[[id, kind, lane], …]` as JSON, or null). */
function withReleased(ids: string[], released: [string, string, string][] | null): SettledIds {
  const out: SettledIds = ids;
  if (released) out.released = released.map(([id, kind, lane]) => ({ id, kind, lane, status: 'pending' }));
  return out;
}
