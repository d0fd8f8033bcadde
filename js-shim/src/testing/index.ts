/**
 * Test kit: a controllable clock and `runUntilIdle`, which drives the real outbox (claims,
 * handlers, settlements) until nothing is due.
 * @module
 */
import { runTransaction, type TransactionalDb } from '../db.js';
import { PostboxError } from '../errors.js';
import { RUN, type Outbox } from '../outbox.js';
import { addReport, emptyReport, type RunReport } from '../runner.js';
import type { Clock } from '../types.js';

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

/**
 * Runs every lane until no job is due. With a test `clock` and the `db`, it then skips the
 * clock ahead to the next due job and goes on, so retries and delays play out instantly.
 * Throws after `maxRounds` (default 100) so a job that retries forever fails the test.
 */
export async function runUntilIdle(outbox: Outbox<any>, opts: { clock?: TestClock; db?: TransactionalDb; maxRounds?: number } = {}): Promise<RunReport> {
  const engine = outbox[RUN];
  const lanes = [...new Set(engine.runtime.policies.map((p) => p.lane))];
  const kinds = engine.runtime.policies.map((p) => p.kind);
  const report = emptyReport();
  const maxRounds = opts.maxRounds ?? 100;
  for (let round = 0; round < maxRounds; round++) {
    let claimed = 0;
    for (const lane of lanes) {
      const { deadlineAt } = engine.runtime.core.call<{ deadlineAt: number }>('claim', { op: 'deadline', startedAt: engine.runtime.clock.now() });
      const r = await engine.drain({ lane, deadlineAt });
      claimed += r.claimed;
      addReport(report, r);
    }
    if (claimed > 0) continue;
    if (!opts.clock || !opts.db) return report;
    const next = await runTransaction(opts.db, async (q) =>
      (await q.query(
        `SELECT round(extract(epoch from min(due_at)) * 1000)::bigint AS due FROM outbox.job WHERE status IN ('pending', 'retrying') AND kind = ANY($1::text[])`,
        [kinds],
      )).rows[0]?.due,
    );
    if (next === null || next === undefined) return report;
    opts.clock.set(Number(next));
  }
  throw new PostboxError('not_idle', `runUntilIdle: still busy after ${maxRounds} rounds`);
}

export type { RunReport };
