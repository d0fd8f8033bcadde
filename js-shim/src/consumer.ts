// Running an outbox outside Cloudflare's handlers: a drain, a consumer that keeps draining
// until told to stop, and the sweep and recovery on their own. Nothing here imports a
// Node-only module: the same calls work in workerd (a Durable Object, say) and in Node.
import { PostboxError, errorMessage } from './errors.js';
import { RUN, type Outbox } from './outbox.js';
import { addReport, emptyReport, type RunReport } from './engine/drain.js';
import type { SweepOptions, SweepReport } from './engine/sweep.js';

/** Options of {@link runDrain}. */
export interface RunDrainOptions {
  /** The lane to drain. Default `default`. */
  lane?: string;
  /** Stops the drain: nothing more is claimed, claimed jobs not started yet are released. */
  signal?: AbortSignal;
  /** How long one drain may run (ms, at most 900,000). Default the core's 840,000. */
  budgetMs?: number;
}

/**
 * Claims and runs a lane's due jobs now, on `lanes` connections, until a claim finds nothing
 * more due, the budget is spent or `signal` aborts; resolves once every claimed job is settled
 * (or released). Rejects when a statement fails (the database is down, say), after settling
 * what it could.
 */
export async function runDrain(outbox: Outbox<any>, options: RunDrainOptions = {}): Promise<RunReport> {
  const engine = outbox[RUN];
  const rt = engine.runtime;
  const lane = options.lane ?? 'default';
  if (typeof lane !== 'string' || lane.length === 0) throw new PostboxError('invalid_input', 'runDrain: lane must be a non-empty string');
  const { deadlineAt } = rt.core.call<{ deadlineAt: number }>('claim', {
    op: 'deadline', startedAt: rt.clock.now(), invocationBudgetMs: options.budgetMs ?? null,
  });
  return engine.drain({ lane, deadlineAt, ...(options.signal ? { signal: options.signal } : {}) });
}

/** Options of {@link runConsumer}. */
export interface ConsumerOptions {
  /** Stops the consumer. Required: a consumer without a way to stop would never resolve. */
  signal: AbortSignal;
  /** Lanes to drain, each on its own loop. Default every lane a registered job uses. */
  lanes?: readonly string[];
  /**
   * How long a lane waits after a drain that found nothing due. Default 1,000 ms; 0 to 3,600,000.
   * After failed drains in a row it waits longer, as the core decides: from 1 s (or `idleMs`, if
   * longer), doubling per failure, up to 30 s (or `idleMs`).
   */
  idleMs?: number;
  /** How long each drain may run before the next starts (ms). Default the core's 840,000. */
  budgetMs?: number;
  /** Called after each drain that claimed something, with that drain's counts. */
  onReport?: (report: RunReport, lane: string) => void;
}

/**
 * Drains the outbox's lanes continuously in a long-lived process: each lane drains until
 * nothing is due, waits `idleMs` (or until `signal` aborts) and drains again. A failed drain
 * is reported as an `infra_error` event and retried after a wait that doubles with each failure
 * in a row (1 s to 30 s; see `idleMs`). When `signal` aborts,
 * nothing more is claimed, claimed jobs that have not started are released (due again at
 * once, nothing charged), running handlers finish and are settled; then the promise resolves
 * with the counts of every drain. Expired leases are not recovered here: run
 * {@link runSweep} (or {@link runRecovery}) on a timer beside it.
 *
 * @example
 * ```ts
 * const stop = new AbortController();
 * process.once('SIGTERM', () => stop.abort());
 * const report = await runConsumer(outbox, { signal: stop.signal });
 * ```
 */
export async function runConsumer(outbox: Outbox<any>, options: ConsumerOptions): Promise<RunReport> {
  const signal = options?.signal;
  if (!signal || typeof signal.aborted !== 'boolean' || typeof signal.addEventListener !== 'function') {
    throw new PostboxError('invalid_input', 'runConsumer: `signal` (an AbortSignal) is required');
  }
  const engine = outbox[RUN];
  const rt = engine.runtime;
  const idleMs = options.idleMs ?? null;
  // The core decides each wait: none after a claim, idleMs after an empty drain, longer after failures in a row.
  const waitMs = (claimed: number, failures: number) => rt.core.call<{ waitMs: number }>('claim', { op: 'idle', idleMs, claimed, failures }).waitMs;
  // Asked once before anything runs: an idleMs out of the core's bounds is refused here (invalid_input), not mid-loop.
  waitMs(0, 0);
  const registered = [...new Set(rt.policies.map((p) => p.lane))];
  const lanes = options.lanes ?? registered;
  if (lanes.length === 0) throw new PostboxError('invalid_input', 'runConsumer: no lane to drain');
  for (const lane of lanes) {
    if (!registered.includes(lane)) throw new PostboxError('invalid_input', `runConsumer: no registered job uses lane ${JSON.stringify(lane)}`);
  }
  const total = emptyReport();
  await Promise.all(
    [...new Set(lanes)].map(async (lane) => {
      let failures = 0;
      while (!signal.aborted) {
        let report: RunReport;
        try {
          report = await runDrain(outbox, { lane, signal, ...(options.budgetMs === undefined ? {} : { budgetMs: options.budgetMs }) });
          failures = 0;
        } catch (error) {
          rt.emit({ type: 'infra_error', where: `consumer ${lane}`, error: errorMessage(error) });
          await idle(waitMs(0, ++failures), signal);
          continue;
        }
        addReport(total, report);
        const wait = waitMs(report.claimed, 0);
        if (wait > 0) {
          await idle(wait, signal);
          continue;
        }
        try {
          options.onReport?.(report, lane);
        } catch {
          // A broken callback must not stop the consumer.
        }
      }
    }),
  );
  return total;
}

/**
 * One sweep, as the Cron Trigger runs it (recover expired leases → reserved sweeps → drain →
 * hand-off → retention), with the outbox's clock as its start. For processes that have no
 * Cron Trigger: run it every few minutes.
 */
export function runSweep(outbox: Outbox<any>, options: SweepOptions = {}): Promise<SweepReport> {
  const engine = outbox[RUN];
  return engine.sweep(engine.runtime.clock.now(), options);
}

/**
 * The sweep's first step alone: every attempt whose lease has expired on the outbox's clock
 * (its process died mid-run) is settled as a crash, so the job retries (or dead-letters after
 * `maxCrashes`). Counts come back as `recovered`.
 */
export function runRecovery(outbox: Outbox<any>): Promise<RunReport> {
  return outbox[RUN].recover();
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function idle(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done);
  });
}

export type { RunReport, SweepOptions, SweepReport };
