// The reference Worker (wrangler.jsonc, worker/src) end to end under the real `wrangler dev`,
// against PostgreSQL 17: the flow `npm run dev` shows, checked without a person watching.
//
// Run: node --import tsx --test tests/e2e/reference-worker.test.ts
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  ensureBuilt,
  listJobs,
  postJson,
  sleep,
  startDatabase,
  startWrangler,
  triggerSweep,
  guardTeardown,
  pollUntil,
  waitForHealth,
  type Database,
  type JobRow,
  type WranglerDev,
} from '../../scripts/reference-stack.ts';
import { freePort } from '../support/postgres.ts';
import { ATTEMPTS } from '../support/ledger.ts';

/** Everything, including a cold core build, must finish within this. */
const HARD_TIMEOUT_MS = 8 * 60_000;

let db: Database | undefined;
let dev: WranglerDev | undefined;
const guard = guardTeardown('reference-worker e2e', HARD_TIMEOUT_MS, async () => {
  await dev?.stop();
  await db?.stop();
});

const until = <T>(what: string, fn: () => Promise<T | undefined | null | false>, timeoutMs = 30_000, everyMs = 250): Promise<T> =>
  pollUntil(what, fn, { timeoutMs, everyMs, dev: () => dev });

const jobOf = async (userId: string, kind: string) =>
  (await db!.sql<JobRow & { payload: any }>(`SELECT * FROM outbox.job WHERE kind = $1 AND payload->>'userId' = $2`, [kind, userId]))[0];

async function signup(body: object) {
  const res = await postJson(dev!.url, '/signup', body);
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body as { user: { id: string; email: string }; jobs: Record<'welcome' | 'crm' | 'webhook', { status: string; id: string; kind: string }> };
}

describe('reference Worker under wrangler dev', { timeout: HARD_TIMEOUT_MS - 30_000 }, () => {
  before(async () => {
    ensureBuilt();
    db = await startDatabase({ port: 'any' });
    dev = await startWrangler({ port: await freePort(), databaseUrl: db.url });
    await waitForHealth(dev);
  });
  after(async () => {
    await guard.done();
  });

  test('GET /health answers with the database reachable', async () => {
    const res = await fetch(`${dev!.url}/health`);
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { ok: boolean }).ok, true);
  });

  test('signup commits the user and its jobs; the welcome email is sent once', async () => {
    const { user, jobs } = await signup({ email: 'ada@example.com' });
    assert.equal(user.email, 'ada@example.com');
    assert.deepEqual(
      Object.values(jobs).map((j) => [j.kind, j.status]),
      [['email.welcome', 'created'], ['crm.sync', 'created'], ['webhook.deliver', 'created']],
    );
    // The queue nudge runs it without any sweep.
    const listed = await until('email.welcome succeeded (GET /jobs)', async () =>
      (await listJobs(dev!.url)).find((j) => j.id === jobs.welcome.id && j.status === 'succeeded'),
    );
    assert.equal(listed.attempts, 1);
    assert.equal(listed.last_error_code, null);
    // Sent once: one attempt ever opened for the job (the table's unique key would hide a second
    // run, so count the runs themselves).
    const runs = await db!.sql(`SELECT seq, outcome FROM ${ATTEMPTS} a WHERE job_id = $1`, [jobs.welcome.id]);
    assert.deepEqual(runs, [{ seq: 1, outcome: 'ok' }]);
    const sent = await db!.sql('SELECT user_id, to_email, template, idempotency_key FROM public.sent_email WHERE user_id = $1', [user.id]);
    assert.equal(sent.length, 1);
    assert.equal(sent[0].to_email, 'ada@example.com');
    assert.equal(sent[0].template, 'welcome');
    const webhook = await until('webhook.deliver succeeded', async () => {
      const j = await jobOf(user.id, 'webhook.deliver');
      return j?.status === 'succeeded' ? j : undefined;
    });
    assert.equal(webhook.attempts, 1);
  });

  test('crm.sync retries crm_unavailable twice, then succeeds on a sweep', async () => {
    const { user, jobs } = await signup({ email: 'grace@example.com' });
    const statuses = new Set<string>();
    let sweeps = 0;
    const done = await until(
      'crm.sync succeeded',
      async () => {
        const j = await jobOf(user.id, 'crm.sync');
        if (j) statuses.add(j.status);
        if (j?.status === 'succeeded') return j;
        assert.notEqual(j?.status, 'dead', 'crm.sync must not dead-letter');
        assert.equal(await triggerSweep(dev!.url), 200);
        sweeps++;
        return undefined;
      },
      60_000,
      1_000,
    );
    assert.equal(done.id, jobs.crm.id);
    assert.ok(statuses.has('retrying'), `saw ${[...statuses].join(', ')}`);
    assert.equal(done.attempts, 3);
    assert.ok(sweeps >= 1);
    const attempts = await db!.sql(`SELECT seq, outcome, error_code FROM ${ATTEMPTS} a WHERE job_id = $1 ORDER BY seq`, [done.id]);
    assert.deepEqual(
      attempts.map((a) => [a.outcome, a.error_code]),
      [['retry', 'crm_unavailable'], ['retry', 'crm_unavailable'], ['ok', null]],
    );
    assert.equal((await db!.sql('SELECT count(*)::int AS n FROM public.crm_contact WHERE user_id = $1', [user.id]))[0].n, 1);
  });

  test('a webhook the receiver rejects dead-letters at once with http_4xx', async () => {
    const { user } = await signup({ email: 'mallory@example.com', badWebhook: true });
    const dead = await until('webhook.deliver dead', async () => {
      const j = await jobOf(user.id, 'webhook.deliver');
      return j?.status === 'dead' ? j : undefined;
    });
    assert.equal(dead.last_error_code, 'http_4xx');
    assert.equal(dead.attempts, 1);
    assert.equal((await db!.sql('SELECT count(*)::int AS n FROM public.webhook_delivery WHERE user_id = $1', [user.id]))[0].n, 0);
    // Its welcome email is unaffected.
    await until('mallory welcome sent', async () => (await jobOf(user.id, 'email.welcome'))?.status === 'succeeded');
    // The dead-letter is reported as a structured log line.
    await until('dead_letter event logged', async () => dev!.output().includes('"type":"dead_letter"'), 10_000);
  });

  test('a rolled-back signup (duplicate email → 409) leaves no user and no job', async () => {
    const jobsBefore = (await db!.sql('SELECT count(*)::int AS n FROM outbox.job'))[0].n;
    const res = await postJson(dev!.url, '/signup', { email: 'ADA@example.com' });
    assert.equal(res.status, 409, JSON.stringify(res.body));
    assert.equal(res.body.error, 'email_taken');
    await sleep(500);
    assert.equal((await db!.sql('SELECT count(*)::int AS n FROM outbox.job'))[0].n, jobsBefore);
    assert.equal((await db!.sql("SELECT count(*)::int AS n FROM public.app_user WHERE email = 'ada@example.com'"))[0].n, 1);
    // Every job belongs to a committed user.
    const orphans = await db!.sql(
      `SELECT count(*)::int AS n FROM outbox.job j WHERE NOT EXISTS (SELECT 1 FROM public.app_user u WHERE u.id = (j.payload->>'userId')::uuid)`,
    );
    assert.equal(orphans[0].n, 0);
  });

  test('bad input is refused before anything is written', async () => {
    const res = await postJson(dev!.url, '/signup', { email: 'not-an-email' });
    assert.equal(res.status, 400);
  });
});
