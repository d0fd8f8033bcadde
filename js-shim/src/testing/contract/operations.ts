// The store conformance suite's reads and operations: inspection, operator actions, retention, hand-off, schedule runs, named outboxes.
import { getCore } from '../../core/core.js';
import type { PostboxError } from '../../errors.js';
import { KIND, OTHER_KIND, T0, eq, ok, rejects, type ScenarioOf, type StoreScenario } from './driver.js';
import type { OutboxStore } from '../../stores/contract.js';

export function operationsScenarios<Db, Tx>(scenario: ScenarioOf<Db, Tx>, options: { makeStore(name: string | null): OutboxStore<Db, Tx> | Promise<OutboxStore<Db, Tx>> }, otherName: string): StoreScenario[] {
  return [
    scenario('inspection: get, filters, counts and cursors', async (d) => {
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        d.now = T0 + i * 1000;
        ids.push(await d.one({ payload: { i }, tenantKey: i % 2 === 0 ? 'even' : null }));
      }
      await d.enqueue(d.db, [{ payload: { x: 1 }, correlationId: 'corr-1' }], OTHER_KIND);
      const seen: string[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < 10; page++) {
        const result = await d.store.listJobs(d.db, { kind: KIND, limit: 2, ...(cursor ? { cursor } : {}) });
        seen.push(...result.jobs.map((j) => j.id));
        if (!result.nextCursor) break;
        cursor = result.nextCursor;
      }
      eq(seen, ids, 'pages cover every job once, oldest first');
      const desc = await d.store.listJobs(d.db, { kind: KIND, limit: 3, order: 'desc' });
      eq(desc.jobs.map((j) => j.id), [...ids].reverse().slice(0, 3), 'newest first');
      const rest = await d.store.listJobs(d.db, { kind: KIND, limit: 3, order: 'desc', cursor: desc.nextCursor! });
      eq(rest.jobs.map((j) => j.id), [ids[1], ids[0]], 'the next page goes on backwards');
      eq((await d.store.listJobs(d.db, { tenantKey: 'even', limit: 10 })).jobs.map((j) => j.id), [ids[0], ids[2], ids[4]], 'a tenant filter');
      eq((await d.store.listJobs(d.db, { tenantKey: null, kind: KIND, limit: 10 })).jobs.map((j) => j.id), [ids[1], ids[3]], 'jobs without a tenant');
      eq((await d.store.listJobs(d.db, { correlationId: 'corr-1', limit: 10 })).jobs.map((j) => j.kind), [OTHER_KIND], 'by correlation id');
      eq((await d.store.listJobs(d.db, { createdAfter: new Date(T0 + 1000), createdBefore: new Date(T0 + 4000), limit: 10 })).jobs.map((j) => j.id), [ids[2], ids[3]], 'by creation time');
      const view = await d.job(ids[1]!);
      eq([view.payload, view.tenantKey, view.status, view.createdAt.getTime(), view.dueAt.getTime()], [{ i: 1 }, null, 'pending', T0 + 1000, T0 + 1000], 'a job as stored');
      eq(await d.store.getJob(d.db, { id: ids[1]!, tenantKey: 'even' }), null, 'another tenant\'s job is not found');
      d.now = T0 + 10_000;
      const [claimed] = await d.claim(1);
      await d.settle(claimed!, { type: 'ok' });
      eq(await d.store.countJobs(d.db, {}), { pending: 5, running: 0, retrying: 0, succeeded: 1, dead: 0, cancelled: 0, waiting: 0 }, 'counts by status');
      eq((await d.store.countJobs(d.db, { tenantKey: 'even', status: 'succeeded' })).succeeded, 1, 'counts with a filter');
      eq((await d.store.listJobs(d.db, { finishedAfter: new Date(T0), limit: 10 })).jobs.map((j) => j.id), [ids[0]], 'by finish time');
      await rejects(d.store.listJobs(d.db, { limit: 2, cursor: 'not-a-cursor' }), (e) => (e as PostboxError).code === 'invalid_input', 'a malformed cursor');
      await rejects(d.store.listJobs(d.db, { limit: 0 }), (e) => (e as PostboxError).code === 'invalid_input', 'a bad page size');
    }),

    scenario('countActive: unfinished jobs by kind, lane and status; finished ones are not counted', async (d) => {
      const sorted = async () => (await d.store.countActive(d.db)).map((c) => `${c.kind} ${c.lane} ${c.status} ${c.count}`).sort();
      eq(await sorted(), [], 'an empty outbox counts nothing');
      for (let i = 0; i < 3; i++) await d.one({ payload: { i } });
      await d.enqueue(d.db, [{ payload: { x: 1 } }], OTHER_KIND);
      const [a, b] = await d.claim(2);
      await d.settle(a!, { type: 'ok' });
      eq(b?.kind, KIND, 'the second claimed');
      eq(await sorted(), [`${KIND} default pending 1`, `${KIND} default running 1`, `${OTHER_KIND} bulk pending 1`].sort(), 'one of each, the succeeded one gone');
    }),

    scenario('operator actions as the core decides, within a tenant scope', async (d) => {
      const mine = await d.one({ tenantKey: 'acme' });
      const theirs = await d.one({ tenantKey: 'other' });
      const none = await d.one();
      const scoped = await d.operate('cancel', [mine, theirs, none, crypto.randomUUID()], 'acme', 'by_operator');
      eq([scoped.found, scoped.written], [[mine], [mine]], 'a scoped action finds only the tenant\'s jobs');
      const cancelled = await d.job(mine);
      eq([cancelled.status, cancelled.lastErrorCode, cancelled.finishedAt?.getTime()], ['cancelled', 'by_operator', d.now], 'cancelled with its reason');
      eq((await d.operate('cancel', [none], null)).written, [none], 'scope null: jobs without a tenant');
      eq((await d.job(theirs)).status, 'pending', 'the other tenant\'s job is untouched');
      // A running job cancelled: its open attempt closes with it.
      const [running] = await d.claim(1);
      eq(running?.id, theirs, 'claimed');
      await d.operate('cancel', [theirs]);
      eq((await d.store.listAttempts(d.db, { jobId: theirs })).map((a) => [a.outcome, a.finishedAt?.getTime()]), [['cancel', d.now]], 'the attempt closed');
      eq((await d.settle(running!, { type: 'ok' })).settled, false, 'the cancelled attempt cannot settle');
      d.now += 5000;
      eq((await d.operate('replay', [mine], 'acme')).written, [mine], 'replay');
      const replayed = await d.job(mine);
      eq([replayed.status, replayed.attempts, replayed.dueAt.getTime(), replayed.finishedAt], ['pending', 0, d.now, null], 'replayed: pending, due now, fresh budget');
      eq((await d.operate('retryNow', [none])).written, [], 'the core refuses retryNow of a cancelled job');
      const later = await d.one({ delayMs: 60_000 });
      await d.operate('retryNow', [later]);
      eq((await d.job(later)).dueAt.getTime(), d.now, 'retryNow makes it due now');
      await rejects(
        d.store.transaction(d.db, async (tx) => {
          await d.store.applyOperate(tx, { now: d.now, writes: [{ id: later, status: 'cancelled', dueAt: null, budget: null, reason: 'x', closeAttempt: null, finished: true, recordReason: true }] });
          throw new Error('operator changed their mind');
        }),
        (e) => (e as Error).message === 'operator changed their mind',
        'a failing operator transaction',
      );
      eq((await d.job(later)).status, 'pending', 'rolled back');
      const erased = await d.store.transaction(d.db, (tx) => d.store.eraseTenant(tx, 'acme'));
      eq(erased, 1, 'erase removes the tenant\'s jobs');
      eq(await d.store.getJob(d.db, { id: mine }), null, 'gone');
      eq(await d.store.listAttempts(d.db, { jobId: mine }), [], 'with its attempts');
      ok(await d.store.getJob(d.db, { id: theirs }), 'other tenants stay');
    }),

    scenario('retention deletes finished jobs past the core\'s cutoffs, bounded', async (d) => {
      const finish = async (outcome: Record<string, unknown>) => {
        const id = await d.one();
        const [job] = await d.claim(1);
        await d.settle(job!, outcome);
        return id;
      };
      const oldOk = await finish({ type: 'ok' });
      const oldDead = await finish({ type: 'fail', code: 'x' });
      d.now = T0 + 3 * 86_400_000;
      const newOk = await finish({ type: 'ok' });
      const waiting = await d.one();
      d.now = T0 + 5 * 86_400_000;
      const plan = getCore().call<{ steps: { type: string; succeededBefore: number; deadBefore: number; limit: number }[] }>('sweep', {
        op: 'plan', now: d.now, startedAt: d.now, policies: d.policies, retention: { succeededMs: 4 * 86_400_000, deadMs: 30 * 86_400_000 },
      });
      const step = plan.steps.find((s) => s.type === 'retention')!;
      eq(await d.store.deleteFinished(d.db, { ...step, limit: step.limit }), 1, 'one job is past its retention');
      eq(await d.store.getJob(d.db, { id: oldOk }), null, 'the old success is gone');
      for (const id of [oldDead, newOk, waiting]) ok(await d.store.getJob(d.db, { id }), 'the rest stays');
      d.now = T0 + 40 * 86_400_000;
      eq(await d.store.deleteFinished(d.db, { succeededBefore: d.now, deadBefore: d.now, limit: 1 }), 1, 'a limit bounds the delete');
      eq(await d.store.deleteFinished(d.db, { succeededBefore: d.now, deadBefore: d.now, limit: 10 }), 1, 'then the rest');
      eq((await d.store.countJobs(d.db, {})).pending, 1, 'a waiting job is never deleted');
    }),

    scenario('hand-off lists due jobs and honours the recorded nudges', async (d) => {
      d.now = T0;
      const a = await d.one({ kind: OTHER_KIND });
      d.now = T0 + 10;
      const b = await d.one({ kind: OTHER_KIND });
      await d.one({ kind: OTHER_KIND, delayMs: 60_000 });
      d.now = T0 + 1000;
      const query = { now: d.now, lane: 'bulk', kinds: [OTHER_KIND], limit: 10, nudgedBefore: d.now - 500 };
      eq((await d.store.listDueForHandoff(d.db, query)).map((r) => [r.id, r.lane]), [[a, 'bulk'], [b, 'bulk']], 'due jobs, oldest first, with their lane');
      await d.store.recordNudges(d.db, { now: d.now, ids: [a] });
      eq((await d.store.listDueForHandoff(d.db, query)).map((r) => r.id), [b], 'a job nudged since the cutoff is left alone');
      eq((await d.store.listDueForHandoff(d.db, { ...query, nudgedBefore: d.now + 1 })).map((r) => r.id), [a, b], 'until the cooldown has passed');
    }),

    scenario('schedule runs keep each schedule\'s latest occurrence and never move back', async (d) => {
      eq([...(await d.store.lastScheduleRuns(d.db, ['weekly', 'daily']))], [], 'nothing recorded yet');
      await d.store.recordScheduleRun(d.db, { name: 'weekly', at: T0 + 1000, now: T0 });
      await d.store.recordScheduleRun(d.db, { name: 'weekly', at: T0, now: T0 + 5 });
      await d.store.recordScheduleRun(d.db, { name: 'daily', at: T0 + 7, now: T0 + 6 });
      const runs = await d.store.lastScheduleRuns(d.db, ['weekly', 'daily', 'never']);
      eq([runs.get('weekly'), runs.get('daily'), runs.has('never')], [T0 + 1000, T0 + 7, false], 'the later occurrence stays; unknown names are absent');
      const other = await options.makeStore(otherName);
      eq([...(await other.lastScheduleRuns(d.db, ['weekly']))], [], 'another outbox keeps its own');
    }),

    scenario('named outboxes on one database never see each other', async (d) => {
      const other = await options.makeStore(otherName);
      eq(other.name, otherName, 'the store carries its name');
      eq(d.store.name, null, 'the default store has none');
      const [mine] = await d.enqueue(d.db, [{ payload: { n: 1 }, dedupeKey: 'shared', tenantKey: 't' }]);
      const [theirs] = await d.enqueue(d.db, [{ payload: { n: 2 }, dedupeKey: 'shared', tenantKey: 't' }], KIND, other);
      eq([mine!.verdict, theirs!.verdict], ['created', 'created'], 'one dedupe key in each outbox');
      const db = d.db;
      eq(await other.getJob(db, { id: mine!.id }), null, 'the other outbox cannot read this one\'s job');
      eq((await other.listJobs(db, { limit: 10 })).jobs.map((j) => j.id), [theirs!.id], 'nor list it');
      const claimed = await other.claim(db, d.claimInput(10));
      eq(claimed.map((j) => j.id), [theirs!.id], 'a claim takes only its own jobs');
      eq((await d.store.countJobs(db, {})).pending, 1, 'this outbox\'s job is still pending');
      d.now = Number(claimed[0]!.lease_expires_ms) + 1;
      eq((await d.store.listExpiredLeases(db, { now: d.now, kinds: [KIND], limit: 10 })).length, 0, 'recovery sees only its own leases');
      eq(await d.store.settle(db, { now: d.now, items: [{ ...d.decide(claimed[0]!, { type: 'ok' }) }] }), [], 'nor can it settle the other\'s claims');
      eq(await d.store.transaction(db, (tx) => d.store.eraseTenant(tx, 't')), 1, 'erase acts on its own outbox');
      eq((await other.countJobs(db, {})).running, 1, 'the other outbox keeps its job');
    }),
  ];
}
