// Schedules inside workerd against a real PostgreSQL (tests/shim/fixtures/schedules-worker.ts):
// which occurrences a tick enqueues (the core decides), catch-up after missed ticks and its
// bound, the first run, a lost connection retried within the tick, a lenient refusal counted
// as rejected, a `run` schedule's fan-out in one statement, and a schedule's own dedupe key.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { z } from 'zod';
import { defineJob, ok, PostboxError } from 'postbox';
import { createScheduledHandler, defineSchedule } from 'postbox/cloudflare';
import { sleep, useOutboxEnv } from './outbox-env.ts';

const env = useOutboxEnv({ entry: 'schedules-worker.ts' });

const HOUR = 3_600_000;
const at = (iso: string) => Date.parse(iso);

interface Run {
  name: string;
  key: string;
  scheduledAt: number;
  status: string;
  ok: boolean;
  tries: number;
  created: number;
  exists: number;
  rejected: number;
}

/**
 * One Cron Trigger tick at `time` (the Worker's clock set to it too). Returns the tick's
 * schedule report and the other events it emitted.
 */
async function tickAt(time: number, cron = '*/5 * * * *') {
  await env.post('/clock', { offsetMs: time - Date.now() });
  const result = await env.worker.scheduled({ cron, scheduledTime: time });
  assert.equal(result.outcome, 'ok');
  const events = await env.events();
  const report = events.find((e) => e.type === 'test_report')?.report;
  assert.ok(report, 'the tick reported');
  return { runs: report.schedules as Run[], events: events.filter((e) => e.type !== 'test_report') };
}

const keysOf = async (prefix: string) =>
  (await env.sql(`SELECT dedupe_key FROM outbox.job WHERE dedupe_key LIKE $1 ORDER BY dedupe_key`, [`${prefix}%`])).map((r) => r.dedupe_key as string);
const lastRun = async (name: string) => {
  const rows = await env.sql(`SELECT round(extract(epoch FROM last_at) * 1000)::bigint AS ms FROM outbox.schedule_run WHERE name = $1`, [name]);
  return rows[0] ? Number(rows[0].ms) : null;
};
const setLastRun = (name: string, ms: number) =>
  env.sql(`INSERT INTO outbox.schedule_run (name, last_at, updated_at) VALUES ($1, to_timestamp($2::bigint / 1000.0), now())`, [name, ms]);

describe('which occurrences a tick enqueues', () => {
  test('the first run enqueues only the tick\'s own occurrence, and records where catch-up starts', async () => {
    // 10:20: no schedule matches this minute, and nothing earlier is caught up on a first run.
    const quiet = await tickAt(at('2026-11-30T10:20:00.000Z'));
    assert.deepEqual(quiet.runs, []);
    assert.deepEqual(await keysOf('schedule:'), []);
    assert.equal(await lastRun('hourly'), at('2026-11-30T10:19:59.999Z'));
    assert.equal(await lastRun('fanout'), at('2026-11-30T10:19:59.999Z'));

    await env.sql('DELETE FROM outbox.schedule_run');
    const first = await tickAt(at('2026-11-30T11:00:00.000Z'));
    assert.deepEqual(
      first.runs.map((r) => [r.name, r.key, r.status, r.created]),
      [['hourly', 'schedule:hourly:2026-11-30T11:00:00.000Z', 'enqueued', 1]],
    );
    assert.deepEqual(await keysOf('schedule:'), ['schedule:hourly:2026-11-30T11:00:00.000Z']);
    assert.equal(await lastRun('hourly'), at('2026-11-30T11:00:00.000Z'));
    assert.ok(first.events.some((e) => e.type === 'schedule_enqueued' && e.schedule === 'hourly' && e.status === 'created' && e.created === 1));
    // The same tick delivered again, and a later tick with nothing due: nothing new.
    assert.deepEqual((await tickAt(at('2026-11-30T11:00:00.000Z'))).runs, []);
    assert.deepEqual((await tickAt(at('2026-11-30T11:05:00.000Z'))).runs, []);
    assert.deepEqual(await keysOf('schedule:'), ['schedule:hourly:2026-11-30T11:00:00.000Z']);
  });

  test('missed ticks are caught up at the next one, each occurrence keyed by its own time', async () => {
    await tickAt(at('2026-11-30T10:00:00.000Z'));
    // The Worker was down from 10:00 to 14:05; the next tick is a plain sweep tick.
    const next = await tickAt(at('2026-11-30T14:05:00.000Z'));
    assert.deepEqual(
      next.runs.map((r) => [r.name, new Date(r.scheduledAt).toISOString(), r.status]),
      [
        ['hourly', '2026-11-30T11:00:00.000Z', 'enqueued'],
        ['hourly', '2026-11-30T12:00:00.000Z', 'enqueued'],
        ['hourly', '2026-11-30T13:00:00.000Z', 'enqueued'],
        ['hourly', '2026-11-30T14:00:00.000Z', 'enqueued'],
        ['checked', '2026-11-30T10:15:00.000Z', 'enqueued'],
        ['checked', '2026-11-30T11:15:00.000Z', 'enqueued'],
        ['checked', '2026-11-30T12:15:00.000Z', 'enqueued'],
        ['checked', '2026-11-30T13:15:00.000Z', 'enqueued'],
      ],
    );
    assert.deepEqual(await keysOf('schedule:hourly:'), [
      'schedule:hourly:2026-11-30T10:00:00.000Z',
      'schedule:hourly:2026-11-30T11:00:00.000Z',
      'schedule:hourly:2026-11-30T12:00:00.000Z',
      'schedule:hourly:2026-11-30T13:00:00.000Z',
      'schedule:hourly:2026-11-30T14:00:00.000Z',
    ]);
    // Each job's payload is its own occurrence's time.
    const payloads = await env.sql(`SELECT payload->>'at' AS at, dedupe_key FROM outbox.job WHERE dedupe_key LIKE 'schedule:hourly:%'`);
    for (const p of payloads) assert.equal(`schedule:hourly:${p.at}`, p.dedupe_key);
    assert.equal(await lastRun('hourly'), at('2026-11-30T14:00:00.000Z'));
    assert.equal(await lastRun('checked'), at('2026-11-30T13:15:00.000Z'));
    assert.ok(!next.events.some((e) => e.type === 'schedule_missed'));
    // Delivered again: everything is already recorded.
    assert.deepEqual((await tickAt(at('2026-11-30T14:05:00.000Z'))).runs, []);
  });

  test('catch-up is bounded to the last 24 hours (24 occurrences), and the rest is reported missed', async () => {
    const now = at('2026-11-30T12:00:00.000Z');
    await setLastRun('hourly', now - 30 * HOUR);
    const { runs, events } = await tickAt(now);
    const hourly = runs.filter((r) => r.name === 'hourly');
    assert.equal(hourly.length, 24);
    assert.equal(new Date(hourly[0]!.scheduledAt).toISOString(), '2026-11-29T13:00:00.000Z');
    assert.equal(new Date(hourly[23]!.scheduledAt).toISOString(), '2026-11-30T12:00:00.000Z');
    assert.equal((await keysOf('schedule:hourly:')).length, 24);
    assert.deepEqual(
      events.filter((e) => e.type === 'schedule_missed'),
      [{ type: 'schedule_missed', schedule: 'hourly', since: '2026-11-29T06:00:00.000Z', from: '2026-11-29T13:00:00.000Z', severity: 'warn' }],
    );
  });
});

describe('recovery\'s budget is held back from schedules', () => {
  test('with no time left past recovery\'s budget, a tick starts no occurrence; the next tick catches it up', async () => {
    await tickAt(at('2026-11-30T10:00:00.000Z'));
    assert.deepEqual(await keysOf('schedule:hourly:'), ['schedule:hourly:2026-11-30T10:00:00.000Z']);
    // '*/7' runs the handler whose recoveryBudgetMs equals its invocationBudgetMs: the core's
    // schedulesUntil is the tick's start, so 'checked' 10:15 and 'hourly' 11:00 are deferred,
    // unrecorded, and the sweep still runs.
    await env.post('/clock', { offsetMs: at('2026-11-30T11:00:00.000Z') - Date.now() });
    const result = await env.worker.scheduled({ cron: '*/7 * * * *', scheduledTime: at('2026-11-30T11:00:00.000Z') });
    assert.equal(result.outcome, 'ok');
    const events = await env.events();
    const report = events.find((e) => e.type === 'test_report')?.report;
    assert.deepEqual(report.schedules, []);
    assert.equal(report.schedulesDeferred, 2);
    assert.deepEqual(report.failedSteps, []);
    assert.ok(events.some((e) => e.type === 'schedules_deferred' && e.occurrences === 2 && e.severity === 'warn'), JSON.stringify(events));
    assert.deepEqual(await keysOf('schedule:hourly:'), ['schedule:hourly:2026-11-30T10:00:00.000Z']);
    assert.equal(await lastRun('hourly'), at('2026-11-30T10:00:00.000Z'));
    // The next ordinary tick (recovery's default 2 min of a 14 min budget) catches both up.
    const next = await tickAt(at('2026-11-30T11:05:00.000Z'));
    assert.deepEqual(next.runs.map((r) => [r.key, r.status]).sort(), [
      ['schedule:checked:2026-11-30T10:15:00.000Z', 'enqueued'],
      ['schedule:hourly:2026-11-30T11:00:00.000Z', 'enqueued'],
    ]);
    assert.deepEqual(await keysOf('schedule:hourly:'), ['schedule:hourly:2026-11-30T10:00:00.000Z', 'schedule:hourly:2026-11-30T11:00:00.000Z']);
  });
});

describe('failures within a tick', () => {
  test('a lost connection is retried on a fresh session within the tick; the occurrence commits once', async () => {
    await tickAt(at('2026-11-30T10:00:00.000Z'));
    // The record statement runs inside the occurrence's transaction, after its enqueue.
    await env.post('/break', { statement: 'ScheduleRecord', times: 1 });
    const { runs, events } = await tickAt(at('2026-11-30T11:00:00.000Z'));
    // (`checked` catches up its 10:15 here too, after the connection is back.)
    assert.deepEqual(runs.map((r) => [r.name, r.status, r.tries, r.created]), [['hourly', 'enqueued', 2, 1], ['checked', 'enqueued', 1, 1]]);
    assert.ok(events.some((e) => e.type === 'infra_error' && e.where === 'schedule'));
    assert.ok(!events.some((e) => e.type === 'schedule_failed'));
    assert.deepEqual(await keysOf('schedule:hourly:2026-11-30T11'), ['schedule:hourly:2026-11-30T11:00:00.000Z']);
    assert.equal(await lastRun('hourly'), at('2026-11-30T11:00:00.000Z'));
  });

  test('a backend terminated under a fan-out (57P01) is retried, and its jobs are written once', async () => {
    await env.post('/mode', { fanout: 'sleep' });
    const time = at('2026-12-01T02:30:00.000Z');
    await env.post('/clock', { offsetMs: time - Date.now() });
    await env.worker.fetch('/stats');
    const running = env.worker.scheduled({ cron: '30 2 * * *', scheduledTime: time });
    // Find the fan-out's backend while it sleeps inside the occurrence's transaction, and end it.
    let killed = false;
    for (let i = 0; i < 100 && !killed; i++) {
      const rows = await env.sql(
        `SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity WHERE query LIKE '%AS fanout_sleeping%' AND pid <> pg_backend_pid()`,
      );
      killed = rows.some((r) => r.done);
      if (!killed) await sleep(50);
    }
    assert.ok(killed, 'the fan-out was seen running');
    assert.equal((await running).outcome, 'ok');
    const events = await env.events();
    const runs = events.find((e) => e.type === 'test_report').report.schedules as Run[];
    assert.deepEqual(runs.map((r) => [r.name, r.status, r.tries, r.created]), [['fanout', 'enqueued', 2, 5]]);
    assert.ok(events.some((e) => e.type === 'infra_error' && e.where === 'schedule' && /terminat/i.test(e.error)));
    assert.equal((await env.sql(`SELECT count(*)::int AS n FROM outbox.job WHERE kind = 'test.shard'`))[0].n, 5);
    assert.equal((await (await env.worker.fetch('/stats')).json() as { jobInserts: number }).jobInserts, 1);
  });

  test('a connection lost on every try gives up after 3 tries, and the next tick catches the occurrence up', async () => {
    await tickAt(at('2026-11-30T10:00:00.000Z'));
    await env.post('/break', { statement: 'ScheduleRecord', times: 3 });
    const down = await tickAt(at('2026-11-30T11:00:00.000Z'));
    assert.deepEqual(down.runs.map((r) => [r.name, r.status, r.tries, r.ok]), [['hourly', 'failed', 3, false], ['checked', 'enqueued', 1, true]]);
    const failed = down.events.filter((e) => e.type === 'schedule_failed');
    assert.deepEqual(failed.map((e) => [e.schedule, e.key, e.tries, e.severity]), [['hourly', 'schedule:hourly:2026-11-30T11:00:00.000Z', 3, 'error']]);
    assert.deepEqual(await keysOf('schedule:hourly:2026-11-30T11'), []);
    assert.equal(await lastRun('hourly'), at('2026-11-30T10:00:00.000Z'));
    const back = await tickAt(at('2026-11-30T11:05:00.000Z'));
    assert.deepEqual(back.runs.map((r) => [r.key, r.status, r.tries]), [['schedule:hourly:2026-11-30T11:00:00.000Z', 'enqueued', 1]]);
    assert.deepEqual(await keysOf('schedule:hourly:2026-11-30T11'), ['schedule:hourly:2026-11-30T11:00:00.000Z']);
  });

  test('a throw from `run` fails its occurrence at once, rolled back, and it is passed over', async () => {
    await env.post('/mode', { fanout: 'throw' });
    const { runs, events } = await tickAt(at('2026-12-01T02:30:00.000Z'));
    assert.deepEqual(runs.map((r) => [r.name, r.status, r.tries]), [['fanout', 'failed', 1]]);
    const failed = events.find((e) => e.type === 'schedule_failed');
    assert.equal(failed.error, 'fan-out failed on purpose');
    assert.equal((await env.sql(`SELECT count(*)::int AS n FROM outbox.job WHERE kind = 'test.shard'`))[0].n, 0);
    // Recorded as dealt with: trying the same code again would fail the same way.
    assert.equal(await lastRun('fanout'), at('2026-12-01T02:30:00.000Z'));
    await env.post('/mode', {});
    assert.deepEqual((await tickAt(at('2026-12-01T02:35:00.000Z'))).runs, []);
  });

  test('a lenient refusal is counted as rejected and emitted, not dropped silently', async () => {
    await env.post('/mode', { checked: 'invalid' });
    const { runs, events } = await tickAt(at('2026-11-30T10:15:00.000Z'));
    assert.deepEqual(
      runs.map((r) => [r.name, r.status, r.ok, r.created, r.rejected]),
      [['checked', 'rejected', true, 0, 1]],
    );
    assert.deepEqual(
      events.filter((e) => e.type === 'schedule_rejected'),
      [{ type: 'schedule_rejected', schedule: 'checked', key: 'schedule:checked:2026-11-30T10:15:00.000Z', status: 'invalid_payload', rejected: 1, severity: 'error' }],
    );
    assert.deepEqual(await keysOf('schedule:checked:'), []);
    // A refusal is an answer, not a fault: the occurrence is recorded, and not tried again.
    assert.equal(await lastRun('checked'), at('2026-11-30T10:15:00.000Z'));
    await env.post('/mode', {});
    assert.deepEqual((await tickAt(at('2026-11-30T10:20:00.000Z'))).runs, []);
  });
});

describe('a refusal inside a `run` schedule', () => {
  test('lenient: counted as rejected, the other jobs commit; strict: the whole occurrence rolls back as failed', async (t) => {
    // The mode is the fixture's, not reset between tests: put it back whatever happens.
    t.after(() => env.post('/mode', {}));
    const fanout = (runs: Run[]) => runs.filter((r) => r.name === 'fanout').map((r) => [r.status, r.ok, r.created, r.rejected]);
    await env.post('/mode', { fanout: 'invalid' });
    const lenient = await tickAt(at('2026-12-01T02:30:00.000Z'), '30 2 * * *');
    assert.deepEqual(fanout(lenient.runs), [['rejected', true, 4, 1]]);
    assert.deepEqual((await env.sql(`SELECT dedupe_key FROM outbox.job WHERE kind = 'test.shard' ORDER BY dedupe_key`)).map((r) => r.dedupe_key),
      [0, 1, 3, 4].map((i) => `fanout:2026-12-01:${i}`));

    await env.post('/mode', { fanout: 'invalid', strict: true });
    const strict = await tickAt(at('2026-12-02T02:30:00.000Z'), '30 2 * * *');
    assert.deepEqual(fanout(strict.runs), [['failed', false, 0, 0]]);
    const failed = strict.events.filter((e) => e.type === 'schedule_failed' && e.schedule === 'fanout');
    assert.equal(failed.length, 1);
    assert.equal(failed[0].key, 'schedule:fanout:2026-12-02T02:30:00.000Z');
    assert.equal(failed[0].severity, 'error');
    assert.deepEqual(await env.sql(`SELECT 1 FROM outbox.job WHERE dedupe_key LIKE 'fanout:2026-12-02:%'`), []);
    // Its own failure, not the connection's: passed over, on record.
    assert.equal(await lastRun('fanout'), at('2026-12-02T02:30:00.000Z'));
  });
});

describe('a `run` schedule fans out', () => {
  test('its jobs are created in one statement, and a repeated tick creates nothing new', async () => {
    await env.worker.fetch('/stats');
    const time = at('2026-12-01T02:30:00.000Z');
    const { runs } = await tickAt(time, '30 2 * * *');
    assert.deepEqual(runs.map((r) => [r.name, r.key, r.status, r.created, r.exists]), [['fanout', 'schedule:fanout:2026-12-01T02:30:00.000Z', 'enqueued', 5, 0]]);
    const jobs = await env.sql(`SELECT dedupe_key, payload FROM outbox.job WHERE kind = 'test.shard' ORDER BY dedupe_key`);
    assert.deepEqual(jobs.map((j) => j.dedupe_key), [0, 1, 2, 3, 4].map((i) => `fanout:2026-12-01:${i}`));
    assert.deepEqual(jobs[3].payload, { day: '2026-12-01', shard: 3 });
    assert.equal(((await (await env.worker.fetch('/stats')).json()) as { jobInserts: number }).jobInserts, 1);
    // The same tick again: recorded, so not run.
    assert.deepEqual((await tickAt(time, '30 2 * * *')).runs, []);
    // Even with the record gone, the keys derived from the tick find the jobs already made.
    await env.sql('DELETE FROM outbox.schedule_run');
    const again = await tickAt(time, '30 2 * * *');
    assert.deepEqual(again.runs.map((r) => [r.name, r.status, r.created, r.exists]), [['fanout', 'enqueued', 0, 5]]);
    assert.equal((await env.sql(`SELECT count(*)::int AS n FROM outbox.job WHERE kind = 'test.shard'`))[0].n, 5);
  });
});

describe('a schedule with its own dedupe key', () => {
  test('its job carries the key the schedule gives, and the same tick again enqueues nothing new', async () => {
    const time = at('2027-01-01T04:45:00.000Z');
    const { runs } = await tickAt(time, '45 4 1 1 *');
    // The occurrence keeps its own key (it names the run); only the job's dedupe key is the override.
    assert.deepEqual(runs.map((r) => [r.name, r.key, r.status, r.created]), [['yearly', 'schedule:yearly:2027-01-01T04:45:00.000Z', 'enqueued', 1]]);
    const jobs = async () => (await env.sql(`SELECT dedupe_key, payload FROM outbox.job ORDER BY id`)).map((j) => [j.dedupe_key, j.payload.at]);
    assert.deepEqual(await jobs(), [['yearly-report:2027', '2027-01-01T04:45:00.000Z']]);
    // The same tick again: recorded, so not run.
    assert.deepEqual((await tickAt(time, '45 4 1 1 *')).runs, []);
    // With the record gone, the override's key finds the job already made.
    await env.sql('DELETE FROM outbox.schedule_run');
    const again = await tickAt(time, '45 4 1 1 *');
    assert.deepEqual(again.runs.map((r) => [r.name, r.status, r.created, r.exists]), [['yearly', 'enqueued', 0, 1]]);
    assert.deepEqual(await jobs(), [['yearly-report:2027', '2027-01-01T04:45:00.000Z']]);
  });
});

describe('defining schedules', () => {
  const job = defineJob({ kind: 'def.job', payload: z.object({}), timeoutMs: 1_000, handle: async () => ok() });
  const refused = (fn: () => unknown, code: string, message: RegExp) =>
    assert.throws(fn, (e: unknown) => e instanceof PostboxError && e.code === code && message.test(e.message));

  test('a name that cannot key an occurrence fails at definition, not at the first tick', () => {
    refused(() => defineSchedule({ cron: '0 9 * * *', name: 'has space', job, payload: () => ({}) }), 'invalid_schedule', /name/);
    refused(() => defineSchedule({ cron: '0 9 * * *', name: 'x'.repeat(129), run: async () => undefined }), 'invalid_schedule', /name/);
  });

  test('two schedules sharing a name (and so a recorded last run) are refused', () => {
    const a = defineSchedule({ cron: '0 9 * * *', name: 'same', job, payload: () => ({}) });
    const b = defineSchedule({ cron: '0 3 * * *', name: 'same', run: async () => undefined });
    refused(() => createScheduledHandler(() => ({}) as never, { schedules: [a, b] }), 'invalid_schedule', /two schedules are named same/);
  });
});
