// The invariant checker. After every step it reads the store back through the store contract
// (listJobs, countJobs, listAttempts, dependencies) and checks what must hold whatever the store
// and whatever the sequence, against the store's own reads and the runner's inputs (which jobs
// it created, with which options, and what it asked of the outbox): there is no model of the
// outbox's state to agree with.
import type { AttemptView, JobView, OutboxStore } from '../../js-shim/src/stores/contract.ts';
import type { Op } from './ops.ts';
import type { ExclusionName } from './exclusions.ts';
import type { Probe } from './world.ts';
import { LIMITS, RETENTION, kindOf } from './world.ts';

/** What the runner knows of a job it created: its inputs, never its state. */
export interface JobMeta {
  kind: string;
  tenant: string | null;
  /** What a parent's failure does to it; null for a job enqueued without parents. */
  onParentFailure: 'cancel' | 'run' | null;
  /** For a batch's completion job: how many members the batch has. */
  batchMembers: number | null;
  /** Whether it named a parent by list index (`dependsOn: [n]`): the job an index names may hold a key in another tenant's scope. */
  byIndex: boolean;
  /** Whether an item it named by index was not created: its dedupe key was held (exists, or a conflict), so the holder is its parent. */
  heldByIndex: boolean;
}

/** One step as the runner ran it. */
export interface StepInfo {
  index: number;
  op: Op;
  /** The clock when the step started (on the grid) and when it ended (before the next second). */
  startNow: number;
  endNow: number;
  /** Jobs the step created, with their inputs. */
  created: Map<string, JobMeta>;
  /** A replay's jobs that went back to waiting or due (their attempt budget starts afresh). */
  replayed: string[];
  /** An injected crash: claims made outside any drain that never settle. */
  crashed: { id: string; seq: number; leaseExpiresAt: number }[];
  /** The tenant an erase removed. */
  erased: string | null;
  /** A drain or sweep released claimed jobs it never started (due again, uncharged). */
  released: boolean;
}

/** Outcomes that charge an attempt (settle.cpp). An operator's cancel of a running attempt closes it as `cancel`, uncharged; no handler here cancels. */
const CHARGED = new Set(['ok', 'retry', 'fail', 'timeout', 'hook_failed', 'invalid_payload']);
const FINAL = new Set(['succeeded', 'dead', 'cancelled']);
const RUNS_JOBS = new Set<Op['t']>(['drain', 'sweep', 'recover', 'crash']);

const fingerprint = (v: JobView) => `${v.status}|${v.attempts}|${v.crashes}|${v.lastErrorCode}|${v.dueAt.getTime()}|${v.finishedAt?.getTime() ?? '-'}`;
const time = (d: Date | null | undefined) => (d ? d.getTime() : null);

type Store = OutboxStore<any, any>;

export class Checker {
  readonly violations: string[] = [];
  /** How often each exclusion held a violation back (the runner counts here too when one keeps it off a path). */
  readonly excused: Partial<Record<ExclusionName, number>> = {};
  readonly meta = new Map<string, JobMeta>();
  readonly views = new Map<string, JobView>();
  readonly ledgers = new Map<string, AttemptView[]>();
  /** Each child's parents, read once (edges never change; a parent retention removed stays named). */
  readonly parents = new Map<string, string[]>();
  /** When each job was last replayed: its attempt count restarts there. */
  readonly #replayedAt = new Map<string, number>();
  /** Injected claims still open, by job id. */
  readonly #crashed = new Map<string, { seq: number; leaseExpiresAt: number }>();
  /** What each child's handler was told of its parents (ctx.parents), run by run: attempt:total/succeeded/dead/cancelled. */
  readonly told = new Map<string, string[]>();
  /** Why a job is gone (retention or erase), by id. */
  readonly gone = new Map<string, string>();
  /** How many times each batch's completion handler ran. */
  readonly #completionRuns = new Map<string, number>();
  /** Children replayed from an operator's cancel (exclusion replay-ignores-parents). */
  readonly #replayedAlone = new Set<string>();
  /** `child>parent` pairs: the parent was reopened (replayed, or revived) after the child had been released. */
  readonly #releasedBefore = new Set<string>();
  /** Children cancelled at birth by a parent that had failed (exclusion revived-child-tally). */
  readonly #bornCancelled = new Set<string>();

  constructor(readonly store: Store, readonly db: unknown, readonly exclusions: ReadonlySet<ExclusionName>) {}

  #fail(step: StepInfo, message: string): void {
    this.violations.push(`step ${step.index} (${step.op.t}): ${message}`);
  }

  /** A violation, unless exclusion `name` (exclusions.ts) is on and holds it back: then only counted. */
  #failUnless(name: ExclusionName, applies: boolean, step: StepInfo, message: string): void {
    if (applies && this.exclusions.has(name)) this.excused[name] = (this.excused[name] ?? 0) + 1;
    else this.#fail(step, message);
  }

  async #readAll(): Promise<Map<string, JobView>> {
    const out = new Map<string, JobView>();
    let cursor: string | undefined;
    for (;;) {
      const page = await this.store.listJobs(this.db, { limit: 1000, ...(cursor ? { cursor } : {}) });
      for (const j of page.jobs) out.set(j.id, j);
      if (!page.nextCursor) return out;
      cursor = page.nextCursor;
    }
  }

  /** Checks every invariant after `step`; `probe` is what handlers saw during it. */
  async check(step: StepInfo, probe: Probe, final = false): Promise<void> {
    for (const [id, m] of step.created) this.meta.set(id, m);
    for (const id of step.replayed) {
      this.#replayedAt.set(id, step.startNow);
      const was = this.views.get(id);
      if (this.meta.get(id)?.onParentFailure !== null && was?.status === 'cancelled' && was.lastErrorCode !== 'parent_failed') this.#replayedAlone.add(id);
    }
    for (const c of step.crashed) this.#crashed.set(c.id, { seq: c.seq, leaseExpiresAt: c.leaseExpiresAt });
    const { runs, violations } = probe.take();
    for (const r of runs) if (r.parents) this.told.set(r.id, [...(this.told.get(r.id) ?? []), `${r.attempt}:${r.parents.total}/${r.parents.succeeded}/${r.parents.dead}/${r.parents.cancelled}`]);
    for (const v of violations) this.#fail(step, `handlers: ${v}`);

    // A clock step asks nothing of the store: nothing to read back.
    if (step.op.t === 'clock') return;
    const now = await this.#readAll();
    if (RUNS_JOBS.has(step.op.t) || step.op.t === 'erase' || final) {
      // Two reads of the same rows agree (checked where most rows move: a D1 read costs a millisecond or two).
      const counts = await this.store.countJobs(this.db, {});
      const tally: Record<string, number> = {};
      for (const v of now.values()) tally[v.status] = (tally[v.status] ?? 0) + 1;
      for (const [status, n] of Object.entries(counts)) {
        if ((tally[status] ?? 0) !== n) this.#fail(step, `countJobs says ${n} ${status}, listJobs lists ${tally[status] ?? 0}`);
      }
    }

    // No job is lost: a job leaves only by retention (finished long enough, in a sweep) or by its tenant's erase.
    for (const [id, before] of this.views) {
      if (now.has(id)) continue;
      const retention = before.status === 'succeeded' ? RETENTION.succeededMs : RETENTION.deadMs;
      const finished = time(before.finishedAt);
      if (step.erased !== null && before.tenantKey === step.erased) this.gone.set(id, 'erased');
      else if (step.op.t === 'sweep' && FINAL.has(before.status) && finished !== null && finished + retention < step.endNow) this.gone.set(id, 'retention');
      else this.#fail(step, `job ${id} (${before.status}, finished ${finished}) is gone, neither erased nor due for retention`);
      this.ledgers.delete(id);
    }
    for (const id of step.created.keys()) if (!now.has(id)) this.#fail(step, `job ${id} was created but is not found`);
    for (const id of now.keys()) if (!this.meta.has(id)) this.#fail(step, `job ${id} was never created here`);

    // The ledger of every job that may have changed.
    const newAttempts = new Map<string, AttemptView[]>();
    for (const [id, v] of now) {
      const before = this.views.get(id);
      // Every attempt a step opens or closes changes the job's row (status, counts, due time):
      // only a claim released unstarted may not, and then the step reports it (`released`).
      const maybe = !before || fingerprint(before) !== fingerprint(v) || step.replayed.includes(id) || (step.released && !FINAL.has(before.status));
      if (!maybe) continue;
      const ledger = await this.store.listAttempts(this.db, { jobId: id });
      const seen = this.ledgers.get(id)?.length ?? 0;
      const fresh = ledger.filter((a) => a.attempt > seen);
      if (fresh.length > 0) newAttempts.set(id, fresh);
      this.ledgers.set(id, ledger);
      this.#checkLedger(step, v, ledger);
      if (fresh.length > 0 && !RUNS_JOBS.has(step.op.t)) this.#fail(step, `job ${id} got attempts ${fresh.map((a) => a.attempt).join(',')} in a step that runs none`);
    }

    // Parents: read once per child.
    for (const [id, m] of this.meta) {
      if (m.onParentFailure === null || this.parents.has(id) || !now.has(id)) continue;
      const deps = await this.store.dependencies!.dependencies(this.db, id, 100);
      this.parents.set(id, deps.parents.map((p) => p.id));
      // A job depends only on jobs of its own tenant scope (EnqueueOptions.dependsOn).
      for (const p of deps.parents) {
        const pv = now.get(p.id);
        if (pv && pv.tenantKey !== m.tenant) {
          this.#failUnless('cross-tenant-list-parent', m.byIndex, step, `job ${id} (tenant ${m.tenant}) depends on ${p.id} of tenant ${pv.tenantKey}`);
        }
      }
    }

    // A child already released (or run) when a parent is reopened (replayed, or brought back by
    // its own parent's replay) stays released: the parent's end it counted stands for it (only a
    // waiting child counts the parent again).
    for (const [p, pv] of now) {
      const was = this.views.get(p);
      if (!was || !FINAL.has(was.status) || FINAL.has(pv.status)) continue;
      for (const [child, parents] of this.parents) {
        const cv = this.views.get(child);
        if (parents.includes(p) && cv && cv.status !== 'waiting') this.#releasedBefore.add(`${child}>${p}`);
      }
    }
    this.#checkParents(step, now, newAttempts, runs);
    this.#checkRunning(step, now);
    this.#checkDue(step, now);
    if (RUNS_JOBS.has(step.op.t)) this.#checkLimits(step, now);
    this.#checkBatches(step, runs);

    this.views.clear();
    for (const [id, v] of now) this.views.set(id, v);
  }

  /** A job's ledger agrees with its row: numbered from 1, one open attempt while running, attempts charged since its last replay. */
  #checkLedger(step: StepInfo, v: JobView, ledger: AttemptView[]): void {
    const id = v.id;
    ledger.forEach((a, i) => {
      if (a.attempt !== i + 1) this.#fail(step, `job ${id}: attempt ${i + 1} of the ledger is numbered ${a.attempt}`);
      if (a.finishedAt === null && i !== ledger.length - 1) this.#fail(step, `job ${id}: attempt ${a.attempt} is open but not the last`);
      if (a.finishedAt !== null && a.finishedAt.getTime() < a.startedAt.getTime()) this.#fail(step, `job ${id}: attempt ${a.attempt} finished before it started`);
    });
    const open = ledger.filter((a) => a.finishedAt === null).length;
    if ((v.status === 'running') !== (open === 1)) this.#fail(step, `job ${id} is ${v.status} with ${open} open attempts`);
    const since = this.#replayedAt.get(id) ?? -Infinity;
    const charged = ledger.filter((a) => a.startedAt.getTime() >= since && a.outcome !== null && CHARGED.has(a.outcome)).length;
    if (charged !== v.attempts) this.#fail(step, `job ${id}: attempts ${v.attempts}, but its ledger charges ${charged} since its last replay`);
    if ((v.finishedAt !== null) !== FINAL.has(v.status)) this.#fail(step, `job ${id} is ${v.status} with finishedAt ${time(v.finishedAt)}`);
    const last = ledger[ledger.length - 1];
    if (v.status === 'succeeded' && last?.outcome !== 'ok') this.#fail(step, `job ${id} succeeded, its last attempt's outcome is ${last?.outcome}`);
    if (v.status === 'dead' && v.lastErrorCode === null) this.#fail(step, `job ${id} is dead without an error code`);
  }

  /** The exclusion (exclusions.ts) that holds a child's order against its parents back, if one applies to it. */
  #excuse(id: string): ExclusionName | null {
    if (this.#replayedAlone.has(id)) return 'replay-ignores-parents';
    if (this.meta.get(id)?.heldByIndex) return 'held-list-parent';
    return null;
  }

  /** A child starts only after every parent ended; one kept `cancel` never after a parent failed; none waits forever after a sweep. */
  #checkParents(step: StepInfo, now: Map<string, JobView>, fresh: Map<string, AttemptView[]>, runs: Probe['runs']): void {
    for (const [id, v] of now) {
      if (step.created.has(id) && v.status === 'cancelled' && v.lastErrorCode === 'parent_failed') this.#bornCancelled.add(id);
      // Waiting again: it waits for its parents' ends anew.
      if (v.status === 'waiting') for (const p of this.parents.get(id) ?? []) this.#releasedBefore.delete(`${id}>${p}`);
    }
    for (const [id, attempts] of fresh) {
      const parents = this.parents.get(id);
      if (!parents) continue;
      const keep = this.meta.get(id)?.onParentFailure ?? 'cancel';
      const excuse = this.#excuse(id);
      for (const a of attempts) {
        for (const p of parents) {
          const pv = now.get(p);
          if (!pv) continue; // removed by retention or erase: it had ended
          if (this.#releasedBefore.has(`${id}>${p}`)) continue;
          if (!FINAL.has(pv.status) || (pv.finishedAt !== null && pv.finishedAt.getTime() > a.startedAt.getTime())) {
            this.#failUnless(excuse ?? 'replay-ignores-parents', excuse !== null, step, `child ${id} started attempt ${a.attempt} at ${a.startedAt.getTime()} before parent ${p} ended (${pv.status}, finished ${time(pv.finishedAt)})`);
          }
          if (keep === 'cancel' && (pv.status === 'dead' || pv.status === 'cancelled')) {
            this.#failUnless(excuse ?? 'replay-ignores-parents', excuse !== null, step, `child ${id} (onParentFailure cancel) ran attempt ${a.attempt} though parent ${p} is ${pv.status}`);
          }
        }
      }
    }
    for (const r of runs) {
      const m = this.meta.get(r.id);
      if (m?.onParentFailure === 'cancel' && r.parents && r.parents.dead + r.parents.cancelled > 0) {
        const excuse = this.#bornCancelled.has(r.id) ? 'revived-child-tally' : this.#excuse(r.id);
        this.#failUnless(excuse ?? 'revived-child-tally', excuse !== null, step, `child ${r.id} (onParentFailure cancel) ran told of parents ${JSON.stringify(r.parents)}`);
      }
      if (m?.onParentFailure !== null && m?.onParentFailure !== undefined && r.parents === null) this.#fail(step, `child ${r.id} ran without its parents' outcomes`);
    }
    for (const [id, v] of now) if (v.status === 'waiting' && (this.parents.get(id) ?? []).length === 0) this.#fail(step, `job ${id} waits with no parents`);
    if (step.op.t !== 'sweep') return;
    // The sweep's dependencies step (its first after recovery) ends the wait of every waiting job
    // whose parents had all ended before it began. (One whose last parent ends in the sweep's own
    // drain may still wait, when another of its parents ended unseen: the next sweep's.)
    const ended = (p: string) => !this.views.has(p) || FINAL.has(this.views.get(p)!.status);
    for (const [id, v] of now) {
      if (v.status !== 'waiting' || this.views.get(id)?.status !== 'waiting') continue;
      const parents = this.parents.get(id) ?? [];
      if (parents.every(ended)) this.#fail(step, `job ${id} still waits after a sweep though its parents ${parents.join(',')} had all ended before it`);
    }
  }

  /** Nothing runs after a step but injected crashes; a sweep or recovery takes back every crash whose lease had run out. */
  #checkRunning(step: StepInfo, now: Map<string, JobView>): void {
    for (const [id, c] of this.#crashed) {
      const v = now.get(id);
      const seq = this.ledgers.get(id)?.length ?? 0;
      if (!v || v.status !== 'running' || seq !== c.seq) {
        this.#crashed.delete(id);
        continue;
      }
      if ((step.op.t === 'sweep' || step.op.t === 'recover') && c.leaseExpiresAt < step.startNow) {
        this.#fail(step, `job ${id}: its crashed attempt's lease ran out at ${c.leaseExpiresAt}, still running after a ${step.op.t} at ${step.startNow}`);
      }
    }
    for (const [id, v] of now) {
      if (v.status === 'running' && !this.#crashed.has(id)) this.#fail(step, `job ${id} is running after the step, and no crash was injected on it`);
    }
  }

  /** A drain (or a sweep's) leaves nothing due behind but what a rate limit holds back, and a sweep leaves nothing past retention. */
  #checkDue(step: StepInfo, now: Map<string, JobView>): void {
    if (step.op.t !== 'drain' && step.op.t !== 'sweep') return;
    for (const [id, v] of now) {
      if ((v.status === 'pending' || v.status === 'retrying') && v.dueAt.getTime() <= step.startNow && v.kind !== kindOf('rated')) {
        this.#fail(step, `job ${id} (${v.kind}, ${v.status}) was due at ${v.dueAt.getTime()} and the ${step.op.t} at ${step.startNow} left it`);
      }
      const finished = time(v.finishedAt);
      if (step.op.t === 'sweep' && finished !== null && FINAL.has(v.status)) {
        const retention = v.status === 'succeeded' ? RETENTION.succeededMs : RETENTION.deadMs;
        if (finished + retention + 1 < step.startNow) this.#fail(step, `job ${id} (${v.status}, finished ${finished}) outlived retention in a sweep at ${step.startNow}`);
      }
    }
  }

  /**
   * Flow limits on the ledger: attempts of a kind holding a slot at once ([start, finish), an
   * open one until now), per tenant too, and starts of the rate-limited kind within its window.
   */
  #checkLimits(step: StepInfo, now: Map<string, JobView>): void {
    const spans = (kind: string, by: (v: JobView) => string) => {
      const out = new Map<string, [number, number][]>();
      for (const [id, v] of now) {
        if (v.kind !== kind) continue;
        for (const a of this.ledgers.get(id) ?? []) {
          const key = by(v);
          if (!out.has(key)) out.set(key, []);
          out.get(key)!.push([a.startedAt.getTime(), a.finishedAt?.getTime() ?? Infinity]);
        }
      }
      return out;
    };
    const most = (list: [number, number][]) => {
      // Half-open spans: an attempt that settles at t frees its slot for a claim at t.
      const events = list.flatMap(([s, e]) => [[s, 1], [e, -1]] as [number, number][]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
      let n = 0;
      let top = 0;
      for (const [, d] of events) top = Math.max(top, (n += d));
      return top;
    };
    const limit = (kind: string, by: (v: JobView) => string, max: number, what: string) => {
      for (const [key, list] of spans(kind, by)) {
        const n = most(list);
        if (n > max) this.#fail(step, `${what}: ${n} attempts of ${kind}${key ? ` (tenant ${key})` : ''} held slots at once, limit ${max}`);
      }
    };
    limit(kindOf('capped'), () => '', LIMITS.capped.concurrency, 'concurrency');
    limit(kindOf('tenant'), () => '', LIMITS.tenant.concurrency, 'concurrency');
    limit(kindOf('tenant'), (v) => v.tenantKey ?? '-', LIMITS.tenant.tenantConcurrency, 'tenantConcurrency');
    const starts = [...(spans(kindOf('rated'), () => '').get('') ?? [])].map(([s]) => s).sort((a, b) => a - b);
    for (let i = 0; i < starts.length; i++) {
      const inWindow = starts.filter((s) => s >= starts[i]! && s < starts[i]! + LIMITS.rated.perMs).length;
      if (inWindow > LIMITS.rated.starts) this.#fail(step, `rateLimit: ${inWindow} starts of ${kindOf('rated')} within ${LIMITS.rated.perMs} ms from ${starts[i]}, limit ${LIMITS.rated.starts}`);
    }
  }

  /** A batch's completion runs at most once, told of all its members. */
  #checkBatches(step: StepInfo, runs: Probe['runs']): void {
    for (const r of runs) {
      const m = this.meta.get(r.id);
      if (m?.batchMembers === null || m?.batchMembers === undefined) continue;
      if (r.parents?.total !== m.batchMembers) this.#fail(step, `batch ${r.id}'s completion was told of ${r.parents?.total} members, it has ${m.batchMembers}`);
      const runs = (this.#completionRuns.get(r.id) ?? 0) + 1;
      this.#completionRuns.set(r.id, runs);
      if (runs > 1) this.#fail(step, `batch ${r.id}'s completion ran ${runs} times`);
      const ran = (this.ledgers.get(r.id) ?? []).filter((a) => a.outcome === 'ok').length;
      if (ran > 1) this.#fail(step, `batch ${r.id}'s completion succeeded ${ran} times`);
    }
  }
}
