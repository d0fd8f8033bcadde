import { errorMessage } from '../errors.js';
import { addReport, drainLane, emptyReport, settleAll, type ClaimedRow, type RunReport } from './drain.js';
import type { EngineRuntime } from './runtime.js';
import type { CorePolicy, JobDefinition } from '../types.js';
import type { Session } from './session.js';
import { isDeadlineError, type Deadline } from './deadline.js';
import { sendDrains, sendNudges } from './nudge.js';

/** A reserved sweep: kinds swept before the catch-all drain, with their own budget. */
export interface ReservedSweep {
  name: string;
  kinds: readonly string[];
  budget: { maxJobs: number; deadlineMs: number };
}

/** Options of one sweep (the scheduled handler's). */
export interface SweepOptions {
  /** Wall time of the whole invocation. Default 840 s (Cloudflare allows 15 min). */
  invocationBudgetMs?: number;
  /** Recovery's share, so a crash backlog cannot starve fresh work. Default 120 s. */
  recoveryBudgetMs?: number;
  reserved?: readonly ReservedSweep[];
  /**
   * Retention: finished jobs older than these are deleted, in batches of `batchSize` (default
   * 1,000, at most 10,000; one statement each), batch after batch while a batch comes back
   * full, for at most `budgetMs` from the first batch (default 60,000) and never past the
   * invocation's budget.
   */
  retention?: { succeededRetentionMs?: number; deadRetentionMs?: number; batchSize?: number; budgetMs?: number };
  /**
   * A job handed to its lane's queue is not handed off again for this long (read from its
   * `nudge_sent_at`), so a long job waiting for its consumer is not re-nudged on every sweep.
   * Default 15 min.
   */
  handoffCooldownMs?: number;
  /**
   * Index compaction (PostgreSQL), on by default: once nothing holds the xmin horizon, an index
   * of `job` or `attempt` at twice its baseline size and 8 MiB past it (a held horizon's bloat,
   * which VACUUM never gives back) is rebuilt with REINDEX CONCURRENTLY, at most 4 per sweep and
   * once per 6 h each. Needs the tables' owner, or PostgreSQL 17's MAINTAIN privilege
   * (examples/roles/roles.sql grants it); without either, `compaction_refused` says so.
   */
  compaction?: boolean;
}

type SweepStep =
  | { type: 'recover'; deadlineAt: number; limit: number }
  | { type: 'dependencies'; limit: number }
  | { type: 'reserved'; name: string; kinds: string[]; maxJobs: number; deadlineAt: number }
  | { type: 'drain'; kinds: string[]; deadlineAt: number }
  | { type: 'handoff'; nudgedBefore: number; limit: number; lanes: { lane: string; kinds: string[] }[] }
  | { type: 'unregistered'; dueBefore: number; recoverLimit: number; policy: CorePolicy }
  | { type: 'retention'; succeededBefore: number; deadBefore: number; limit: number; budgetMs: number; deadlineAt: number }
  | { type: 'compact'; deadlineAt: number };

/** The core's compaction decision (docs/ABI.md, pb_sweep `compact`). */
interface CompactDecision {
  held: boolean;
  drop: string[];
  record: { name: string; bytes: number }[];
  rebuild: { name: string; bytes: number; baselineBytes: number; rebuiltAt: number } | null;
  analyze: string[];
}

/** What a sweep did. */
export interface SweepReport extends RunReport {
  handedOff: number;
  /** Finished jobs retention deleted, over all its batches. */
  deleted: number;
  /** Pending jobs, due for a while, of kinds this deploy does not register, per kind (`unknown_kind` events). */
  unregistered: { kind: string; count: number }[];
  /** Indexes the compact step rebuilt. */
  rebuiltIndexes: string[];
  /** Tables the compact step analyzed: their planner statistics described a much smaller table. */
  analyzedTables: string[];
  /** Waiting jobs the dependencies step found ready and released (their parents had all finished). */
  unblocked: number;
  /** Steps that failed (reported as `infra_error` events); the others still ran. */
  failedSteps: string[];
}

/** The core's plan of one sweep (docs/ABI.md, pb_sweep). */
export interface SweepPlan {
  deadlineAt: number;
  /** Schedule occurrences start only before this: recovery's budget is held back from them. */
  schedulesUntil: number;
  steps: SweepStep[];
}

/** Asks the core how the invocation that started at `startedAt` spends its time, from now. */
export function planSweep(rt: EngineRuntime<unknown>, startedAt: number, opts: SweepOptions): SweepPlan {
  // Only what the user set: the core owns every default (docs/ABI.md, pb_sweep).
  return rt.core.call<SweepPlan>('sweep', {
    op: 'plan',
    now: rt.clock.now(),
    startedAt,
    ...(opts.invocationBudgetMs === undefined ? {} : { invocationBudgetMs: opts.invocationBudgetMs }),
    ...(opts.recoveryBudgetMs === undefined ? {} : { recoveryBudgetMs: opts.recoveryBudgetMs }),
    ...(opts.handoffCooldownMs === undefined ? {} : { handoffCooldownMs: opts.handoffCooldownMs }),
    ...(opts.compaction === undefined ? {} : { compaction: opts.compaction }),
    ...(rt.store.dependencies ? { dependencies: true } : {}),
    reserved: (opts.reserved ?? []).map((r) => ({ name: r.name, kinds: r.kinds, maxJobs: r.budget.maxJobs, deadlineMs: r.budget.deadlineMs })),
    retention: {
      ...(opts.retention?.succeededRetentionMs === undefined ? {} : { succeededMs: opts.retention.succeededRetentionMs }),
      ...(opts.retention?.deadRetentionMs === undefined ? {} : { deadMs: opts.retention.deadRetentionMs }),
      ...(opts.retention?.batchSize === undefined ? {} : { batchSize: opts.retention.batchSize }),
      ...(opts.retention?.budgetMs === undefined ? {} : { budgetMs: opts.retention.budgetMs }),
    },
    policies: rt.policies,
  });
}

/**
 * The cron backstop: runs the core's plan (planned when the sweep starts) in order: recover
 * expired leases, release waiting jobs whose parents all finished unseen, reserved sweeps, drain, hand long jobs to their queue, report unregistered
 * kinds, retention, index compaction. The session gives up at the plan's deadline.
 */
export async function runSweep<Db>(rt: EngineRuntime<Db>, session: Session<Db>, plan: SweepPlan): Promise<SweepReport> {
  const report: SweepReport = { ...emptyReport(), handedOff: 0, deleted: 0, unblocked: 0, unregistered: [], rebuiltIndexes: [], analyzedTables: [], failedSteps: [] };
  const deadline = { at: plan.deadlineAt, now: () => rt.clock.now() };
  const span = rt.options.telemetry?.operation('sweep', { steps: plan.steps.map((s) => s.type).join(',') });
  for (const step of plan.steps) {
    // One step's failure (say, a dropped connection) must not cost the others their turn.
    try {
      await runStep(rt, session, step, report, deadline);
    } catch (error) {
      report.failedSteps.push(step.type);
      rt.emit(isDeadlineError(error) ? { type: 'deadline_exceeded', where: `sweep ${step.type}`, severity: 'error' } : { type: 'infra_error', where: `sweep ${step.type}`, error: errorMessage(error) });
      await session.replace();
    }
  }
  const telemetry = rt.options.telemetry;
  if (telemetry?.backlog) {
    // The backlog gauge's values: what waits and runs as the sweep leaves it.
    try {
      telemetry.backlog(await session.exclusive((q) => rt.store.countActive(q)));
    } catch (error) {
      report.failedSteps.push('backlog');
      rt.emit({ type: 'infra_error', where: 'sweep backlog', error: errorMessage(error) });
      await session.replace();
    }
  }
  span?.end({
    ...(report.failedSteps.length > 0 ? { error: `failed steps: ${report.failedSteps.join(', ')}` } : {}),
    attributes: { recovered: report.recovered, claimed: report.claimed, succeeded: report.succeeded, deleted: report.deleted, handed_off: report.handedOff },
  });
  return report;
}

async function runStep<Db>(rt: EngineRuntime<Db>, session: Session<Db>, step: SweepStep, report: SweepReport, deadline: Deadline): Promise<void> {
  switch (step.type) {
    case 'recover':
      addReport(report, await recoverUntil(rt, session, step));
      break;
    case 'dependencies': {
      // Waiting jobs whose parents all finished unseen (a child enqueued while its last parent
      // settled): their wait ends here, and the drain after this step may run them.
      const changed = await session.exclusive((q) => rt.store.dependencies!.resolveWaiting(q, { now: rt.clock.now(), limit: step.limit }));
      report.unblocked += changed.filter((c) => c.status === 'pending').length;
      break;
    }
    case 'reserved': {
      // One budget for the step, whichever lanes its kinds are on (the core counts it down).
      let claimed = 0;
      for (const lane of lanesOf(rt, step.kinds)) {
        const ran = await drainLane(rt, session, { lane, kinds: step.kinds, deadlineAt: step.deadlineAt, maxJobs: step.maxJobs, claimedBefore: claimed });
        claimed += ran.claimed;
        addReport(report, ran);
      }
      break;
    }
    case 'drain': {
      // A lane whose backlog outlives the sweep's budget goes on in its queue consumer.
      const backlogged: string[] = [];
      for (const lane of lanesOf(rt, step.kinds)) {
        addReport(report, await drainLane(rt, session, { lane, kinds: step.kinds, deadlineAt: step.deadlineAt, onBacklog: () => backlogged.push(lane) }));
      }
      await sendDrains(rt, backlogged, deadline);
      break;
    }
    case 'handoff':
      for (const { lane, kinds } of step.lanes) report.handedOff += await handOff(rt, session, lane, kinds, step.nudgedBefore, step.limit, deadline);
      break;
    case 'unregistered': {
      const kinds = rt.policies.map((p) => p.kind);
      addReport(report, await recoverUnregistered(rt, session, kinds, step));
      const rows = await session.exclusive((q) => rt.store.countUnregistered(q, { dueBefore: step.dueBefore, kinds }));
      for (const { kind, count } of rows) {
        report.unregistered.push({ kind, count });
        rt.emit({ type: 'unknown_kind', kind, count, severity: 'warn' });
      }
      break;
    }
    case 'retention': {
      // Batch after batch for as long as the core says: while they come back full, within
      // the step's budget (from its first batch) and the invocation's.
      const startedAt = rt.clock.now();
      let deleted = 0;
      let batches = 0;
      try {
        for (;;) {
          const batch = await session.exclusive((q) => rt.store.deleteFinished(q, { succeededBefore: step.succeededBefore, deadBefore: step.deadBefore, limit: step.limit }));
          deleted += batch;
          batches++;
          const { again } = rt.core.call<{ again: boolean }>('sweep', {
            op: 'retention', now: rt.clock.now(), startedAt, deadlineAt: step.deadlineAt, budgetMs: step.budgetMs, limit: step.limit, deleted: batch,
          });
          if (!again) break;
        }
      } finally {
        // What the batches before a failure deleted stays deleted: count it either way.
        report.deleted += deleted;
        if (deleted) rt.emit({ type: 'retention', deleted, batches });
      }
      break;
    }
    case 'compact':
      await compact(rt, session, step, report);
      break;
  }
}

/**
 * Reads the indexes' and tables' facts, and does what the core decides from them, until it
 * decides no rebuild: stale tables analyzed, leftovers dropped, baselines recorded, then one
 * rebuild, and a fresh look.
 */
async function compact<Db>(rt: EngineRuntime<Db>, session: Session<Db>, step: Extract<SweepStep, { type: 'compact' }>, report: SweepReport): Promise<void> {
  const store = rt.store.compaction;
  if (!store) return;
  const analyzeTried: string[] = [];
  for (;;) {
    const facts = await session.exclusive((q) => store.compactionFacts(q));
    const now = rt.clock.now();
    const decision = rt.core.call<CompactDecision>('sweep', {
      op: 'compact', now, deadlineAt: step.deadlineAt, rebuilt: report.rebuiltIndexes.length, horizon: facts.horizon, indexes: facts.indexes,
      tables: facts.tables, analyzedTables: analyzeTried,
    });
    for (const name of decision.analyze) {
      analyzeTried.push(name);
      if (!(await session.exclusive((q) => store.analyzeTable(q, name)))) continue;
      report.analyzedTables.push(name);
      rt.emit({ type: 'table_analyzed', table: name });
    }
    for (const name of decision.drop) await session.exclusive((q) => store.dropIndex(q, name));
    if (decision.record.length > 0) await session.exclusive((q) => store.recordIndexBaselines(q, now, decision.record));
    const rebuild = decision.rebuild;
    if (!rebuild) return;
    try {
      await session.exclusive((q) => store.rebuildIndex(q, rebuild.name, rebuild.rebuiltAt));
    } catch (error) {
      // Not the owner (and no MAINTAIN): every later sweep would be refused the same way.
      if ((error as { code?: unknown }).code !== '42501') throw error;
      rt.emit({ type: 'compaction_refused', index: rebuild.name, bytes: rebuild.bytes, error: errorMessage(error), severity: 'warn' });
      return;
    }
    report.rebuiltIndexes.push(rebuild.name);
    rt.emit({ type: 'index_rebuilt', index: rebuild.name, bytes: rebuild.bytes, baselineBytes: rebuild.baselineBytes });
  }
}

function lanesOf(rt: EngineRuntime<unknown>, kinds: readonly string[]): string[] {
  return [...new Set(rt.policies.filter((p) => kinds.includes(p.kind)).map((p) => p.lane))];
}

/** Settles up to `limit` attempts whose lease expired unsettled as crashes. */
async function recover<Db>(rt: EngineRuntime<Db>, session: Session<Db>, limit: number): Promise<RunReport & { found: number }> {
  const kinds = rt.policies.map((p) => p.kind);
  const rows: ClaimedRow[] = await session.exclusive((q) => rt.store.listExpiredLeases(q, { now: rt.clock.now(), kinds, limit }));
  if (rows.length > 0) rt.emit({ type: 'recovered', jobs: rows.length });
  const report = await settleAll(rt, session, rows.map((row) => ({ row, outcome: { type: 'crash' as const } })));
  return { ...report, found: rows.length };
}

/**
 * Expired leases of kinds this deploy does not register (a kind removed, or a newer deploy's
 * job run by an older one): no handler here can settle them, and recovery proper lists only
 * registered kinds. They are settled as crashes by the core under the default policy the plan
 * carries, so the job leaves `running` (to retrying, reported with the pending ones; dead as
 * `crash_loop` only after the default `maxCrashes`) and its attempt is closed.
 */
async function recoverUnregistered<Db>(rt: EngineRuntime<Db>, session: Session<Db>, kinds: string[], step: Extract<SweepStep, { type: 'unregistered' }>): Promise<RunReport> {
  const rows: ClaimedRow[] = await session.exclusive((q) => rt.store.listExpiredLeases(q, { now: rt.clock.now(), kinds, limit: step.recoverLimit, unregistered: true }));
  if (rows.length === 0) return emptyReport();
  rt.emit({ type: 'recovered', jobs: rows.length });
  // Settlement looks each kind's policy up in the registry: these kinds get the default one.
  const registry = new Map(rt.registry);
  for (const kind of new Set(rows.map((r) => r.kind))) registry.set(kind, { kind, policy: { ...step.policy, kind } } as unknown as JobDefinition);
  return settleAll({ ...rt, registry }, session, rows.map((row) => ({ row, outcome: { type: 'crash' as const } })));
}

/**
 * Recovery alone, outside a sweep: every expired lease, in batches of the core's recovery
 * limit, until a batch comes back short or the core's recovery deadline passes.
 */
export async function recoverExpired<Db>(rt: EngineRuntime<Db>, session: Session<Db>): Promise<RunReport> {
  const now = rt.clock.now();
  const plan = rt.core.call<{ steps: SweepStep[] }>('sweep', { op: 'plan', now, startedAt: now, policies: rt.policies });
  const step = plan.steps.find((s): s is Extract<SweepStep, { type: 'recover' }> => s.type === 'recover');
  return step ? recoverUntil(rt, session, step) : emptyReport();
}

/** The recovery step: batches of its limit for as long as the core says (until one comes back short or its deadline passes). */
async function recoverUntil<Db>(rt: EngineRuntime<Db>, session: Session<Db>, step: Extract<SweepStep, { type: 'recover' }>): Promise<RunReport> {
  const report = emptyReport();
  for (;;) {
    const { found, ...batch } = await recover(rt, session, step.limit);
    addReport(report, batch);
    const { again } = rt.core.call<{ again: boolean }>('sweep', { op: 'recover', now: rt.clock.now(), deadlineAt: step.deadlineAt, limit: step.limit, found });
    if (!again) return report;
  }
}

/**
 * Nudges due jobs whose lease is too long for the sweep onto their lane's queue, skipping those
 * nudged since the core's cooldown cutoff. Hand-off nudges are always recorded (`nudge_sent_at`):
 * the cooldown reads it. Returns how many went out.
 */
async function handOff<Db>(rt: EngineRuntime<Db>, session: Session<Db>, lane: string, kinds: string[], nudgedBefore: number, limit: number, deadline: Deadline): Promise<number> {
  if (!rt.queueFor(lane)) {
    rt.emit({ type: 'nudge_skipped', jobs: 0, reason: `no queue for lane ${lane}: long jobs of this lane cannot run` });
    return 0;
  }
  const rows = await session.exclusive((q) => rt.store.listDueForHandoff(q, { now: rt.clock.now(), lane, kinds, limit, nudgedBefore }));
  if (rows.length === 0) return 0;
  const sent = await sendNudges(rt, rows.map((r) => ({ id: r.id, kind: r.kind, lane: r.lane, delaySeconds: 0 })), { record: true, session, deadline });
  if (sent.length > 0) rt.emit({ type: 'handoff', lane, jobs: sent.length });
  return sent.length;
}
