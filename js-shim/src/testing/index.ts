/**
 * Test kit: a controllable clock, `runUntilIdle`, which drives the real outbox (claims,
 * handlers, settlements, crash recovery) until nothing is due, and `createOutboxTestDatabase`,
 * an in-process PostgreSQL (PGlite, an optional peer dependency) with the schema applied.
 * @module
 */
import { runTransaction, type TransactionalDb } from '../stores/pg/db.js';
import { PostboxError } from '../errors.js';
import { runDrain, runRecovery } from '../consumer.js';
import { RUN, type Outbox } from '../outbox.js';
import { addReport, emptyReport, type RunReport } from '../engine/drain.js';
import type { Clock, LaneDb } from '../types.js';

/** A clock that moves only when told. */
export interface TestClock extends Clock {
  /** Moves forward by `ms`. */
  advance(ms: number): void;
  /** Jumps to an absolute epoch ms (never backwards). */
  set(epochMs: number): void;
}

/** A clock frozen at `start` (default: the real time at creation). */
export function createTestClock(start: number = Date.now()): TestClock {
  let now = start;
  return {
    now: () => now,
    advance(ms) {
      if (!Number.isFinite(ms) || ms < 0) throw new PostboxError('invalid_input', 'advance(ms): ms must be a non-negative number');
      now += ms;
    },
    set(epochMs) {
      now = Math.max(now, epochMs);
    },
  };
}

/** Options of {@link runUntilIdle}. */
export interface RunUntilIdleOptions {
  /** The outbox's test clock: when nothing is due, it is moved to the next due job. */
  clock?: TestClock;
  /** Where to look for the next due job. Default a session of the outbox's own. */
  db?: TransactionalDb;
  /** Rounds (drains of every lane) before giving up with `PostboxError('not_idle')`. Default 100. */
  maxRounds?: number;
}

/**
 * Runs every lane until no job is due. Attempts whose lease has expired on the outbox's clock
 * (their run crashed) are recovered first, as the sweep would, and run again when due. With a
 * test `clock`, it then moves the clock to the next due job and goes on, so retries, delays
 * and crash recoveries play out instantly. Throws `PostboxError` with code `not_idle` after
 * `maxRounds`, so a job that retries forever fails the test instead of hanging it.
 */
export async function runUntilIdle(outbox: Outbox<any>, opts: RunUntilIdleOptions = {}): Promise<RunReport> {
  const engine = outbox[RUN];
  const rt = engine.runtime;
  const lanes = [...new Set(rt.policies.map((p) => p.lane))];
  const report = emptyReport();
  const maxRounds = opts.maxRounds ?? 100;
  if (!Number.isInteger(maxRounds) || maxRounds < 1) throw new PostboxError('invalid_input', 'runUntilIdle: maxRounds must be a positive integer');
  // Leases only run out as the clock moves: recover at the start and after each skip.
  let recover = true;
  for (let round = 0; round < maxRounds; round++) {
    if (recover) addReport(report, await runRecovery(outbox));
    recover = false;
    let claimed = 0;
    for (const lane of lanes) {
      const r = await runDrain(outbox, { lane });
      claimed += r.claimed;
      addReport(report, r);
    }
    if (claimed > 0) continue;
    if (!opts.clock) return report;
    const next = await nextDue(outbox, lanes, opts.db);
    if (next === null) return report;
    opts.clock.set(next);
    recover = true;
  }
  throw new PostboxError('not_idle', `runUntilIdle: still busy after ${maxRounds} rounds`);
}

/**
 * When the earliest job a drain could claim falls due: the core's claim plan says which kinds
 * and deploy versions each lane may take; the database only reports their earliest `due_at`.
 */
async function nextDue(outbox: Outbox<any>, lanes: readonly string[], db: TransactionalDb | undefined): Promise<number | null> {
  const engine = outbox[RUN];
  const rt = engine.runtime;
  const now = rt.clock.now();
  const { deadlineAt } = rt.core.call<{ deadlineAt: number }>('claim', { op: 'deadline', startedAt: now });
  const read = async (q: LaneDb): Promise<number | null> => {
    let next: number | null = null;
    for (const lane of lanes) {
      const plan = rt.core.call<{ kinds: string[]; versionCutoff: number | null }>('claim', {
        op: 'plan', now, deadlineAt, lane, concurrency: rt.concurrency, policies: rt.policies,
        version: rt.versionTs === null ? null : { timestamp: rt.versionTs }, target: null,
      });
      if (plan.kinds.length === 0) continue;
      const due = await rt.store.nextDue(q, { lane, kinds: plan.kinds, versionCutoff: plan.versionCutoff });
      if (due !== null && (next === null || due < next)) next = due;
    }
    return next;
  };
  // The caller's handle is node-postgres (a client or pool's), which takes named statements too.
  return db ? runTransaction(db, (q) => read(q as LaneDb)) : engine.withSession((session) => session.exclusive(read));
}

export { createOutboxTestDatabase, type OutboxTestDatabase, type OutboxTestDatabaseOptions, type PGliteLike, type TestDb, type TestDbClient } from './pglite.js';
export type { RunReport };
export { outboxStoreContract, type OutboxStoreContractOptions, type StoreScenario } from './store-contract.js';
