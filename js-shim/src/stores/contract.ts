/**
 * The store contract: what an outbox needs from its storage. A store PERSISTS what the core
 * decided (statuses, due times, attempt counts, lease expiries all arrive as inputs) and
 * decides nothing itself. Every operation is batch-shaped (arrays in, arrays out), so a store
 * backed by a database can write a whole batch in one statement; settling one batch and
 * claiming the next is one operation for the same reason.
 *
 * Operations take the handle they run on as their first argument (`db`, or `tx` inside a
 * transaction): the caller keeps its connections, sessions and retries, and the store keeps
 * its SQL (or its maps). What a handle is depends on the store: a node-postgres client for
 * PostgreSQL, a D1 database or `ctx.storage.sql` for SQLite, nothing at all for memory.
 *
 * Times are epoch milliseconds on the caller's clock, never the database's.
 *
 * Changes to this file are additive only (new optional members), so stores written against it
 * keep compiling.
 * @module
 */
import type { HorizonHolder } from './pg/sql/horizon.js';
import type { BacklogCount, JobStatus } from '../types.js';

export type { BacklogCount, JobStatus };

/** A job as operators see it. Times are `Date`s. */
export interface JobView {
  id: string;
  kind: string;
  lane: string;
  status: JobStatus;
  payload: unknown;
  tenantKey: string | null;
  dedupeKey: string | null;
  correlationId: string | null;
  metadata: Record<string, unknown> | null;
  attempts: number;
  crashes: number;
  lastErrorCode: string | null;
  lastErrorMessage: string | null;
  dueAt: Date;
  createdAt: Date;
  finishedAt: Date | null;
}

/** Filters shared by `listJobs` and `countJobs`. */
export interface JobFilter {
  status?: JobStatus;
  kind?: string;
  tenantKey?: string | null;
  correlationId?: string;
  createdAtOrAfter?: Date;
  createdAfter?: Date;
  createdBefore?: Date;
  /** Finished (succeeded, dead or cancelled) strictly after this time. */
  finishedAfter?: Date;
  /** Finished strictly before this time. */
  finishedBefore?: Date;
}

/** One attempt of a job, as `listAttempts` returns it. */
export interface AttemptView {
  /** The attempt's number (every claim ever made, so it keeps counting across replays). */
  attempt: number;
  /**
   * `null` while it runs; then ok, retry, fail, cancel, timeout, crash, claim_late, released,
   * hook_failed, invalid_payload or defer (the core's settle outcomes, docs/ABI.md).
   */
  outcome: string | null;
  code: string | null;
  message?: string;
  startedAt: Date;
  finishedAt: Date | null;
  /** `finishedAt - startedAt`, or `null` while it runs. */
  durationMs: number | null;
}

/** One job to append (the caller has validated and serialised it; the core has set its due time). */
export interface AppendItem {
  /** A UUID the caller generated; the job's id unless its dedupe key is already held. */
  id: string;
  /** The payload as JSON text. */
  payloadJson: string;
  /** Scopes dedupe and operator actions; `null`: no tenant. */
  tenantKey: string | null;
  /** Unique within the tenant scope; `null`: no dedupe. */
  dedupeKey: string | null;
  correlationId: string | null;
  /** Metadata as JSON text (an object), or `null`. */
  metadataJson: string | null;
  /** When the job falls due (epoch ms), as the core decided. */
  dueAt: number;
  /** The job's own retry budget, or `null` for its kind's. */
  maxAttempts: number | null;
  /** Its priority (0-10, higher first) and, as the core decided, how far ahead of its due time claims take it (ms); absent: 0. */
  priority?: number;
  boostMs?: number;
  /** Present when the job has parents: how it is written, as the core decided from them (docs/ABI.md, pb_enqueue dependencies). */
  parents?: AppendParents;
}

/**
 * A job with parents as the core decided it from what they were at enqueue: `waiting` on
 * `waitingOn` unfinished ones, `pending` (every one done), or `cancelled` at birth under `code`;
 * and what a parent that ends dead or cancelled will do to it.
 */
export interface AppendParents {
  status: 'waiting' | 'pending' | 'cancelled';
  waitingOn: number;
  onParentFailure: 'cancel' | 'release';
  /** The last error code of a job cancelled at birth (`parent_failed`), else null. */
  code: string | null;
  /** Its parents at birth: all of them, and those already dead or cancelled (the store keeps the counts and adds each parent's end). */
  total: number;
  dead: number;
  cancelled: number;
  /** A batch's completion job (`outbox.batch`): stored so that `cancelBatch` recognises a batch. */
  batch?: boolean;
}

/** A list of jobs of ONE kind to append, in one write. */
export interface AppendInput {
  kind: string;
  lane: string;
  /** created_at / updated_at of the new rows. */
  now: number;
  /** The deploy version's timestamp the jobs carry (claims of older versions skip them), or `null`. */
  versionTs: number | null;
  items: readonly AppendItem[];
  /** The enqueue's trace context (a W3C traceparent; the engine passes at most 512 characters) every job of the list keeps; absent or `null`: none. */
  traceContext?: string | null;
}

/**
 * What append did with one item, in input order. `created`: inserted under the item's id (the
 * `same*` flags are then true). Otherwise the dedupe key was already held in the item's tenant
 * scope (by a committed job, or by an EARLIER item of the same list): `id`/`kind` name the
 * holder and the `same*` flags say, field by field, whether the holder holds the item's value.
 * The caller asks the core whether that is `exists` or a conflict, and which field it names.
 */
export interface AppendRow {
  id: string;
  kind: string;
  created: boolean;
  /** The payloads are equal as JSON values (key order and spacing do not count). */
  samePayload: boolean;
  /** The same own retry budget, `null` (the kind's) only equal to `null`. */
  sameMaxAttempts: boolean;
  /** The metadata are equal as JSON values, or both are none. */
  sameMetadata: boolean;
  /** The same correlation id, or both are none. */
  sameCorrelationId: boolean;
  /** The same stored priority (the item's `priority`, 0 for none). */
  samePriority: boolean;
  /** The same parent-failure effect (the item's `parents.onParentFailure`), or both have no parents. */
  sameOnParentFailure: boolean;
  /**
   * A row not created: the ids of the holder's parents as the store keeps them (its edges), in any
   * order; `null` when the holder was appended by the same call (the engine knows its parents
   * from the call) or the store cannot tell yet. The engine compares them with the item's.
   */
  holderParents?: readonly string[] | null;
}

/**
 * Append as statements the caller runs itself, in its own batch (D1 has no interactive
 * transactions: `db.batch([...appStatements, ...statements])` is its atomic unit). `read` turns
 * the results of `statements` (in order) into the rows `append` would have returned.
 */
export interface AppendBatch<S = unknown> {
  statements: S[];
  read(results: readonly unknown[]): AppendRow[];
}

/** Nudged jobs a claim is limited to. */
export interface ClaimTarget {
  id: string;
  kind: string;
}

/**
 * A claim: jobs of `lane` and `kinds` with status pending or retrying, due at or before `now`,
 * whose version timestamp (if any) is at or before `versionCutoff` (`null`: any), at most
 * `limit`, oldest due first (ties by id). With `targets`, only those jobs (id AND kind match),
 * in any order. Each claimed job becomes `running`, its `attempt_seq` goes up by one, its lease
 * ends at `now + leaseMs[i]` where `kinds[i]` is its kind, and an attempt record opens.
 * Two concurrent claims never take the same job.
 */
export interface ClaimInput {
  now: number;
  lane: string;
  kinds: readonly string[];
  /** Parallel to `kinds`: each kind's lease, ms. */
  leaseMs: readonly number[];
  limit: number;
  versionCutoff: number | null;
  targets?: readonly ClaimTarget[];
  /** Return each job's `trace_context` and `created_ms` too (the outbox has telemetry). */
  traced?: boolean;
  /** The flow limits of the claim's limited kinds, as the core's plan gives them; absent when none is. */
  limits?: ClaimLimits;
  /**
   * Fair share across tenants (due claims only); absent when the outbox has none. With `limits`,
   * the kinds without limits are picked fairly among themselves, every limited kind visits its
   * tenants (`limits.tenantVisits`) taking each one's first ⌈room / visited⌉ jobs of it before
   * its due order fills the room, and the answer lists every pick's first round first.
   */
  fair?: ClaimFairShare;
  /**
   * With a kind limited per tenant (`limits.tenantVisits`): the tenant scope the claim's visit of
   * that kind's tenants starts after (null: from the first), the last answer's `tenantAfter`.
   */
  tenantAfter?: string | null;
}

/**
 * A fair claim (wasm/include/postbox/fair_share.h): it visits up to `tenants` tenant scopes with
 * due jobs (`'n'` for jobs without a tenant, `'t:<key>'` otherwise) in scope order, starting
 * just after `after` (null: from the first) and wrapping round; each visited scope offers its
 * first ⌈limit / visited⌉ jobs in claim order (weighted: see `weights`), taken round by round, and the lane's claim order
 * fills the rest. The answer lists jobs in that order and says where the next claim starts.
 */
export interface ClaimFairShare {
  tenants: number;
  after: string | null;
  /**
   * Weights by scope (fair_share.h): a visited scope of weight w offers its share in proportion
   * to w among the visited scopes' (⌈limit × w / Σw⌉, at least one) and w jobs a round; a scope
   * not named weighs 1. Absent or null: all weigh 1.
   */
  weights?: Readonly<Record<string, number>> | null;
}

/**
 * Flow limits of a claim's kinds (parallel arrays): a job of `kinds[i]` is claimed only while
 * fewer than `concurrency[i]` attempts of its kind hold a lease (0: no such limit), and fewer
 * than `rateSlots[i]` of its kind started in the last `rateHoldMs[i]` ms (0: no rate), counted
 * across every consumer of the store.
 */
export interface ClaimLimits {
  kinds: readonly string[];
  concurrency: readonly number[];
  rateSlots: readonly number[];
  rateHoldMs: readonly number[];
  /**
   * At most this many attempts of `kinds[i]` per tenant scope hold a lease (0: no such limit).
   * A kind with one is claimed tenant by tenant: the claim visits up to `tenantVisits` scopes
   * with due jobs of it, in scope order after `ClaimInput.tenantAfter` and round, takes from
   * each no more than its free room, the scopes' first jobs first.
   */
  tenantConcurrency: readonly number[];
  /** How many tenant scopes a claim visits per kind limited per tenant (with fair share, per limited kind); absent when none is. */
  tenantVisits?: number;
}

/**
 * A limited kind whose due jobs a claim left for want of room; `retryAt` is when a rate slot
 * frees (null: not known). `tenant`: the kind had room, but its tenants with due jobs had none
 * (with a `retryAt`: their slots were just made, claim again then).
 */
export interface ThrottledKind {
  kind: string;
  retryAt: number | null;
  tenant?: boolean;
}

/** What a claim returns: the claimed jobs, and with limits the kinds it held back. */
export interface ClaimedJobs extends Array<ClaimedJob> {
  throttled?: ThrottledKind[];
  /** A fair claim's last visited scope when it visited all it might, else null: the next claim's `fair.after`. */
  fairAfter?: string | null;
  /** A claim with a kind limited per tenant: as `fairAfter`, for the next claim's `tenantAfter`. */
  tenantAfter?: string | null;
}

/**
 * A job as claimed (or found with an expired lease): what a handler and the core need.
 * Column names follow the job table.
 */
export interface ClaimedJob {
  id: string;
  kind: string;
  lane: string;
  /** The payload, parsed. */
  payload: unknown;
  tenant_key: string | null;
  correlation_id: string | null;
  metadata: Record<string, unknown> | null;
  /** Attempts charged since the last replay. */
  attempts: number;
  /** The claiming attempt: every claim ever made adds one. Settles and heartbeats are fenced by it. */
  attempt_seq: number;
  crashes: number;
  streak_code: string | null;
  streak: number;
  /** The job's own retry budget, or null for its kind's. */
  max_attempts: number | null;
  last_error_code: string | null;
  last_error_message: string | null;
  /** The lease's end, epoch ms (PostgreSQL returns a bigint as a decimal string). */
  lease_expires_ms: string | number;
  /** The trace context the job was enqueued with, or null: present when the claim was `traced` (a store may always return it). */
  trace_context?: string | null;
  /** When the job was enqueued (created_at), epoch ms (a decimal string from PostgreSQL): present when `traced`, as `trace_context`. */
  created_ms?: string | number;
  /** How its parents ended (`dependsOn`, or a batch's members): all of them, and those dead or cancelled; null (or absent, where a store keeps no dependencies) without parents. */
  parents_total?: number | null;
  parents_dead?: number | null;
  parents_cancelled?: number | null;
}

/** The core's decision for one finished attempt, to write (docs/ABI.md, `pb_settle`). */
export interface SettleWrite {
  id: string;
  /** The attempt being settled: the write applies only while the job is `running` under it. */
  attemptSeq: number;
  status: JobStatus;
  /** The new due time, or `null` to keep the old one. */
  dueAt: number | null;
  attempts: number;
  crashes: number;
  streakCode: string | null;
  streak: number;
  errorCode: string | null;
  errorMessage: string | null;
  /** Sets finished_at to `now` (else it is cleared). */
  finished: boolean;
  /**
   * The attempt's outcome, recorded on its attempt record. `crash` (a recovery) applies only
   * when the lease has run out at `now`: a heartbeat since the job was listed wins.
   */
  outcome: string;
}

/** A batch of settlements. */
export interface SettleInput {
  now: number;
  items: readonly SettleWrite[];
}

/** One lease extension, as the core decided it. */
export interface HeartbeatWrite {
  id: string;
  attemptSeq: number;
  /** The new lease end (epoch ms). */
  leaseExpiresAt: number;
}

/**
 * Lease extensions: each applies only while the job is running under `attemptSeq` with a lease
 * that has not run out at `now` (a recovery may be taking an expired one).
 */
export interface HeartbeatInput {
  now: number;
  beats: readonly HeartbeatWrite[];
}

/** Running jobs of `kinds` whose lease ended before `now`, earliest expiry first, at most `limit`. */
export interface ExpiredLeaseQuery {
  now: number;
  kinds: readonly string[];
  limit: number;
  /** List the expired leases of every kind NOT in `kinds` (the registered ones) instead. */
  unregistered?: boolean;
}

/** The claim's own predicate without its `due <= now`: when the next claimable job falls due. */
export interface NextDueQuery {
  lane: string;
  kinds: readonly string[];
  versionCutoff: number | null;
}

/** Jobs an operator acts on. `tenantKey` omitted: any tenant; `null`: only jobs without one. */
export interface OperateLockInput {
  ids: readonly string[];
  tenantKey?: string | null;
  /**
   * A replay: each job cancelled by its parent's failure (code `parent_failed`) comes with its
   * parents counted (`OperateTarget.parents`), for the core to decide whether it may rejoin them.
   */
  withParents?: boolean;
}

/** A job as an operator action sees it. */
export interface OperateTarget {
  id: string;
  kind: string;
  lane: string;
  status: JobStatus;
  /** Its last error code (where the lock read it: `withParents`). */
  code?: string | null;
  /**
   * With `withParents`, for a job cancelled with `parent_failed`: its parents failed (dead or
   * cancelled) and not among the action's ids, and those open (unfinished, or dead or cancelled
   * and among the action's ids, which the same replay reopens). Null otherwise.
   */
  parents?: { failed: number; open: number } | null;
}

/** The counters a fresh retry budget starts from. */
export interface RetryBudget {
  attempts: number;
  crashes: number;
  streak: number;
}

/** One operator decision of the core (docs/ABI.md, `pb_operate`), to write. */
export interface OperateWrite {
  id: string;
  status: JobStatus;
  /** New due time, or `null` to keep it. */
  dueAt: number | null;
  /**
   * A fresh retry budget (a replay: the core's numbers, docs/ABI.md `pb_operate`): `attempts`,
   * `crashes` and `streak` written as given, the streak's code cleared, `replayed_at` = now.
   * `null` keeps the counters.
   */
  budget: RetryBudget | null;
  /** The operator's reason: the closed attempt's code, and the job's last error code when `recordReason`. */
  reason: string | null;
  /** Closes the job's open attempt with this outcome (and `reason` as its code), or `null`. */
  closeAttempt: string | null;
  /** The job ends here: `finished_at` = now (else cleared). The core's. */
  finished: boolean;
  /** `reason` becomes the job's last error code. The core's. */
  recordReason: boolean;
  /** A job the core sends back to wait on its parents (`status` waiting): how many are open. */
  waitingOn?: number;
}

/** A batch of operator decisions. Lease cleared; the rest as each write says. */
export interface ApplyOperateInput {
  now: number;
  writes: readonly OperateWrite[];
}

/** Retention: succeeded jobs finished before `succeededBefore`, dead and cancelled ones before `deadBefore`; at most `limit`. */
export interface RetentionInput {
  succeededBefore: number;
  deadBefore: number;
  limit: number;
}

/** One of the store's indexes as the sweep's compaction sees it (docs/ABI.md, pb_sweep `compact`). */
export interface IndexFact {
  /** The index, unqualified (`job_pkey`): its schema is the outbox's. */
  name: string;
  /** `false` for an index an interrupted concurrent rebuild left behind. */
  valid: boolean;
  bytes: number;
  /** Its size when last recorded while nothing held the horizon; `null`: none yet, or just rebuilt. */
  baselineBytes: number | null;
  /** When the sweep last rebuilt it (epoch ms); `null`: never. */
  rebuiltAt: number | null;
}

/** One of the tables that churn as the server's planner sees it (docs/ABI.md, pb_sweep `compact`). */
export interface TableFact {
  /** The table, unqualified (`job`). */
  name: string;
  /** Its heap's pages now. */
  pages: number;
  /** Its live rows now (the server's running count, `pg_stat_get_live_tuples`). */
  rows: number;
  /** The rows its statistics were taken at (`pg_class.reltuples`, rounded; 0 if never analyzed). */
  statsRows: number;
  /** Whether it has been analyzed at all (`pg_class.reltuples >= 0`). */
  hasStatistics: boolean;
}

/** What the compact step decides on: the indexes and tables of the ones that churn, and the horizon's holders. */
export interface CompactionFacts {
  indexes: IndexFact[];
  tables: TableFact[];
  horizon: HorizonHolder[];
}

/**
 * Index compaction, for a store whose indexes keep the pages a held horizon made them grow
 * (PostgreSQL's B-trees); a store without it leaves the whole capability out.
 */
export interface IndexCompaction<Db> {
  compactionFacts(db: Db): Promise<CompactionFacts>;
  /**
   * Refreshes a table's planner statistics (ANALYZE), which also has every session plan its
   * statements on it afresh. `false`: not done, for want of the privilege (owner, or MAINTAIN).
   */
  analyzeTable(db: Db, name: string): Promise<boolean>;
  /** Records each index's size as its baseline, at `now`. */
  recordIndexBaselines(db: Db, now: number, indexes: readonly { name: string; bytes: number }[]): Promise<void>;
  /**
   * Records `rebuiltAt` (the try counts, whatever comes of it), rebuilds the index without
   * blocking writes, then clears its baseline.
   */
  rebuildIndex(db: Db, name: string, rebuiltAt: number): Promise<void>;
  /** Drops a leftover of an interrupted rebuild (without blocking writes). */
  dropIndex(db: Db, name: string): Promise<void>;
}

/** A webhook endpoint's breaker state as stored, with the version a write must name. */
export interface StoredWebhookEndpoint {
  state: { state: 'closed' | 'open' | 'half_open' | 'disabled'; failures: number; openedAt: number | null; failingSince: number | null };
  version: string;
}

/** The breaker state of webhook endpoints (postbox/webhooks), for a store that keeps it. */
export interface WebhookEndpointStore<Db> {
  /**
   * The endpoint's state, created closed by its first delivery; `null` when a concurrent first
   * delivery is creating it and its row is not yet visible (ask again).
   */
  readEndpoint(db: Db, id: string, now: number): Promise<StoredWebhookEndpoint | null>;
  /** Stores the core's decision over the version it was made from; `false` when another delivery wrote first. */
  writeEndpoint(db: Db, input: { id: string; state: StoredWebhookEndpoint['state']; reason: string | null; now: number; version: string }): Promise<boolean>;
}

/**
 * Due (pending/retrying, due at or before `now`) jobs of `lane` and `kinds` to hand to the lane's
 * queue, oldest due first, at most `limit`, skipping those nudged at or after `nudgedBefore`.
 */
export interface HandoffQuery {
  now: number;
  lane: string;
  kinds: readonly string[];
  limit: number;
  nudgedBefore: number;
}

/** A job reference with its lane. */
export interface JobLaneRef {
  id: string;
  kind: string;
  lane: string;
}

/** A page of `listJobs`: pass `nextCursor` back as `cursor`, with the same filter. */
export interface JobPage {
  jobs: JobView[];
  nextCursor: string | null;
}

/** `listJobs`' query: a filter, a page size (1..1000), an order by (created, id), a cursor. */
export interface ListJobsQuery extends JobFilter {
  limit: number;
  order?: 'asc' | 'desc';
  cursor?: string;
}

/** What `settle` returns: the ids written, and the waiting children those settlements released (now due). */
export interface SettledIds extends Array<string> {
  released?: DependentChange[];
}

/**
 * One dependency, as the enqueue links it. `parentEnded`: the parent had ended when the child
 * was written, so the child counted it at birth (a store that marks each counted end, as the
 * SQLite stores do, marks this one at once, so no later settle of the parent counts it again).
 */
export interface DependencyEdge {
  child: string;
  parent: string;
  parentEnded: boolean;
}

/** A job whose status a dependency changed (released to `pending`, or `cancelled`). */
export interface DependentChange {
  id: string;
  kind: string;
  lane: string;
  status: JobStatus;
}

/** One side of a job's dependencies, as the job page shows it; a parent retention removed has `kind` and `status` null. */
export interface DependencyView {
  id: string;
  kind: string | null;
  status: JobStatus | null;
}

/**
 * Job dependencies (wasm/include/postbox/dependencies.h), for a store that keeps them. A job
 * with parents is appended as the core decided from their states (`AppendItem.parents`); a
 * waiting child counts its unfinished parents; `settle` and `applyOperate` apply a finished parent's
 * effect on its waiting children in the same write (a success releases; a failure does what the
 * child's `onParentFailure` says), `applyOperate` revives the children a replayed job's failure
 * cancelled, and deleting a job deletes its edges.
 */
export interface DependencyStore<Db, Tx> {
  /** Each named parent's status as `tx` sees it, in the scope of the tenant naming it (`null`: no such job there), in input order. */
  parentStates(tx: Tx, refs: readonly { id: string; tenantKey: string | null }[]): Promise<(JobStatus | null)[]>;
  /** Records the edges of jobs just appended with parents (a child's count and status were written by `append`). */
  addEdges(tx: Tx, edges: readonly DependencyEdge[]): Promise<void>;
  /**
   * The sweep's check: of the waiting jobs whose parents have all finished, the `limit` updated
   * longest ago get their parents' effect (a settle cannot see a child enqueued while it ran).
   * Jobs still waiting on open parents are passed over, never counted against `limit`.
   */
  resolveWaiting(db: Db, input: { now: number; limit: number }): Promise<DependentChange[]>;
  /** A job's parents and children, at most `limit` of each (by id). */
  dependencies(db: Db, id: string, limit: number): Promise<{ parents: DependencyView[]; children: DependencyView[] }>;
  /** How a job's parents stand (a batch's members, for its completion job): `null` when the job has none or is not found. */
  parentTally(db: Db, id: string): Promise<ParentTally | null>;
  /**
   * A batch's members that have not finished, by its id (its completion job's); `null` when no
   * batch has that id (no job, or a job that is not a batch's completion: any other child).
   */
  openBatchMembers(db: Db, id: string): Promise<string[] | null>;
}

/**
 * How a job's parents stand: the counts kept with it (all parents, and how many ended dead or
 * cancelled as each was counted), and of those still stored, how many are in each status (the
 * rest retention has deleted).
 */
export interface ParentTally {
  total: number;
  dead: number;
  cancelled: number;
  byStatus: Partial<Record<JobStatus, number>>;
}

/**
 * An outbox's storage. `Db` is the handle operations run on; `Tx` the handle inside
 * `transaction` (the same type for most stores).
 */
export interface OutboxStore<Db = unknown, Tx = Db> {
  /** The outbox's name; `null` for the default outbox. Stores with different names never see each other's jobs. */
  readonly name: string | null;

  /**
   * Runs `fn` in one transaction of the store on `db`: every `append` (and operator write) made
   * with its `tx` commits together with `fn`'s own writes, or nothing does. The transaction is
   * released on both paths; if `fn` throws, that error is what rejects, even when the rollback
   * or release fails too.
   */
  transaction<T>(db: Db, fn: (tx: Tx) => Promise<T>): Promise<T>;

  /** Appends a list of jobs of one kind in one write. Rows come back in input order. */
  append(tx: Tx, input: AppendInput): Promise<AppendRow[]>;

  /** Append as statements for the caller's own batch; stores without interactive transactions provide it. */
  appendStatements?(db: Db, input: AppendInput): AppendBatch;

  /** Claims due (or targeted) jobs with a lease; see {@link ClaimInput}. */
  claim(db: Db, input: ClaimInput): Promise<ClaimedJobs>;

  /**
   * Writes settlements; returns the ids actually written (a stale or duplicate one is left out
   * and changes nothing), and on a store with dependencies the waiting children they released.
   */
  settle(db: Db, input: SettleInput): Promise<SettledIds>;

  /**
   * `settle` then `claim` as one operation (one statement on PostgreSQL). The claim never takes
   * a job this settle touches. Both halves carry the same `now` (the PostgreSQL store refuses
   * two with `invalid_input`: its statement has one).
   */
  settleThenClaim(db: Db, settle: SettleInput, claim: ClaimInput): Promise<{ settled: SettledIds; claimed: ClaimedJobs }>;

  /** Extends leases; returns the ids whose lease was written. */
  heartbeat(db: Db, input: HeartbeatInput): Promise<string[]>;

  /** Running jobs whose lease ran out, for recovery (their settle, outcome `crash`, is fenced again). */
  listExpiredLeases(db: Db, query: ExpiredLeaseQuery): Promise<ClaimedJob[]>;

  /** The earliest due time among jobs a claim could take (ignoring `now`); `null` when none waits. */
  nextDue(db: Db, query: NextDueQuery): Promise<number | null>;

  /** Finds (and, where the store can, locks until `tx` ends) the jobs an operator acts on; unknown or out-of-scope ids are left out. */
  lockForOperate(tx: Tx, input: OperateLockInput): Promise<OperateTarget[]>;

  /** Writes operator decisions (made by the core on `lockForOperate`'s rows); returns the jobs written. */
  applyOperate(tx: Tx, input: ApplyOperateInput): Promise<OperateTarget[]>;

  /** Deletes every job (and attempt record) of one tenant; returns how many jobs. */
  eraseTenant(tx: Tx, tenantKey: string): Promise<number>;

  /** Retention; returns how many jobs were deleted. */
  deleteFinished(db: Db, input: RetentionInput): Promise<number>;

  /** Job dependencies; absent where the store keeps none (an enqueue with `dependsOn` is then refused with `unsupported`). */
  readonly dependencies?: DependencyStore<Db, Tx>;

  /** Index compaction after a held horizon; absent where the store's indexes need none. */
  readonly compaction?: IndexCompaction<Db>;

  /** Due jobs to hand to their lane's queue; see {@link HandoffQuery}. */
  listDueForHandoff(db: Db, query: HandoffQuery): Promise<JobLaneRef[]>;

  /**
   * Pending and retrying jobs due before `dueBefore` whose kind is not in `kinds` (the kinds the
   * outbox registers), counted per kind, sorted by kind: no claim of this outbox takes them.
   */
  countUnregistered(db: Db, query: { dueBefore: number; kinds: readonly string[] }): Promise<{ kind: string; count: number }[]>;

  /** Pending, retrying and running jobs, counted per kind, lane and status (any order; none: no row). */
  countActive(db: Db): Promise<BacklogCount[]>;

  /** Each named schedule's latest handled occurrence (epoch ms); a schedule never recorded is absent. */
  lastScheduleRuns(db: Db, names: readonly string[]): Promise<Map<string, number>>;

  /** Records `at` as the schedule's latest handled occurrence; it never moves back (two ticks at once leave the later). */
  recordScheduleRun(db: Db, input: { name: string; at: number; now: number }): Promise<void>;

  /**
   * Whether user code can run inside the store's transactions on a SQL handle: a handler's
   * `ok({ commit })` and `onTransition` (in its settlement's transaction) and `ctx.db`. True for
   * PostgreSQL; absent for a store of D1 batches or a Durable Object's synchronous storage
   * transactions, whose outboxes refuse those hooks when they are made.
   */
  readonly runsUserCode?: boolean;

  /** Webhook endpoints' breaker state, written in the delivering job's transaction; absent where the store keeps none. */
  readonly webhookEndpoints?: WebhookEndpointStore<Tx>;

  /** Records when jobs were last nudged (the hand-off cooldown reads it). */
  recordNudges(db: Db, input: { now: number; ids: readonly string[] }): Promise<void>;

  /** One job, or `null` (also when it belongs to another tenant than `tenantKey`, if given). */
  getJob(db: Db, query: { id: string; tenantKey?: string | null }): Promise<JobView | null>;

  /** A page of jobs matching the filter, ordered by (created, id). */
  listJobs(db: Db, query: ListJobsQuery): Promise<JobPage>;

  /** Counts by status of the jobs matching the filter (every status present, zero or more). */
  countJobs(db: Db, filter: JobFilter): Promise<Record<JobStatus, number>>;

  /** Every attempt record of one job, in order. */
  listAttempts(db: Db, query: { jobId: string }): Promise<AttemptView[]>;
}
