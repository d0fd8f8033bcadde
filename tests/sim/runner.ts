// Runs one seed's operation sequence on one store through createSqliteOutbox (the one engine
// every store runs under), checks the invariants after every step, and digests the end state
// for the comparison across stores (digest.ts). Runs inside workerd (tests/shim/fixtures/sim-worker.ts).
import { EnqueueRefusedError } from '../../js-shim/src/errors.ts';
import { createSqliteOutbox } from '../../js-shim/src/sqlite-outbox.ts';
import type { OutboxStore } from '../../js-shim/src/stores/contract.ts';
import type { EnqueueOptions, EnqueueResult, OutboxEvent } from '../../js-shim/src/types.ts';
import { Checker, type JobMeta, type StepInfo } from './invariants.ts';
import { UNKNOWN_PICK, configFor, generate, type ItemSpec, type Op } from './ops.ts';
import { ALL_EXCLUSIONS, type ExclusionName } from './exclusions.ts';
import { LIMITS, MAX_DRIFT_MS, Probe, RETENTION, T0, TICK, idGenerator, kindOf, nameOf, simJobs, type KindName } from './world.ts';

/** The four stores, as the engine scenarios' `Harness` (tests/shim/fixtures/sqlite/scenarios.ts) names them. */
export type Flavor = 'memory' | 'd1' | 'durable-object' | 'postgres';

/**
 * A store to run on: the engine scenarios' `Harness` less its raw SQL driver and other outboxes,
 * since the simulation uses only the store contract.
 */
export interface SimTarget {
  flavor: Flavor;
  store: OutboxStore<any, any>;
  db: unknown;
}

/** The end of a run, comparable across stores: each step's result, and each job's state and ledger. */
export interface Digest {
  steps: string[];
  jobs: Record<string, string>;
}

export interface SimResult {
  seed: number;
  ops: number;
  violations: string[];
  /** How often each exclusion (exclusions.ts) held a violation back or kept the run off its path. */
  excused: Partial<Record<ExclusionName, number>>;
  digest: Digest;
  /** Set when the run itself broke (an operation threw where nothing may). */
  error?: string;
  /** A drain or sweep never returned: it may still be running on the store's tables. */
  stuck?: boolean;
}

const NO_SUCH_JOB = 'ffffffff-ffff-4fff-8fff-ffffffffffff';
class StuckError extends Error {}

/** Real time a drain or sweep may take before the run reports it stuck; a whole sequence takes well under a second. */
const WATCHDOG_MS = 20_000;

/** Runs the first `count` operations of seed `seed` on `target`, whose tables are empty. */
export async function runSequence(target: SimTarget, seed: number, count: number, run: { trace?: (line: string) => void; events?: (event: OutboxEvent) => void; exclusions?: ReadonlySet<ExclusionName> } = {}): Promise<SimResult> {
  const ops = generate(seed, count);
  const exclusions = run.exclusions ?? ALL_EXCLUSIONS;
  const config = configFor(seed);
  const clock = { now: T0 };
  const probe = new Probe();
  const jobs = simJobs(clock, probe);
  const outbox = createSqliteOutbox({
    store: target.store,
    jobs: Object.values(jobs),
    now: () => clock.now,
    generateId: idGenerator(seed),
    retention: RETENTION,
    concurrency: config.concurrency,
    fairShare: config.fairShare,
    ...(run.events ? { events: run.events } : {}),
  });
  const { store, db } = target;
  const checker = new Checker(store, db, exclusions);
  /** Jobs created so far, in creation order (the same on every store while they agree). */
  const created: { id: string; meta: JobMeta }[] = [];
  const batches: string[] = [];
  let erasedLeasesUntil = -Infinity;
  const steps: string[] = [];
  const result: SimResult = { seed, ops: ops.length, violations: checker.violations, excused: checker.excused, digest: { steps, jobs: {} } };

  const resolve = (pick: number, pool: readonly string[]): string => (pick === UNKNOWN_PICK || pool.length === 0 ? NO_SUCH_JOB : pool[pick % pool.length]!);
  const sameTenant = (tenant: string | null) => {
    const pool = created.filter((c) => c.meta.tenant === tenant).map((c) => c.id);
    return pool.length > 0 ? pool : created.map((c) => c.id);
  };
  /** The enqueue options of an item, its parents resolved. */
  const options = (it: ItemSpec): EnqueueOptions<unknown> => {
    const o: EnqueueOptions<unknown> = { payload: { s: it.s, a: it.a, tag: it.tag }, tenantKey: it.tenant };
    if (it.dedupe !== undefined) o.dedupeKey = it.dedupe;
    if (it.delayMs !== undefined) o.delayMs = it.delayMs;
    if (it.priority !== undefined) o.priority = it.priority;
    if (it.maxAttempts !== undefined) o.maxAttempts = it.maxAttempts;
    if (it.parents) {
      o.dependsOn = it.parents.map((p) => ('index' in p ? p.index : 'unknown' in p ? NO_SUCH_JOB : resolve(p.pick, sameTenant(it.tenant))));
      if (it.onParentFailure) o.onParentFailure = it.onParentFailure;
    }
    return o;
  };
  const record = (step: StepInfo, kind: KindName, items: readonly ItemSpec[], results: readonly EnqueueResult[]) => {
    results.forEach((r, i) => {
      if (r.status !== 'created') return;
      const it = items[i]!;
      const byIndex = (it.parents ?? []).some((p) => 'index' in p);
      const heldByIndex = (it.parents ?? []).some((p) => 'index' in p && results[p.index]?.status !== 'created');
      const meta: JobMeta = { kind: kindOf(kind), tenant: it.tenant, onParentFailure: it.parents ? it.onParentFailure ?? 'cancel' : null, batchMembers: null, byIndex, heldByIndex };
      created.push({ id: r.id, meta });
      step.created.set(r.id, meta);
    });
  };
  const statuses = (results: readonly EnqueueResult[]) =>
    results.map((r) => (r.status === 'created' || r.status === 'exists' ? `${r.status}:${r.id.slice(-4)}` : 'reason' in r ? `${r.status}:${r.reason}` : r.status)).join(',');
  const operated = (results: readonly { id: string; status: string; jobStatus?: string }[]) => results.map((r) => `${r.id.slice(-4)}:${r.status}${r.jobStatus ? `:${r.jobStatus}` : ''}`).join(',');
  const scopeOf = (op: { scope?: string | null }) => ('scope' in op ? { tenantKey: op.scope ?? null } : undefined);

  for (let index = 0; index < ops.length; index++) {
    const op = ops[index]!;
    // Before the step starts (exclusion standing-clock-throttle): its clock is then its own.
    const moved = op.t === 'drain' || op.t === 'sweep' ? skipStandingWaits() : '';
    const step: StepInfo = { index, op, startNow: clock.now, endNow: clock.now, created: new Map(), replayed: [], crashed: [], erased: null, released: false };
    let summary: string;
    run.trace?.(`${index} @${clock.now - T0} ${JSON.stringify(op)}`);
    try {
      summary = await apply(op, step);
    } catch (error) {
      // No operation here may throw: refusals are results, and a refused batch is caught below.
      const e = error as Error;
      result.error = `step ${index} (${JSON.stringify(op)}) threw: ${e?.stack ?? String(error)}`;
      if (error instanceof StuckError) result.stuck = true;
      break;
    }
    step.endNow = clock.now;
    if (clock.now - step.startNow > MAX_DRIFT_MS && op.t !== 'clock') {
      result.error = `step ${index}: the clock moved ${clock.now - step.startNow} ms within one step; the grid (world.ts) no longer holds`;
      break;
    }
    steps.push(`${index} ${op.t}: ${moved}${summary}`);
    await checker.check(step, probe, index === ops.length - 1);
    // A drain or sweep takes up to a second: the next step starts on the next one.
    if (op.t === 'drain' || op.t === 'sweep' || op.t === 'recover') clock.now = Math.floor(clock.now / TICK) * TICK + TICK;
  }

  for (const [id, v] of [...checker.views].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const ledger = (checker.ledgers.get(id) ?? []).map((a) => `${a.outcome ?? 'open'}${a.code ? `/${a.code}` : ''}`).join(' ');
    const told = checker.told.get(id);
    result.digest.jobs[id] = `${v.status} attempts=${v.attempts} crashes=${v.crashes} code=${v.lastErrorCode ?? '-'} [${ledger}]${told ? ` told=${told.join(',')}` : ''}`;
  }
  for (const [id, why] of checker.gone) result.digest.jobs[id] = `gone (${why})`;
  return result;

  /**
   * Exclusion `standing-clock-throttle` (exclusions.ts): a drain on a clock that stands still
   * waits forever for a rate slot that frees within 5 s of it. Before a drain or sweep, the clock
   * moves to the second after any such slot frees, by the ledger the store gave (the starts of
   * the rate-limited kind); and past erased jobs' leases (erase-holds-slots). Returns what it
   * did, for the step's summary.
   */
  function skipStandingWaits(): string {
    const from = clock.now;
    const why = new Set<string>();
    const starts: number[] = [];
    for (const [id, v] of checker.views) if (v.kind === kindOf('rated')) for (const a of checker.ledgers.get(id) ?? []) starts.push(a.startedAt.getTime());
    // Each move may bring the other's wait within reach: until neither moves the clock.
    for (let moved = true; moved; ) {
      moved = false;
      // The drain's own clock runs up to MAX_DRIFT_MS past its start: a second more covers it.
      const frees = starts.map((s) => s + LIMITS.rated.perMs).filter((f) => f > clock.now && f <= clock.now + 5_000 + TICK);
      if (exclusions.has('standing-clock-throttle') && frees.length > 0) {
        clock.now = Math.floor(Math.max(...frees) / TICK) * TICK + TICK;
        why.add('a rate slot');
        moved = true;
      }
      if (exclusions.has('erase-holds-slots') && clock.now <= erasedLeasesUntil) {
        clock.now = Math.floor(erasedLeasesUntil / TICK) * TICK + TICK;
        why.add("erased jobs' leases");
        moved = true;
      }
    }
    return clock.now === from ? '' : `(clock +${clock.now - from} past ${[...why].join(' and ')}) `;
  }

  /**
   * Exclusion `erase-holds-slots` (exclusions.ts): on PostgreSQL, a concurrency slot an erased
   * job's last attempt took stays held until that attempt's lease would have ended. Before an
   * erase, note when the latest such lease ends (from the ledgers the store gave).
   */
  function noteErasedLeases(tenant: string): void {
    for (const [id, v] of checker.views) {
      if (v.tenantKey !== tenant || (v.kind !== kindOf('capped') && v.kind !== kindOf('tenant'))) continue;
      const last = checker.ledgers.get(id)?.at(-1);
      if (last) erasedLeasesUntil = Math.max(erasedLeasesUntil, last.startedAt.getTime() + jobs[nameOf(v.kind)].policy.leaseMs);
    }
  }

  /**
   * An operator action's ids. Exclusion `duplicate-operator-ids` (exclusions.ts): each id once,
   * since a cancel that names a job twice counts its end twice for its waiting children.
   */
  function targets(picks: readonly number[]): string[] {
    const ids = picks.map((p) => resolve(p, created.map((c) => c.id)));
    if (!exclusions.has('duplicate-operator-ids')) return ids;
    const once = [...new Set(ids)];
    if (once.length < ids.length) checker.excused['duplicate-operator-ids'] = (checker.excused['duplicate-operator-ids'] ?? 0) + 1;
    return once;
  }

  /**
   * Exclusion `cancel-with-descendant` (exclusions.ts): a cancel names no job together with one of
   * its descendants (by the edges the store reported), since PostgreSQL then counts the
   * descendant's end twice for its own waiting children.
   */
  function withoutDescendants(ids: string[]): string[] {
    if (!exclusions.has('cancel-with-descendant')) return ids;
    const children = new Map<string, string[]>();
    for (const [child, parents] of checker.parents) for (const p of parents) children.set(p, [...(children.get(p) ?? []), child]);
    const below = new Set<string>();
    const walk = (id: string) => {
      for (const c of children.get(id) ?? []) if (!below.has(c)) (below.add(c), walk(c));
    };
    ids.forEach(walk);
    const kept = ids.filter((id) => !below.has(id));
    if (kept.length < ids.length) checker.excused['cancel-with-descendant'] = (checker.excused['cancel-with-descendant'] ?? 0) + 1;
    return kept;
  }

  /** A drain or sweep that has not returned after WATCHDOG_MS of real time is reported, not waited for. */
  function watchdog<T>(work: Promise<T>, what: string): Promise<T> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stuck = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new StuckError(`${what} had not returned after ${WATCHDOG_MS} ms of real time (the outbox's clock stands still within a step)`)), WATCHDOG_MS);
    });
    return Promise.race([work, stuck]).finally(() => clearTimeout(timer));
  }

  async function apply(op: Op, step: StepInfo): Promise<string> {
    switch (op.t) {
      case 'enqueue': {
        const job = jobs[op.kind];
        const items = op.items.map(options);
        const results = op.many ? await outbox.enqueueMany(db, job, items) : [await outbox.enqueue(db, job, items[0]!)];
        record(step, op.kind, op.items, results);
        return statuses(results);
      }
      case 'batch': {
        const n = batches.length + 1;
        const groups: { kind: KindName; items: readonly ItemSpec[]; results: EnqueueResult[] }[] = [];
        try {
          const made = await store.transaction(db, (tx) =>
            outbox.batch(tx, { onComplete: { job: jobs.done, payload: { batch: `b${n}` }, tenantKey: op.tenant } }, async (m) => {
              for (const g of op.members) groups.push({ kind: g.kind, items: g.items, results: await m.enqueueMany(jobs[g.kind], g.items.map(options)) });
            }));
          for (const g of groups) record(step, g.kind, g.items, g.results);
          const meta: JobMeta = { kind: kindOf('done'), tenant: op.tenant, onParentFailure: 'run', batchMembers: made.members, byIndex: false, heldByIndex: false };
          created.push({ id: made.id, meta });
          step.created.set(made.id, meta);
          batches.push(made.id);
          return `batch ${made.id.slice(-4)} members=${made.members} ${groups.map((g) => statuses(g.results)).join(' | ')}`;
        } catch (error) {
          // A refused completion (a member outside the batch's tenant) throws, and nothing of the batch commits.
          if (error instanceof EnqueueRefusedError) return `batch refused: ${error.result.status}${'reason' in error.result ? `:${error.result.reason}` : ''}`;
          throw error;
        }
      }
      case 'drain': {
        const r = await watchdog(outbox.drain(db), 'drain');
        step.released = r.released > 0;
        // `throttled` counts the drain's polls of a limited kind, timed in real time: not compared.
        return `claimed=${r.claimed} ok=${r.succeeded} retrying=${r.retrying} dead=${r.dead} cancelled=${r.cancelled} pending=${r.pending} late=${r.claimLate} released=${r.released} stale=${r.stale}`;
      }
      case 'sweep': {
        const r = await watchdog(outbox.sweep(db), 'sweep');
        step.released = r.released > 0;
        if (r.failedSteps.length > 0) checker.violations.push(`step ${step.index} (sweep): failed steps ${r.failedSteps.join(',')}`);
        return `recovered=${r.recovered} unblocked=${r.unblocked} claimed=${r.claimed} ok=${r.succeeded} retrying=${r.retrying} dead=${r.dead} deleted=${r.deleted}`;
      }
      case 'recover': {
        const r = await outbox.recover(db);
        return `recovered=${r.recovered} retrying=${r.retrying} dead=${r.dead}`;
      }
      case 'clock':
        clock.now += op.ms;
        return `+${op.ms}`;
      case 'crash': {
        // An isolate claims and dies before it settles: its attempt stays open until recovered.
        const job = jobs[op.kind];
        const pool = created.filter((c) => c.meta.kind === job.kind).map((c) => c.id);
        if (pool.length === 0) return 'none';
        const ids = [...new Set(op.picks.map((p) => resolve(p, pool)))];
        const claimed = await store.claim(db, {
          now: clock.now, lane: job.lane, kinds: [job.kind], leaseMs: [job.policy.leaseMs], limit: ids.length, versionCutoff: null, targets: ids.map((id) => ({ id, kind: job.kind })),
        });
        for (const c of claimed) step.crashed.push({ id: c.id, seq: c.attempt_seq, leaseExpiresAt: Number(c.lease_expires_ms) });
        return claimed.map((c) => `${c.id.slice(-4)}#${c.attempt_seq}`).sort().join(',') || 'none';
      }
      case 'cancel':
        return operated(await outbox.cancelMany(db, withoutDescendants(targets(op.picks)), op.reason, scopeOf(op)));
      case 'replay': {
        const results = await outbox.replayMany(db, targets(op.picks), scopeOf(op));
        step.replayed.push(...results.filter((r) => r.status === 'ok').map((r) => r.id));
        return operated(results);
      }
      case 'retryNow':
        return operated(await outbox.retryNowMany(db, targets(op.picks), scopeOf(op)));
      case 'cancelBatch': {
        // Mostly a batch's id; now and then any job's (which is no batch: not_found).
        const pool = batches.length > 0 && op.pick % 4 !== 0 ? batches : created.map((c) => c.id);
        const r = await outbox.cancelBatch(db, resolve(op.pick, pool), 'batch off');
        // In id order: the members come in openBatchMembers' order, which the store contract leaves
        // to the store (PostgreSQL's differs from the others').
        return `${operated([r.completion])} members ${operated([...r.members].sort((a, b) => (a.id < b.id ? -1 : 1)))}`;
      }
      case 'erase': {
        step.erased = op.tenant;
        noteErasedLeases(op.tenant);
        return `erased=${await outbox.eraseTenant(db, op.tenant)}`;
      }
    }
  }
}
