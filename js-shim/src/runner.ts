// The drain loop of one lane: the core plans each claim; one statement settles the previous
// batch and claims the next; the batch's handlers run concurrently; repeat. So a batch of N
// jobs costs one round trip (plus one per job whose settlement runs a hook).
import { addReport, emptyReport, type ClaimedRow, type Finished, type RunReport } from './attempt.js';
import { runHandler } from './handler.js';
import { JOB_CLAIM_DUE, JOB_CLAIM_TARGETS } from './queries/claim.js';
import { JOB_SETTLE_THEN_CLAIM_DUE, JOB_SETTLE_THEN_CLAIM_TARGETS } from './queries/drain.js';
import { run } from './queries/statement.js';
import type { OutboxRuntime } from './runtime.js';
import type { LaneSession } from './session.js';
import { decide, needsHooks, pair, recordAll, settleAll, settleColumns, settleHooked, type Settlement } from './settle.js';

export { addReport, emptyReport, settleAll, type ClaimedRow, type Finished, type RunReport };

interface ClaimPlan {
  limit: number;
  kinds: string[];
  leaseMs: number[];
  versionCutoff: number | null;
  targetOnly: boolean;
}

export interface DrainOptions {
  lane: string;
  deadlineAt: number;
  /** Only these kinds (a reserved sweep); default every registered kind of the lane. */
  kinds?: readonly string[];
  /** Stop after claiming this many. */
  maxJobs?: number;
  /** Claim only these nudged jobs. */
  targets?: readonly { id: string; kind: string }[];
  /** Called (once) when the plan drops a kind right after a full batch: due jobs likely remain. */
  onBacklog?: () => void;
}

/**
 * Claims and runs jobs of one lane until none are due, the plan says stop, or `maxJobs`.
 * Plain settlements ride on the next claim statement; the last batch's are written alone.
 */
export async function drainLane(rt: OutboxRuntime, session: LaneSession, opts: DrainOptions): Promise<RunReport> {
  const report = emptyReport();
  const policies = opts.kinds ? rt.policies.filter((p) => opts.kinds!.includes(p.kind)) : rt.policies;
  // The core decides, per nudge, whether this lane may claim it at all.
  const targets = opts.targets?.filter((target) => plan(rt, policies, opts, target).limit > 0);
  if (targets?.length === 0) return report;
  let carry: Finished[] = [];
  let lastBatchFull = false;
  let plannedKinds: number | undefined;
  let backlogReported = false;
  try {
    for (;;) {
      const claimPlan = plan(rt, policies, opts, null);
      // The plan drops a kind once its attempt could no longer finish in the budget; if the
      // batch before was full, that kind likely still has due jobs.
      plannedKinds ??= claimPlan.kinds.length;
      if (!backlogReported && lastBatchFull && !targets && claimPlan.kinds.length < plannedKinds) {
        backlogReported = true;
        opts.onBacklog?.();
      }
      let limit = claimPlan.limit;
      if (opts.maxJobs !== undefined) limit = Math.min(limit, opts.maxJobs - report.claimed);
      if (limit <= 0 || claimPlan.kinds.length === 0) break;
      // Nudged targets are claimed a batch at a time, like a drain, so `concurrency` holds.
      const chunk = targets?.splice(0, limit);
      if (chunk?.length === 0) break;
      const now = rt.clock.now();
      const claimArgs = [opts.lane, claimPlan.kinds, claimPlan.leaseMs, limit, claimPlan.versionCutoff];
      if (chunk) claimArgs.push(chunk.map((t) => t.id), chunk.map((t) => t.kind));
      let rows: ClaimedRow[];
      if (carry.length > 0) {
        const items: Settlement[] = pair(carry, decide(rt, now, carry));
        const statement = chunk ? JOB_SETTLE_THEN_CLAIM_TARGETS : JOB_SETTLE_THEN_CLAIM_DUE;
        const out = await session.exclusive(async (q) => (await run(q, statement, [now, ...settleColumns(items), ...claimArgs])).rows[0]);
        carry = [];
        recordAll(rt, report, items, new Set(out.settled as string[]));
        rows = out.claimed as ClaimedRow[];
      } else {
        const statement = chunk ? JOB_CLAIM_TARGETS : JOB_CLAIM_DUE;
        rows = await session.exclusive(async (q) => (await run(q, statement, [now, ...claimArgs])).rows as ClaimedRow[]);
      }
      if (rows.length === 0) break;
      lastBatchFull = rows.length === limit;
      report.claimed += rows.length;
      const finished = await runBatch(rt, session, rows, opts.deadlineAt);
      await settleHooked(rt, session, finished.filter((f) => needsHooks(rt, f)), report);
      carry = finished.filter((f) => !needsHooks(rt, f));
      if (!chunk && rows.length < limit) break;
    }
  } catch (error) {
    // The statement that would have carried these failed as a whole: write them on a fresh session.
    if (carry.length > 0) {
      await session.replace();
      addReport(report, await settleAll(rt, session, carry));
    }
    throw error;
  }
  if (carry.length > 0) addReport(report, await settleAll(rt, session, carry));
  return report;
}

function plan(rt: OutboxRuntime, policies: readonly OutboxRuntime['policies'][number][], opts: DrainOptions, target: { id: string; kind: string } | null): ClaimPlan {
  return rt.core.call<ClaimPlan>('claim', {
    op: 'plan',
    now: rt.clock.now(),
    deadlineAt: opts.deadlineAt,
    lane: opts.lane,
    concurrency: rt.concurrency,
    maxBatch: 100,
    policies,
    version: rt.versionTs === null ? null : { timestamp: rt.versionTs },
    target,
  });
}

/** Runs a claimed batch concurrently, admitting each job first (the core may say claim_late). */
async function runBatch(rt: OutboxRuntime, session: LaneSession, rows: ClaimedRow[], deadlineAt: number): Promise<Finished[]> {
  const now = rt.clock.now();
  let abandoned = false;
  const finished = await Promise.all(
    rows.map(async (row): Promise<Finished> => {
      // Claims only pick registered kinds, so the job is always there.
      const job = rt.registry.get(row.kind)!;
      const admit = rt.core.call<{ start: boolean; deadline?: number }>('claim', {
        op: 'admit', now, deadlineAt, leaseExpiresAt: Number(row.lease_expires_ms), timeoutMs: job.policy.timeoutMs,
      });
      if (!admit.start) return { row, outcome: { type: 'claim_late' } };
      const result = await runHandler(rt, session, job, row, admit.deadline!);
      if (result.abandoned) abandoned = true;
      return result.finished;
    }),
  );
  // A handler that timed out mid-query may hold the session forever: settle on a fresh one.
  if (abandoned) await session.replace();
  return finished;
}
