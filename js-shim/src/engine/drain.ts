// The drain of one lane, as a pipeline. `concurrency` slots run handlers; jobs are claimed
// ahead into a buffer, so a slot that frees starts its next job at once. One statement at a
// time on the lane session carries every plain settlement finished since the last one, plus a
// claim when the window has room. The core decides each step (claim `pump`: claim how many,
// settle, wait or stop; `plan`: which kinds still fit the deadline; `admit`: whether a buffered
// job may still start). Settlements with hooks run in their own transactions, queued on the
// same session, while the other slots go on.
import { addReport, emptyReport, type ClaimedRow, type Finished, type RunReport } from './attempt.js';
import { fairWeightsByScope } from './outbox-config.js';
import { runHandler } from './handler.js';
import type { PumpAnswer } from '../core/core.js';
import type { Admitted } from './lease.js';
import type { EngineRuntime, OutboxRuntime } from './runtime.js';
import type { Session } from './session.js';
import { decidePairs, needsHooks, recordAll, settleAll, settleHooked, takeReleased, writeSettled, type Settlement } from './settle.js';
import type { ClaimedJobs, ClaimInput, ClaimLimits, DependentChange, ThrottledKind } from '../stores/contract.js';
import { sendDrains, sendNudges } from './nudge.js';
import type { ThrottleReason } from '../types.js';

export { addReport, emptyReport, settleAll, type ClaimedRow, type Finished, type RunReport };

interface ClaimPlan {
  limit: number;
  kinds: string[];
  leaseMs: number[];
  versionCutoff: number | null;
  targetOnly: boolean;
  /** The smallest claim slack of `kinds` (null: none). */
  slackMs: number | null;
  /** With `firstKinds`: the core's verdict that due jobs are left behind (a drain message is needed). */
  backlog?: boolean;
  /** The flow limits of the plan's limited kinds; absent when none is. */
  limits?: ClaimLimits;
  /** With fair share: how many tenants a claim visits (fair_share.h); absent otherwise. */
  fairTenants?: number;
}

/** The core's next step for the lane; on wait, `waitMs` says when to ask again even if no handler ends. */
type PumpStep = PumpAnswer;

type Target = { id: string; kind: string };

/** How many of the lane's latest handler runs the pump is told about (their slowest). */
const RECENT_RUNS = 32;
/** How many of the lane's latest statements the pump is told about (their slowest). */
const RECENT_STATEMENTS = 8;

export interface DrainOptions {
  lane: string;
  deadlineAt: number;
  /** Only these kinds (a reserved sweep); default every registered kind of the lane. */
  kinds?: readonly string[];
  /** Stop after claiming this many (with `claimedBefore`: a budget shared with earlier lanes). */
  maxJobs?: number;
  /** Claimed by the same sweep step on earlier lanes: counts against `maxJobs`. */
  claimedBefore?: number;
  /** Claim only these nudged jobs. */
  targets?: readonly Target[];
  /** Called (once) when the plan drops a kind right after a full claim: due jobs likely remain. */
  onBacklog?: () => void;
  /**
   * Stops the drain early: no claim after it aborts, claimed jobs still waiting for a slot are
   * released (due again at once, nothing charged), running handlers finish and are settled.
   */
  signal?: AbortSignal;
}

/**
 * Claims and runs jobs of one lane until none are due, the plan says stop, or `maxJobs`.
 * Resolves once every claimed job has been settled (or released); rejects with the first
 * statement failure after settling what it could on a fresh session.
 */
export async function drainLane<Db>(rt: EngineRuntime<Db>, session: Session<Db>, opts: DrainOptions): Promise<RunReport> {
  const policies = opts.kinds ? rt.policies.filter((p) => opts.kinds!.includes(p.kind)) : rt.policies;
  // The core decides, per nudge, whether this lane may claim it at all.
  const targets = opts.targets?.filter((target) => plan(rt, policies, opts, target).limit > 0);
  if (targets?.length === 0) return emptyReport();
  const pump = new LanePump(rt, session, opts, policies, targets);
  const report = await pump.run();
  // Stopped behind a rate slot that frees later than the drain waits: the lane's drain message
  // comes back when the core said, so the backlog runs at its rate without waiting for a nudge or
  // a cron tick. Without a queue (a polling consumer, a sweep-only outbox) those come back anyway.
  if (pump.resumeAfterSeconds !== null && rt.queueFor(opts.lane)) {
    await sendDrains(rt as EngineRuntime<unknown>, [opts.lane], { at: opts.deadlineAt, now: () => rt.clock.now() }, pump.resumeAfterSeconds);
  }
  return report;
}

class LanePump<Db> {
  readonly report = emptyReport();
  /** Claimed, not yet started: the lookahead. */
  readonly #buffer: ClaimedRow[] = [];
  /** Finished attempts whose settlement rides on the next statement. */
  #finished: Finished[] = [];
  /** When (performance.now()) the oldest of #finished finished. */
  #oldestFinishedAt = 0;
  /** Settlements with hooks, each in its own transaction on the session. */
  readonly #hooked = new Set<Promise<void>>();
  #running = 0;
  /** The last claim came back short (or the targets ran out): nothing more is due. */
  #exhausted = false;
  #failure: unknown = undefined;
  #wake: (() => void) | null = null;
  /** How long the lane's last handlers ran (ms, real time), newest last: the core sizes the lookahead from them. */
  readonly #recentMs: number[] = [];
  /** How long the lane's last statements took (ms, real time, round trip included), newest last. */
  readonly #statementMs: number[] = [];
  #plannedKinds: number | undefined;
  /** The last plan's smallest claim slack: how long a claimed job may wait for a slot. */
  #slackMs: number | null = null;
  #lastClaimFull = false;
  /** With fair share: the tenant scope this drain's next claim starts after (the last one's answer). */
  #fairAfter: string | null = null;
  /** With a kind limited per tenant: the tenant scope this drain's next limited claim starts after. */
  #tenantAfter: string | null = null;
  /** With weighted fair share: the weights by tenant scope (made on the first fair claim; null: none). */
  #fairWeights: Record<string, number> | null | undefined;

  #weights(): Record<string, number> | null {
    if (this.#fairWeights === undefined) this.#fairWeights = fairWeightsByScope(this.rt.options.fairShare);
    return this.#fairWeights;
  }
  /**
   * When (performance.now(): the wait runs in real time, as handler timers do, so a test clock
   * that stands still cannot hold it forever) claims paused by a flow limit may resume; null: not paused.
   */
  #throttledUntil: number | null = null;
  /** Kinds this drain has reported held back (a `throttled` event each). */
  readonly #throttledKinds = new Set<string>();
  /** The first of the claims a flow limit has held back since one last took a job; null: none. */
  #throttledSince: number | null = null;
  #backlogReported = false;
  #stopped = false;
  /** The core's delay for the lane's drain message once claims stopped behind a rate slot; null: none needed. */
  resumeAfterSeconds: number | null = null;

  constructor(
    readonly rt: EngineRuntime<Db>,
    readonly session: Session<Db>,
    readonly opts: DrainOptions,
    readonly policies: readonly OutboxRuntime['policies'][number][],
    readonly targets: Target[] | undefined,
  ) {}

  async run(): Promise<RunReport> {
    const signal = this.opts.signal;
    const onAbort = () => this.#poke();
    signal?.addEventListener('abort', onAbort);
    try {
      return await this.#run();
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  async #run(): Promise<RunReport> {
    for (;;) {
      if (this.opts.signal?.aborted && !this.#stopped) {
        // Stopped from outside: claim no more, hand back what has not started.
        this.#stopped = true;
        this.#exhausted = true;
        this.#release();
      }
      if (this.#throttledUntil !== null && this.#throttledUntil <= performance.now()) this.#throttledUntil = null;
      let step = this.#pump(this.#failure === undefined && !this.#exhausted && this.#throttledUntil === null);
      // The plan (which kinds still fit the deadline) is only needed for a claim.
      let claimPlan: ClaimPlan | null = null;
      if (step.action === 'claim') {
        claimPlan = this.#plan();
        if (claimPlan.kinds.length === 0) {
          // No kind fits any more, and time only moves on: claims are over.
          this.#exhausted = true;
          step = this.#pump(false);
        }
      }
      if (step.action === 'done') break;
      if (step.action === 'wait') await this.#waitForHandler(step.waitMs);
      else await this.#statement(step.action === 'claim' ? step.claim : 0, claimPlan);
    }
    await Promise.all(this.#hooked);
    if (this.#failure !== undefined) throw this.#failure;
    return this.report;
  }

  /** The core's next step for the lane, from its counts. */
  #pump(mayClaim: boolean): PumpStep {
    return this.rt.core.pump({
      concurrency: this.rt.concurrency,
      running: this.#running,
      buffered: this.#buffer.length,
      settles: this.#finished.length,
      mayClaim,
      remaining: this.targets ? this.targets.length : null,
      maxJobs: this.opts.maxJobs ?? null,
      claimed: (this.opts.claimedBefore ?? 0) + this.report.claimed,
      slowestRecentMs: this.#recentMs.length === 0 ? null : Math.ceil(Math.max(...this.#recentMs)),
      oldestSettleAgeMs: this.#finished.length === 0 ? null : Math.floor(performance.now() - this.#oldestFinishedAt),
      slackMs: this.#slackMs,
      statementMs: this.#statementMs.length === 0 ? null : Math.ceil(Math.max(...this.#statementMs)),
      throttleWaitMs: this.#throttledUntil === null || this.#exhausted || this.#failure !== undefined ? null : Math.max(0, Math.ceil(this.#throttledUntil - performance.now())),
    });
  }

  /** Until a handler ends, or `ms` pass. */
  async #waitForHandler(ms: number | null): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    await new Promise<void>((resolve) => {
      this.#wake = resolve;
      if (ms !== null) timer = setTimeout(resolve, ms);
    });
    clearTimeout(timer);
    this.#wake = null;
  }

  #settleLater(f: Finished): void {
    if (this.#finished.length === 0) this.#oldestFinishedAt = performance.now();
    this.#finished.push(f);
  }

  /** The core's claim plan for now; reports a backlog once when the core says one is left behind. */
  #plan(): ClaimPlan {
    const claimPlan = plan(this.rt, this.policies, this.opts, null, { firstKinds: this.#plannedKinds ?? null, lastClaimFull: this.#lastClaimFull });
    this.#plannedKinds ??= claimPlan.kinds.length;
    if (claimPlan.slackMs !== null) this.#slackMs = claimPlan.slackMs;
    if (!this.#backlogReported && !this.targets && claimPlan.backlog === true) {
      this.#backlogReported = true;
      this.opts.onBacklog?.();
    }
    return claimPlan;
  }

  /** One statement: the waiting settlements, plus a claim of `n` when n > 0. */
  async #statement(n: number, claimPlan: ClaimPlan | null): Promise<void> {
    const carry = this.#finished;
    this.#finished = [];
    if (n === 0 || !claimPlan) {
      addReport(this.report, await settleAll(this.rt, this.session, carry));
      await this.#released();
      return;
    }
    const chunk = this.targets?.splice(0, n);
    const now = this.rt.clock.now();
    const claim: ClaimInput = { now, lane: this.opts.lane, kinds: claimPlan.kinds, leaseMs: claimPlan.leaseMs, limit: n, versionCutoff: claimPlan.versionCutoff };
    if (this.rt.options.telemetry?.needsJobContext) claim.traced = true;
    if (claimPlan.limits) claim.limits = claimPlan.limits;
    if (claimPlan.limits?.tenantVisits !== undefined) claim.tenantAfter = this.#tenantAfter;
    if (claimPlan.fairTenants !== undefined) claim.fair = { tenants: claimPlan.fairTenants, after: this.#fairAfter, weights: this.#weights() };
    if (chunk) claim.targets = chunk;
    let rows: ClaimedJobs;
    const startedAt = performance.now();
    const items: Settlement[] = carry.length > 0 ? decidePairs(this.rt, now, carry) : [];
    const span = this.rt.options.telemetry?.operation('claim', { lane: this.opts.lane, limit: n, settling: items.length });
    try {
      if (items.length > 0) {
        // The settlements with the claim riding on them; a failure is the writer's to handle.
        const out = await writeSettled(this.rt, this.session, now, items, { claim });
        recordAll(this.rt, this.report, items, out);
        if (out.claimed === null) {
          span?.end({ error: out.failure ?? 'the claim did not run' });
          if (chunk) this.targets!.unshift(...chunk);
          // The session failed (the writer has written the settlements on a fresh one): stop
          // claiming, let what runs finish, and release what waits for a slot. A row's data at
          // fault took only the claim down: the drain goes on claiming.
          if (out.failure !== null) {
            this.#failure = out.failure;
            this.#release();
          }
          return;
        }
        rows = out.claimed;
      } else {
        rows = await this.session.exclusive((q) => this.rt.store.claim(q, claim));
      }
    } catch (error) {
      span?.end({ error });
      // The claim alone failed: it claimed nothing. Stop claiming on a fresh session.
      if (chunk) this.targets!.unshift(...chunk);
      this.#failure = error;
      await this.session.replace();
      this.#release();
      return;
    }
    span?.end({ attributes: { claimed: rows.length } });
    this.#statementMs.push(performance.now() - startedAt);
    if (this.#statementMs.length > RECENT_STATEMENTS) this.#statementMs.shift();
    this.report.claimed += rows.length;
    this.#lastClaimFull = rows.length === n;
    if (rows.fairAfter !== undefined) this.#fairAfter = rows.fairAfter;
    if (rows.tenantAfter !== undefined) this.#tenantAfter = rows.tenantAfter;
    const throttled = rows.throttled ?? [];
    if (rows.length > 0) this.#throttledSince = null;
    if (throttled.length > 0 && rows.length < n) {
      // Held back by a flow limit, not out of work: the core says when to ask again, if at all.
      if (chunk) this.targets!.unshift(...chunk.filter((t) => !rows.some((r) => r.id === t.id)));
      this.#throttle(throttled);
    } else if (chunk ? this.targets!.length === 0 : rows.length < n) this.#exhausted = true;
    this.#buffer.push(...rows);
    await this.#released();
    this.#fill();
  }

  /**
   * Children the drain's settlements released are due now: those its claims may take keep it
   * claiming (a claim that came back short no longer means the lane is out of work); the rest
   * go to their lane's queue as nudges.
   */
  async #released(): Promise<void> {
    const released = takeReleased(this.session);
    if (released.length === 0) return;
    const kinds = new Set(this.policies.map((p) => p.kind));
    const mine = (r: DependentChange) => !this.targets && r.lane === this.opts.lane && kinds.has(r.kind);
    if (released.some(mine) && !this.#stopped && this.#failure === undefined) this.#exhausted = false;
    const others = released.filter((r) => !mine(r));
    // On the drain's own session and deadline: no connection beyond the invocation's, no wait past its end.
    if (others.length > 0) {
      await sendNudges(this.rt, others.map((r) => ({ id: r.id, kind: r.kind, lane: r.lane, delaySeconds: 0 })), {
        session: this.session, deadline: { at: this.opts.deadlineAt, now: () => this.rt.clock.now() },
      });
    }
  }

  /** A claim left limited kinds' due jobs behind: pause claims until the core's time, or stop claiming. */
  #throttle(throttled: readonly ThrottledKind[]): void {
    const timeouts = new Map(this.policies.map((p) => [p.kind, p.timeoutMs]));
    const now = this.rt.clock.now();
    this.#throttledSince ??= now;
    const { retryAt, resumeAfterSeconds, kinds } = this.rt.core.call<{ retryAt: number | null; resumeAfterSeconds: number | null; kinds: { kind: string; reason: ThrottleReason }[] }>('claim', {
      op: 'throttle', now, deadlineAt: this.opts.deadlineAt, throttledSince: this.#throttledSince,
      throttled: throttled.map((t) => ({ kind: t.kind, retryAt: t.retryAt, timeoutMs: timeouts.get(t.kind) ?? 1, ...(t.tenant ? { tenant: true } : {}) })),
    });
    this.report.throttled++;
    // Once per kind and drain: a held-back kind is news, each poll of it is not.
    for (const { kind, reason } of kinds) {
      if (this.#throttledKinds.has(kind)) continue;
      this.#throttledKinds.add(kind);
      this.rt.emit({ type: 'throttled', lane: this.opts.lane, kind, reason });
    }
    if (retryAt === null) this.#exhausted = true;
    else this.#throttledUntil = performance.now() + (retryAt - now);
    this.resumeAfterSeconds = resumeAfterSeconds;
  }

  /** Starts buffered jobs in free slots. */
  #fill(): void {
    while (this.#running < this.rt.concurrency && this.#buffer.length > 0) this.#start(this.#buffer.shift()!);
  }

  /** Buffered jobs that will get no slot go back to due, uncharged, in the next statement. */
  #release(): void {
    for (const row of this.#buffer.splice(0)) this.#settleLater({ row, outcome: { type: 'released' } });
  }

  #start(row: ClaimedRow): void {
    // Claims only pick registered kinds, so the job is always there.
    const job = this.rt.registry.get(row.kind)!;
    const admit = this.rt.core.admit({
      now: this.rt.clock.now(), deadlineAt: this.opts.deadlineAt, leaseExpiresAt: Number(row.lease_expires_ms), timeoutMs: job.policy.timeoutMs,
      heartbeatMs: job.policy.heartbeatMs ?? null, attempts: row.attempts,
    });
    if (!admit.start) {
      this.#settleLater({ row, outcome: { type: admit.reason } });
      this.#poke();
      return;
    }
    this.#running++;
    const startedAt = performance.now();
    const { start: _start, ...admitted } = admit;
    const trace = this.rt.options.telemetry?.attempt({
      jobId: row.id, kind: row.kind, lane: row.lane, attempt: (admitted as Admitted).attempt, tenantKey: row.tenant_key,
      traceContext: row.trace_context ?? null, enqueuedAt: Number(row.created_ms), startedAt: this.rt.clock.now(),
    });
    void runHandler(this.rt, this.session, job, row, admitted as Admitted).then(async (result) => {
      if (trace) {
        trace.ran();
        if (result.finished) result.finished.trace = trace;
        else trace.abandoned('lease_lost');
      }
      this.#recentMs.push(performance.now() - startedAt);
      if (this.#recentMs.length > RECENT_RUNS) this.#recentMs.shift();
      // A handler that timed out mid-query may hold the session forever: the others go on on a fresh one.
      if (result.abandoned) await this.session.replace();
      this.#running--;
      // Its attempt's concurrency slot frees with the settlement that rides on the next claim.
      this.#throttledUntil = null;
      // A lost lease settles nothing: the job's owner (or the recovery, once the lease ran out) decides.
      if (result.finished === null) this.report.stale++;
      else if (needsHooks(this.rt, result.finished)) this.#settleWithHooks(result.finished);
      else this.#settleLater(result.finished);
      this.#fill();
      this.#poke();
    });
  }

  #settleWithHooks(f: Finished): void {
    // A throw here (the core refusing the settlement) fails the drain once all else is settled,
    // like a failed statement, instead of rejecting unobserved.
    const settled: Promise<void> = settleHooked(this.rt, this.session, [f], this.report)
      .catch((error: unknown) => {
        this.#failure ??= error;
      })
      .finally(() => this.#hooked.delete(settled));
    this.#hooked.add(settled);
  }

  #poke(): void {
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  }
}

function plan(
  rt: EngineRuntime<unknown>,
  policies: readonly OutboxRuntime['policies'][number][],
  opts: DrainOptions,
  target: Target | null,
  backlog: { firstKinds: number | null; lastClaimFull: boolean } | null = null,
): ClaimPlan {
  return rt.core.call<ClaimPlan>('claim', {
    ...backlog,
    op: 'plan',
    now: rt.clock.now(),
    deadlineAt: opts.deadlineAt,
    lane: opts.lane,
    concurrency: rt.concurrency,
    policies,
    version: rt.versionTs === null ? null : { timestamp: rt.versionTs },
    target,
    fairShare: rt.options.fairShare !== undefined && rt.options.fairShare !== false,
  });
}
