// Operator actions over a filter (operateMatching) in Node against a real PostgreSQL: paging,
// the core's per-job refusals, dry runs, tenant scope and bad input; and the attempt ledger of
// a job that failed, was replayed and succeeded.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { createOutbox, defineJob, ok, operateMatching, PostboxError } from 'postbox';
import { aggregateAttemptOutcomes, listAttempts } from 'postbox/inspect';
import { createPgConnector } from 'postbox/pg';
import { runUntilIdle } from 'postbox/testing';
import { useMigratedDb } from '../support/migrated-db.ts';

const db = useMigratedDb('operate', { max: 2, resetEachTest: true });

const job = defineJob({ kind: 'op.note', payload: z.object({ n: z.number() }), timeoutMs: 5_000, handle: async () => ok() });
const outbox = () => createOutbox({ jobs: [job], connect: createPgConnector(db.url) });

async function seed(count: number, tenantKey?: string) {
  const items = Array.from({ length: count }, (_, n) => ({ payload: { n }, ...(tenantKey ? { tenantKey } : {}) }));
  return outbox().transaction(db.pool, (_tx, _enqueue, enqueueMany) => enqueueMany(job, items));
}
const statuses = async () =>
  Object.fromEntries((await db.pool.query('SELECT status, count(*)::int AS n FROM outbox.job GROUP BY status')).rows.map((r) => [r.status, r.n]));

test('cancel by filter acts on every match across pages; the core refuses finished jobs', async () => {
  const created = await seed(25);
  const done = created.slice(0, 5).map((r) => (r as { id: string }).id);
  await db.pool.query(`UPDATE outbox.job SET status = 'succeeded', finished_at = now() WHERE id = ANY($1::uuid[])`, [done]);
  const report = await operateMatching(outbox(), db.pool, 'cancel', { kind: 'op.note' }, { pageSize: 7, reason: 'operator' });
  assert.equal(report.matched, 25);
  assert.equal(report.changed, 20);
  assert.equal(report.invalidState, 5);
  assert.deepEqual(await statuses(), { cancelled: 20, succeeded: 5 });
  const { rows } = await db.pool.query(`SELECT DISTINCT last_error_code FROM outbox.job WHERE status = 'cancelled'`);
  assert.deepEqual(rows, [{ last_error_code: 'operator' }]);
});

test('a dry run lists the matches and changes nothing; max truncates', async () => {
  await seed(12);
  const dry = await operateMatching(outbox(), db.pool, 'cancel', { status: 'pending' }, { dryRun: true, pageSize: 5 });
  assert.equal(dry.matched, 12);
  assert.equal(dry.ids.length, 12);
  assert.equal(dry.changed, 0);
  assert.deepEqual(await statuses(), { pending: 12 });
  const capped = await operateMatching(outbox(), db.pool, 'cancel', { status: 'pending' }, { max: 10, pageSize: 4 });
  assert.equal(capped.matched, 10);
  assert.equal(capped.truncated, true);
  assert.deepEqual(await statuses(), { pending: 2, cancelled: 10 });
});

test('replay and retryNow by filter; a tenant scope only reaches its tenant', async () => {
  await seed(3, 'acme');
  await seed(4, 'globex');
  await db.pool.query(`UPDATE outbox.job SET status = 'dead', finished_at = now(), attempts = 20`);
  const replayed = await operateMatching(outbox(), db.pool, 'replay', {}, { scope: { tenantKey: 'acme' } });
  assert.equal(replayed.changed, 3);
  const { rows } = await db.pool.query(`SELECT tenant_key, status, attempts FROM outbox.job ORDER BY tenant_key`);
  assert.deepEqual(new Set(rows.filter((r) => r.tenant_key === 'acme').map((r) => `${r.status}/${r.attempts}`)), new Set(['pending/0']));
  assert.ok(rows.filter((r) => r.tenant_key === 'globex').every((r) => r.status === 'dead'));
  await assert.rejects(
    operateMatching(outbox(), db.pool, 'replay', { tenantKey: 'globex' }, { scope: { tenantKey: 'acme' } }),
    (e: unknown) => e instanceof PostboxError && e.code === 'wrong_tenant',
  );
  await db.pool.query(`UPDATE outbox.job SET due_at = now() + interval '1 hour' WHERE tenant_key = 'acme'`);
  const now = await operateMatching(outbox(), db.pool, 'retryNow', { tenantKey: 'acme' });
  assert.equal(now.changed, 3);
  const due = await db.pool.query(`SELECT count(*)::int AS n FROM outbox.job WHERE tenant_key = 'acme' AND due_at <= now()`);
  assert.equal(due.rows[0].n, 3);
});

test('bad input is a typed error', async () => {
  await assert.rejects(operateMatching(outbox(), db.pool, 'delete' as never, {}), (e: unknown) => e instanceof PostboxError && e.code === 'invalid_input');
  await assert.rejects(operateMatching(outbox(), db.pool, 'cancel', {}, { pageSize: 0 }), (e: unknown) => e instanceof PostboxError && /pageSize/.test(e.message));
  await assert.rejects(operateMatching(outbox(), db.pool, 'cancel', {}, { max: -1 }), (e: unknown) => e instanceof PostboxError && /max/.test(e.message));
});

test('a success is recorded by its job row: the ledger reads it there, and a replay cannot rewrite it', async () => {
  const [created] = await seed(1);
  const id = (created as { id: string }).id;
  // Its first attempt fails, so the ledger holds one row of the attempt table and one of the job's.
  await db.pool.query(`UPDATE outbox.job SET status = 'dead', finished_at = now(), attempts = 20, attempt_seq = 1 WHERE id = $1`, [id]);
  await db.pool.query(`INSERT INTO outbox.attempt (job_id, seq, kind, started_at, finished_at, outcome, error_code) VALUES ($1, 1, 'op.note', now(), now(), 'fail', 'boom')`, [id]);
  assert.equal((await operateMatching(outbox(), db.pool, 'replay', { kind: 'op.note' })).changed, 1);
  assert.equal((await runUntilIdle(outbox())).succeeded, 1);
  const attemptRows = async () => (await db.pool.query('SELECT seq, outcome FROM outbox.attempt WHERE job_id = $1 ORDER BY seq', [id])).rows;
  assert.deepEqual(await attemptRows(), [{ seq: 1, outcome: 'fail' }], 'the success wrote no attempt row');
  const { rows: [row] } = await db.pool.query('SELECT started_at, finished_at FROM outbox.job WHERE id = $1', [id]);
  const ledger = await listAttempts(db.pool, { jobId: id });
  assert.deepEqual(ledger.map((a) => [a.attempt, a.outcome, a.code]), [[1, 'fail', 'boom'], [2, 'ok', null]]);
  assert.deepEqual([ledger[1]!.startedAt, ledger[1]!.finishedAt], [row.started_at, row.finished_at]);
  const since = new Date(row.started_at.getTime() - 60_000);
  assert.deepEqual((await aggregateAttemptOutcomes(db.pool, { since })).map((r) => [r.kind, r.outcome, r.count]), [['op.note', 'fail', 1], ['op.note', 'ok', 1]]);
  // The core refuses to replay a succeeded job, so nothing ever rewrites the row that records it.
  const again = await operateMatching(outbox(), db.pool, 'replay', { kind: 'op.note' });
  assert.deepEqual([again.changed, again.invalidState], [0, 1]);
  assert.deepEqual((await listAttempts(db.pool, { jobId: id })).map((a) => [a.attempt, a.outcome]), [[1, 'fail'], [2, 'ok']]);
});

test('erasing named jobs cancels the waiting children left behind (parent_erased), whatever their onParentFailure; none runs or waits for good', async () => {
  const ids = (rs: readonly unknown[]) => rs.map((r) => (r as { id: string }).id);
  const acme = { tenantKey: 'acme' };
  const [parent, other] = ids(await outbox().transaction(db.pool, (_tx, _e, many) => many(job, [{ payload: { n: 0 }, delayMs: 86_400_000, ...acme }, { payload: { n: 9 }, delayMs: 86_400_000, ...acme }])));
  const [cancels, runs] = ids(await outbox().transaction(db.pool, (_tx, _e, many) =>
    many(job, [{ payload: { n: 1 }, dependsOn: [parent!], ...acme }, { payload: { n: 2 }, dependsOn: [parent!], onParentFailure: 'run', ...acme }])));
  const [grandchild, runsAfter, erasedToo, belowErased] = ids(await outbox().transaction(db.pool, async (_tx, enqueue, many) => [
    ...(await many(job, [{ payload: { n: 3 }, dependsOn: [cancels!], ...acme }, { payload: { n: 4 }, dependsOn: [runs!], onParentFailure: 'run', ...acme }])),
    await enqueue(job, { payload: { n: 5 }, dependsOn: [other!], ...acme }),
  ]).then(async (made) => [...made, await outbox().transaction(db.pool, (_tx, enqueue) => enqueue(job, { payload: { n: 6 }, dependsOn: [(made[2] as { id: string }).id], ...acme }))]));
  const row = async (id: string) => (await db.pool.query('SELECT status, last_error_code, waiting_on FROM outbox.job WHERE id = $1', [id])).rows[0];
  assert.deepEqual((await row(cancels!)).status, 'waiting');
  // Another tenant's erase reaches nothing.
  assert.equal(await outbox().eraseTenant('globex', { ids: [parent!] }), 0);
  assert.equal((await row(cancels!)).status, 'waiting');
  assert.equal(await outbox().eraseTenant('acme', { ids: [parent!, other!, erasedToo!] }), 3);
  assert.equal(await row(parent!), undefined);
  assert.deepEqual(await row(cancels!), { status: 'cancelled', last_error_code: 'parent_erased', waiting_on: 0 });
  assert.deepEqual(await row(runs!), { status: 'cancelled', last_error_code: 'parent_erased', waiting_on: 0 }, 'a parent erased never ran: onParentFailure run does not run it');
  assert.deepEqual(await row(grandchild!), { status: 'cancelled', last_error_code: 'parent_failed', waiting_on: 0 }, 'its parent cancelled, as any cancel');
  assert.deepEqual(await row(belowErased!), { status: 'cancelled', last_error_code: 'parent_erased', waiting_on: 0 }, 'the child of an erased child left behind');
  // A child that chose to run whatever its parent's end does so once its own parent was cancelled.
  assert.deepEqual((await row(runsAfter!)).status, 'pending');
  await runUntilIdle(outbox(), { sweep: true });
  assert.deepEqual(await statuses(), { cancelled: 4, succeeded: 1 });
});
