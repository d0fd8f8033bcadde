// The conformance suite's driver: a store under test with a clock, the core's decisions made as
// the runtime makes them, and the suite's assertions (see ../store-contract.ts).
import { getCore } from '../../core/core.js';
import { dedupeItem } from '../../engine/dedupe.js';
import type { SettleDecision } from '../../engine/settle.js';
import type { AppendRow, ClaimedJob, ClaimInput, JobStatus, JobView, OutboxStore, RetryBudget, SettleWrite } from '../../stores/contract.js';
import type { CorePolicy } from '../../types.js';

/** The epoch every scenario starts at: far from the real clock, so a store that reads its own clock fails. */
export const T0 = Date.UTC(2031, 0, 1);

export const KIND = 'contract.mail';
export const OTHER_KIND = 'contract.bill';

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

export function ok(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(`store contract: ${message}`);
}

export function eq(actual: unknown, expected: unknown, message: string): void {
  if (!same(actual, expected)) throw new Error(`store contract: ${message}: expected ${show(expected)}, got ${show(actual)}`);
}

export async function rejects(promise: Promise<unknown>, check: (error: unknown) => boolean, message: string): Promise<void> {
  try {
    await promise;
  } catch (error) {
    ok(check(error), `${message}: wrong error ${String(error)}`);
    return;
  }
  throw new Error(`store contract: ${message}: did not reject`);
}

/** A scenario's world: a store, its handle, a clock of its own and the core's decisions. */
export class Driver<Db, Tx> {
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
    traceContext: string | null = null,
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
      ...(traceContext === null ? {} : { traceContext }),
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
    // The suite's items have no parents; a holder this call created has none (as the engine resolves it), any other the store names.
    const createdHere = new Set(rows.filter((r) => r.created).map((r) => r.id.toLowerCase()));
    const verdicts = held.length === 0 ? [] : core.call<{ results: { status: string; reason?: string }[] }>('enqueue', {
      op: 'dedupe', items: held.map((r) => dedupeItem(r, kind, [], createdHere.has(r.id.toLowerCase()) ? [] : (r.holderParents ?? null))),
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


/** Makes one scenario: a fresh store and driver per run; `batched` drives appends through D1-style statements. */
export type ScenarioOf<Db, Tx> = (name: string, body: (d: Driver<Db, Tx>) => Promise<void>, batched?: boolean) => StoreScenario;

/** One scenario: `run` resolves when the store conforms, and rejects saying how it does not. */
export interface StoreScenario {
  name: string;
  run(): Promise<void>;
}
