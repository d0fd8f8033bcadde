/**
 * The store conformance suite: scenarios any {@link OutboxStore} must pass, runner-agnostic.
 * Each scenario throws on failure; wire them into your test runner of choice. Wherever a value
 * is a decision (a due time, a retry's backoff, an operator action's effect), the scenario asks
 * the core for it through the shim, exactly as the runtime does, and checks the store kept it.
 * @module
 */
import { getCore } from '../core/core.js';
import { dedupeItem } from '../engine/dedupe.js';
import type { PostboxError } from '../errors.js';
import type { SettleDecision } from '../engine/settle.js';
import type { AppendRow, ClaimedJob, ClaimInput, JobStatus, JobView, OutboxStore, RetryBudget, SettleWrite } from '../stores/contract.js';
import type { CorePolicy } from '../types.js';

/** One scenario: `run` resolves when the store conforms, and rejects saying how it does not. */
export interface StoreScenario {
  name: string;
  run(): Promise<void>;
}

/** What the suite needs to drive a store. */
export interface OutboxStoreContractOptions<Db, Tx> {
  /**
   * The store of the outbox `name` (`null`: the default outbox). Within one scenario every store
   * made must share one database, so named outboxes can be checked for isolation.
   */
  makeStore(name: string | null): OutboxStore<Db, Tx> | Promise<OutboxStore<Db, Tx>>;
  /** The handle the store's operations (and `transaction`) run on. */
  db(): Db | Promise<Db>;
  /** Empties every outbox the scenarios use (the default and `otherName`); runs before each scenario. */
  reset?(): Promise<void>;
  /** The second outbox of the isolation scenario. Default `contract_b`. */
  otherName?: string;
  /**
   * Runs the statements of `store.appendStatements` as one batch and resolves to their results,
   * in order (for D1: `db.batch(statements)`). Given, the suite also checks the batched append.
   */
  runBatch?(db: Db, statements: unknown[]): Promise<unknown[]>;
}

/** The epoch every scenario starts at: far from the real clock, so a store that reads its own clock fails. */
const T0 = Date.UTC(2031, 0, 1);

const KIND = 'contract.mail';
const OTHER_KIND = 'contract.bill';

/** Deep equality of plain JSON-like values (Dates by time). */
function same(a: unknown, b: unknown): boolean {
  if (a instanceof Date && b instanceof Date) return a.getTime() === b.getTime();
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null || Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => same((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

const show = (v: unknown) => JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? String(x) : x));

function ok(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(`store contract: ${message}`);
}

function eq(actual: unknown, expected: unknown, message: string): void {
  if (!same(actual, expected)) throw new Error(`store contract: ${message}: expected ${show(expected)}, got ${show(actual)}`);
}

async function rejects(promise: Promise<unknown>, check: (error: unknown) => boolean, message: string): Promise<void> {
  try {
    await promise;
  } catch (error) {
    ok(check(error), `${message}: wrong error ${String(error)}`);
    return;
  }
  throw new Error(`store contract: ${message}: did not reject`);
}

/** A scenario's world: a store, its handle, a clock of its own and the core's decisions. */
class Driver<Db, Tx> {
  now = T0;
  readonly policies: CorePolicy[];

  constructor(
    readonly store: OutboxStore<Db, Tx>,
    readonly db: Db,
    /** Set: appends go through `appendStatements` and this batch runner instead of `append`. */
    readonly runBatch: ((db: Db, statements: unknown[]) => Promise<unknown[]>) | null = null,
  ) {
    const core = getCore();
    this.policies = [
      core.call<CorePolicy>('policy', { kind: KIND, timeoutMs: 10_000, retry: { maxAttempts: 3, backoff: { baseMs: 1000, maxMs: 60_000 } }, warnAtStreak: null }),
      core.call<CorePolicy>('policy', { kind: OTHER_KIND, timeoutMs: 20_000, lane: 'bulk', warnAtStreak: null }),
    ];
  }

  policy(kind: string): CorePolicy {
    return this.policies.find((p) => p.kind === kind)!;
  }

  /**
   * Appends jobs of one kind as `enqueueMany` does: the core sets each due time, the store
   * writes, the core judges each held dedupe key. Returns the outcome per item.
   */
  async enqueue(
    tx: Tx | Db,
    items: { payload: unknown; dedupeKey?: string; tenantKey?: string | null; delayMs?: number; correlationId?: string; metadata?: object; maxAttempts?: number }[],
    kind = KIND,
    store: OutboxStore<Db, Tx> = this.store,
  ): Promise<(AppendRow & { verdict: string })[]> {
    const core = getCore();
    const payloads = items.map((i) => JSON.stringify(i.payload));
    const decided = core.call<{ results: { ok: boolean; dueAt: number }[] }>('enqueue', {
      op: 'batch', now: this.now, maxPayloadBytes: 262_144, maxQueueDelayMs: 86_400_000, hasQueue: false,
      items: items.map((i, n) => ({ delayMs: i.delayMs ?? 0, payloadBytes: payloads[n]!.length })),
    }).results;
    ok(decided.every((d) => d.ok), 'the core refused a contract item');
    const input = {
      kind, lane: this.policy(kind).lane, now: this.now, versionTs: null,
      items: items.map((i, n) => ({
        id: crypto.randomUUID(), payloadJson: payloads[n]!, tenantKey: i.tenantKey ?? null, dedupeKey: i.dedupeKey ?? null,
        correlationId: i.correlationId ?? null, metadataJson: i.metadata === undefined ? null : JSON.stringify(i.metadata), dueAt: decided[n]!.dueAt,
        maxAttempts: i.maxAttempts ?? null,
      })),
    };
    let rows: AppendRow[];
    if (this.runBatch) {
      ok(store.appendStatements, 'runBatch is given but the store has no appendStatements');
      const batch = store.appendStatements(tx as Db, input);
      rows = batch.read(await this.runBatch(tx as Db, batch.statements));
    } else {
      rows = await store.append(tx as Tx, input);
    }
    eq(rows.length, items.length, 'append returns one row per item');
    const held = rows.filter((r) => !r.created);
    const verdicts = held.length === 0 ? [] : core.call<{ results: { status: string; reason?: string }[] }>('enqueue', {
      op: 'dedupe', items: held.map((r) => dedupeItem(r, kind)),
    }).results;
    let h = 0;
    return rows.map((r) => ({ ...r, verdict: r.created ? 'created' : ((v) => (v.reason ? `${v.status}:${v.reason}` : v.status))(verdicts[h++]!) }));
  }

  async one(opts: { payload?: unknown; tenantKey?: string | null; delayMs?: number; kind?: string } = {}): Promise<string> {
    const [row] = await this.enqueue(this.db, [{ payload: opts.payload ?? { to: 'a@example.com' }, tenantKey: opts.tenantKey ?? null, delayMs: opts.delayMs ?? 0 }], opts.kind);
    return row!.id;
  }

  /** A claim of the default lane's kind, as the runtime would build it. */
  claimInput(limit = 10, extra: Partial<ClaimInput> = {}): ClaimInput {
    return { now: this.now, lane: 'default', kinds: [KIND], leaseMs: [this.policy(KIND).leaseMs], limit, versionCutoff: null, ...extra };
  }

  claim(limit = 10, extra: Partial<ClaimInput> = {}): Promise<ClaimedJob[]> {
    return this.store.claim(this.db, this.claimInput(limit, extra));
  }

  /** The core's decision for a claimed job's outcome. */
  decide(job: ClaimedJob, outcome: Record<string, unknown>, attemptSeq = job.attempt_seq): SettleWrite & { decision: SettleDecision } {
    const out = getCore().call<{ results: (SettleDecision | { error: { message: string } })[] }>('settle', {
      policies: [this.policy(job.kind)],
      batch: [{
        now: this.now, seed: 7, policy: 0, outcome,
        job: { status: 'running', attempts: job.attempts, crashes: job.crashes, streakCode: job.streak_code, streak: job.streak, maxAttempts: job.max_attempts, errorCode: job.last_error_code, errorMessage: job.last_error_message },
      }],
    }).results[0]!;
    if ('error' in out) throw new Error(`store contract: the core refused a settlement: ${out.error.message}`);
    return {
      id: job.id, attemptSeq, status: out.status as JobStatus, dueAt: out.dueAt, attempts: out.attempts, crashes: out.crashes, streakCode: out.streakCode,
      streak: out.streak, errorCode: out.errorCode, errorMessage: out.errorMessage, finished: out.finished, outcome: out.attemptOutcome, decision: out,
    };
  }

  async settle(job: ClaimedJob, outcome: Record<string, unknown>, attemptSeq = job.attempt_seq) {
    const write = this.decide(job, outcome, attemptSeq);
    const settled = await this.store.settle(this.db, { now: this.now, items: [write] });
    return { write, settled: settled.includes(job.id) };
  }

  async job(id: string): Promise<JobView> {
    const view = await this.store.getJob(this.db, { id });
    ok(view, `job ${id} is missing`);
    return view;
  }

  /** Asks the core for an operator action on each job and writes the decisions in one transaction. */
  async operate(action: 'cancel' | 'replay' | 'retryNow', ids: string[], tenantKey?: string | null, reason: string | null = null) {
    return this.store.transaction(this.db, async (tx) => {
      const rows = await this.store.lockForOperate(tx, tenantKey === undefined ? { ids } : { ids, tenantKey });
      const writes = rows.flatMap((r) => {
        const d = getCore().call<{ ok: boolean; status: JobStatus; dueAt: number | null; budget: RetryBudget | null; closeAttempt: string | null; finished: boolean; recordReason: boolean }>('operate', { action, now: this.now, job: { status: r.status } });
        return d.ok ? [{ id: r.id, status: d.status, dueAt: d.dueAt, budget: d.budget, reason, closeAttempt: d.closeAttempt, finished: d.finished, recordReason: d.recordReason }] : [];
      });
      const written = await this.store.applyOperate(tx, { now: this.now, writes });
      return { found: rows.map((r) => r.id).sort(), written: written.map((r) => r.id).sort() };
    });
  }
}

/**
 * The conformance scenarios for a store. Example with `node:test`:
 * ```ts
 * for (const s of outboxStoreContract({ makeStore: (name) => new MemoryOutboxStore({ name, database }), db: () => undefined }))
 *   test(s.name, s.run);
 * ```
 */
export function outboxStoreContract<Db, Tx = Db>(options: OutboxStoreContractOptions<Db, Tx>): StoreScenario[] {
  const otherName = options.otherName ?? 'contract_b';
  const scenario = (name: string, body: (d: Driver<Db, Tx>) => Promise<void>, batched = false): StoreScenario => ({
    name,
    async run() {
      await options.reset?.();
      const store = await options.makeStore(null);
      await body(new Driver(store, await options.db(), batched ? options.runBatch! : null));
    },
  });

  const batchedAppend = !options.runBatch ? [] : [
    scenario('append as batched statements: the same rows as append', async (d) => {
      const list = await d.enqueue(d.db, [
        { payload: { n: 1 }, dedupeKey: 'b1' }, { payload: { n: 1 }, dedupeKey: 'b1' }, { payload: { n: 2 }, dedupeKey: 'b1' }, { payload: { n: 3 }, tenantKey: 't' },
      ]);
      eq(list.map((r) => r.verdict), ['created', 'exists', 'dedupe_conflict:payload', 'created'], 'within one batch the first item holds the key');
      const [again] = await d.enqueue(d.db, [{ payload: { n: 1 }, dedupeKey: 'b1' }]);
      eq([again!.verdict, again!.id], ['exists', list[0]!.id], 'a later batch finds the committed holder');
      const view = await d.job(list[3]!.id);
      eq([view.status, view.tenantKey, view.payload], ['pending', 't', { n: 3 }], 'the batched job is stored');
      eq((await d.store.countJobs(d.db, {})).pending, 2, 'two jobs were written');
    }, true),
  ];

  return [
    ...batchedAppend,
    scenario('append is idempotent per dedupe key and tenant, and reports conflicts', async (d) => {
      const [first] = await d.enqueue(d.db, [{ payload: { a: 1, b: [1, 2] }, dedupeKey: 'k1' }]);
      eq(first!.verdict, 'created', 'a new key is created');
      const [again] = await d.enqueue(d.db, [{ payload: { b: [1, 2], a: 1 }, dedupeKey: 'k1' }]);
      eq([again!.verdict, again!.id], ['exists', first!.id], 'the same key and payload (keys reordered) is the job that exists');
      const [other] = await d.enqueue(d.db, [{ payload: { a: 2 }, dedupeKey: 'k1' }]);
      eq([other!.verdict, other!.id], ['dedupe_conflict:payload', first!.id], 'the same key with another payload is a conflict');
      const [kind] = await d.enqueue(d.db, [{ payload: { a: 1, b: [1, 2] }, dedupeKey: 'k1' }], OTHER_KIND);
      eq(kind!.verdict, 'dedupe_conflict:kind', 'the same key held by another kind is a conflict');
      const [tenant] = await d.enqueue(d.db, [{ payload: { a: 1 }, dedupeKey: 'k1', tenantKey: 't1' }]);
      eq(tenant!.verdict, 'created', 'the key is unique per tenant scope');
      const list = await d.enqueue(d.db, [
        { payload: { n: 1 }, dedupeKey: 'k2' }, { payload: { n: 1 }, dedupeKey: 'k2' }, { payload: { n: 2 }, dedupeKey: 'k2' }, { payload: { n: 3 } },
      ]);
      eq(list.map((r) => r.verdict), ['created', 'exists', 'dedupe_conflict:payload', 'created'], 'within one list the first item holds the key');
      eq([list[1]!.id, list[2]!.id], [list[0]!.id, list[0]!.id], 'later items name the first');
      eq((await d.store.countJobs(d.db, {})).pending, 4, 'four jobs were written');
    }),

    scenario('append compares a held key\'s maxAttempts, metadata and correlationId; a repeat differing in one is a conflict naming it', async (d) => {
      const base = { payload: { a: 1 }, dedupeKey: 'f1', maxAttempts: 4, metadata: { m: 1, n: [1, 2] }, correlationId: 'c1' };
      const [first] = await d.enqueue(d.db, [base]);
      eq(first!.verdict, 'created', 'a new key is created');
      const [again] = await d.enqueue(d.db, [{ ...base, metadata: { n: [1, 2], m: 1 } }]);
      eq([again!.verdict, again!.id], ['exists', first!.id], 'the same fields (metadata keys reordered) are the job that exists');
      const repeats = await d.enqueue(d.db, [
        { ...base, maxAttempts: 5 }, { ...base, maxAttempts: undefined }, { ...base, metadata: { m: 2, n: [1, 2] } }, { ...base, metadata: undefined },
        { ...base, correlationId: 'c2' }, { ...base, correlationId: undefined },
      ]);
      eq(repeats.map((r) => [r.verdict, r.id]), [
        ['dedupe_conflict:maxAttempts', first!.id], ['dedupe_conflict:maxAttempts', first!.id], ['dedupe_conflict:metadata', first!.id],
        ['dedupe_conflict:metadata', first!.id], ['dedupe_conflict:correlationId', first!.id], ['dedupe_conflict:correlationId', first!.id],
      ], 'against a committed holder');
      const list = await d.enqueue(d.db, [
        { ...base, dedupeKey: 'f2' }, { ...base, dedupeKey: 'f2', metadata: { n: [1, 2], m: 1 } }, { ...base, dedupeKey: 'f2', maxAttempts: 3 },
        { ...base, dedupeKey: 'f2', metadata: {} }, { ...base, dedupeKey: 'f2', correlationId: undefined },
      ]);
      eq(list.map((r) => r.verdict), ['created', 'exists', 'dedupe_conflict:maxAttempts', 'dedupe_conflict:metadata', 'dedupe_conflict:correlationId'],
        'against an earlier item of the same list');
      eq((await d.store.countJobs(d.db, {})).pending, 2, 'two jobs were written');
    }),

    scenario('transaction: the append commits with the callback, or neither happens', async (d) => {
      const committed = await d.store.transaction(d.db, async (tx) => (await d.enqueue(tx, [{ payload: { n: 1 } }]))[0]!.id);
      eq((await d.job(committed)).status, 'pending', 'a committed append is there');
      const boom = new Error('the callback failed');
      let rolledBack = '';
      await rejects(
        d.store.transaction(d.db, async (tx) => {
          rolledBack = (await d.enqueue(tx, [{ payload: { n: 2 }, dedupeKey: 'rolled' }]))[0]!.id;
          throw boom;
        }),
        (e) => e === boom,
        'the callback\'s own error rejects the transaction',
      );
      eq(await d.store.getJob(d.db, { id: rolledBack }), null, 'a rolled-back append left nothing');
      const [again] = await d.enqueue(d.db, [{ payload: { n: 3 }, dedupeKey: 'rolled' }]);
      eq(again!.verdict, 'created', 'a rolled-back dedupe key is free again');
      // The store's handle still works after a rollback: resources were released.
      eq((await d.store.countJobs(d.db, {})).pending, 2, 'two jobs committed');
    }),

    scenario('claim takes due jobs oldest due first, within lane, kinds and limit', async (d) => {
      const late = await d.one({ delayMs: 3000 });
      const early = await d.one({ delayMs: 1000 });
      const middle = await d.one({ delayMs: 2000 });
      const future = await d.one({ delayMs: 60_000 });
      await d.one({ kind: OTHER_KIND });
      eq(await d.store.nextDue(d.db, { lane: 'default', kinds: [KIND], versionCutoff: null }), T0 + 1000, 'nextDue is the earliest due time');
      eq((await d.claim(10)).length, 0, 'nothing is due yet');
      d.now = T0 + 5000;
      const first = await d.claim(2);
      eq(first.map((j) => j.id), [early, middle], 'the two oldest due come first, in order');
      ok(first.every((j) => j.attempt_seq === 1 && Number(j.lease_expires_ms) === d.now + d.policy(KIND).leaseMs), 'each claim opens attempt 1 with the lease asked for');
      eq((await d.claim(10)).map((j) => j.id), [late], 'then the rest that is due; never a running one, a future one or another lane\'s');
      eq((await d.job(future)).status, 'pending', 'the future job waits');
      // Claims racing each other never share a job.
      d.now = T0 + 120_000;
      for (let i = 0; i < 6; i++) await d.one();
      const raced = await Promise.all([d.claim(4), d.claim(4), d.claim(4)]);
      const all = raced.flat().map((j) => j.id);
      eq([all.length, new Set(all).size], [7, 7], 'concurrent claims take every due job once');
      const targeted = await d.claim(10, { lane: 'bulk', kinds: [OTHER_KIND], leaseMs: [d.policy(OTHER_KIND).leaseMs], targets: [{ id: future, kind: KIND }] });
      eq(targeted.length, 0, 'a target of another kind or lane is not claimed');
    }),

    scenario('leases fence settlements: a stale attempt changes nothing', async (d) => {
      const id = await d.one();
      const [job] = await d.claim();
      ok(job, 'claimed');
      eq((await d.settle(job, { type: 'ok' }, job.attempt_seq + 1)).settled, false, 'a settle of another attempt is refused');
      eq((await d.settle(job, { type: 'crash' })).settled, false, 'a crash before the lease ran out is refused');
      eq((await d.job(id)).status, 'running', 'the job still runs');
      d.now = Number(job.lease_expires_ms) + 1;
      const expired = await d.store.listExpiredLeases(d.db, { now: d.now, kinds: [KIND], limit: 10 });
      eq(expired.map((j) => [j.id, j.attempt_seq]), [[id, 1]], 'the expired lease is listed with its attempt');
      eq((await d.store.listExpiredLeases(d.db, { now: d.now, kinds: [KIND], limit: 10, unregistered: true })).length, 0, 'not among the unregistered kinds\' leases');
      eq((await d.store.listExpiredLeases(d.db, { now: d.now, kinds: ['other.kind'], limit: 10, unregistered: true })).map((j) => j.id), [id], 'a deploy without its kind lists it as unregistered');
      eq((await d.store.listExpiredLeases(d.db, { now: d.now, kinds: [], limit: 10, unregistered: true })).map((j) => j.id), [id], 'as does one with no kinds at all');
      const recovered = await d.settle(expired[0]!, { type: 'crash' });
      eq(recovered.settled, true, 'recovery settles it as a crash');
      eq([(await d.job(id)).status, (await d.job(id)).crashes], [recovered.write.status, 1], 'as the core decided');
      d.now = recovered.write.dueAt!;
      const [second] = await d.claim();
      eq(second?.attempt_seq, 2, 'the next claim is attempt 2');
      eq((await d.settle(job, { type: 'ok' })).settled, false, 'attempt 1 finishing late changes nothing');
      eq((await d.job(id)).status, 'running', 'attempt 2 still owns the job');
      eq((await d.settle(second!, { type: 'ok' })).settled, true, 'attempt 2 settles');
      eq((await d.settle(second!, { type: 'ok' })).settled, false, 'a duplicate settle changes nothing');
    }),

    scenario('heartbeat extends a live lease; recovery waits for it', async (d) => {
      const id = await d.one();
      const [job] = await d.claim();
      const lease = Number(job!.lease_expires_ms);
      d.now += 1000;
      const extended = lease + 60_000;
      eq(await d.store.heartbeat(d.db, { now: d.now, beats: [{ id, attemptSeq: 2, leaseExpiresAt: extended }] }), [], 'a beat of another attempt is refused');
      eq(await d.store.heartbeat(d.db, { now: d.now, beats: [{ id, attemptSeq: 1, leaseExpiresAt: extended }] }), [id], 'the owner\'s beat is written');
      d.now = lease + 1;
      eq((await d.store.listExpiredLeases(d.db, { now: d.now, kinds: [KIND], limit: 10 })).length, 0, 'the extended lease has not expired');
      eq((await d.settle(job!, { type: 'crash' })).settled, false, 'a recovery listed before the beat loses to it');
      d.now = extended + 1;
      eq(await d.store.heartbeat(d.db, { now: d.now, beats: [{ id, attemptSeq: 1, leaseExpiresAt: d.now + 60_000 }] }), [], 'an expired lease cannot be extended');
      const [expired] = await d.store.listExpiredLeases(d.db, { now: d.now, kinds: [KIND], limit: 10 });
      eq(expired?.id, id, 'then it is listed');
      eq((await d.settle(expired!, { type: 'crash' })).settled, true, 'and recovered');
      eq((await d.store.listAttempts(d.db, { jobId: id })).map((a) => a.outcome), ['crash'], 'its attempt closed as a crash');
      // Beats are batch-shaped: several attempts in one call, each fenced on its own.
      const x = await d.one();
      const y = await d.one();
      const claimed = await d.claim(2);
      eq(claimed.map((j) => j.id).sort(), [x, y].sort(), 'two claimed');
      const beats = claimed.map((j) => ({ id: j.id, attemptSeq: j.attempt_seq, leaseExpiresAt: Number(j.lease_expires_ms) + 5000 }));
      beats.push({ id: x, attemptSeq: 99, leaseExpiresAt: d.now + 1 });
      eq((await d.store.heartbeat(d.db, { now: d.now, beats })).sort(), [x, y].sort(), 'both owners\' beats are written, the stray one is not');
      const expiries = (await d.store.listExpiredLeases(d.db, { now: d.now + 10 * 86_400_000, kinds: [KIND], limit: 10 })).map((j) => [j.id, Number(j.lease_expires_ms)]);
      eq(expiries.sort(), beats.slice(0, 2).map((b) => [b.id, b.leaseExpiresAt]).sort(), 'each lease is the one written for it');
    }),

    scenario('every outcome is settled as the core decides', async (d) => {
      const outcomes: Record<string, unknown>[] = [
        { type: 'ok' }, { type: 'retry', code: 'rate_limited', after: 5000, message: '429' }, { type: 'fail', code: 'bad_address' },
        { type: 'cancel', reason: 'user_left' }, { type: 'timeout' }, { type: 'claim_late' }, { type: 'released' }, { type: 'hook_failed', message: 'hook' },
        { type: 'invalid_payload' }, { type: 'defer', code: 'paused', after: 1000 }, { type: 'crash' },
      ];
      for (const outcome of outcomes) {
        d.now = T0;
        const id = await d.one({ payload: { outcome: outcome.type } });
        const [job] = await d.claim(1);
        eq(job?.id, id, `claimed for ${String(outcome.type)}`);
        if (outcome.type === 'crash') d.now = Number(job!.lease_expires_ms) + 1;
        const { write, settled } = await d.settle(job!, outcome);
        eq(settled, true, `${String(outcome.type)} is written`);
        const view = await d.job(id);
        eq(
          [view.status, view.attempts, view.crashes, view.lastErrorCode, view.lastErrorMessage, view.finishedAt?.getTime() ?? null, view.dueAt.getTime()],
          [write.status, write.attempts, write.crashes, write.errorCode, write.errorMessage, write.finished ? d.now : null, write.dueAt ?? T0],
          `the job after ${String(outcome.type)}`,
        );
        const attempts = await d.store.listAttempts(d.db, { jobId: id });
        eq(attempts.map((a) => [a.attempt, a.outcome, a.finishedAt?.getTime()]), [[1, write.outcome, d.now]], `the attempt after ${String(outcome.type)}`);
        // Done with it: out of the way of the next claim.
        if (!write.finished) await d.operate('cancel', [id]);
      }
    }),

    scenario('retries wait out the backoff the core decides, then dead-letter', async (d) => {
      const id = await d.one();
      let due = T0;
      for (let attempt = 1; attempt <= 3; attempt++) {
        d.now = due - 1;
        if (attempt > 1) eq((await d.claim()).length, 0, `attempt ${attempt} is not claimed before its due time`);
        d.now = due;
        const [job] = await d.claim();
        eq([job?.id, job?.attempts, job?.attempt_seq], [id, attempt - 1, attempt], `attempt ${attempt} is claimed when due`);
        const { write } = await d.settle(job!, { type: 'retry', code: 'flaky' });
        const view = await d.job(id);
        if (attempt < 3) {
          eq(write.status, 'retrying', 'the core retries');
          ok(write.dueAt! > d.now, 'after a backoff');
          eq([view.status, view.dueAt.getTime(), view.attempts], ['retrying', write.dueAt, attempt], 'the store keeps the core\'s due time');
          eq(await d.store.nextDue(d.db, { lane: 'default', kinds: [KIND], versionCutoff: null }), write.dueAt, 'nextDue reports it');
          due = write.dueAt!;
        } else {
          eq([view.status, view.lastErrorCode, view.finishedAt?.getTime()], ['dead', 'flaky', d.now], 'the budget spent, the job is dead');
        }
      }
      eq(await d.store.nextDue(d.db, { lane: 'default', kinds: [KIND], versionCutoff: null }), null, 'nothing waits');
    }),

    scenario('settle then claim is one operation that never reclaims what it settles', async (d) => {
      const a = await d.one();
      const [job] = await d.claim(1);
      const b = await d.one();
      const write = d.decide(job!, { type: 'released' });
      eq(write.dueAt, d.now, 'released is due at once');
      const out = await d.store.settleThenClaim(d.db, { now: d.now, items: [write] }, d.claimInput(10));
      eq(out.settled, [a], 'the settle is written');
      eq(out.claimed.map((j) => j.id), [b], 'the claim takes the other job, not the one just settled');
      eq((await d.claim()).map((j) => j.id), [a], 'which the next claim takes');
      const stale = d.decide(job!, { type: 'ok' });
      eq((await d.store.settleThenClaim(d.db, { now: d.now, items: [stale] }, d.claimInput(10))).settled, [], 'a stale settle in it changes nothing');
    }),

    scenario('inspection: get, filters, counts and cursors', async (d) => {
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        d.now = T0 + i * 1000;
        ids.push(await d.one({ payload: { i }, tenantKey: i % 2 === 0 ? 'even' : null }));
      }
      await d.enqueue(d.db, [{ payload: { x: 1 }, correlationId: 'corr-1' }], OTHER_KIND);
      const seen: string[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < 10; page++) {
        const result = await d.store.listJobs(d.db, { kind: KIND, limit: 2, ...(cursor ? { cursor } : {}) });
        seen.push(...result.jobs.map((j) => j.id));
        if (!result.nextCursor) break;
        cursor = result.nextCursor;
      }
      eq(seen, ids, 'pages cover every job once, oldest first');
      const desc = await d.store.listJobs(d.db, { kind: KIND, limit: 3, order: 'desc' });
      eq(desc.jobs.map((j) => j.id), [...ids].reverse().slice(0, 3), 'newest first');
      const rest = await d.store.listJobs(d.db, { kind: KIND, limit: 3, order: 'desc', cursor: desc.nextCursor! });
      eq(rest.jobs.map((j) => j.id), [ids[1], ids[0]], 'the next page goes on backwards');
      eq((await d.store.listJobs(d.db, { tenantKey: 'even', limit: 10 })).jobs.map((j) => j.id), [ids[0], ids[2], ids[4]], 'a tenant filter');
      eq((await d.store.listJobs(d.db, { tenantKey: null, kind: KIND, limit: 10 })).jobs.map((j) => j.id), [ids[1], ids[3]], 'jobs without a tenant');
      eq((await d.store.listJobs(d.db, { correlationId: 'corr-1', limit: 10 })).jobs.map((j) => j.kind), [OTHER_KIND], 'by correlation id');
      eq((await d.store.listJobs(d.db, { createdAfter: new Date(T0 + 1000), createdBefore: new Date(T0 + 4000), limit: 10 })).jobs.map((j) => j.id), [ids[2], ids[3]], 'by creation time');
      const view = await d.job(ids[1]!);
      eq([view.payload, view.tenantKey, view.status, view.createdAt.getTime(), view.dueAt.getTime()], [{ i: 1 }, null, 'pending', T0 + 1000, T0 + 1000], 'a job as stored');
      eq(await d.store.getJob(d.db, { id: ids[1]!, tenantKey: 'even' }), null, 'another tenant\'s job is not found');
      d.now = T0 + 10_000;
      const [claimed] = await d.claim(1);
      await d.settle(claimed!, { type: 'ok' });
      eq(await d.store.countJobs(d.db, {}), { pending: 5, running: 0, retrying: 0, succeeded: 1, dead: 0, cancelled: 0 }, 'counts by status');
      eq((await d.store.countJobs(d.db, { tenantKey: 'even', status: 'succeeded' })).succeeded, 1, 'counts with a filter');
      eq((await d.store.listJobs(d.db, { finishedAfter: new Date(T0), limit: 10 })).jobs.map((j) => j.id), [ids[0]], 'by finish time');
      await rejects(d.store.listJobs(d.db, { limit: 2, cursor: 'not-a-cursor' }), (e) => (e as PostboxError).code === 'invalid_input', 'a malformed cursor');
      await rejects(d.store.listJobs(d.db, { limit: 0 }), (e) => (e as PostboxError).code === 'invalid_input', 'a bad page size');
    }),

    scenario('operator actions as the core decides, within a tenant scope', async (d) => {
      const mine = await d.one({ tenantKey: 'acme' });
      const theirs = await d.one({ tenantKey: 'other' });
      const none = await d.one();
      const scoped = await d.operate('cancel', [mine, theirs, none, crypto.randomUUID()], 'acme', 'by_operator');
      eq([scoped.found, scoped.written], [[mine], [mine]], 'a scoped action finds only the tenant\'s jobs');
      const cancelled = await d.job(mine);
      eq([cancelled.status, cancelled.lastErrorCode, cancelled.finishedAt?.getTime()], ['cancelled', 'by_operator', d.now], 'cancelled with its reason');
      eq((await d.operate('cancel', [none], null)).written, [none], 'scope null: jobs without a tenant');
      eq((await d.job(theirs)).status, 'pending', 'the other tenant\'s job is untouched');
      // A running job cancelled: its open attempt closes with it.
      const [running] = await d.claim(1);
      eq(running?.id, theirs, 'claimed');
      await d.operate('cancel', [theirs]);
      eq((await d.store.listAttempts(d.db, { jobId: theirs })).map((a) => [a.outcome, a.finishedAt?.getTime()]), [['cancel', d.now]], 'the attempt closed');
      eq((await d.settle(running!, { type: 'ok' })).settled, false, 'the cancelled attempt cannot settle');
      d.now += 5000;
      eq((await d.operate('replay', [mine], 'acme')).written, [mine], 'replay');
      const replayed = await d.job(mine);
      eq([replayed.status, replayed.attempts, replayed.dueAt.getTime(), replayed.finishedAt], ['pending', 0, d.now, null], 'replayed: pending, due now, fresh budget');
      eq((await d.operate('retryNow', [none])).written, [], 'the core refuses retryNow of a cancelled job');
      const later = await d.one({ delayMs: 60_000 });
      await d.operate('retryNow', [later]);
      eq((await d.job(later)).dueAt.getTime(), d.now, 'retryNow makes it due now');
      await rejects(
        d.store.transaction(d.db, async (tx) => {
          await d.store.applyOperate(tx, { now: d.now, writes: [{ id: later, status: 'cancelled', dueAt: null, budget: null, reason: 'x', closeAttempt: null, finished: true, recordReason: true }] });
          throw new Error('operator changed their mind');
        }),
        (e) => (e as Error).message === 'operator changed their mind',
        'a failing operator transaction',
      );
      eq((await d.job(later)).status, 'pending', 'rolled back');
      const erased = await d.store.transaction(d.db, (tx) => d.store.eraseTenant(tx, 'acme'));
      eq(erased, 1, 'erase removes the tenant\'s jobs');
      eq(await d.store.getJob(d.db, { id: mine }), null, 'gone');
      eq(await d.store.listAttempts(d.db, { jobId: mine }), [], 'with its attempts');
      ok(await d.store.getJob(d.db, { id: theirs }), 'other tenants stay');
    }),

    scenario('retention deletes finished jobs past the core\'s cutoffs, bounded', async (d) => {
      const finish = async (outcome: Record<string, unknown>) => {
        const id = await d.one();
        const [job] = await d.claim(1);
        await d.settle(job!, outcome);
        return id;
      };
      const oldOk = await finish({ type: 'ok' });
      const oldDead = await finish({ type: 'fail', code: 'x' });
      d.now = T0 + 3 * 86_400_000;
      const newOk = await finish({ type: 'ok' });
      const waiting = await d.one();
      d.now = T0 + 5 * 86_400_000;
      const plan = getCore().call<{ steps: { type: string; succeededBefore: number; deadBefore: number; limit: number }[] }>('sweep', {
        op: 'plan', now: d.now, startedAt: d.now, policies: d.policies, retention: { succeededMs: 4 * 86_400_000, deadMs: 30 * 86_400_000 },
      });
      const step = plan.steps.find((s) => s.type === 'retention')!;
      eq(await d.store.deleteFinished(d.db, { ...step, limit: step.limit }), 1, 'one job is past its retention');
      eq(await d.store.getJob(d.db, { id: oldOk }), null, 'the old success is gone');
      for (const id of [oldDead, newOk, waiting]) ok(await d.store.getJob(d.db, { id }), 'the rest stays');
      d.now = T0 + 40 * 86_400_000;
      eq(await d.store.deleteFinished(d.db, { succeededBefore: d.now, deadBefore: d.now, limit: 1 }), 1, 'a limit bounds the delete');
      eq(await d.store.deleteFinished(d.db, { succeededBefore: d.now, deadBefore: d.now, limit: 10 }), 1, 'then the rest');
      eq((await d.store.countJobs(d.db, {})).pending, 1, 'a waiting job is never deleted');
    }),

    scenario('hand-off lists due jobs and honours the recorded nudges', async (d) => {
      d.now = T0;
      const a = await d.one({ kind: OTHER_KIND });
      d.now = T0 + 10;
      const b = await d.one({ kind: OTHER_KIND });
      await d.one({ kind: OTHER_KIND, delayMs: 60_000 });
      d.now = T0 + 1000;
      const query = { now: d.now, lane: 'bulk', kinds: [OTHER_KIND], limit: 10, nudgedBefore: d.now - 500 };
      eq((await d.store.listDueForHandoff(d.db, query)).map((r) => [r.id, r.lane]), [[a, 'bulk'], [b, 'bulk']], 'due jobs, oldest first, with their lane');
      await d.store.recordNudges(d.db, { now: d.now, ids: [a] });
      eq((await d.store.listDueForHandoff(d.db, query)).map((r) => r.id), [b], 'a job nudged since the cutoff is left alone');
      eq((await d.store.listDueForHandoff(d.db, { ...query, nudgedBefore: d.now + 1 })).map((r) => r.id), [a, b], 'until the cooldown has passed');
    }),

    scenario('schedule runs keep each schedule\'s latest occurrence and never move back', async (d) => {
      eq([...(await d.store.lastScheduleRuns(d.db, ['weekly', 'daily']))], [], 'nothing recorded yet');
      await d.store.recordScheduleRun(d.db, { name: 'weekly', at: T0 + 1000, now: T0 });
      await d.store.recordScheduleRun(d.db, { name: 'weekly', at: T0, now: T0 + 5 });
      await d.store.recordScheduleRun(d.db, { name: 'daily', at: T0 + 7, now: T0 + 6 });
      const runs = await d.store.lastScheduleRuns(d.db, ['weekly', 'daily', 'never']);
      eq([runs.get('weekly'), runs.get('daily'), runs.has('never')], [T0 + 1000, T0 + 7, false], 'the later occurrence stays; unknown names are absent');
      const other = await options.makeStore(otherName);
      eq([...(await other.lastScheduleRuns(d.db, ['weekly']))], [], 'another outbox keeps its own');
    }),

    scenario('named outboxes on one database never see each other', async (d) => {
      const other = await options.makeStore(otherName);
      eq(other.name, otherName, 'the store carries its name');
      eq(d.store.name, null, 'the default store has none');
      const [mine] = await d.enqueue(d.db, [{ payload: { n: 1 }, dedupeKey: 'shared', tenantKey: 't' }]);
      const [theirs] = await d.enqueue(d.db, [{ payload: { n: 2 }, dedupeKey: 'shared', tenantKey: 't' }], KIND, other);
      eq([mine!.verdict, theirs!.verdict], ['created', 'created'], 'one dedupe key in each outbox');
      const db = d.db;
      eq(await other.getJob(db, { id: mine!.id }), null, 'the other outbox cannot read this one\'s job');
      eq((await other.listJobs(db, { limit: 10 })).jobs.map((j) => j.id), [theirs!.id], 'nor list it');
      const claimed = await other.claim(db, d.claimInput(10));
      eq(claimed.map((j) => j.id), [theirs!.id], 'a claim takes only its own jobs');
      eq((await d.store.countJobs(db, {})).pending, 1, 'this outbox\'s job is still pending');
      d.now = Number(claimed[0]!.lease_expires_ms) + 1;
      eq((await d.store.listExpiredLeases(db, { now: d.now, kinds: [KIND], limit: 10 })).length, 0, 'recovery sees only its own leases');
      eq(await d.store.settle(db, { now: d.now, items: [{ ...d.decide(claimed[0]!, { type: 'ok' }) }] }), [], 'nor can it settle the other\'s claims');
      eq(await d.store.transaction(db, (tx) => d.store.eraseTenant(tx, 't')), 1, 'erase acts on its own outbox');
      eq((await other.countJobs(db, {})).running, 1, 'the other outbox keeps its job');
    }),
  ];
}
