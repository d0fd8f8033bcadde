// The dashboard's fetch handler in Node against a real PostgreSQL: authorization, read-only
// mode, CSRF, escaping of hostile data, filters and cursor paging, actions on a selection and
// on a filter, tenant scope, and the overview's backlog, charts and health warnings. Inside
// workerd (tests/shim/fixtures/dashboard-worker.ts): bad addresses, the actions a job page
// offers per status, and its times in UTC.
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { z } from 'zod';
import { createOutbox, defineJob, ok } from 'postbox';
import { createDashboard, type DashboardAccess } from 'postbox/dashboard';
import { getBatch, listAttempts, type OutboxHealth } from 'postbox/inspect';
import { createPgConnector } from 'postbox/pg';
import { useMigratedDb } from '../support/migrated-db.ts';
import { startWorker, type TestWorker } from '../support/worker.ts';

const db = useMigratedDb('dashboard', { max: 3, resetEachTest: true });

const HOSTILE = '<img src=x onerror=alert(1)>';
const note = defineJob({ kind: 'dash.note', payload: z.object({ text: z.string() }), timeoutMs: 5_000, handle: async () => ok() });
const other = defineJob({ kind: 'dash.other', lane: 'slow', payload: z.object({ n: z.number() }), timeoutMs: 5_000, handle: async () => ok() });
const limited = defineJob({
  kind: 'dash.limited', payload: z.object({ n: z.number() }), timeoutMs: 5_000, concurrency: 4, tenantConcurrency: 1, handle: async () => ok(),
});
const outbox = () => createOutbox({ jobs: [note, other, limited], connect: createPgConnector(db.url) });

/** Roles by header, so one handler serves every case. */
function authorize(request: Request): boolean | DashboardAccess {
  const role = request.headers.get('x-role') ?? 'admin';
  if (role === 'deny') return false;
  if (role === 'throw') throw new Error('identity provider down');
  if (role === 'ro') return { readOnly: true };
  if (role.startsWith('tenant:')) return { tenantKey: role.slice(7) };
  return true;
}
const SECRET = 'dashboard-test-secret';
const dashboard = createDashboard(() => outbox(), { authorize, basePath: '/dash', csrfSecret: SECRET, pageSize: 3 });
const BASE = 'http://dash.test';

/** A browser-like session: keeps the CSRF cookie, reads the token from the last page. */
class Session {
  cookie = '';
  token = '';
  constructor(readonly role = 'admin') {}
  async get(path: string): Promise<{ res: Response; body: string }> {
    const res = await dashboard(new Request(BASE + path, { headers: { 'x-role': this.role, ...(this.cookie ? { cookie: this.cookie } : {}) } }), {});
    const set = res.headers.get('set-cookie');
    if (set) this.cookie = set.split(';')[0]!;
    const body = await res.text();
    const token = /name="csrf" value="([^"]*)"/.exec(body);
    if (token) this.token = token[1]!;
    return { res, body };
  }
  async post(fields: [string, string][], opts: { token?: string | null; cookie?: string; site?: string } = {}): Promise<{ res: Response; body: string }> {
    const form = new URLSearchParams(fields);
    const token = opts.token === undefined ? this.token : opts.token;
    if (token !== null) form.set('csrf', token);
    const cookie = opts.cookie ?? this.cookie;
    const res = await dashboard(
      new Request(`${BASE}/dash/actions`, {
        method: 'POST',
        body: form,
        headers: { 'x-role': this.role, ...(cookie ? { cookie } : {}), ...(opts.site ? { 'sec-fetch-site': opts.site } : {}) },
        redirect: 'manual',
      }),
      {},
    );
    return { res, body: await res.text() };
  }
}

async function seed(job: typeof note | typeof other | typeof limited, items: { payload: any; tenantKey?: string; correlationId?: string }[]): Promise<string[]> {
  const results = await outbox().transaction(db.pool, (_tx, _enqueue, enqueueMany) => enqueueMany(job as typeof note, items));
  return results.map((r) => (r as { id: string }).id);
}
const kill = (ids: string[]) => db.pool.query(`UPDATE outbox.job SET status = 'dead', finished_at = now(), attempts = 3, last_error_code = 'boom' WHERE id = ANY($1::uuid[])`, [ids]);
const statusOf = async (id: string) => (await db.pool.query('SELECT status FROM outbox.job WHERE id = $1', [id])).rows[0]?.status;
const rowIds = (body: string) => [...body.matchAll(/name="id" value="([0-9a-f-]{36})"/g)].map((m) => m[1]!);
const listedIds = (body: string) => [...body.matchAll(/href="\/dash\/jobs\/([0-9a-f-]{36})"/g)].map((m) => m[1]!);

describe('access', () => {
  test('authorize denies with 403 on every path; a throwing authorize is a 500; other paths are 404', async () => {
    for (const path of ['/dash', '/dash/', '/dash/jobs', '/dash/assets/app.css']) {
      const res = await dashboard(new Request(BASE + path, { headers: { 'x-role': 'deny' } }), {});
      assert.equal(res.status, 403, path);
    }
    const post = await dashboard(new Request(`${BASE}/dash/actions`, { method: 'POST', headers: { 'x-role': 'deny' }, body: new URLSearchParams({ op: 'cancel:filter' }) }), {});
    assert.equal(post.status, 403);
    const thrown = await dashboard(new Request(`${BASE}/dash/jobs`, { headers: { 'x-role': 'throw' } }), {});
    assert.equal(thrown.status, 500);
    assert.doesNotMatch(await thrown.text(), /identity provider/);
    assert.equal((await dashboard(new Request(`${BASE}/elsewhere`), {})).status, 404);
    assert.equal((await dashboard(new Request(`${BASE}/dash/nope`), {})).status, 404);
  });

  test('pages carry security headers and a strict, HttpOnly CSRF cookie', async () => {
    const s = new Session();
    const { res } = await s.get('/dash/');
    assert.equal(res.status, 200);
    const csp = res.headers.get('content-security-policy')!;
    assert.match(csp, /script-src 'self'/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.doesNotMatch(csp, /unsafe-inline/);
    assert.equal(res.headers.get('x-frame-options'), 'DENY');
    assert.equal(res.headers.get('cache-control'), 'no-store');
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    assert.match(res.headers.get('set-cookie')!, /^postbox_dashboard_csrf=[\w-]{43}; Path=\/dash; HttpOnly; SameSite=Strict$/);
    // The cookie is issued once: a second page with it sets none.
    assert.equal((await s.get('/dash/jobs')).res.headers.get('set-cookie'), null);
  });

  test('read-only mode shows no actions and refuses POSTs', async () => {
    const [id] = await seed(note, [{ payload: { text: 'a' } }]);
    await kill([id!]);
    const admin = new Session();
    await admin.get('/dash/jobs');
    const ro = new Session('ro');
    const list = await ro.get('/dash/jobs');
    assert.equal(list.res.status, 200);
    assert.ok(listedIds(list.body).includes(id!));
    assert.doesNotMatch(list.body, /name="op"|name="csrf"|type="checkbox"/);
    assert.doesNotMatch((await ro.get(`/dash/jobs/${id}`)).body, /name="op"/);
    // Even with a valid cookie and token from an operator who may act.
    const res = await new Session('ro').post([['op', 'replay:selected'], ['id', id!]], { token: admin.token, cookie: admin.cookie });
    assert.equal(res.res.status, 403);
    assert.equal(await statusOf(id!), 'dead');
  });
});

describe('CSRF', () => {
  test('a POST without, with a bad, or with another session\'s token is 403; a valid one acts', async () => {
    const [id] = await seed(note, [{ payload: { text: 'a' } }]);
    await kill([id!]);
    const s = new Session();
    await s.get('/dash/jobs');
    assert.ok(s.token && s.cookie);
    const fields: [string, string][] = [['op', 'replay:selected'], ['id', id!], ['return', '/dash/jobs?status=dead']];
    assert.equal((await s.post(fields, { token: null })).res.status, 403, 'no token');
    assert.equal((await s.post(fields, { token: 'x'.repeat(43) })).res.status, 403, 'bad token');
    assert.equal((await s.post(fields, { token: s.token.slice(0, -2) + (s.token.endsWith('AA') ? 'BB' : 'AA') })).res.status, 403, 'altered token');
    assert.equal((await s.post(fields, { cookie: '' })).res.status, 403, 'no cookie');
    const other = new Session();
    await other.get('/dash/jobs');
    assert.equal((await s.post(fields, { cookie: other.cookie })).res.status, 403, "another session's cookie");
    // A token signed with another secret does not verify here.
    const elsewhere = createDashboard(() => outbox(), { authorize, basePath: '/dash', csrfSecret: 'other-secret' });
    const page = await elsewhere(new Request(`${BASE}/dash/jobs`, { headers: { cookie: s.cookie } }), {});
    const foreign = /name="csrf" value="([^"]*)"/.exec(await page.text())![1]!;
    assert.notEqual(foreign, s.token);
    assert.equal((await s.post(fields, { token: foreign })).res.status, 403, 'token of another secret');
    assert.equal((await s.post(fields, { site: 'cross-site' })).res.status, 403, 'cross-site');
    assert.equal((await s.post(fields, { site: 'same-site' })).res.status, 403, 'a sibling site');
    assert.equal(await statusOf(id!), 'dead');

    const okRes = await s.post(fields, { site: 'same-origin' });
    assert.equal(okRes.res.status, 303);
    assert.equal(okRes.res.headers.get('location'), '/dash/jobs?status=dead&done=replay&changed=1&refused=0&missing=0');
    assert.equal(await statusOf(id!), 'pending');
    const after = await s.get(okRes.res.headers.get('location')!);
    assert.match(after.body, /Replay: 1 job\(s\) changed/);
  });

  test('the return address cannot leave the dashboard', async () => {
    const [id] = await seed(note, [{ payload: { text: 'a' } }]);
    const s = new Session();
    await s.get('/dash/jobs');
    for (const ret of ['https://evil.example/x', '//evil.example/x', '/elsewhere', '/\\evil.example']) {
      const res = await s.post([['op', 'retryNow:selected'], ['id', id!], ['return', ret]]);
      assert.equal(res.res.status, 303);
      assert.match(res.res.headers.get('location')!, /^\/dash\/jobs\?done=retryNow/, ret);
    }
  });
});

describe('rendering', () => {
  test('a hostile payload, error message, attempt message and tenant render as text', async () => {
    const [id] = await seed(note, [{ payload: { text: HOSTILE }, tenantKey: '<b>t</b>', correlationId: '"><script>alert(2)</script>' }]);
    await db.pool.query(`UPDATE outbox.job SET status = 'dead', finished_at = now(), last_error_code = 'x', last_error_message = $2 WHERE id = $1`, [id, `<script>alert(3)</script>${HOSTILE}`]);
    await db.pool.query(
      `INSERT INTO outbox.attempt (job_id, seq, kind, started_at, lease_expires_at, finished_at, outcome, error_code, error_message)
       VALUES ($1, 1, 'dash.note', now() - interval '2 seconds', now() + interval '30 seconds', now(), 'fail', 'x', $2)`,
      [id, HOSTILE],
    );
    const s = new Session();
    const job = await s.get(`/dash/jobs/${id}`);
    assert.equal(job.res.status, 200);
    assert.doesNotMatch(job.body, /<img|<script>|<b>t/);
    assert.ok(job.body.includes('&lt;img src=x onerror=alert(1)&gt;'));
    assert.ok(job.body.includes('&lt;script&gt;alert(3)&lt;/script&gt;'));
    assert.ok(job.body.includes('&lt;b&gt;t&lt;/b&gt;'));
    assert.ok(job.body.includes('&quot;&gt;&lt;script&gt;alert(2)&lt;/script&gt;'));
    // The attempt: outcome, code, message (escaped) and duration.
    assert.match(job.body, /<td class="n">1<\/td><td>fail<\/td><td>x<\/td><td>&lt;img src=x onerror=alert\(1\)&gt;<\/td>/);
    const list = await s.get('/dash/jobs');
    assert.doesNotMatch(list.body, /<img|<script>|<b>t/);
    // The list never shows payloads.
    assert.doesNotMatch(list.body, /onerror/);
  });

  test('listAttempts returns every attempt with outcome, code, message and duration', async () => {
    const [id] = await seed(note, [{ payload: { text: 'a' } }]);
    await db.pool.query(
      `INSERT INTO outbox.attempt (job_id, seq, kind, started_at, lease_expires_at, finished_at, outcome, error_code, error_message) VALUES
       ($1, 1, 'dash.note', '2026-01-01T00:00:00Z', '2026-01-01T00:01:00Z', '2026-01-01T00:00:01.5Z', 'retry', 'rate_limited', 'slow down'),
       ($1, 2, 'dash.note', '2026-01-01T00:05:00Z', '2026-01-01T00:06:00Z', NULL, NULL, NULL, NULL)`,
      [id],
    );
    const attempts = await listAttempts(db.pool, { jobId: id! });
    assert.deepEqual(attempts, [
      { attempt: 1, outcome: 'retry', code: 'rate_limited', message: 'slow down', startedAt: new Date('2026-01-01T00:00:00Z'), finishedAt: new Date('2026-01-01T00:00:01.5Z'), durationMs: 1500 },
      { attempt: 2, outcome: null, code: null, startedAt: new Date('2026-01-01T00:05:00Z'), finishedAt: null, durationMs: null },
    ]);
    await assert.rejects(listAttempts(db.pool, { jobId: 'nope' }), /jobId must be a job id/);
  });
});

describe('dependencies', () => {
  test('a job page lists its parents and children, linked, with their statuses; the waiting tab counts the child', async () => {
    const [parent, child] = (await outbox().transaction(db.pool, (_tx, _enqueue, enqueueMany) =>
      enqueueMany(note, [{ payload: { text: 'parent' } }, { payload: { text: 'child' }, dependsOn: [0] }]))).map((r) => (r as { id: string }).id);
    const s = new Session();
    const childPage = (await s.get(`/dash/jobs/${child}`)).body;
    assert.match(childPage, /<span class="status-waiting">waiting<\/span>/);
    assert.match(childPage, new RegExp(`<table id="parents">[\\s\\S]*href="/dash/jobs/${parent}"[\\s\\S]*<span class="status-pending">pending</span>`));
    assert.match(childPage, /it waits until every one has finished/);
    assert.doesNotMatch(childPage, /<table id="children">/);
    // A waiting job offers cancel only: nothing but its parents makes it due.
    assert.match(childPage, /value="cancel:selected"/);
    assert.doesNotMatch(childPage, /value="retryNow:selected"/);
    const parentPage = (await s.get(`/dash/jobs/${parent}`)).body;
    assert.match(parentPage, new RegExp(`<table id="children">[\\s\\S]*href="/dash/jobs/${child}"[\\s\\S]*<span class="status-waiting">waiting</span>`));
    assert.doesNotMatch(parentPage, /<table id="parents">/);
    assert.match((await s.get('/dash/jobs')).body, /status=waiting">waiting <b>1<\/b>/);
  });

  test("a batch's completion page counts its members by status and lists the first 100; getBatch reads the same", async () => {
    const { id, members } = await outbox().transaction(db.pool, (_tx, _enqueue, _enqueueMany, batch) =>
      batch({ onComplete: { job: note, payload: { text: 'all done' } } }, (m) => m.enqueueMany(note, Array.from({ length: 150 }, (_, n) => ({ payload: { text: `m${n}` } })))));
    assert.equal(members, 150);
    const first = (await db.pool.query(`SELECT parent_id::text AS id FROM outbox.job_edge WHERE child_id = $1 ORDER BY parent_id LIMIT 1`, [id])).rows[0].id as string;
    await outbox().cancel({ id: first }, 'dropped');
    assert.deepEqual(await getBatch(db.pool, { id }), {
      id, completion: { kind: 'dash.note', status: 'waiting' }, members: 150, ended: { dead: 0, cancelled: 1 }, byStatus: { pending: 149, cancelled: 1 }, gone: 0,
    });
    assert.equal(await getBatch(db.pool, { id: first }), null, 'a member has no parents');
    assert.equal(await getBatch(db.pool, { id, tenantKey: 'acme' }), null, "another tenant's scope finds no batch");
    const page = (await new Session().get(`/dash/jobs/${id}`)).body;
    assert.match(page, /<p id="parent-tally">150 parent\(s\)[^<]*149 pending, 1 cancelled; 0 ended dead and 1 cancelled as counted\.<\/p>/);
    assert.match(page, /the first 100 by id/);
    assert.equal(page.match(/<table id="parents">[\s\S]*?<\/table>/)![0].match(/<tr>/g)!.length, 101, 'a header and 100 members');
  });
});

describe('jobs list', () => {
  test('filters by kind, status, tenant, correlation id and created time; pages by cursor', async () => {
    const a = await seed(note, Array.from({ length: 7 }, (_, n) => ({ payload: { text: `a${n}` }, tenantKey: 'acme', correlationId: n < 2 ? 'order-1' : 'order-2' })));
    const b = await seed(other, Array.from({ length: 3 }, (_, n) => ({ payload: { n }, tenantKey: 'globex' })));
    const s = new Session();
    // Cursor paging over kind = dash.note, three a page, newest first.
    const seen: string[] = [];
    let path: string | null = '/dash/jobs?kind=dash.note';
    let pages = 0;
    while (path) {
      const page = await s.get(path);
      assert.equal(page.res.status, 200);
      const ids = listedIds(page.body);
      assert.ok(ids.length <= 3);
      seen.push(...ids);
      const next = /rel="next" href="([^"]+)"/.exec(page.body);
      path = next ? next[1]!.replaceAll('&amp;', '&') : null;
      pages++;
    }
    assert.equal(pages, 3);
    assert.deepEqual(seen, [...a].reverse());
    // Oldest first.
    assert.deepEqual(listedIds((await s.get('/dash/jobs?kind=dash.note&order=asc')).body), a.slice(0, 3));
    assert.deepEqual(new Set(listedIds((await s.get('/dash/jobs?tenant=globex')).body)), new Set(b));
    assert.deepEqual(new Set(listedIds((await s.get('/dash/jobs?correlation=order-1')).body)), new Set(a.slice(0, 2)));
    await kill([b[0]!]);
    const dead = await s.get('/dash/jobs?status=dead');
    assert.deepEqual(listedIds(dead.body), [b[0]]);
    assert.match(dead.body, /dead <b>1<\/b>/);
    // Created time range (UTC, as a datetime-local field sends it).
    await db.pool.query(`UPDATE outbox.job SET created_at = '2026-03-01T10:00:00Z' WHERE id = $1`, [a[3]]);
    assert.deepEqual(listedIds((await s.get('/dash/jobs?from=2026-03-01T09:00&to=2026-03-01T11:00')).body), [a[3]]);
    assert.deepEqual(listedIds((await s.get('/dash/jobs?to=2026-03-01T09:59:59')).body), []);
    // Bad filters are 400s with the reason.
    const badStatus = await s.get('/dash/jobs?status=bogus');
    assert.equal(badStatus.res.status, 400);
    assert.match(badStatus.body, /status must be one of/);
    assert.equal((await s.get('/dash/jobs?cursor=garbage')).res.status, 400);
    assert.equal((await s.get('/dash/jobs?from=yesterday')).res.status, 400);
    assert.equal((await s.get('/dash/jobs/not-a-uuid')).res.status, 404);
    assert.equal((await s.get('/dash/jobs/00000000-0000-7000-8000-000000000000')).res.status, 404);
  });
});

describe('actions', () => {
  test('on a selection: replay dead jobs; the core refuses the ones whose status does not allow it', async () => {
    const ids = await seed(note, Array.from({ length: 4 }, (_, n) => ({ payload: { text: `s${n}` } })));
    await kill(ids.slice(0, 3));
    await db.pool.query(`UPDATE outbox.job SET status = 'succeeded', finished_at = now() WHERE id = $1`, [ids[3]]);
    const s = new Session();
    const page = await s.get('/dash/jobs?status=dead');
    assert.deepEqual(new Set(rowIds(page.body)), new Set(ids.slice(0, 3)));
    const res = await s.post([['op', 'replay:selected'], ['id', ids[0]!], ['id', ids[1]!], ['id', ids[3]!], ['return', '/dash/jobs?status=dead']]);
    assert.equal(res.res.status, 303);
    assert.match(res.res.headers.get('location')!, /done=replay&changed=2&refused=1&missing=0$/);
    assert.deepEqual([await statusOf(ids[0]!), await statusOf(ids[1]!), await statusOf(ids[2]!), await statusOf(ids[3]!)], ['pending', 'pending', 'dead', 'succeeded']);
    // Cancel one, then retry now on a pending one; a selection of nothing is a 400.
    assert.match((await s.post([['op', 'cancel:selected'], ['id', ids[0]!]])).res.headers.get('location')!, /done=cancel&changed=1/);
    assert.equal(await statusOf(ids[0]!), 'cancelled');
    assert.match((await s.post([['op', 'retryNow:selected'], ['id', ids[1]!]])).res.headers.get('location')!, /done=retryNow&changed=1/);
    assert.equal((await s.post([['op', 'replay:selected']])).res.status, 400);
    assert.equal((await s.post([['op', 'explode:selected'], ['id', ids[0]!]])).res.status, 400);
    assert.equal((await s.post([['op', 'replay:selected'], ['id', 'nope']])).res.status, 400);
  });

  test('on a filter: a confirmation page first (nothing changes), then every match across pages', async () => {
    await seed(note, Array.from({ length: 5 }, (_, n) => ({ payload: { text: `k${n}` } })));
    const others = await seed(other, Array.from({ length: 2 }, (_, n) => ({ payload: { n } })));
    const s = new Session();
    await s.get('/dash/jobs?kind=dash.note');
    const filter: [string, string][] = [['f_kind', 'dash.note'], ['f_status', 'pending'], ['op', 'cancel:filter'], ['return', '/dash/jobs?kind=dash.note']];
    const confirm = await s.post(filter);
    assert.equal(confirm.res.status, 200);
    assert.match(confirm.body, /Cancel 5 job\(s\)\?/);
    assert.match(confirm.body, /name="confirm" value="1"/);
    assert.equal((await db.pool.query(`SELECT count(*)::int AS n FROM outbox.job WHERE status = 'cancelled'`)).rows[0].n, 0);
    const done = await s.post([...filter, ['confirm', '1']]);
    assert.equal(done.res.status, 303);
    assert.match(done.res.headers.get('location')!, /done=cancel&changed=5&refused=0/);
    const { rows } = await db.pool.query(`SELECT kind, status, count(*)::int AS n FROM outbox.job GROUP BY 1, 2 ORDER BY 1`);
    assert.deepEqual(rows, [{ kind: 'dash.note', status: 'cancelled', n: 5 }, { kind: 'dash.other', status: 'pending', n: 2 }]);
    // Replay everything cancelled (no other filter): only those five.
    const replay = await s.post([['f_status', 'cancelled'], ['op', 'replay:filter'], ['confirm', '1']]);
    assert.match(replay.res.headers.get('location')!, /done=replay&changed=5/);
    assert.equal(await statusOf(others[0]!), 'pending');
  });
});

describe('tenant scope', () => {
  test('a scoped operator sees and acts on its tenant only, whatever the form says', async () => {
    const acme = await seed(note, [{ payload: { text: 'a1' }, tenantKey: 'acme' }, { payload: { text: 'a2' }, tenantKey: 'acme' }]);
    const globex = await seed(note, [{ payload: { text: 'g1' }, tenantKey: 'globex' }]);
    await kill([...acme, ...globex]);
    const s = new Session('tenant:acme');
    const list = await s.get('/dash/jobs?tenant=globex');
    assert.deepEqual(new Set(listedIds(list.body)), new Set(acme));
    assert.doesNotMatch(list.body, /name="tenant"/);
    assert.equal((await s.get(`/dash/jobs/${globex[0]}`)).res.status, 404);
    assert.equal((await s.get(`/dash/jobs/${acme[0]}`)).res.status, 200);
    const bySelection = await s.post([['op', 'replay:selected'], ['id', globex[0]!], ['id', acme[0]!]]);
    assert.match(bySelection.res.headers.get('location')!, /changed=1&refused=0&missing=1/);
    assert.equal(await statusOf(globex[0]!), 'dead');
    const byFilter = await s.post([['f_tenant', 'globex'], ['f_status', 'dead'], ['op', 'replay:filter'], ['confirm', '1']]);
    assert.match(byFilter.res.headers.get('location')!, /changed=1&refused=0&missing=0/);
    assert.equal(await statusOf(acme[1]!), 'pending');
    assert.equal(await statusOf(globex[0]!), 'dead');
    // The overview counts the tenant's jobs only and leaves out the shared table's health.
    const overview = await s.get('/dash/');
    assert.match(overview.body, /dead <b>0<\/b>/);
    assert.match(overview.body, /tenant acme/);
    assert.doesNotMatch(overview.body, /Outbox tables|outbox\.job/);
  });
});

describe('overview', () => {
  test('backlog per kind and lane graded by the core, health warnings, charts and the table health', async () => {
    const notes = await seed(note, Array.from({ length: 3 }, (_, n) => ({ payload: { text: `o${n}` } })));
    const slow = await seed(other, [{ payload: { n: 1 } }, { payload: { n: 2 } }]);
    // One aged (due 10 minutes ago), one stuck (running, lease expired), one dead just now.
    await db.pool.query(`UPDATE outbox.job SET due_at = now() - interval '10 minutes' WHERE id = $1`, [notes[0]]);
    await db.pool.query(`UPDATE outbox.job SET status = 'running', lease_expires_at = now() - interval '1 minute' WHERE id = $1`, [slow[0]]);
    await kill([notes[2]!]);
    await db.pool.query(
      `INSERT INTO outbox.attempt (job_id, seq, kind, started_at, lease_expires_at, finished_at, outcome, error_code) VALUES
       ($1, 1, 'dash.note', now() - interval '3 minutes', now(), now() - interval '2 minutes', 'retry', 'x'),
       ($1, 2, 'dash.note', now() - interval '1 minute', now(), now() - interval '50 seconds', 'ok', NULL)`,
      [notes[1]],
    );
    // A session holding a snapshot: the table health names it.
    const holder = new pg.Client({ connectionString: db.url, application_name: 'snapshot-holder' });
    await holder.connect();
    try {
      await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await holder.query('SELECT count(*) FROM outbox.job');
      const { rows } = await holder.query('SELECT pg_backend_pid() AS pid');
      const s = new Session();
      const { res, body } = await s.get('/dash');
      assert.equal(res.status, 200);
      assert.match(body, /<tr><td>dash\.note<\/td><td>default<\/td><td class="n">2<\/td><td class="n">2<\/td><td class="n">0<\/td><td class="n">0<\/td><td class="n">1<\/td><td class="n">0<\/td><td><span class="sev-warn">warn<\/span><\/td><\/tr>/);
      assert.match(body, /<tr><td>dash\.other<\/td><td>slow<\/td><td class="n">1<\/td><td class="n">1<\/td><td class="n">1<\/td><td class="n">0<\/td><td class="n">0<\/td><td class="n">1<\/td><td><span class="sev-warn">warn<\/span><\/td><\/tr>/);
      assert.match(body, /The backlog is ageing<\/strong> \(warn\)\. 1 job\(s\)/);
      assert.match(body, /Leases stuck past expiry<\/strong> \(warn\)/);
      assert.match(body, /Dead letters are growing<\/strong> \(warn\)\. 1 job\(s\) dead-lettered/);
      assert.equal((body.match(/<svg class="chart"/g) ?? []).length, 2);
      const bars = [...body.matchAll(/<title>\d\d:\d\d: (\d+) ok, (\d+) failed<\/title>/g)];
      assert.equal(bars.length, 30);
      assert.deepEqual([bars.reduce((n, m) => n + Number(m[1]), 0), bars.reduce((n, m) => n + Number(m[2]), 0)], [1, 1]);
      assert.match(body, new RegExp(`session ${rows[0].pid} \\(snapshot-holder\\)`));
      assert.ok(Buffer.byteLength(body) < 50_000, `overview is ${Buffer.byteLength(body)} bytes`);
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
  });

  test('the flow limits in force, per tenant too, and how many due jobs each holds back now', async () => {
    const acme = await seed(limited, [{ payload: { n: 1 }, tenantKey: 'acme' }, { payload: { n: 2 }, tenantKey: 'acme' }, { payload: { n: 3 }, tenantKey: 'acme' }]);
    await seed(limited, [{ payload: { n: 4 }, tenantKey: 'beta' }]);
    // acme runs one (a live lease): its two others wait for it; beta's one fits.
    await db.pool.query(`UPDATE outbox.job SET status = 'running', lease_expires_at = now() + interval '1 minute' WHERE id = $1`, [acme[0]]);
    const { res, body } = await new Session().get('/dash');
    assert.equal(res.status, 200);
    assert.match(body, /<tr><td>dash\.limited<\/td><td>4<\/td><td>1<\/td><td>—<\/td><td>2<\/td><\/tr>/, body.match(/<table class="flow-limits">[\s\S]*?<\/table>/)?.[0]);
  });

  test('reads through a handle the caller owns when `db` is given, and never closes it', async () => {
    await seed(note, [{ payload: { text: 'p' } }]);
    const viaPool = createDashboard(() => outbox(), { authorize: () => true, db: () => db.pool });
    const res = await viaPool(new Request(`${BASE}/jobs`), {});
    assert.equal(res.status, 200);
    assert.equal(listedIds((await res.text()).replaceAll('href="/jobs/', 'href="/dash/jobs/')).length, 1);
    assert.equal((await db.pool.query('SELECT 1 AS one')).rows[0].one, 1);
  });
});

describe('inside workerd', () => {
  let worker: TestWorker;
  before(async () => {
    worker = await startWorker({ entry: path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures/dashboard-worker.ts'), databaseUrl: db.url });
  });
  after(async () => {
    await worker?.dispose();
  });
  const offered = (body: string) => [...body.matchAll(/name="op" value="(\w+):selected"/g)].map((m) => m[1]!);

  test('a malformed percent-escape in a job address is a 400, not a 500', async () => {
    for (const bad of ['/dash/jobs/%E0%A4%A', '/dash/jobs/%', '/dash/jobs/%ZZ']) {
      const res = await worker.fetch(bad);
      const body = await res.text();
      assert.equal(res.status, 400, `${bad}: ${body}`);
      assert.match(body, /Malformed percent-escape/);
    }
    // A well-formed escape still decodes (to a non-id: not found).
    assert.equal((await worker.fetch('/dash/jobs/%41')).status, 404);
  });

  test('a job page offers exactly the actions the core allows for its status', async () => {
    // The core's table (docs/ABI.md, pb_operate): what each status accepts.
    const expected: Record<string, string[]> = {
      pending: ['cancel', 'retryNow'],
      running: ['cancel'],
      retrying: ['cancel', 'retryNow'],
      succeeded: [],
      dead: ['replay'],
      cancelled: ['replay'],
    };
    const ids = await seed(note, Object.keys(expected).map((status) => ({ payload: { text: status } })));
    for (const [i, status] of Object.keys(expected).entries()) {
      await db.pool.query(
        `UPDATE outbox.job SET status = $2, lease_expires_at = CASE WHEN $2 = 'running' THEN now() + interval '1 minute' END,
                finished_at = CASE WHEN $2 IN ('succeeded', 'dead', 'cancelled') THEN now() END WHERE id = $1`,
        [ids[i], status],
      );
    }
    for (const [i, status] of Object.keys(expected).entries()) {
      const res = await worker.fetch(`/dash/jobs/${ids[i]}`);
      const body = await res.text();
      assert.equal(res.status, 200, body);
      assert.match(body, new RegExp(`<dd><span class="status-${status}">${status}</span></dd>`));
      assert.deepEqual(offered(body), expected[status], status);
      // No actions, no form (and so no CSRF field) on a job nothing applies to.
      if (expected[status]!.length === 0) assert.doesNotMatch(body, /action="\/dash\/actions"/);
    }
    // Each action the dead job's page leaves out is one the outbox refuses for it.
    const deadId = ids[Object.keys(expected).indexOf('dead')]!;
    const o = outbox();
    assert.deepEqual((await o.cancelMany([deadId])).map((r) => r.status), ['invalid_state']);
    assert.deepEqual((await o.retryNowMany([deadId])).map((r) => r.status), ['invalid_state']);
  });

  test('health covers every outbox table and counts only what holds back this database', async () => {
    const otherUrl = await db.server.createDatabase('dashboard_other');
    const other = new pg.Client({ connectionString: otherUrl, application_name: 'other-db-holder' });
    const here = new pg.Client({ connectionString: db.url, application_name: 'this-db-holder' });
    await other.connect();
    await here.connect();
    const writer = await db.pool.connect();
    // Prepared transactions to roll back afterwards, each from a session of its own database.
    const prepared: { url: string; gid: string }[] = [];
    const prepare = async (url: string, gid: string) => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        await c.query('BEGIN');
        await c.query('SELECT pg_current_xact_id()');
        await c.query(`PREPARE TRANSACTION '${gid}'`);
        prepared.push({ url, gid });
      } finally {
        await c.end();
      }
    };
    try {
      // A dead-tuple-heavy attempt table: 5,000 attempts deleted, autovacuum kept off it meanwhile.
      await writer.query('ALTER TABLE outbox.attempt SET (autovacuum_enabled = off)');
      await writer.query(
        `INSERT INTO outbox.attempt (job_id, seq, kind, started_at, lease_expires_at, finished_at, outcome)
         SELECT gen_random_uuid(), 1, 'dash.note', now(), now(), now(), 'ok' FROM generate_series(1, 5000)`,
      );
      await writer.query('DELETE FROM outbox.attempt');
      // A session reports its statistics when it goes idle, at most every 0.5 s (PostgreSQL 14) or
      // 1 s (15+, which can be told to flush at once): poke it until they show.
      await writer.query(`DO $$ BEGIN PERFORM pg_stat_force_next_flush(); EXCEPTION WHEN undefined_function THEN NULL; END $$`);
      const deadNow = async () => Number((await db.pool.query(`SELECT n_dead_tup FROM pg_stat_user_tables WHERE schemaname = 'outbox' AND relname = 'attempt'`)).rows[0]?.n_dead_tup ?? 0);
      for (let i = 0; i < 100 && (await deadNow()) < 5000; i++) {
        await new Promise((r) => setTimeout(r, 200));
        await writer.query('SELECT 1');
      }

      // Another database's idle-in-transaction session, with a snapshot, and its prepared transaction.
      await other.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await other.query('SELECT 1');
      const otherPid = (await other.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
      await prepare(otherUrl, 'pb-other-db');

      const health = async () => {
        const res = await worker.fetch('/health');
        const text = await res.text();
        assert.equal(res.status, 200, text);
        return JSON.parse(text) as OutboxHealth;
      };
      const before = await health();
      assert.deepEqual(before.tables.map((t) => t.table), ['outbox.attempt', 'outbox.index_baseline', 'outbox.job', 'outbox.job_edge', 'outbox.kind_slot', 'outbox.schedule_run', 'outbox.webhook_endpoint']);
      const attempt = before.tables.find((t) => t.table === 'outbox.attempt')!;
      assert.ok(attempt.deadTuples >= 5000, `attempt dead tuples: ${attempt.deadTuples}`);
      assert.equal(attempt.grades.deadTuples, 'error', 'more dead than live tuples');
      assert.ok(attempt.totalBytes > 0);
      // Never vacuumed by hand: unknown, not "just now".
      assert.equal(attempt.lastVacuumAgeMs, null);
      assert.equal(before.severity, 'error');
      assert.deepEqual(before.horizon.filter((h) => (h.kind === 'session' && h.pid === otherPid) || h.kind === 'prepared'), [], 'the other database holds nothing back here');

      // The same kinds of holder in this database count.
      await here.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await here.query('SELECT count(*) FROM outbox.job');
      const herePid = (await here.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
      await prepare(db.url, 'pb-this-db');
      const after = await health();
      const session = after.horizon.find((h) => h.kind === 'session');
      assert.ok(session && session.kind === 'session', JSON.stringify(after.horizon));
      assert.equal(session.pid, herePid);
      assert.equal(session.applicationName, 'this-db-holder');
      assert.equal(session.grade, 'ok', 'held for seconds, a few transactions behind');
      const held = after.horizon.find((h) => h.kind === 'prepared');
      assert.ok(held && held.kind === 'prepared' && held.gid === 'pb-this-db', JSON.stringify(after.horizon));

      // The overview shows the same: every table, the attempt table's warning, this database's holders only.
      const page = await worker.fetch('/dash');
      const body = await page.text();
      assert.equal(page.status, 200, body);
      assert.match(body, /Dead tuples in outbox\.attempt<\/strong> \(error\)/);
      for (const t of ['job', 'attempt', 'schedule_run', 'webhook_endpoint', 'index_baseline']) assert.match(body, new RegExp(`<tr><td>outbox\\.${t}</td>`));
      assert.match(body, new RegExp(`session ${herePid} \\(this-db-holder\\)`));
      assert.match(body, /prepared transaction pb-this-db/);
      assert.doesNotMatch(body, new RegExp(`session ${otherPid}\\b|other-db-holder|pb-other-db`));
    } finally {
      writer.release();
      for (const c of [here, other]) {
        await c.query('ROLLBACK').catch(() => undefined);
        await c.end();
      }
      for (const { url, gid } of prepared) {
        const c = new pg.Client({ connectionString: url });
        await c.connect();
        await c.query(`ROLLBACK PREPARED '${gid}'`).finally(() => c.end());
      }
      await db.pool.query('ALTER TABLE outbox.attempt RESET (autovacuum_enabled)');
    }
  });

  test('the job page shows its times in UTC and says so', async () => {
    const [id] = await seed(note, [{ payload: { text: 't' } }]);
    await db.pool.query(`UPDATE outbox.job SET status = 'dead', created_at = '2026-03-01T10:00:00Z', due_at = '2026-03-01T10:00:05Z', finished_at = '2026-03-01T10:01:00.5Z' WHERE id = $1`, [id]);
    await db.pool.query(
      `INSERT INTO outbox.attempt (job_id, seq, kind, started_at, lease_expires_at, finished_at, outcome, error_code)
       VALUES ($1, 1, 'dash.note', '2026-03-01T10:00:06Z', '2026-03-01T10:01:06Z', '2026-03-01T10:00:07Z', 'fail', 'x')`,
      [id],
    );
    const res = await worker.fetch(`/dash/jobs/${id}`);
    const body = await res.text();
    assert.equal(res.status, 200, body);
    assert.match(body, /<dt>created<\/dt><dd>2026-03-01 10:00:00 UTC<\/dd><dt>due<\/dt><dd>2026-03-01 10:00:05 UTC<\/dd><dt>finished<\/dt><dd>2026-03-01 10:01:00 UTC<\/dd>/);
    assert.match(body, /<td>2026-03-01 10:00:06 UTC<\/td><td>2026-03-01 10:00:07 UTC<\/td>/);
    // Every time on the page carries its zone.
    const times = [...body.matchAll(/\d{4}-\d\d-\d\d \d\d:\d\d:\d\d( UTC)?/g)];
    assert.equal(times.length, 5);
    for (const t of times) assert.equal(t[1], ' UTC', t[0]);
  });
});
