// What a claimed attempt is, how it ended, and what a run of attempts did.
import type { ClaimedJob } from '../stores/contract.js';
import type { AttemptTrace, Queryable } from '../types.js';

/** A job row as claimed (or found with an expired lease): the store contract's `ClaimedJob`. */
export type ClaimedRow = ClaimedJob;

/** An outcome in the core's vocabulary (docs/ABI.md, `pb_settle`). */
export interface CoreOutcome {
  type: 'ok' | 'retry' | 'fail' | 'cancel' | 'timeout' | 'crash' | 'claim_late' | 'released' | 'hook_failed' | 'invalid_payload' | 'defer' | 'none' | 'thrown' | 'commit_unsupported';
  code?: string;
  after?: number;
  reason?: string;
  message?: string;
}


/** One finished attempt waiting to be settled. */
export interface Finished {
  row: ClaimedRow;
  outcome: CoreOutcome;
  commit?: (tx: Queryable) => Promise<unknown>;
  /** The attempt's trace, ended by its settlement (only with the outbox's `telemetry`). */
  trace?: AttemptTrace;
}

/** Counts of what a run did, by resulting status. */
export interface RunReport {
  claimed: number;
  succeeded: number;
  retrying: number;
  dead: number;
  cancelled: number;
  pending: number;
  claimLate: number;
  /** Claimed ahead, never started (the drain stopped first): back to due, uncharged. */
  released: number;
  stale: number;
  recovered: number;
  /** Claims that a flow limit (a kind's `concurrency` or `rateLimit`) cut short, leaving due jobs of its kind. */
  throttled: number;
}

export const emptyReport = (): RunReport => ({
  claimed: 0, succeeded: 0, retrying: 0, dead: 0, cancelled: 0, pending: 0, claimLate: 0, released: 0, stale: 0, recovered: 0, throttled: 0,
});

/** Adds `from`'s counts into `into`; only the run counts, so a wider report (a sweep's) keeps its own fields. */
export function addReport<R extends RunReport>(into: R, from: RunReport): R {
  for (const key of Object.keys(from) as (keyof RunReport)[]) into[key] += from[key];
  return into;
}
