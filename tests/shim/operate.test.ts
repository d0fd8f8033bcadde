// Operator actions over a filter (operateMatching) in Node against a real PostgreSQL: paging,
// the core's per-job refusals, dry runs, tenant scope and bad input.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { createOutbox, defineJob, ok, operateMatching, PostboxError } from 'postbox';
import { createPgConnector } from 'postbox/pg';
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
