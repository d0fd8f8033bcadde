// Signed webhook delivery inside workerd against a real PostgreSQL, connected as the documented
// worker role, sending to a Node HTTP receiver that checks every signature with node:crypto
// (never Postbox's code); then verifyWebhook's own checks in Node.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, before, beforeEach, describe, test } from 'node:test';
import pg from 'pg';
import { migrate } from '../../js-shim/src/sql/index.ts';
import { signWebhook, verifyWebhook, assertWebhook, WebhookVerificationError } from '../../js-shim/src/webhooks/index.ts';
import { freePort, startPostgres, type PgServer } from '../support/postgres.ts';
import { startWorker, type TestWorker } from '../support/worker.ts';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
const rolesSql = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../examples/roles/roles.sql');
const NEW_SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const OLD_SECRET = `whsec_${randomBytes(24).toString('base64')}`;

// ---------------------------------------------------------------------------------------------
// The receiver: scripted answers per path, every request recorded and verified independently.

interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** node:crypto's verdict with the receiver's secret (the new one only). */
  verified: boolean;
  signatures: string[];
  receivedAt: number;
}
interface Answer {
  status: number;
  headers?: Record<string, string>;
  delayMs?: number;
}

function independentlyVerified(headers: http.IncomingHttpHeaders, body: Buffer, secret: string): boolean {
  const id = headers['webhook-id'];
  const ts = headers['webhook-timestamp'];
  const sig = headers['webhook-signature'];
  if (typeof id !== 'string' || typeof ts !== 'string' || typeof sig !== 'string') return false;
  if (Math.abs(Date.now() / 1000 - Number(ts)) > 300) return false;
  const expected = createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64')).update(`${id}.${ts}.`).update(body).digest();
  return sig.split(' ').some((s) => {
    if (!s.startsWith('v1,')) return false;
    const given = Buffer.from(s.slice(3), 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

const received: Received[] = [];
const scripts = new Map<string, Answer[]>();
const receiver = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const sig = typeof req.headers['webhook-signature'] === 'string' ? req.headers['webhook-signature'] : '';
    const p = new URL(req.url ?? '/', 'http://x').pathname;
    received.push({ path: p, headers: req.headers, body, verified: independentlyVerified(req.headers, body, NEW_SECRET), signatures: sig.split(' '), receivedAt: Date.now() });
    const answer = scripts.get(p)?.shift() ?? { status: 200 };
    setTimeout(() => {
      if (res.destroyed) return;
      res.writeHead(answer.status, answer.headers ?? {});
      res.end('thanks');
    }, answer.delayMs ?? 0);
  });
});
receiver.on('clientError', () => undefined);

// ---------------------------------------------------------------------------------------------

let server: PgServer;
let worker: TestWorker;
let client: pg.Client;
let base: string;

const sql = async (text: string, values?: unknown[]) => (await client.query(text, values)).rows;
async function post(pathname: string, body: unknown = {}): Promise<any> {
  const res = await worker.fetch(pathname, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  const out = await res.json();
  assert.equal(res.status, 200, JSON.stringify(out));
  return out;
}
const enqueue = async (...deliveries: object[]) => (await post('/enqueue', { deliveries })) as { status: string; id: string }[];
const run = () => post('/run');
const events = async () => (await (await worker.fetch('/events')).json()) as any[];
const job = async (id: string) => (await sql(`SELECT *, round(extract(epoch from due_at) * 1000)::bigint AS due_ms FROM outbox.job WHERE id = $1`, [id]))[0];
const endpoint = async (id: string) => (await sql('SELECT * FROM outbox.webhook_endpoint WHERE id = $1', [id]))[0];

before(async () => {
  server = await startPostgres();
  const url = await server.createDatabase('webhooks');
  client = new pg.Client({ connectionString: url });
  await client.connect();
  await migrate(client);
  // The Worker connects as the worker role of examples/roles/roles.sql, as documented: every
  // delivery, breaker write, replay and enable below runs under its grants.
  await promisify(execFile)('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-v', 'worker=wh_worker', '-v', 'app=wh_app', '-f', rolesSql, url]);
  await client.query(`ALTER ROLE wh_worker PASSWORD 'secret'`);
  const workerUrl = new URL(url);
  workerUrl.username = 'wh_worker';
  workerUrl.password = 'secret';
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  worker = await startWorker({
    entry: path.join(fixtures, 'webhook-worker.ts'),
    databaseUrl: workerUrl.toString(),
    vars: { WEBHOOK_SECRET: NEW_SECRET, WEBHOOK_OLD_SECRET: OLD_SECRET },
  });
});
after(async () => {
  await worker?.dispose();
  await client?.end();
  await server?.stop();
  receiver.closeAllConnections();
  await new Promise((resolve) => receiver.close(resolve));
});
beforeEach(async () => {
  await sql('DELETE FROM outbox.job; DELETE FROM outbox.webhook_endpoint');
  await post('/clock', { offsetMs: 0 });
  await events();
  received.length = 0;
  scripts.clear();
});

describe('delivery inside workerd', () => {
  test('a delivery arrives signed, with a stable id, the event type and a verifiable signature; the job succeeds', async () => {
    const body = JSON.stringify({ type: 'invoice.paid', id: 'inv_1' });
    const [r] = await enqueue({ url: `${base}/ok`, endpoint: 'ep-ok', eventType: 'invoice.paid', body });
    assert.equal(r!.status, 'created');
    const report = await run();
    assert.equal(report.succeeded, 1);
    assert.equal(received.length, 1);
    const got = received[0]!;
    assert.equal(got.verified, true, 'node:crypto accepts the signature');
    assert.equal(got.body.toString('utf8'), body);
    assert.match(String(got.headers['webhook-id']), /^msg_[0-9a-f]{32}$/);
    assert.equal(got.headers['webhook-event-type'], 'invoice.paid');
    assert.equal(got.headers['content-type'], 'application/json');
    assert.equal(got.headers['user-agent'], 'postbox-test');
    assert.ok(Math.abs(Number(got.headers['webhook-timestamp']) - Date.now() / 1000) < 30);
    assert.equal(got.signatures.length, 1);
    const row = await job(r!.id);
    assert.equal(row.status, 'succeeded');
    assert.equal(row.payload.webhookId, got.headers['webhook-id']);
    assert.equal((await endpoint('ep-ok')).state, 'closed');
  });

  test('a body with odd whitespace, unicode and U+2028 arrives byte for byte', async () => {
    const body = '{ "a" :  "é😀\u2028" ,"b":[1 ,2] }\n';
    const [r] = await enqueue({ url: `${base}/bytes`, endpoint: 'ep-bytes', eventType: 'odd.body', body });
    await run();
    assert.equal(received.length, 1);
    assert.ok(received[0]!.body.equals(Buffer.from(body, 'utf8')), `got ${JSON.stringify(received[0]!.body.toString('utf8'))}`);
    assert.equal(received[0]!.verified, true);
    assert.equal((await job(r!.id)).status, 'succeeded');
  });

  test('500 then 200: retried after the first scheduled delay (4.5-5 s), same webhook-id, new timestamp', async () => {
    scripts.set('/flaky', [{ status: 500 }, { status: 200 }]);
    const [r] = await enqueue({ url: `${base}/flaky`, endpoint: 'ep-flaky', eventType: 'x', body: '{}' });
    const before = Date.now();
    await run();
    let row = await job(r!.id);
    assert.equal(row.status, 'retrying');
    assert.equal(row.last_error_code, 'http_500');
    assert.equal(row.attempts, 1);
    const delay = Number(row.due_ms) - before;
    assert.ok(delay >= 4_400 && delay <= 5_000 + (Date.now() - before), `due in ${delay} ms`);
    await post('/clock', { offsetMs: 6_000 });
    await run();
    row = await job(r!.id);
    assert.equal(row.status, 'succeeded');
    assert.equal(received.length, 2);
    assert.equal(received[0]!.headers['webhook-id'], received[1]!.headers['webhook-id']);
    assert.notEqual(received[0]!.headers['webhook-timestamp'], received[1]!.headers['webhook-timestamp']);
    assert.ok(received.every((x) => x.verified));
  });

  test('429 with Retry-After: the job is due when the endpoint asked, not on the schedule', async () => {
    scripts.set('/busy', [{ status: 429, headers: { 'retry-after': '120' } }]);
    const [r] = await enqueue({ url: `${base}/busy`, endpoint: 'ep-busy', eventType: 'x', body: '{}' });
    const before = Date.now();
    await run();
    const row = await job(r!.id);
    assert.equal(row.status, 'retrying');
    assert.equal(row.last_error_code, 'http_429');
    const delay = Number(row.due_ms) - before;
    assert.ok(delay >= 119_000 && delay <= 121_000 + (Date.now() - before), `due in ${delay} ms`);
    // 429 is the endpoint alive and pacing us: no breaker failure.
    assert.equal((await endpoint('ep-busy')).failures, 0);
  });

  test('410 Gone: the delivery is dead, the endpoint disabled with an event, later deliveries dead at once', async () => {
    scripts.set('/gone', [{ status: 410 }]);
    const [r] = await enqueue({ url: `${base}/gone`, endpoint: 'ep-gone', eventType: 'x', body: '{}' });
    await run();
    const row = await job(r!.id);
    assert.equal(row.status, 'dead');
    assert.equal(row.last_error_code, 'http_410');
    const ep = await endpoint('ep-gone');
    assert.equal(ep.state, 'disabled');
    assert.equal(ep.disabled_reason, 'gone');
    const evs = await events();
    assert.deepEqual(evs.filter((e) => e.type === 'webhook_endpoint_disabled'), [{ type: 'webhook_endpoint_disabled', endpoint: 'ep-gone', reason: 'gone', jobId: r!.id }]);
    assert.ok(evs.some((e) => e.type === 'dead_letter' && e.jobId === r!.id));

    const [next] = await enqueue({ url: `${base}/gone`, endpoint: 'ep-gone', eventType: 'x', body: '{"n":2}' });
    await run();
    assert.equal(received.length, 1, 'nothing is sent to a disabled endpoint');
    const nextRow = await job(next!.id);
    assert.equal(nextRow.status, 'dead');
    assert.equal(nextRow.last_error_code, 'endpoint_disabled');

    // An operator enables it again and replays: the same webhook-id arrives.
    assert.deepEqual(await post('/enable', { id: 'ep-gone' }), { enabled: true });
    await post('/replay', { ids: [next!.id] });
    await run();
    assert.equal((await job(next!.id)).status, 'succeeded');
    assert.equal(received.length, 2);
    assert.equal(received[1]!.headers['webhook-id'], nextRow.payload.webhookId);
  });

  test('400: dead at once, no retry, the endpoint stays closed', async () => {
    scripts.set('/bad', [{ status: 400 }]);
    const [r] = await enqueue({ url: `${base}/bad`, endpoint: 'ep-bad', eventType: 'x', body: '{}' });
    await run();
    const row = await job(r!.id);
    assert.equal(row.status, 'dead');
    assert.equal(row.last_error_code, 'http_400');
    assert.equal(row.attempts, 1);
    assert.equal((await endpoint('ep-bad')).state, 'closed');
  });

  test('a 3xx is not followed: dead', async () => {
    scripts.set('/moved', [{ status: 301, headers: { location: `${base}/ok` } }]);
    const [r] = await enqueue({ url: `${base}/moved`, endpoint: 'ep-moved', eventType: 'x', body: '{}' });
    await run();
    assert.equal((await job(r!.id)).last_error_code, 'http_301');
    assert.equal((await job(r!.id)).status, 'dead');
    assert.equal(received.length, 1);
  });

  test('connection refused: retried as network_error, counted by the breaker', async () => {
    const closed = await freePort();
    const [r] = await enqueue({ url: `http://127.0.0.1:${closed}/nobody`, endpoint: 'ep-refused', eventType: 'x', body: '{}' });
    await run();
    const row = await job(r!.id);
    assert.equal(row.status, 'retrying');
    assert.equal(row.last_error_code, 'network_error');
    const ep = await endpoint('ep-refused');
    assert.equal(ep.failures, 1);
    assert.equal(ep.state, 'closed');
  });

  test('a receiver slower than the request timeout: retried as request_timeout', async () => {
    scripts.set('/slow', [{ status: 200, delayMs: 3_000 }]);
    const [r] = await enqueue({ url: `${base}/slow`, endpoint: 'ep-slow', eventType: 'x', body: '{}' });
    const started = Date.now();
    await run();
    assert.ok(Date.now() - started < 2_900, 'the request was cut at its 1 s timeout');
    const row = await job(r!.id);
    assert.equal(row.status, 'retrying');
    assert.equal(row.last_error_code, 'request_timeout');
    assert.equal((await endpoint('ep-slow')).failures, 1);
  });

  test('secret rotation: two signatures; a receiver that knows only the new secret accepts', async () => {
    const [r] = await enqueue({ url: `${base}/rot`, endpoint: 'rotating-1', eventType: 'x', body: '{"rotate":true}' });
    await run();
    assert.equal((await job(r!.id)).status, 'succeeded');
    const got = received[0]!;
    assert.equal(got.signatures.length, 2);
    assert.ok(got.signatures.every((s) => s.startsWith('v1,')));
    assert.equal(got.verified, true);
    // And the other signature is the old secret's, by node:crypto too.
    assert.equal(independentlyVerified(got.headers, got.body, OLD_SECRET), true);
  });

  test('no secret for an endpoint: dead with no_secret, nothing sent', async () => {
    const [r] = await enqueue({ url: `${base}/ok`, endpoint: 'nosecret-1', eventType: 'x', body: '{}' });
    await run();
    assert.equal((await job(r!.id)).last_error_code, 'no_secret');
    assert.equal(received.length, 0);
  });

  test('replay of a dead delivery keeps its webhook-id', async () => {
    scripts.set('/once-bad', [{ status: 422 }, { status: 200 }]);
    const [r] = await enqueue({ url: `${base}/once-bad`, endpoint: 'ep-replay', eventType: 'x', body: '{"r":1}', webhookId: 'evt_42' });
    await run();
    assert.equal((await job(r!.id)).status, 'dead');
    await post('/replay', { ids: [r!.id] });
    await run();
    assert.equal((await job(r!.id)).status, 'succeeded');
    assert.deepEqual(received.map((x) => x.headers['webhook-id']), ['evt_42', 'evt_42']);
    assert.ok(received.every((x) => x.verified));
    // The same event enqueued again for this endpoint is the same delivery.
    const [again] = await enqueue({ url: `${base}/once-bad`, endpoint: 'ep-replay', eventType: 'x', body: '{"r":1}', webhookId: 'evt_42' });
    assert.deepEqual(again, { status: 'exists', id: r!.id, kind: 'test.webhook' });
  });

  test('a delivery that could never be sent is refused at enqueue as invalid_payload, naming the field', async () => {
    const auth = new URL(`${base}/ok`);
    auth.username = 'user';
    auth.password = 'secret';
    const userOnly = new URL(`${base}/ok`);
    userOnly.username = 'user';
    const bad: [string, object][] = [
      ['webhookId', { webhookId: ' evt_1 ' }],
      ['webhookId', { webhookId: 'evt_1 ' }],
      ['webhookId', { webhookId: 'evt_a\nb' }],
      ['webhookId', { webhookId: 'a\r\nX-Injected: 1' }],
      ['webhookId', { webhookId: 'evt_\u0001' }],
      ['webhookId', { webhookId: 'evt_\u007f' }],
      ['webhookId', { webhookId: 'evt_é' }],
      ['webhookId', { webhookId: 'evt_😀' }],
      ['eventType', { eventType: 'invoice.paid\n' }],
      ['eventType', { eventType: 'a\r\nX-Injected: 1' }],
      ['eventType', { eventType: '\tinvoice.paid' }],
      ['eventType', { eventType: 'facture.payée' }],
      ['url', { url: auth.toString() }],
      ['url', { url: userOnly.toString() }],
    ];
    const results = await enqueue(...bad.map(([, d]) => ({ url: `${base}/ok`, endpoint: 'ep-refused-input', eventType: 'x', body: '{}', webhookId: 'evt_ok', ...d })));
    bad.forEach(([field, d], i) => {
      const r = results[i] as unknown as { status: string; issues: { message: string; path?: string[] }[] };
      assert.equal(r.status, 'invalid_payload', JSON.stringify(d));
      assert.deepEqual(r.issues.map((issue) => issue.path), [[field]], JSON.stringify(d));
      assert.match(r.issues[0]!.message, new RegExp(`^${field} `));
    });
    assert.equal((await sql('SELECT count(*)::int AS n FROM outbox.job'))[0].n, 0, 'nothing was written');
    await run();
    assert.equal(received.length, 0);
    assert.equal(await endpoint('ep-refused-input'), undefined, 'no breaker was charged');

    // A space inside the id and the type is kept by Headers: sent and verified as signed.
    const [r] = await enqueue({ url: `${base}/ok`, endpoint: 'ep-spaced', eventType: 'invoice paid', body: '{}', webhookId: 'evt 1' });
    assert.equal(r!.status, 'created');
    await run();
    assert.equal((await job(r!.id)).status, 'succeeded');
    assert.equal(received[0]!.headers['webhook-id'], 'evt 1');
    assert.equal(received[0]!.headers['webhook-event-type'], 'invoice paid');
    assert.equal(received[0]!.verified, true);
  });

  test('the breaker opens after 3 consecutive failures, pauses deliveries uncharged, then half-opens and closes', async () => {
    // The probe's answer takes 500 ms, so that every other delivery of its drain looks at the
    // endpoint while the probe is out (a fast probe could close the breaker before a slower
    // slot looked, and that slot would rightly send).
    scripts.set('/down', [{ status: 503 }, { status: 503 }, { status: 503 }, { status: 200, delayMs: 500 }]);
    const failing = await enqueue(
      ...[1, 2, 3].map((n) => ({ url: `${base}/down`, endpoint: 'ep-breaker', eventType: 'x', body: `{"n":${n}}` })),
    );
    await run();
    let ep = await endpoint('ep-breaker');
    assert.equal(ep.state, 'open');
    assert.equal(ep.failures, 3);
    let evs = await events();
    assert.equal(evs.filter((e) => e.type === 'webhook_endpoint_paused').length, 1);
    assert.deepEqual(
      evs.filter((e) => e.type === 'webhook_endpoint_paused').map((e) => ({ endpoint: e.endpoint, failures: e.failures })),
      [{ endpoint: 'ep-breaker', failures: 3 }],
    );

    // While open, a new delivery is not sent and not charged: pending, due when the cooldown ends.
    const [paused] = await enqueue({ url: `${base}/down`, endpoint: 'ep-breaker', eventType: 'x', body: '{"n":4}' });
    await run();
    assert.equal(received.length, 3);
    let row = await job(paused!.id);
    assert.equal(row.status, 'pending');
    assert.equal(row.attempts, 0);
    assert.equal(row.last_error_code, 'endpoint_paused');
    // node-postgres hands a timestamptz back as a Date: read its milliseconds, not its string (which drops them).
    const openedMs = (ep.opened_at as Date).getTime();
    assert.ok(Math.abs(Number(row.due_ms) - (openedMs + 60_000)) < 1_000, 'due at the end of the cooldown');

    // After the cooldown one delivery probes (the others look again a second later); the
    // endpoint is back, so it closes and the rest flow.
    await post('/clock', { offsetMs: 61_000 });
    await run();
    assert.equal(received.length, 4, 'one probe');
    await post('/clock', { offsetMs: 63_000 });
    await run();
    ep = await endpoint('ep-breaker');
    assert.equal(ep.state, 'closed');
    assert.equal(ep.failures, 0);
    row = await job(paused!.id);
    assert.equal(row.status, 'succeeded');
    assert.equal(row.attempts, 1, 'the paused delivery was charged one attempt: the one that was sent');
    evs = await events();
    assert.equal(evs.filter((e) => e.type === 'webhook_endpoint_resumed').length, 1);
    // The three that failed were due again (5 s after failing) and went through too.
    for (const f of failing) assert.equal((await job(f.id)).status, 'succeeded');
    assert.ok(received.every((x) => x.verified));
  });

  test('a failed probe reopens the breaker for another cooldown', async () => {
    scripts.set('/still-down', [{ status: 500 }, { status: 500 }, { status: 500 }, { status: 502 }]);
    await enqueue(...[1, 2, 3].map((n) => ({ url: `${base}/still-down`, endpoint: 'ep-reopen', eventType: 'x', body: `{"n":${n}}` })));
    await run();
    const first = await endpoint('ep-reopen');
    assert.equal(first.state, 'open');
    await post('/clock', { offsetMs: 61_000 });
    await run();
    const second = await endpoint('ep-reopen');
    assert.equal(second.state, 'open');
    assert.ok((second.opened_at as Date).getTime() > (first.opened_at as Date).getTime(), 'the cooldown restarted');
    assert.equal(received.length, 4, 'one probe, the others waited');
    const evs = await events();
    assert.equal(evs.filter((e) => e.type === 'webhook_endpoint_paused').length, 2);
  });
});

// ---------------------------------------------------------------------------------------------
// verifyWebhook, against signatures made by node:crypto.

describe('verifyWebhook', () => {
  const secret = `whsec_${Buffer.from('a-test-secret-of-32-bytes-length').toString('base64')}`;
  const other = `whsec_${Buffer.from('another-secret-of-32-bytes-long!').toString('base64')}`;
  const sign = (s: string, id: string, ts: number, body: string) =>
    `v1,${createHmac('sha256', Buffer.from(s.slice(6), 'base64')).update(`${id}.${ts}.${body}`).digest('base64')}`;
  const now = 1_700_000_000_000;
  const ts = now / 1000;
  const body = '{"hello": "wörld"}';
  const headers = (sig: string, t: number | string = ts) => ({ 'webhook-id': 'msg_1', 'webhook-timestamp': String(t), 'webhook-signature': sig });

  test('accepts a valid signature and returns the id, timestamp and body', async () => {
    const r = await verifyWebhook({ headers: headers(sign(secret, 'msg_1', ts, body)), body }, secret, { now });
    assert.deepEqual(r, { ok: true, id: 'msg_1', timestamp: ts, body });
  });

  test('tolerance: 300 s either way by default, configurable', async () => {
    const at = (t: number, toleranceSec?: number) =>
      verifyWebhook({ headers: headers(sign(secret, 'msg_1', t, body), t), body }, secret, { now, ...(toleranceSec === undefined ? {} : { toleranceSec }) });
    assert.equal((await at(ts - 300)).ok, true);
    assert.equal((await at(ts + 300)).ok, true);
    assert.equal(((await at(ts - 301)) as { code: string }).code, 'timestamp_too_old');
    assert.equal(((await at(ts + 301)) as { code: string }).code, 'timestamp_too_new');
    assert.equal(((await at(ts - 60, 30)) as { code: string }).code, 'timestamp_too_old');
    assert.equal((await at(ts - 60, 90)).ok, true);
  });

  test('a wrong secret, a tampered body, another id: no_matching_signature', async () => {
    const sig = sign(secret, 'msg_1', ts, body);
    assert.equal(((await verifyWebhook({ headers: headers(sig), body }, other, { now })) as { code: string }).code, 'no_matching_signature');
    assert.equal(((await verifyWebhook({ headers: headers(sig), body: body + ' ' }, secret, { now })) as { code: string }).code, 'no_matching_signature');
    assert.equal(
      ((await verifyWebhook({ headers: { ...headers(sig), 'webhook-id': 'msg_2' }, body }, secret, { now })) as { code: string }).code,
      'no_matching_signature',
    );
    assert.equal(((await verifyWebhook({ headers: headers('v1,not base64!'), body }, secret, { now })) as { code: string }).code, 'no_matching_signature');
  });

  test('several signatures and several secrets: any match is enough; unknown versions are skipped', async () => {
    const both = `v2,abcd ${sign(other, 'msg_1', ts, body)} ${sign(secret, 'msg_1', ts, body)}`;
    assert.equal((await verifyWebhook({ headers: headers(both), body }, secret, { now })).ok, true);
    assert.equal((await verifyWebhook({ headers: headers(sign(other, 'msg_1', ts, body)), body }, [secret, other], { now })).ok, true);
    // Postbox's own signer agrees with node:crypto.
    const ours = await signWebhook({ id: 'msg_1', timestamp: ts, body, secrets: [other, secret] });
    assert.equal(ours, `${sign(other, 'msg_1', ts, body)} ${sign(secret, 'msg_1', ts, body)}`);
  });

  test('missing headers and a malformed timestamp are typed refusals', async () => {
    const r = await verifyWebhook({ headers: { 'webhook-id': 'msg_1' }, body }, secret, { now });
    assert.deepEqual(r, { ok: false, code: 'missing_headers', message: 'missing webhook-timestamp, webhook-signature', missing: ['webhook-timestamp', 'webhook-signature'] });
    for (const bad of ['soon', '-5', '1.5e9', '']) {
      const out = await verifyWebhook({ headers: headers(sign(secret, 'msg_1', ts, body), bad), body }, secret, { now });
      assert.equal((out as { code: string }).code, 'invalid_timestamp', bad);
    }
  });

  test('a Request, read as bytes (and left readable), with headers in any case', async () => {
    const raw = '{"x":"\u2028é"}';
    const request = new Request('http://x/hook', {
      method: 'POST',
      body: raw,
      headers: { 'Webhook-Id': 'msg_1', 'Webhook-Timestamp': String(ts), 'Webhook-Signature': sign(secret, 'msg_1', ts, raw) },
    });
    assert.deepEqual(await verifyWebhook(request, secret, { now: new Date(now) }), { ok: true, id: 'msg_1', timestamp: ts, body: raw });
    assert.equal(await request.text(), raw);
  });

  test('assertWebhook throws WebhookVerificationError; a malformed secret is the caller’s PostboxError', async () => {
    await assert.rejects(
      assertWebhook({ headers: headers(sign(other, 'msg_1', ts, body)), body }, secret, { now }),
      (e: unknown) => e instanceof WebhookVerificationError && e.code === 'no_matching_signature',
    );
    await assert.rejects(verifyWebhook({ headers: headers('v1,x'), body }, 'whsec_***', { now }), { code: 'invalid_secret' });
    await assert.rejects(verifyWebhook({ headers: headers('v1,x'), body }, [], { now }), { code: 'invalid_secret' });
  });
});
