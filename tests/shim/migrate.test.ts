// migrate() and OUTBOX_MIGRATIONS against a real PostgreSQL (flavor from POSTBOX_PG).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { OUTBOX_TABLES } from '../../js-shim/src/inspect/health.ts';
import { migrate, OUTBOX_MIGRATIONS, UnsupportedServerError } from '../../js-shim/src/sql/index.ts';
import { routines, splitStatements } from '../../scripts/gen-sql.mjs';
import { startPostgres, type PgServer } from '../support/postgres.ts';

let server: PgServer;
let n = 0;
before(async () => {
  server = await startPostgres();
});
after(async () => {
  await server?.stop();
});

async function freshClient(): Promise<pg.Client> {
  const url = await server.createDatabase(`migrate_${++n}`);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return client;
}

test('OUTBOX_MIGRATIONS is generated from migrations/', () => {
  assert.ok(OUTBOX_MIGRATIONS.length >= 1);
  OUTBOX_MIGRATIONS.forEach((m, i) => {
    // Unique and ascending from 1 (a number reserved by another change may be missing).
    assert.ok(m.version > (i === 0 ? 0 : OUTBOX_MIGRATIONS[i - 1]!.version));
    assert.match(m.name, /^[a-z0-9_]+$/);
    assert.ok(m.statements.length > 0);
    for (const s of m.statements) assert.ok(!s.trimEnd().endsWith(';'));
  });
  assert.equal(OUTBOX_MIGRATIONS[0]!.name, 'outbox_tables');
});

test('splitStatements ignores semicolons in comments, strings and dollar quotes', () => {
  assert.deepEqual(splitStatements("select 1; -- a;b\nselect 'x;''y'; /* c; /* d; */ */ select $t$ ; $$ $t$;;"), [
    'select 1',
    "-- a;b\nselect 'x;''y'",
    '/* c; /* d; */ */ select $t$ ; $$ $t$',
  ]);
  assert.deepEqual(splitStatements("select E'\\';'; select \"a;b\", $1::int"), ["select E'\\';'", 'select "a;b", $1::int']);
  assert.deepEqual(splitStatements('-- only a comment;\n'), []);
});

test('routines follows the functions and triggers drizzle-kit cannot generate, and refuses what it cannot follow', () => {
  const migrations = [
    { statements: ['CREATE TABLE outbox.t (id int)', '-- why\nCREATE FUNCTION outbox.f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$',
      'CREATE TRIGGER t_a AFTER DELETE ON outbox.t FOR EACH STATEMENT EXECUTE FUNCTION outbox.f()'] },
    { statements: ['DROP TRIGGER t_a ON outbox.t', 'CREATE OR REPLACE TRIGGER t_b AFTER INSERT ON outbox.t FOR EACH ROW EXECUTE FUNCTION outbox.f()'] },
  ];
  assert.deepEqual(routines(migrations), { statements: [[0, 1], [0, 2], [1, 0], [1, 1]], functions: ['f'], triggers: [{ name: 't_b', table: 't' }] });
  // A function defined again takes its first definition's place (before the triggers naming it);
  // one dropped and created again goes where it is created.
  const replaced = [...migrations, { statements: ['CREATE OR REPLACE FUNCTION outbox.f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$'] }];
  assert.deepEqual(routines(replaced).statements, [[2, 0], [0, 2], [1, 0], [1, 1]]);
  const recreated = [...migrations, { statements: ['DROP FUNCTION outbox.f', 'CREATE FUNCTION outbox.f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$'] }];
  assert.deepEqual(routines(recreated).statements, [[0, 1], [0, 2], [1, 0], [1, 1], [2, 0], [2, 1]]);
  for (const unknown of ['ALTER TRIGGER t_b ON outbox.t RENAME TO t_c', 'ALTER TABLE outbox.t DISABLE TRIGGER t_b', 'CREATE PROCEDURE outbox.p() LANGUAGE sql AS $$ $$']) {
    assert.throws(() => routines([{ statements: [unknown] }]), /teach routineChange/, unknown);
  }
});

test('migrate applies every migration once, then nothing', async () => {
  const client = await freshClient();
  try {
    const first = await migrate(client);
    assert.deepEqual(first.applied, OUTBOX_MIGRATIONS.map((m) => m.version));
    const again = await migrate(client);
    assert.deepEqual(again.applied, []);
    const { rows } = await client.query('SELECT version, name FROM outbox.schema_migration ORDER BY version');
    assert.deepEqual(rows, OUTBOX_MIGRATIONS.map((m) => ({ version: m.version, name: m.name })));
    const tables = await client.query(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = 'outbox' ORDER BY 1",
    );
    assert.deepEqual(tables.rows.map((r) => r.table_name), ['attempt', 'index_baseline', 'job', 'job_edge', 'kind_slot', 'schedule_run', 'schema_migration', 'webhook_endpoint']);
    // Health (checkHealth, the dashboard) watches every table the outbox itself uses.
    assert.deepEqual([...OUTBOX_TABLES].sort(), tables.rows.map((r) => r.table_name).filter((t) => t !== 'schema_migration'));
  } finally {
    await client.end();
  }
});

test('two concurrent migrators apply each migration exactly once', async () => {
  const a = await freshClient();
  const url = `${server.url.replace(/\/postgres$/, '')}/migrate_${n}`;
  const b = new pg.Client({ connectionString: url });
  await b.connect();
  try {
    const [ra, rb] = await Promise.all([migrate(a), migrate(b)]);
    assert.deepEqual([...ra.applied, ...rb.applied].sort((x, y) => x - y), OUTBOX_MIGRATIONS.map((m) => m.version));
    const { rows } = await a.query('SELECT count(*)::int AS n FROM outbox.schema_migration');
    assert.equal(rows[0].n, OUTBOX_MIGRATIONS.length);
  } finally {
    await a.end();
    await b.end();
  }
});

test('a failing migration leaves nothing behind', async () => {
  const client = await freshClient();
  try {
    await client.query('CREATE SCHEMA outbox; CREATE TABLE outbox.job (id int)');
    await assert.rejects(migrate(client), /migration 1 \(outbox_tables\) failed: .*already exists/);
    const { rows } = await client.query("SELECT to_regclass('outbox.schema_migration') AS t, to_regclass('outbox.attempt') AS a");
    assert.deepEqual(rows[0], { t: null, a: null });
  } finally {
    await client.end();
  }
});

test('migrate refuses PostgreSQL older than 14 before touching anything', async () => {
  const seen: string[] = [];
  const fake = {
    async query(text: string) {
      seen.push(text);
      return { rows: [{ num: '130012', version: '13.12' }] };
    },
  };
  await assert.rejects(migrate(fake), (err: unknown) => {
    assert.ok(err instanceof UnsupportedServerError);
    assert.equal(err.code, 'unsupported_server');
    assert.match(err.message, /PostgreSQL 14 or newer.*13\.12/);
    return true;
  });
  assert.equal(seen.length, 1);
});

test(`server is ${process.env.POSTBOX_PG ?? 'embedded'}`, () => {
  assert.match(server.serverVersion, ({ debian15: /^15\./, embedded14: /^14\./, embedded: /^17\./ } as Record<string, RegExp>)[server.flavor]!);
});

test("deleting jobs deletes their attempts, in a named outbox too, including one a claim committed while the delete waited", async () => {
  const url = await server.createDatabase(`migrate_${++n}`);
  const a = new pg.Client({ connectionString: url });
  const b = new pg.Client({ connectionString: url });
  await a.connect();
  await b.connect();
  try {
    for (const [name, schema] of [[undefined, 'outbox'], ['billing', '"outbox_billing"']] as const) {
      await migrate(a, name === undefined ? {} : { name });
      const job = (id: string) =>
        a.query(`INSERT INTO ${schema}.job (id, kind, payload, due_at, created_at, updated_at) VALUES ($1, 'k', '{}', now(), now(), now())`, [id]);
      const attempt = (c: pg.Client, id: string, seq: number) =>
        c.query(`INSERT INTO ${schema}.attempt (job_id, seq, kind, started_at, lease_expires_at) VALUES ($1, $2, 'k', now(), now())`, [id, seq]);
      const attemptsOf = async (id: string) => (await a.query(`SELECT count(*)::int AS n FROM ${schema}.attempt WHERE job_id = $1`, [id])).rows[0].n;
      const [x, y, z] = ['0190a000-0000-7000-8000-000000000001', '0190a000-0000-7000-8000-000000000002', '0190a000-0000-7000-8000-000000000003'];
      await job(x);
      await job(y);
      await job(z);
      await attempt(a, x, 1);
      await attempt(a, x, 2);
      await attempt(a, y, 1);
      // By hand: only the deleted job's attempts go.
      await a.query(`DELETE FROM ${schema}.job WHERE id = $1`, [x]);
      assert.equal(await attemptsOf(x), 0);
      assert.equal(await attemptsOf(y), 1);
      // A claim (b) holds z's row and opens an attempt; the delete (a) waits for it, then still takes the attempt.
      await b.query('BEGIN');
      await b.query(`UPDATE ${schema}.job SET attempt_seq = 1 WHERE id = $1`, [z]);
      await attempt(b, z, 1);
      const deleting = a.query(`DELETE FROM ${schema}.job WHERE id = ANY($1::uuid[])`, [[y, z]]);
      await new Promise((resolve) => setTimeout(resolve, 200));
      await b.query('COMMIT');
      assert.equal((await deleting).rowCount, 2);
      assert.equal(await attemptsOf(y), 0);
      assert.equal(await attemptsOf(z), 0);
    }
  } finally {
    await a.end();
    await b.end();
  }
});
