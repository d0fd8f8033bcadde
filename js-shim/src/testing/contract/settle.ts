// The store conformance suite's settlements: every outcome as the core decides, retries to the dead letter, settle-then-claim.
import { KIND, T0, eq, ok, type ScenarioOf, type StoreScenario } from './driver.js';


export function settleScenarios<Db, Tx>(scenario: ScenarioOf<Db, Tx>): StoreScenario[] {
  return [
    scenario('every outcome is settled as the core decides', async (d) => {
      const outcomes: Record<string, unknown>[] = [
        { type: 'ok' }, { type: 'retry', code: 'rate_limited', after: 5000, message: '429' }, { type: 'fail', code: 'bad_address' },
        { type: 'cancel', reason: 'user_left' }, { type: 'timeout' }, { type: 'claim_late' }, { type: 'released' }, { type: 'hook_failed', message: 'hook' },
        { type: 'invalid_payload' }, { type: 'defer', code: 'paused', after: 1000 }, { type: 'crash' },
      ];
      for (const outcome of outcomes) {
        d.now = T0;
        const id = await d.one({ payload: { outcome: outcome.type } });
        const [job] = await d.claim(1);
        eq(job?.id, id, `claimed for ${String(outcome.type)}`);
        if (outcome.type === 'crash') d.now = Number(job!.lease_expires_ms) + 1;
        const { write, settled } = await d.settle(job!, outcome);
        eq(settled, true, `${String(outcome.type)} is written`);
        const view = await d.job(id);
        eq(
          [view.status, view.attempts, view.crashes, view.lastErrorCode, view.lastErrorMessage, view.finishedAt?.getTime() ?? null, view.dueAt.getTime()],
          [write.status, write.attempts, write.crashes, write.errorCode, write.errorMessage, write.finished ? d.now : null, write.dueAt ?? T0],
          `the job after ${String(outcome.type)}`,
        );
        const attempts = await d.store.listAttempts(d.db, { jobId: id });
        eq(attempts.map((a) => [a.attempt, a.outcome, a.finishedAt?.getTime()]), [[1, write.outcome, d.now]], `the attempt after ${String(outcome.type)}`);
        // Done with it: out of the way of the next claim.
        if (!write.finished) await d.operate('cancel', [id]);
      }
    }),

    scenario('retries wait out the backoff the core decides, then dead-letter', async (d) => {
      const id = await d.one();
      let due = T0;
      for (let attempt = 1; attempt <= 3; attempt++) {
        d.now = due - 1;
        if (attempt > 1) eq((await d.claim()).length, 0, `attempt ${attempt} is not claimed before its due time`);
        d.now = due;
        const [job] = await d.claim();
        eq([job?.id, job?.attempts, job?.attempt_seq], [id, attempt - 1, attempt], `attempt ${attempt} is claimed when due`);
        const { write } = await d.settle(job!, { type: 'retry', code: 'flaky' });
        const view = await d.job(id);
        if (attempt < 3) {
          eq(write.status, 'retrying', 'the core retries');
          ok(write.dueAt! > d.now, 'after a backoff');
          eq([view.status, view.dueAt.getTime(), view.attempts], ['retrying', write.dueAt, attempt], 'the store keeps the core\'s due time');
          eq(await d.store.nextDue(d.db, { lane: 'default', kinds: [KIND], versionCutoff: null }), write.dueAt, 'nextDue reports it');
          due = write.dueAt!;
        } else {
          eq([view.status, view.lastErrorCode, view.finishedAt?.getTime()], ['dead', 'flaky', d.now], 'the budget spent, the job is dead');
        }
      }
      eq(await d.store.nextDue(d.db, { lane: 'default', kinds: [KIND], versionCutoff: null }), null, 'nothing waits');
    }),

    scenario('settle then claim is one operation that never reclaims what it settles', async (d) => {
      const a = await d.one();
      const [job] = await d.claim(1);
      const b = await d.one();
      const write = d.decide(job!, { type: 'released' });
      eq(write.dueAt, d.now, 'released is due at once');
      const out = await d.store.settleThenClaim(d.db, { now: d.now, items: [write] }, d.claimInput(10));
      eq(out.settled, [a], 'the settle is written');
      eq(out.claimed.map((j) => j.id), [b], 'the claim takes the other job, not the one just settled');
      eq((await d.claim()).map((j) => j.id), [a], 'which the next claim takes');
      const stale = d.decide(job!, { type: 'ok' });
      eq((await d.store.settleThenClaim(d.db, { now: d.now, items: [stale] }, d.claimInput(10))).settled, [], 'a stale settle in it changes nothing');
    }),
  ];
}
