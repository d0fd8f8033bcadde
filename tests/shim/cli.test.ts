// The `postbox` command line, run as operators run it: the built bin in a child process against
// a real PostgreSQL, asserting its output, its exit code and the database afterwards.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, beforeEach, describe, test } from 'node:test';
import pg from 'pg';
import { z } from 'zod';
import { createOutbox, defineJob, ok } from 'postbox';
import { evaluateBacklog } from 'postbox/inspect';
import { createPgConnector } from 'postbox/pg';
import { migrate, OUTBOX_MIGRATIONS } from 'postbox/sql';
import { createTestClock, runUntilIdle } from 'postbox/testing';
import { freePort, startPostgres, type PgServer } from '../support/postgres.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = path.join(root, 'js-shim/dist/cli/main.js');

let server: PgServer;
let url: string;
let pool: pg.Pool;

before(async () => {
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: build the shim first (npm run -w postbox build)`);
  server = await startPostgres();
  url = await server.createDatabase('cli');
  pool = new pg.Pool({ connectionString: url, max: 2 });
  const client = await pool.connect();
  await migrate(client);
  client.release();
});
after(async () => {
  await pool?.end();
  await server?.stop();
});
beforeEach(async () => {
  await pool.query('DELETE FROM outbox.job');
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the built CLI. `DATABASE_URL` is the test database unless `env` says otherwise;
 * `tty` runs it under `script` so that it has a terminal to ask on, answering with `input`;
 * with `beforeAnswer`, the answer waits until the question is shown and `beforeAnswer` is done.
 */
function cli(args: string[], opts: { env?: Record<string, string | undefined>; input?: string; tty?: boolean; beforeAnswer?: () => Promise<void> } = {}): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: url, ...opts.env };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const child = opts.tty
    ? spawn('script', ['-qec', [process.execPath, BIN, ...args].map(quote).join(' '), '/dev/null'], { env, cwd: root })
    : spawn(process.execPath, [BIN, ...args], { env, cwd: root });
  let stdout = '';
  let stderr = '';
  let asked = false;
  child.stdout.on('data', (c) => {
    stdout += c;
    if (opts.beforeAnswer && !asked && stdout.includes('[y/N]')) {
      asked = true;
      opts.beforeAnswer().then(() => child.stdin.end(opts.input ?? ''), (error) => child.emit('error', error));
    }
  });
  child.stderr.on('data', (c) => (stderr += c));
  if (!opts.beforeAnswer) child.stdin.end(opts.input ?? '');
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A failed expectation shows what the CLI said. */
function expectExit(run: Run, code: number): void {
  assert.equal(run.code, code, `exit ${run.code}, expected ${code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`);
}

/** No expected error may surface as a stack trace. */
function expectUsage(run: Run, reason: RegExp): void {
  expectExit(run, 2);
  assert.match(run.stderr, reason);
  assert.doesNotMatch(run.stderr, /\n\s+at /);
}

const json = (run: Run) => JSON.parse(run.stdout);

const note = defineJob({ kind: 'cli.note', payload: z.object({ n: z.number() }), timeoutMs: 5_000, handle: async () => ok() });
const mail = defineJob({ kind: 'cli.mail', payload: z.object({ n: z.number() }), timeoutMs: 5_000, handle: async () => ok() });

/** Enqueues `count` jobs, one per millisecond of creation time so their order is known. */
async function seed(count: number, opts: { kind?: typeof note; tenantKey?: string; correlationId?: string } = {}): Promise<string[]> {
  const job = opts.kind ?? note;
  const outbox = createOutbox({ jobs: [job], connect: createPgConnector(url) });
  const items = Array.from({ length: count }, (_, n) => ({
    payload: { n },
    ...(opts.tenantKey ? { tenantKey: opts.tenantKey } : {}),
    ...(opts.correlationId ? { correlationId: opts.correlationId } : {}),
  }));
  const results = await outbox.transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(job, items));
  const ids = results.map((r) => (r as { id: string }).id);
  // Spread creation times apart so filters on them and the paging order are deterministic.
  const base = (await pool.query(`SELECT COALESCE(max(created_at), now()) AS t FROM outbox.job`)).rows[0].t as Date;
  await pool.query(
    `UPDATE outbox.job j SET created_at = $2::timestamptz + make_interval(secs => s.n::int)
       FROM unnest($1::uuid[]) WITH ORDINALITY AS s(id, n) WHERE j.id = s.id`,
    [ids, base],
  );
  return ids;
}

const rowsOf = async (sql: string, values: unknown[] = []) => (await pool.query(sql, values)).rows;
const statusOf = async (id: string) => (await rowsOf('SELECT status FROM outbox.job WHERE id = $1', [id]))[0]?.status;
const setDead = (ids: string[]) =>
  pool.query(`UPDATE outbox.job SET status = 'dead', finished_at = now(), attempts = 5, last_error_code = 'boom' WHERE id = ANY($1::uuid[])`, [ids]);

describe('help and schema', () => {
  test('--help on the program and on every command exits 0; npx postbox runs the bin from the repository root', async () => {
    const top = await cli(['--help']);
    expectExit(top, 0);
    for (const command of ['migrate', 'verify-schema', 'status', 'list', 'show', 'cancel', 'replay', 'retry-now', 'erase-tenant']) {
      assert.match(top.stdout, new RegExp(`\\n  ${command}\\b`), `--help lists ${command}`);
      const help = await cli([command, '--help'], { env: { DATABASE_URL: undefined } });
      expectExit(help, 0);
      assert.match(help.stdout, new RegExp(`^Usage: postbox ${command}`));
      assert.match(help.stdout, /--database-url <url>/, `${command} --help shows the global --database-url`);
    }
    assert.match(top.stdout, /Exit codes:/);
    const npx = await new Promise<Run>((resolve, reject) => {
      const child = spawn('npx', ['--no-install', 'postbox', '--help'], { cwd: root, env: process.env });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c) => (stdout += c));
      child.stderr.on('data', (c) => (stderr += c));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
    expectExit(npx, 0);
    assert.match(npx.stdout, /^Usage: postbox \[options\] \[command\]/);
  });

  test('migrate applies the migrations once; a second run is a no-op', async () => {
    const fresh = await server.createDatabase('cli_migrate');
    const first = await cli(['migrate', '--database-url', fresh], { env: { DATABASE_URL: undefined } });
    expectExit(first, 0);
    const names = OUTBOX_MIGRATIONS.map((m) => `${String(m.version).padStart(4, '0')}_${m.name}`);
    assert.ok(names.length >= 2 && names[0] === '0001_outbox_tables');
    assert.equal(first.stdout, `applied ${names.length} migrations: ${names.join(', ')}\n`);
    const second = await cli(['migrate', '--json'], { env: { DATABASE_URL: fresh } });
    expectExit(second, 0);
    assert.deepEqual(json(second), { applied: [], latest: OUTBOX_MIGRATIONS.at(-1)!.version });
    expectExit(await cli(['migrate'], { env: { DATABASE_URL: fresh } }), 0);
    const c = new pg.Client({ connectionString: fresh });
    await c.connect();
    try {
      assert.deepEqual(
        (await c.query('SELECT version, name FROM outbox.schema_migration ORDER BY version')).rows,
        OUTBOX_MIGRATIONS.map((m) => ({ version: m.version, name: m.name })),
      );
    } finally {
      await c.end();
    }
  });

  test('verify-schema: clean exits 0; a dropped index is drift, listed, exit 1', async () => {
    const clean = await cli(['verify-schema']);
    expectExit(clean, 0);
    assert.match(clean.stdout, /no drift/);
    assert.deepEqual(json(await cli(['verify-schema', '--json'])), { ok: true, drift: [] });

    const drifted = await server.createDatabase('cli_drift');
    const c = new pg.Client({ connectionString: drifted });
    await c.connect();
    try {
      await migrate(c);
      await c.query('DROP INDEX outbox.job_correlation');
      await c.query('ALTER TABLE outbox.attempt DROP COLUMN error_message');
    } finally {
      await c.end();
    }
    const run = await cli(['verify-schema'], { env: { DATABASE_URL: drifted } });
    expectExit(run, 1);
    assert.match(run.stdout, /schema drift \(2\)/);
    assert.match(run.stdout, /missing_index\s+outbox\.job\s+job_correlation/);
    assert.match(run.stdout, /missing_column\s+outbox\.attempt\.error_message/);
    const report = await cli(['verify-schema', '--json'], { env: { DATABASE_URL: drifted } });
    expectExit(report, 1);
    assert.deepEqual(new Set(json(report).drift.map((d: any) => `${d.type}:${d.index ?? d.column}`)), new Set(['missing_index:job_correlation', 'missing_column:error_message']));
  });
});

describe('reading', () => {
  test('status: the backlog per kind with totals, graded by the core', async () => {
    const empty = await cli(['status']);
    expectExit(empty, 0);
    assert.match(empty.stdout, /backlog: empty/);
    assert.match(empty.stdout, /severity: ok/);

    const notes = await seed(4);
    const mails = await seed(3, { kind: mail });
    // Two notes overdue by an hour (aged), one retrying, one mail running on an expired lease (stuck).
    await pool.query(`UPDATE outbox.job SET due_at = now() - interval '1 hour' WHERE id = ANY($1::uuid[])`, [notes.slice(0, 2)]);
    await pool.query(`UPDATE outbox.job SET status = 'retrying', due_at = now() + interval '1 hour' WHERE id = $1`, [notes[3]]);
    await pool.query(`UPDATE outbox.job SET status = 'running', lease_expires_at = now() - interval '1 minute' WHERE id = $1`, [mails[0]]);
    const run = await cli(['status', '--json']);
    expectExit(run, 0);
    const body = json(run);
    const grade = (counts: { due: number; aged: number; stuck: number }) => evaluateBacklog(counts).severity;
    const mailRow = { kind: 'cli.mail', lane: 'default', pending: 2, retrying: 0, due: 2, aged: 0, scheduled: 0, running: 1, stuck: 1 };
    const noteRow = { kind: 'cli.note', lane: 'default', pending: 3, retrying: 1, due: 3, aged: 2, scheduled: 1, running: 0, stuck: 0 };
    assert.deepEqual(body.rows, [{ ...mailRow, severity: grade(mailRow) }, { ...noteRow, severity: grade(noteRow) }]);
    assert.deepEqual(body.totals, { pending: 5, retrying: 1, due: 5, aged: 2, scheduled: 1, running: 1, stuck: 1 });
    const graded = evaluateBacklog({ due: 5, aged: 2, stuck: 1 });
    assert.equal(body.severity, graded.severity);
    assert.deepEqual(body.reasons, graded.reasons);
    assert.notEqual(body.severity, 'ok', 'a stuck job is graded');

    const table = await cli(['status']);
    expectExit(table, 0);
    assert.match(table.stdout, /^KIND\s+LANE\s+PENDING\s+RETRYING\s+DUE\s+AGED\s+SCHEDULED\s+RUNNING\s+STUCK\s+SEVERITY$/m);
    assert.match(table.stdout, new RegExp(`^cli\\.note\\s+default\\s+3\\s+1\\s+3\\s+2\\s+1\\s+0\\s+0\\s+${grade(noteRow)}$`, 'm'));
    assert.match(table.stdout, new RegExp(`^\\(total\\)\\s+-\\s+5\\s+1\\s+5\\s+2\\s+1\\s+1\\s+1\\s+${graded.severity}$`, 'm'));
    assert.match(table.stdout, new RegExp(`severity: ${graded.severity}`));
    // --tenant narrows the backlog to one tenant's jobs (none here).
    assert.deepEqual(json(await cli(['status', '--tenant', 'acme', '--json'])).rows, []);
    assert.equal(json(await cli(['status', '--no-tenant', '--json'])).rows.length, 2);
    expectExit(await cli(['status', '--fail-on', 'warn']), 1);
    expectUsage(await cli(['status', '--fail-on', 'never']), /Allowed choices are warn, error/);
  });

  test('list: filters, --order, and every job exactly once when paging by cursor', async () => {
    const acme = await seed(7, { tenantKey: 'acme' });
    const globex = await seed(3, { kind: mail, tenantKey: 'globex', correlationId: 'order-42' });
    const plain = await seed(2);
    await setDead(globex.slice(0, 1));

    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const run = await cli(['list', '--tenant', 'acme', '--limit', '3', '--json', ...(cursor ? ['--cursor', cursor] : [])]);
      expectExit(run, 0);
      const page = json(run);
      seen.push(...page.jobs.map((j: any) => j.id));
      assert.ok(page.jobs.every((j: any) => j.tenantKey === 'acme' && j.kind === 'cli.note'));
      cursor = page.nextCursor;
      pages++;
    } while (cursor);
    assert.equal(pages, 3);
    assert.deepEqual(seen, acme);

    const ids = async (args: string[]) => {
      const run = await cli(['list', '--json', ...args]);
      expectExit(run, 0);
      return json(run).jobs.map((j: any) => j.id);
    };
    assert.deepEqual(await ids(['--kind', 'cli.mail']), globex);
    assert.deepEqual(await ids(['--status', 'dead']), globex.slice(0, 1));
    assert.deepEqual(await ids(['--correlation-id', 'order-42', '--status', 'pending']), globex.slice(1));
    assert.deepEqual(await ids(['--no-tenant']), plain);
    assert.deepEqual(await ids(['--tenant', 'acme', '--order', 'desc', '--limit', '2']), acme.slice(-2).reverse());
    const created = (await rowsOf('SELECT id, created_at FROM outbox.job WHERE id = $1', [acme[3]]))[0].created_at as Date;
    assert.deepEqual(await ids(['--tenant', 'acme', '--created-after', created.toISOString()]), acme.slice(4));
    assert.deepEqual(await ids(['--tenant', 'acme', '--created-before', created.toISOString()]), acme.slice(0, 3));

    const human = await cli(['list', '--tenant', 'acme', '--limit', '2']);
    expectExit(human, 0);
    const lines = human.stdout.split('\n');
    assert.match(lines[0]!, /^ID\s+KIND\s+STATUS\s+TENANT\s+ATTEMPTS\s+DUE\s+CREATED\s+LAST ERROR$/);
    assert.equal(lines[1]!.indexOf('cli.note'), lines[0]!.indexOf('KIND'), 'columns align');
    assert.ok(lines[1]!.startsWith(acme[0]!) && lines[2]!.startsWith(acme[1]!));
    assert.match(human.stdout, /more: --cursor \d+\.[0-9a-f-]{36}/);
    expectExit(await cli(['list', '--tenant', 'nobody']), 0);
  });

  test('a reader that closes the pipe early (postbox list | head) ends the command quietly', async () => {
    await seed(1000);
    const child = spawn(process.execPath, [BIN, 'list', '--limit', '1000'], { env: { ...process.env, DATABASE_URL: url } });
    let stderr = '';
    child.stderr.on('data', (c) => (stderr += c));
    // Gone before the first line is written, as `head` is after its first.
    child.stdout.destroy();
    const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
    assert.equal(code, 0, stderr);
    assert.equal(stderr, '');
  });

  test('show: the job, its payload and every attempt; unknown or other-tenant ids exit 1', async () => {
    let calls = 0;
    const flaky = defineJob({
      kind: 'cli.flaky', payload: z.object({ to: z.string() }), timeoutMs: 5_000,
      handle: async () => {
        if (calls++ === 0) throw new Error('smtp <down>');
        return ok();
      },
    });
    const clock = createTestClock(Date.parse('2026-11-30T12:00:00.000Z'));
    const outbox = createOutbox({ jobs: [flaky], connect: createPgConnector(url), clock });
    const created = await outbox.transaction(pool, (_tx, enqueue) =>
      enqueue(flaky, { payload: { to: 'a@example.com' }, tenantKey: 'acme', metadata: { source: 'test' } }),
    );
    const id = (created as { id: string }).id;
    await runUntilIdle(outbox, { clock, db: pool });
    assert.equal(await statusOf(id), 'succeeded');

    const run = await cli(['show', id, '--json']);
    expectExit(run, 0);
    const body = json(run);
    assert.equal(body.job.id, id);
    assert.equal(body.job.status, 'succeeded');
    assert.deepEqual(body.job.payload, { to: 'a@example.com' });
    assert.deepEqual(body.attempts.map((a: any) => [a.attempt, a.outcome, a.code]), [[1, 'retry', 'unexpected'], [2, 'ok', null]]);
    assert.equal(body.attempts[0].message, 'smtp <down>');
    assert.ok(!('message' in body.attempts[1]));
    for (const a of body.attempts) assert.equal(a.durationMs, Date.parse(a.finishedAt) - Date.parse(a.startedAt));

    const human = await cli(['show', id.toUpperCase()]);
    expectExit(human, 0);
    assert.match(human.stdout, new RegExp(`^id\\s+${id}$`, 'm'));
    assert.match(human.stdout, /^status\s+succeeded$/m);
    assert.match(human.stdout, /"to": "a@example.com"/);
    assert.match(human.stdout, /"source": "test"/);
    assert.match(human.stdout, /^#\s+OUTCOME\s+CODE\s+STARTED\s+FINISHED\s+DURATION MS\s+MESSAGE$/m);
    assert.match(human.stdout, /^1\s+retry\s+unexpected\s+2026-11-30 12:00:00Z .* smtp <down>$/m);
    assert.match(human.stdout, /^2\s+ok\s+-\s+/m);

    expectExit(await cli(['show', id, '--tenant', 'acme']), 0);
    const other = await cli(['show', id, '--tenant', 'globex']);
    expectExit(other, 1);
    assert.match(other.stderr, /no job .* in that tenant scope/);
    const missing = await cli(['show', '00000000-0000-4000-8000-000000000000']);
    expectExit(missing, 1);
    assert.match(missing.stderr, /no job 00000000-0000-4000-8000-000000000000/);
  });

  test('text from the database cannot drive the terminal: control characters print escaped', async () => {
    const [id] = await seed(1, { tenantKey: 'evil\u001b[2J' });
    await pool.query(
      `UPDATE outbox.job SET status = 'dead', finished_at = now(), last_error_code = 'x', last_error_message = $2, payload = $3 WHERE id = $1`,
      [id, 'red \u001b[31malert\u0007', { title: '\u001b]0;pwned\u0007', csi: '\u009b2J' }],
    );
    for (const args of [['list'], ['show', id!]]) {
      const run = await cli(args);
      expectExit(run, 0);
      assert.doesNotMatch(run.stdout, /[\u001b\u0007\u009b]/, `${args[0]} prints no control character`);
      assert.match(run.stdout, /evil\\u001b\[2J/);
    }
    const shown = (await cli(['show', id!])).stdout;
    assert.match(shown, /red \\u001b\[31malert\\u0007/);
    assert.match(shown, /\\u009b2J/);
    // --json keeps the data exact for scripts (JSON escapes what it must).
    assert.equal(json(await cli(['show', id!, '--json'])).job.payload.csi, '\u009b2J');
  });
});

describe('operator actions', () => {
  test('cancel by id: pending jobs are cancelled with the reason; a finished one is refused (exit 1)', async () => {
    const ids = await seed(3);
    const run = await cli(['cancel', ids[0]!, ids[1]!, '--reason', 'operator']);
    expectExit(run, 0);
    assert.match(run.stdout, /cancelled: 2 of 2 jobs; refused: 0; not found: 0/);
    assert.deepEqual(await rowsOf(`SELECT status, last_error_code FROM outbox.job WHERE id = ANY($1::uuid[])`, [ids.slice(0, 2)]), [
      { status: 'cancelled', last_error_code: 'operator' },
      { status: 'cancelled', last_error_code: 'operator' },
    ]);
    const again = await cli(['cancel', ids[0]!, ids[2]!, '00000000-0000-4000-8000-000000000000', '--json']);
    expectExit(again, 1);
    const report = json(again);
    assert.equal(report.changed, 1);
    assert.equal(report.invalidState, 1);
    assert.equal(report.notFound, 1);
    assert.deepEqual(report.results[0], { id: ids[0], status: 'invalid_state', jobStatus: 'cancelled' });
    assert.equal(await statusOf(ids[2]!), 'cancelled');
  });

  test('replay by filter: --dry-run lists and changes nothing; without --yes and no terminal it refuses; --yes replays', async () => {
    const dead = await seed(4, { kind: mail });
    const live = await seed(2, { kind: mail });
    await setDead(dead);

    const dry = await cli(['replay', '--kind', 'cli.mail', '--status', 'dead', '--dry-run']);
    expectExit(dry, 0);
    assert.match(dry.stdout, /would replay 4 jobs \(dry run/);
    for (const id of dead) assert.ok(dry.stdout.includes(id));
    const dryJson = json(await cli(['replay', '--status', 'dead', '--dry-run', '--json']));
    assert.deepEqual(dryJson.ids, dead);
    assert.equal(dryJson.changed, 0);
    assert.deepEqual(await rowsOf(`SELECT DISTINCT status FROM outbox.job WHERE id = ANY($1::uuid[])`, [dead]), [{ status: 'dead' }]);

    const unconfirmed = await cli(['replay', '--kind', 'cli.mail', '--status', 'dead']);
    expectUsage(unconfirmed, /pass --yes/);
    assert.deepEqual(await rowsOf(`SELECT DISTINCT status FROM outbox.job WHERE id = ANY($1::uuid[])`, [dead]), [{ status: 'dead' }]);

    const run = await cli(['replay', '--kind', 'cli.mail', '--status', 'dead', '--yes']);
    expectExit(run, 0);
    assert.match(run.stdout, /replayed: 4 of 4 jobs/);
    assert.match(run.stderr, /next cron sweep/);
    const rows = await rowsOf(`SELECT status, attempts, due_at <= now() AS due FROM outbox.job WHERE id = ANY($1::uuid[])`, [dead]);
    assert.deepEqual(rows, dead.map(() => ({ status: 'pending', attempts: 0, due: true })));
    // No queue was nudged: an outbox that drains (as the cron sweep does) runs them.
    const worker = createOutbox({ jobs: [mail], connect: createPgConnector(url) });
    assert.equal((await runUntilIdle(worker)).succeeded, 6);
    assert.deepEqual(await rowsOf(`SELECT DISTINCT status FROM outbox.job`), [{ status: 'succeeded' }]);
    // A filter that also matches jobs the action does not apply to: those are refused, exit 1.
    await setDead(dead.slice(0, 1));
    const mixed = await cli(['replay', '--kind', 'cli.mail', '--yes']);
    expectExit(mixed, 1);
    assert.match(mixed.stdout, /replayed: 1 of 6 jobs; refused: 5/);
    assert.match(mixed.stdout, new RegExp(`${live[0]}\\s+refused\\s+succeeded`));
    assert.equal(await statusOf(dead[0]!), 'pending');
  });

  test('a bulk action asks on a terminal: "n" changes nothing (exit 1), "y" acts on what was counted', async () => {
    const dead = await seed(3);
    await setDead(dead);
    const declined = await cli(['replay', '--status', 'dead'], { tty: true, input: 'n\n' });
    expectExit(declined, 1);
    assert.match(declined.stdout, /replay 3 jobs matching the filter\? \[y\/N\]/);
    assert.match(declined.stdout, /aborted: nothing changed/);
    assert.deepEqual(await rowsOf(`SELECT DISTINCT status FROM outbox.job`), [{ status: 'dead' }]);
    const accepted = await cli(['replay', '--status', 'dead'], { tty: true, input: 'y\n' });
    expectExit(accepted, 0);
    assert.match(accepted.stdout, /replayed: 3 of 3 jobs/);
    assert.deepEqual(await rowsOf(`SELECT DISTINCT status FROM outbox.job`), [{ status: 'pending' }]);
  });

  test('retry-now by id and by filter makes jobs due now', async () => {
    const ids = await seed(4);
    await pool.query(`UPDATE outbox.job SET due_at = now() + interval '1 day'`);
    const one = await cli(['retry-now', ids[0]!]);
    expectExit(one, 0);
    assert.match(one.stdout, /made due now: 1 of 1 job;/);
    const due = async () => (await rowsOf(`SELECT id FROM outbox.job WHERE due_at <= now() ORDER BY created_at`)).map((r) => r.id);
    assert.deepEqual(await due(), [ids[0]]);
    const rest = await cli(['retry-now', '--status', 'pending', '--created-after', '2000-01-01', '--yes', '--json']);
    expectExit(rest, 0);
    assert.equal(json(rest).changed, 4, 'retry-now applies again to a due pending job');
    assert.deepEqual(await due(), ids);
  });

  test('--tenant scopes actions: other tenants\' ids are not found, filters reach only the tenant', async () => {
    const acme = await seed(2, { tenantKey: 'acme' });
    const globex = await seed(2, { tenantKey: 'globex' });
    await setDead([...acme, ...globex]);
    const wrong = await cli(['replay', globex[0]!, '--tenant', 'acme', '--json']);
    expectExit(wrong, 1);
    assert.deepEqual(json(wrong).results, [{ id: globex[0], status: 'not_found' }]);
    assert.equal(await statusOf(globex[0]!), 'dead');
    const scoped = await cli(['replay', '--all', '--tenant', 'acme', '--yes']);
    expectExit(scoped, 0);
    assert.match(scoped.stdout, /replayed: 2 of 2 jobs/);
    assert.deepEqual(
      await rowsOf(`SELECT tenant_key, status FROM outbox.job ORDER BY tenant_key, created_at`),
      [{ tenant_key: 'acme', status: 'pending' }, { tenant_key: 'acme', status: 'pending' }, { tenant_key: 'globex', status: 'dead' }, { tenant_key: 'globex', status: 'dead' }],
    );
    const dry = await cli(['cancel', acme[0]!, globex[0]!, '--tenant', 'acme', '--dry-run']);
    expectExit(dry, 0);
    assert.match(dry.stdout, new RegExp(`${acme[0]}\\s+cli\\.note\\s+pending`));
    assert.match(dry.stdout, new RegExp(`${globex[0]}\\s+-\\s+not found`));
    assert.equal(await statusOf(acme[0]!), 'pending');
  });

  test('erase-tenant: --dry-run counts, no --yes without a terminal refuses, --yes erases jobs and attempts of that tenant only', async () => {
    const acme = await seed(3, { tenantKey: 'acme' });
    const globex = await seed(2, { tenantKey: 'globex' });
    await pool.query(
      `INSERT INTO outbox.attempt (job_id, seq, kind, started_at, lease_expires_at) SELECT id, 1, kind, now(), now() FROM outbox.job`,
    );
    const dry = await cli(['erase-tenant', 'acme', '--dry-run', '--json']);
    expectExit(dry, 0);
    assert.deepEqual(json(dry), { tenantKey: 'acme', dryRun: true, jobs: 3 });
    expectUsage(await cli(['erase-tenant', 'acme']), /pass --yes/);
    assert.equal((await rowsOf(`SELECT count(*)::int AS n FROM outbox.job`))[0].n, 5);
    const run = await cli(['erase-tenant', 'acme', '--yes']);
    expectExit(run, 0);
    assert.match(run.stdout, /erased 3 jobs of tenant "acme"/);
    assert.deepEqual((await rowsOf(`SELECT id FROM outbox.job ORDER BY created_at`)).map((r) => r.id), globex);
    assert.equal((await rowsOf(`SELECT count(*)::int AS n FROM outbox.attempt WHERE job_id = ANY($1::uuid[])`, [acme]))[0].n, 0);
    assert.equal((await rowsOf(`SELECT count(*)::int AS n FROM outbox.attempt`))[0].n, 2);
  });
});

describe('erase-tenant on a terminal', () => {
  test('after a "y" it erases the jobs it counted: a job of the tenant committed before the answer survives', async () => {
    const counted = await seed(3, { tenantKey: 'acme' });
    const globex = await seed(1, { tenantKey: 'globex' });
    let late: string[] = [];
    const run = await cli(['erase-tenant', 'acme'], {
      tty: true,
      input: 'y\n',
      beforeAnswer: async () => {
        late = await seed(1, { tenantKey: 'acme' });
      },
    });
    expectExit(run, 0);
    assert.match(run.stdout, /erase 3 jobs of tenant "acme" and their attempts\? This cannot be undone\. \[y\/N\]/);
    assert.match(run.stdout, /erased 3 jobs of tenant "acme"/);
    assert.equal(late.length, 1);
    const left = (await rowsOf(`SELECT id FROM outbox.job ORDER BY created_at`)).map((r) => r.id);
    assert.deepEqual(new Set(left), new Set([...globex, ...late]));
    assert.ok(counted.every((id) => !left.includes(id)));
    // Nothing of the tenant's left to count: nothing is asked.
    await pool.query(`DELETE FROM outbox.job WHERE tenant_key = 'acme'`);
    const none = await cli(['erase-tenant', 'acme'], { tty: true, input: 'y\n' });
    expectExit(none, 0);
    assert.match(none.stdout, /no jobs of tenant "acme": nothing to do/);
    assert.doesNotMatch(none.stdout, /\[y\/N\]/);
  });
});

describe('bad input and connection failures', () => {
  test('usage errors exit 2 with the reason and no stack trace', async () => {
    const id = '00000000-0000-4000-8000-000000000000';
    const cases: [string[], RegExp][] = [
      [['frobnicate'], /unknown command 'frobnicate'/],
      [['list', '--colour'], /unknown option '--colour'/],
      [['show', 'not-a-uuid'], /job id "not-a-uuid" is not a uuid/],
      [['cancel', id, '12345'], /job id "12345" is not a uuid/],
      [['list', '--created-after', 'yesterday'], /--created-after <time>' argument 'yesterday' is invalid\. expected an ISO 8601/],
      [['list', '--created-before', '2026-02-30'], /"2026-02-30" is not a valid date/],
      [['list', '--created-after', '2026-05-02', '--created-before', '2026-05-01'], /--created-after must be earlier/],
      [['list', '--status', 'exploded'], /argument 'exploded' is invalid\. Allowed choices are pending, running, retrying, succeeded, dead, cancelled/],
      [['replay', '--status', 'nope', '--dry-run'], /Allowed choices/],
      [['list', '--limit', '0'], /expected an integer in 1\.\.1000/],
      [['list', '--limit', 'ten'], /expected an integer in 1\.\.1000/],
      [['list', '--order', 'sideways'], /Allowed choices are asc, desc/],
      [['list', '--cursor', 'page-2'], /cursor <cursor>' argument 'page-2' is invalid/],
      [['show'], /missing required argument 'id'/],
      [['cancel'], /name job ids, or select jobs with filter flags/],
      [['cancel', id, '--kind', 'cli.note'], /ids or filter flags, not both/],
      [['retry-now', id, '--max', '3'], /--max limits a filter/],
      [['erase-tenant', ''], /tenant key must not be empty/],
      [['list', '--kind', ''], /--kind must not be empty/],
    ];
    for (const [args, reason] of cases) {
      const run = await cli(args);
      assert.equal(run.code, 2, `${args.join(' ')}: exit ${run.code}\n${run.stderr}`);
      assert.match(run.stderr, reason, args.join(' '));
      assert.match(run.stderr, /^postbox: /, `${args.join(' ')} prefixes its error`);
      assert.doesNotMatch(run.stderr, /\n\s+at /, `${args.join(' ')} prints no stack`);
      assert.equal(run.stdout, '');
    }
  });

  test('no database URL or a malformed one is a usage error (2); an unreachable or wrong database is 3', async () => {
    expectUsage(await cli(['list'], { env: { DATABASE_URL: undefined } }), /no database: pass --database-url postgres:\/\/… or set DATABASE_URL/);
    expectUsage(await cli(['status'], { env: { DATABASE_URL: '' } }), /no database/);
    expectUsage(await cli(['list', '--database-url', 'localhost:5432']), /must start with postgres:\/\//);
    expectUsage(await cli(['list', '--database-url', 'not a url']), /not a URL/);

    const closed = `postgres://postgres:postgres@127.0.0.1:${await freePort()}/cli`;
    const wrongPassword = url.replace('postgres:postgres@', 'postgres:wrong-secret@');
    const missingDb = url.replace(/\/cli$/, '/no_such_database');
    const unmigrated = await server.createDatabase('cli_empty');
    const cases: [string, string[], RegExp][] = [
      [closed, ['list'], /cannot connect to postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/cli: connect ECONNREFUSED/],
      [wrongPassword, ['status'], /cannot connect to .*: password authentication failed/],
      [missingDb, ['migrate'], /database "no_such_database" does not exist/],
      [closed, ['replay', '--all', '--yes'], /cannot connect/],
      [unmigrated, ['list'], /relation "outbox\.job" does not exist \(SQLSTATE 42P01\) — is the schema migrated\? run `postbox migrate`/],
    ];
    for (const [databaseUrl, args, reason] of cases) {
      const run = await cli([...args, '--database-url', databaseUrl]);
      assert.equal(run.code, 3, `${args.join(' ')} on ${databaseUrl}: exit ${run.code}\n${run.stderr}`);
      assert.match(run.stderr, reason);
      assert.doesNotMatch(run.stderr, /wrong-secret/, 'the password is never printed');
      assert.doesNotMatch(run.stderr, /\n\s+at /);
    }
    // --database-url wins over DATABASE_URL.
    expectExit(await cli(['list', '--database-url', url], { env: { DATABASE_URL: closed } }), 0);
  });
});
