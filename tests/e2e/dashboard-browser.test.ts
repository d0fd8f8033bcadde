// The dashboard in a real browser: Debian's Chromium, driven by playwright-core, against the
// reference Worker under `wrangler dev` and PostgreSQL 17. Loads every page, replays a dead job
// by clicking, sees it succeed, checks that a hostile payload stays text, and saves a
// screenshot of each page under test-artifacts/.
//
// Run: node --import tsx --test tests/e2e/dashboard-browser.test.ts
// POSTBOX_UPDATE_DOCS_SCREENSHOT=1 also writes docs/dashboard.png (the README's screenshot).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { chromium, type Browser, type Page } from 'playwright-core';
import {
  ensureBuilt,
  postJson,
  ROOT,
  sleep,
  startDatabase,
  startWrangler,
  triggerSweep,
  guardTeardown,
  pollUntil,
  waitForHealth,
  type Database,
  type WranglerDev,
} from '../../scripts/reference-stack.ts';
import { freePort } from '../support/postgres.ts';

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = path.join(ROOT, 'test-artifacts');
const HARD_TIMEOUT_MS = 8 * 60_000;
const HOSTILE = '<img src=x onerror=alert(document.domain)>';

let db: Database | undefined;
let dev: WranglerDev | undefined;
let browser: Browser | undefined;
const guard = guardTeardown('dashboard browser e2e', HARD_TIMEOUT_MS, async () => {
  await browser?.close().catch(() => undefined);
  await dev?.stop();
  await db?.stop();
});

const until = <T>(what: string, fn: () => Promise<T | undefined | null | false>, timeoutMs = 30_000, everyMs = 500): Promise<T> =>
  pollUntil(what, fn, { timeoutMs, everyMs, dev: () => dev });

/** A page that records dialogs, CSP violations and failed page loads. */
async function openPage(): Promise<{ page: Page; dialogs: string[]; cspErrors: string[] }> {
  const context = await browser!.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const dialogs: string[] = [];
  const cspErrors: string[] = [];
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) cspErrors.push(m.text());
  });
  return { page, dialogs, cspErrors };
}

async function visit(page: Page, url: string, shot: string): Promise<number> {
  const res = await page.goto(url);
  assert.ok(res, url);
  assert.equal(res.status(), 200, `${url}: ${res.status()}`);
  const bytes = (await res.body()).length;
  assert.ok(bytes < 50_000, `${url} weighs ${bytes} bytes`);
  await page.screenshot({ path: path.join(ARTIFACTS, shot), fullPage: true });
  return bytes;
}

describe('dashboard in Chromium, served by the reference Worker under wrangler dev', { timeout: HARD_TIMEOUT_MS - 30_000 }, () => {
  let base = '';
  let deadWelcome = '';
  let hostile = '';

  before(async () => {
    assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: scripts/setup.sh installs Debian's chromium`);
    mkdirSync(ARTIFACTS, { recursive: true });
    ensureBuilt();
    db = await startDatabase({ port: 'any' });
    dev = await startWrangler({ port: await freePort(), databaseUrl: db.url });
    await waitForHealth(dev);
    // Chromium refuses its sandbox as root (CI runs as root); the page under test is our own.
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    base = `${dev.url}/dashboard`;

    // Real traffic: two signups, one of whose webhooks dead-letters (http_4xx).
    for (const body of [{ email: 'ada@example.com' }, { email: 'mallory@example.com', badWebhook: true }]) {
      const res = await postJson(dev.url, '/signup', body);
      assert.equal(res.status, 201, JSON.stringify(res.body));
    }
    await until('the bad webhook dead-letters', async () => (await db!.sql(`SELECT 1 FROM outbox.job WHERE kind = 'webhook.deliver' AND status = 'dead'`)).length === 1);
    // A welcome email that dead-lettered during an earlier mail outage: replaying it now succeeds.
    deadWelcome = randomUUID();
    const [ada] = await db.sql(`SELECT id FROM public.app_user WHERE email = 'ada@example.com'`);
    await db.sql(
      `INSERT INTO outbox.job (id, kind, status, payload, due_at, created_at, updated_at, finished_at, attempts, attempt_seq, last_error_code, last_error_message)
       VALUES ($1, 'email.welcome', 'dead', $2, now() - interval '1 hour', now() - interval '1 hour', now(), now() - interval '30 minutes', 3, 3, 'smtp_unavailable', 'mail relay refused the connection')`,
      [deadWelcome, JSON.stringify({ userId: ada.id, email: 'ada+again@example.com' })],
    );
    await db.sql(
      `INSERT INTO outbox.attempt (job_id, seq, kind, started_at, lease_expires_at, finished_at, outcome, error_code, error_message)
       SELECT $1, s, 'email.welcome', now() - interval '1 hour' + s * interval '5 minutes', now(), now() - interval '1 hour' + s * interval '5 minutes' + interval '2 seconds',
              CASE WHEN s = 3 THEN 'fail' ELSE 'retry' END, 'smtp_unavailable', 'mail relay refused the connection'
         FROM generate_series(1, 3) AS s`,
      [deadWelcome],
    );
    // Hostile data, as a careless producer or an attacker-controlled field could leave it.
    hostile = randomUUID();
    await db.sql(
      `INSERT INTO outbox.job (id, kind, status, payload, tenant_key, due_at, created_at, updated_at, finished_at, attempts, attempt_seq, last_error_code, last_error_message)
       VALUES ($1, 'webhook.deliver', 'dead', $2, $3, now(), now(), now(), now(), 1, 1, 'http_4xx', $3)`,
      [hostile, JSON.stringify({ event: HOSTILE, userId: randomUUID(), bad: true }), HOSTILE],
    );
    await db.sql(
      `INSERT INTO outbox.attempt (job_id, seq, kind, started_at, lease_expires_at, finished_at, outcome, error_code, error_message)
       VALUES ($1, 1, 'webhook.deliver', now() - interval '1 second', now(), now(), 'fail', 'http_4xx', $2)`,
      [hostile, HOSTILE],
    );
  });
  after(async () => {
    await guard.done();
  });

  test('every page loads within its weight, under the CSP, and is saved as a screenshot', async () => {
    const { page, dialogs, cspErrors } = await openPage();
    // A report that has held its snapshot open: the overview names what holds back cleanup.
    const holder = new pg.Client({ connectionString: db!.url, application_name: 'nightly-report' });
    await holder.connect();
    try {
      await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await holder.query('SELECT count(*) FROM outbox.job');
      await visit(page, `${base}`, 'dashboard-overview.png');
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    assert.equal(await page.locator('h1').textContent(), 'Overview');
    assert.equal(await page.locator('svg.chart').count(), 2);
    assert.match((await page.locator('main').textContent())!, /Backlog by kind and lane/);
    // Every outbox table has a row; the holder is listed under them.
    assert.deepEqual(await page.locator('#tables tbody tr td:first-child').allTextContents(), ['outbox.attempt', 'outbox.index_baseline', 'outbox.job', 'outbox.job_edge', 'outbox.kind_slot', 'outbox.schedule_run', 'outbox.webhook_endpoint']);
    assert.match((await page.locator('#horizon').textContent())!, /session \d+ \(nightly-report\), idle in transaction: .*transactions back ok/);
    // The stylesheet applied (served from /dashboard/assets under `style-src 'self'`).
    assert.equal(await page.locator('header').evaluate((el) => getComputedStyle(el).display), 'flex');
    if (process.env.POSTBOX_UPDATE_DOCS_SCREENSHOT === '1') copyFileSync(path.join(ARTIFACTS, 'dashboard-overview.png'), path.join(ROOT, 'docs/dashboard.png'));

    await visit(page, `${base}/jobs`, 'dashboard-jobs.png');
    assert.ok((await page.locator('tbody tr').count()) >= 8);
    // Select all (the one script) ticks every row's box.
    await page.locator('#select-all').check();
    assert.equal(await page.locator('input[name="id"]:checked').count(), await page.locator('input[name="id"]').count());

    await visit(page, `${base}/jobs?status=dead`, 'dashboard-dead.png');
    assert.equal(await page.locator('tbody tr').count(), 3);
    await visit(page, `${base}/jobs/${deadWelcome}`, 'dashboard-job.png');
    assert.equal(await page.locator('#attempts tbody tr').count(), 3);
    assert.deepEqual(dialogs, []);
    assert.deepEqual(cspErrors, []);
  });

  test('a hostile payload and error message show as text: no dialog, no injected element', async () => {
    const { page, dialogs } = await openPage();
    await visit(page, `${base}/jobs/${hostile}`, 'dashboard-hostile-job.png');
    assert.ok((await page.locator('#payload').textContent())!.includes(HOSTILE));
    assert.equal(await page.locator('#error').textContent(), HOSTILE);
    assert.ok((await page.locator('#attempts').textContent())!.includes(HOSTILE));
    assert.equal(await page.locator('img').count(), 0);
    await visit(page, `${base}/jobs?status=dead`, 'dashboard-hostile-list.png');
    assert.equal(await page.locator('img').count(), 0);
    assert.ok((await page.locator('main').textContent())!.includes(HOSTILE)); // the tenant column
    await sleep(500); // an onerror handler would have fired by now
    assert.deepEqual(dialogs, []);
  });

  test('replaying a dead job by clicking: the notice says so, and the job succeeds after a sweep', async () => {
    const { page } = await openPage();
    await visit(page, `${base}/jobs?status=dead`, 'dashboard-dead-before-replay.png');
    await page.locator(`a[href="/dashboard/jobs/${deadWelcome}"]`).click();
    await page.waitForURL(`**/dashboard/jobs/${deadWelcome}`);
    // A dead job offers only what the core allows for it: Replay (no Cancel, no Retry now).
    assert.deepEqual(await page.locator('form.actions button').allTextContents(), ['Replay']);
    // Its times say they are UTC, as the filters do.
    assert.match((await page.locator('dl.meta').textContent())!, /created\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/);
    await page.getByRole('button', { name: 'Replay', exact: true }).click();
    await page.waitForURL(/done=replay/);
    assert.match((await page.locator('.notice').textContent())!, /Replay: 1 job\(s\) changed/);
    await until(
      'the replayed welcome email succeeds',
      async () => {
        await triggerSweep(dev!.url);
        const [job] = await db!.sql(`SELECT status FROM outbox.job WHERE id = $1`, [deadWelcome]);
        return job.status === 'succeeded';
      },
      60_000,
      1_000,
    );
    await page.reload();
    assert.equal(await page.locator('dd .status-succeeded').textContent(), 'succeeded');
    // A succeeded job has no action the core would accept: no buttons at all.
    assert.equal(await page.locator('form.actions button').count(), 0);
    assert.equal(await page.locator('#attempts tbody tr').count(), 4);
    assert.equal(await page.locator('#attempts tbody tr').last().locator('td').nth(1).textContent(), 'ok');
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-job-after-replay.png'), fullPage: true });
    const sent = await db!.sql(`SELECT to_email FROM public.sent_email WHERE idempotency_key = $1`, [deadWelcome]);
    assert.deepEqual(sent, [{ to_email: 'ada+again@example.com' }]);
  });
});
