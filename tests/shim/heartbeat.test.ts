// Leases inside workerd against a real PostgreSQL: ctx.heartbeat() writes the core's expiry,
// fenced by the attempt; automatic beats keep a long job's short lease fresh; a short timeout's
// crash is recovered after its derived margin. POSTBOX_PG picks the server (17, 15 or 14).
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { startWorker } from '../support/worker.ts';
import { sleep, until, useOutboxEnv } from './outbox-env.ts';
import { ATTEMPTS } from '../support/ledger.ts';

const env = useOutboxEnv({ entry: 'heartbeat-worker.ts' });
const fixture = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'heartbeat-worker.ts');

type Note = { key: string; note: string; value?: any };
type OutboxEventLike = { type: string; [field: string]: any };
const enqueue = async (kind: string, payload: object): Promise<string> => {
  const res = await env.post('/enqueue', { jobs: [{ kind, payload }] });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body[0];
};
const notes = async (key: string): Promise<Note[]> => ((await (await env.worker.fetch('/notes')).json()) as Note[]).filter((n) => n.key === key);
const noteOf = (key: string, name: string) => until(async () => (await notes(key)).find((n) => n.note === name));
const open = (name: string) => env.post('/gate', { name });
const leaseMs = async (id: string) =>
  (await env.sql(`SELECT round(extract(epoch FROM lease_expires_at) * 1000)::bigint AS ms FROM outbox.job WHERE id = $1`, [id]))[0].ms as string | null;
const attemptRows = async (id: string) =>
  (await env.sql(`SELECT seq, outcome FROM ${ATTEMPTS} a WHERE job_id = $1 ORDER BY seq`, [id])) as { seq: number; outcome: string | null }[];
const startedMs = async (id: string) =>
  Number((await env.sql(`SELECT round(extract(epoch FROM started_at) * 1000)::bigint AS ms FROM outbox.job WHERE id = $1`, [id]))[0].ms);
const drain = async () => assert.equal((await env.post('/drain', {})).status, 200);
const recover = async () => (await env.post('/recover', {})).body as { recovered: number };

describe('ctx.heartbeat()', () => {
  test('extends the lease to the core’s value, on the job (its attempt row is written when it ends)', async () => {
    await env.post('/reset', {});
    const id = await enqueue('hb.manual', { key: 'm1', do: 'beat' });
    await drain();
    await noteOf('m1', 'started');
    const claimed = Number(await leaseMs(id));
    assert.deepEqual(await attemptRows(id), [], 'a running attempt has no row of its own');
    // Claimed with a 9 s lease (a 3 s window + a 6 s margin), not the timeout's 30 s + 30 s.
    const started = await startedMs(id);
    assert.equal(claimed - started, 9_000);
    // Four seconds on, a beat reaches past the claim's lease: min(now + 3 s, deadline) + 2 s.
    await env.post('/clock', { offsetMs: 4_000 });
    await open('m1:beat');
    const beat = (await noteOf('m1', 'beat')).value as { lease: number; before: number; after: number };
    assert.ok(beat.lease >= beat.before + 5_000 && beat.lease <= beat.after + 5_000, JSON.stringify(beat));
    assert.ok(beat.lease > claimed, 'the lease moved on');
    assert.equal(Number(await leaseMs(id)), beat.lease, 'the job row holds the core’s expiry');
    assert.equal((await env.job(id)).status, 'running');
    await open('m1:done');
    await until(async () => (await env.job(id)).status === 'succeeded');
    assert.deepEqual(await attemptRows(id), [{ seq: 1, outcome: 'ok' }]);
    const [row] = await env.sql(`SELECT round(extract(epoch FROM started_at) * 1000)::bigint AS ms FROM ${ATTEMPTS} a WHERE job_id = $1`, [id]);
    assert.equal(Number(row.ms), started, 'the ended attempt keeps its start');
  });

  test('of an attempt recovered meanwhile changes nothing, and the handler is told and aborted', async () => {
    await env.post('/reset', {});
    const id = await enqueue('hb.manual', { key: 'm2', do: 'beat' });
    await drain();
    await noteOf('m2', 'started');
    const claimed = Number(await leaseMs(id));
    // The recovery (on a clock past the lease) takes the job as a crash while the handler waits.
    await env.post('/clock', { offsetMs: claimed - Date.now() + 1 });
    assert.equal((await recover()).recovered, 1);
    await env.post('/clock', { offsetMs: 0 });
    const recovered = await env.job(id);
    assert.equal(recovered.status, 'retrying');
    // The handler's clock says its lease still runs, so the core allows the beat; the UPDATE's
    // fence (attempt, status) refuses it.
    await open('m2:beat');
    const failed = await noteOf('m2', 'beat_failed');
    assert.deepEqual(failed.value, { code: 'lease_lost', aborted: true });
    assert.equal((await noteOf('m2', 'db_after_loss')).value, 'attempt_closed', 'ctx.db is closed once the lease is lost');
    const after = await env.job(id);
    assert.equal(after.status, 'retrying');
    assert.equal(after.lease_expires_at, null);
    assert.equal(after.attempt_seq, recovered.attempt_seq);
    assert.equal(after.updated_at.getTime(), recovered.updated_at.getTime(), 'the stale beat wrote nothing');
    assert.deepEqual(await attemptRows(id), [{ seq: 1, outcome: 'crash' }], 'the recovery wrote the attempt as a crash');
    const events = await env.events();
    assert.deepEqual(events.filter((e) => e.type === 'lease_lost'), [{ type: 'lease_lost', jobId: id, kind: 'hb.manual', attempt: 1, reason: 'not_owner' }]);
    assert.equal(events.filter((e) => e.type === 'job_settled' && e.jobId === id && e.outcome !== 'crash').length, 0, 'the lost attempt settles nothing');
  });

  test('of a cancelled job is refused: lease_lost, and the job stays cancelled', async () => {
    await env.post('/reset', {});
    const id = await enqueue('hb.manual', { key: 'm3', do: 'beat' });
    await drain();
    await noteOf('m3', 'started');
    const cancelled = await env.post('/operate', { ids: [id] });
    assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
    assert.equal((await env.job(id)).status, 'cancelled');
    await open('m3:beat');
    assert.deepEqual((await noteOf('m3', 'beat_failed')).value, { code: 'lease_lost', aborted: true });
    const job = await env.job(id);
    assert.equal(job.status, 'cancelled');
    assert.equal(job.lease_expires_at, null);
  });

  test('an expired lease is refused by the core before any write', async () => {
    await env.post('/reset', {});
    const id = await enqueue('hb.manual', { key: 'm4', do: 'beat' });
    await drain();
    await noteOf('m4', 'started');
    const claimed = Number(await leaseMs(id));
    await env.post('/clock', { offsetMs: claimed - Date.now() + 1 });
    await open('m4:beat');
    assert.deepEqual((await noteOf('m4', 'beat_failed')).value, { code: 'lease_lost', aborted: true });
    assert.equal(Number(await leaseMs(id)), claimed, 'nothing written');
    assert.equal((await env.job(id)).status, 'running', 'left to the recovery');
    const lost = (await env.events()).filter((e) => e.type === 'lease_lost');
    assert.deepEqual(lost, [{ type: 'lease_lost', jobId: id, kind: 'hb.manual', attempt: 1, reason: 'lease_expired' }]);
    assert.equal((await recover()).recovered, 1);
  });

  test('inside the handler’s own ctx.db transaction gets through (ctx.db is on a handler session); after the attempt, is a typed error', async () => {
    await env.post('/reset', {});
    const id = await enqueue('hb.manual', { key: 'm5', do: 'misuse' });
    await drain();
    assert.equal((await noteOf('m5', 'in_tx')).value, 'beat');
    await until(async () => (await env.job(id)).status === 'succeeded');
    assert.deepEqual((await env.post('/late-beat', {})).body, { code: 'attempt_closed' });
  });

  test('inside the handler’s own ctx.db transaction on the lane’s session (handlerSessions: 0) is a typed error', async () => {
    await env.post('/reset', {});
    await env.post('/options', { handlerSessions: 0 });
    const id = await enqueue('hb.manual', { key: 'm6', do: 'misuse' });
    await drain();
    assert.equal((await noteOf('m6', 'in_tx')).value, 'heartbeat_in_transaction');
    await until(async () => (await env.job(id)).status === 'succeeded');
  });
});

describe('automatic heartbeats', () => {
  test('keep a long job’s short lease fresh while it runs, past the lease it was claimed with', async () => {
    await env.post('/reset', {});
    const id = await enqueue('hb.auto', { key: 'a1', do: 'sleep', ms: 11_000 });
    await drain();
    await noteOf('a1', 'started');
    const claimed = Number(await leaseMs(id));
    const seen = new Set<number>();
    let recoveredMidway: number | null = null;
    while ((await env.job(id)).status === 'running') {
      const [row] = await env.sql(
        `SELECT round(extract(epoch FROM lease_expires_at) * 1000)::bigint AS ms, lease_expires_at > now() AS live FROM outbox.job WHERE id = $1 AND status = 'running'`,
        [id],
      );
      if (row) {
        assert.ok(row.live, 'the lease never runs out while the handler runs');
        seen.add(Number(row.ms));
      }
      // Past the lease it was claimed with, a recovery finds nothing to take.
      if (recoveredMidway === null && Date.now() > claimed + 500) recoveredMidway = (await recover()).recovered;
      await sleep(250);
    }
    assert.equal(recoveredMidway, 0);
    assert.ok(Math.max(...seen) > claimed + 4_000, `the lease moved well past ${claimed}: ${[...seen].join(', ')}`);
    assert.ok(seen.size >= 5, `beats every second extend it: ${seen.size} values`);
    const job = await env.job(id);
    assert.equal(job.status, 'succeeded');
    assert.equal(job.attempts, 1);
    assert.deepEqual(await attemptRows(id), [{ seq: 1, outcome: 'ok' }]);
    assert.equal((await env.events()).filter((e) => e.type === 'lease_lost' || e.type === 'infra_error').length, 0);
  });
});

describe('heartbeats that never get through', () => {
  test('end the attempt at its stop point: lease_lost heartbeats_failed, the handler aborted, nothing settled', async () => {
    await env.post('/reset', {});
    // Every lease extension of a running job is refused by the server, as a beat cut off would be.
    await env.sql(`CREATE FUNCTION public.refuse_beats() RETURNS trigger LANGUAGE plpgsql AS $$
                   BEGIN RAISE EXCEPTION 'beats are refused here'; END $$`);
    await env.sql(`CREATE TRIGGER refuse_beats BEFORE UPDATE ON outbox.job FOR EACH ROW
                   WHEN (OLD.status = 'running' AND NEW.status = 'running' AND NEW.lease_expires_at > OLD.lease_expires_at)
                   EXECUTE FUNCTION public.refuse_beats()`);
    try {
      const id = await enqueue('hb.auto', { key: 'f1', do: 'sleep', ms: 20_000 });
      await drain();
      await noteOf('f1', 'started');
      const seen: OutboxEventLike[] = [];
      const lost = await until(async () => {
        seen.push(...(await env.events()));
        return seen.find((e) => e.type === 'lease_lost');
      }, 15_000);
      assert.deepEqual(lost, { type: 'lease_lost', jobId: id, kind: 'hb.auto', attempt: 1, reason: 'heartbeats_failed' });
      assert.ok(seen.some((e) => e.type === 'infra_error' && e.where === 'heartbeat' && /beats are refused here/.test(e.error)), JSON.stringify(seen));
      // Lost, so settled by nobody: the job stays running under its attempt until the lease runs out.
      const job = await env.job(id);
      assert.equal(job.status, 'running');
      assert.equal(job.attempts, 0);
      assert.deepEqual(await attemptRows(id), [], 'no attempt row: it has not ended');
      assert.equal(job.attempt_seq, 1);
    } finally {
      await env.sql('DROP TRIGGER refuse_beats ON outbox.job; DROP FUNCTION public.refuse_beats()');
    }
  });
});

describe('short timeouts', () => {
  test('a crashed attempt is recovered after its derived lease (timeout + 6 s), not timeout + 30 s', async () => {
    await env.post('/reset', {});
    const id = await enqueue('hb.short', { key: 's1', do: 'sleep', ms: 4_500 });
    // A second Worker claims the job and is killed mid-attempt: nothing settles it.
    const doomed = await startWorker({ entry: fixture, databaseUrl: env.dbUrl });
    try {
      assert.equal((await doomed.fetch('/drain', { method: 'POST', body: '{}' })).status, 200);
      await until(async () => (await env.job(id)).status === 'running', 5_000);
    } finally {
      await doomed.dispose();
    }
    const [attempt] = await env.sql(
      `SELECT round(extract(epoch FROM started_at) * 1000)::bigint AS started, round(extract(epoch FROM lease_expires_at) * 1000)::bigint AS lease FROM outbox.job WHERE id = $1`,
      [id],
    );
    const lease = Number(attempt.lease);
    assert.equal(lease - Number(attempt.started), 11_000, 'lease = 5 s timeout + clamp(5 s, 6 s, 30 s)');
    await sleep(Math.max(0, Number(attempt.started) + 5_500 - Date.now()));
    assert.equal((await env.job(id)).status, 'running', 'the dead attempt never settled');
    // Just before the lease runs out the attempt may still be alive; just after, it is recovered.
    await env.post('/clock', { offsetMs: lease - Date.now() - 200 });
    assert.equal((await recover()).recovered, 0);
    await env.post('/clock', { offsetMs: lease - Date.now() + 1 });
    assert.equal((await recover()).recovered, 1);
    const job = await env.job(id);
    assert.equal(job.status, 'retrying');
    assert.equal(job.crashes, 1);
    assert.equal(job.attempts, 0, 'a crash is not a charged attempt');
  });
});
