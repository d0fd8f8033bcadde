/**
 * What the kill-drain run's parent and its workers share: the job, the table its handler
 * writes, and the sweep options both use.
 */
import { defineJob, ok } from 'postbox';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';

export const KIND = 'chaos.work';
export const LANE = 'default';
export const CONCURRENCY = 8;

/**
 * Every run of the handler, written through `ctx.db` before the handler returns: the run's
 * side effect, counted against the job's attempts afterwards. `pid` tells which process ran it.
 */
export const RUNS_TABLE = `CREATE TABLE public.runs (
  job_id  uuid        NOT NULL,
  attempt integer     NOT NULL,
  pid     integer     NOT NULL,
  at      timestamptz NOT NULL DEFAULT clock_timestamp(),
  -- The job's parents (dependsOn) not yet succeeded when this run began: always 0, or a child
  -- ran before its parents were done.
  open_parents integer NOT NULL
)`;

/**
 * Every run of a batch's completion job: what `ctx.parents` told it, and how many of its members
 * had not ended when the run began (always 0, or the completion ran early).
 */
export const COMPLETIONS_TABLE = `CREATE TABLE public.completions (
  job_id  uuid    NOT NULL,
  attempt integer NOT NULL,
  total   integer NOT NULL,
  succeeded integer NOT NULL,
  open_members integer NOT NULL
)`;

/** Jobs are enqueued in batches of this many (outbox.batch), each with a completion job. */
export const BATCH_SIZE = 100;
export const DONE_KIND = 'chaos.batch_done';

/** One job in ten depends on the two enqueued just before it (dependsOn). */
export const hasParents = (i: number): boolean => i % 10 === 9;

/** One job in fifty is slow, so kills and clock jumps also catch long attempts mid-run. */
export const isSlow = (i: number): boolean => i % 50 === 0;
/**
 * One job in five hundred gets stuck in a query past its timeout on its first attempt: the lane
 * session is replaced while the other handlers' queries wait behind it (they time out too).
 */
export const isStuck = (i: number): boolean => i % 500 === 7;

export const chaosJob = defineJob({
  kind: KIND,
  payload: z.object({ i: z.number().int().nonnegative() }),
  // Short, so the lease (timeout + a 6 s margin) is short too: recovery moves the clock past it.
  timeoutMs: 2_000,
  retry: {
    // A job is crashed at most once per clock jump (and once more by the final recovery), far
    // fewer than 100: a dead(crash_loop) here means attempts were lost, not a policy at work.
    maxCrashes: 100,
    maxAttempts: 100,
    // Recovered and retried jobs come back within half a second of real time, not 30 s.
    backoff: { baseMs: 50, maxMs: 500 },
  },
  async handle({ i }, ctx) {
    // The side effect first, then the work: a kill during the sleep leaves a recorded run whose
    // attempt never settles, the duplicate that at-least-once allows.
    await ctx.db.query(
      `INSERT INTO public.runs (job_id, attempt, pid, open_parents)
       SELECT $1, $2, $3, (SELECT count(*) FROM outbox.job_edge e JOIN outbox.job p ON p.id = e.parent_id WHERE e.child_id = $1 AND p.status <> 'succeeded')`,
      [ctx.jobId, ctx.attempt, process.pid],
    );
    if (isStuck(i) && ctx.attempt === 1) await ctx.db.query('SELECT pg_sleep(2.5)');
    await sleep(isSlow(i) ? 200 : 1 + Math.floor(Math.random() * 20));
    return ok();
  },
});

export const LEASE_MS = chaosJob.policy.leaseMs;

/** A batch's completion: notes what it was told of its members, and how many had not ended, through ctx.db. */
export const batchDoneJob = defineJob({
  kind: DONE_KIND,
  payload: z.object({ batch: z.number().int().nonnegative() }),
  timeoutMs: 2_000,
  retry: chaosJob.retry,
  async handle(_payload, ctx) {
    await ctx.db.query(
      `INSERT INTO public.completions (job_id, attempt, total, succeeded, open_members)
       SELECT $1, $2, $3, $4, (SELECT count(*) FROM outbox.job_edge e JOIN outbox.job p ON p.id = e.parent_id
                                WHERE e.child_id = $1 AND p.status NOT IN ('succeeded', 'dead', 'cancelled'))`,
      [ctx.jobId, ctx.attempt, ctx.parents?.total ?? -1, ctx.parents?.succeeded ?? -1],
    );
    return ok();
  },
});

/** Sweep options for every sweep of the run: retention must not delete what is verified. */
export const SWEEP_OPTIONS = { retention: { succeededRetentionMs: 30 * 86_400_000, deadRetentionMs: 30 * 86_400_000 } };

/** Parent → worker. */
export type ToWorker = { type: 'clock'; offsetMs: number } | { type: 'stop' };
/** Worker → parent: `counts` are the worker's totals so far (events by type, drain reports). */
export type FromWorker = { type: 'ready' } | { type: 'counts'; counts: Record<string, number> };
