// The SQLite stores' tables (js-shim/src/stores/sqlite/schema.ts, a translation of migrations/ into
// SQLite types) checked against the migrations as PostgreSQL applies them: the same tables, the
// same columns with the same NOT NULLs and primary keys, the same indexes (name, columns,
// unique, partial). SQLite's side is read from Miniflare's D1 inside workerd (PRAGMA), the
// PostgreSQL side from the catalog of a migrated database. The differences the designs mean
// are listed below with their reasons; any other is drift and fails, and so does a listed one
// that went away (the list must say what is true).
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { migrate } from 'postbox/sql';
import { startPostgres, type PgServer } from '../support/postgres.ts';
import { startWorker, type TestWorker } from '../support/worker.ts';

interface Column {
  name: string;
  notNull: boolean;
  pk: boolean;
}
interface Index {
  name: string;
  unique: boolean;
  partial: boolean;
  columns: string[];
}
interface Table {
  columns: Column[];
  indexes: Index[];
  foreignKeys: { column: string; references: string; onDelete: string }[];
}

/** What the two stores mean to differ in, and why. */
const INTENDED: Record<string, string> = {
  'table index_baseline: postgresql only': 'index compaction after a held horizon (REINDEX CONCURRENTLY) is PostgreSQL\'s alone',
  'table guard: sqlite only': 'the one row a D1 batch\'s guard statements rewrite, so a failed guard aborts the batch (stores/sqlite/statements.ts)',
  'column job.started_at: postgresql only': 'PostgreSQL writes an attempt once, at its settle (0006), so the job holds the running attempt\'s start; SQLite opens the attempt row at the claim, in-process, with its start',
  'not null attempt.lease_expires_at: postgresql null, sqlite not null': 'the same: PostgreSQL\'s attempt row is written at settle, when a released attempt has no lease to record',
  'table kind_slot: postgresql only': 'flow limits: PostgreSQL\'s concurrent claims take slot rows (0009); SQLite has one writer, so its claim counts running jobs and recent starts instead',
  'column job_edge.counted: sqlite only': 'a settle here is several statements of one batch, so each parent\'s end is counted into its child once by marking the edge that carried it (stores/sqlite/dependencies.ts); PostgreSQL counts in the one statement that ends the parent',
  'index attempt_kind_started: sqlite only': 'flow limits: SQLite\'s limited claim counts a kind\'s starts in its rate window from the attempt rows opened at claim',
  'index attempt_held: sqlite only': 'flow limits: an attempt an operator cancelled while it ran keeps its lease, and SQLite\'s limited claim counts it until then; PostgreSQL keeps the slot row held instead (kind_slot.held_until)',
  'foreign key attempt.job_id: sqlite only': 'deleting a job deletes its attempts: SQLite by the key\'s ON DELETE CASCADE, PostgreSQL by a statement-level trigger (0005), which is cheaper per claimed job than the key\'s row checks',
};

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
let server: PgServer;
let worker: TestWorker;
before(async () => {
  server = await startPostgres();
  worker = await startWorker({ entry: path.join(fixtures, 'sqlite-stores-worker.ts'), d1Databases: ['DB'] });
});
after(async () => {
  await worker?.dispose();
  await server?.stop();
});

/** The migrated `outbox` schema as PostgreSQL's catalog describes it, in the worker's shape. */
async function postgresSchema(): Promise<Record<string, Table>> {
  const client = new pg.Client({ connectionString: await server.createDatabase('sqlite_schema') });
  await client.connect();
  try {
    await migrate(client);
    const { rows: columns } = await client.query<{ table: string; name: string; notNull: boolean; pk: boolean }>(
      `SELECT c.table_name AS table, c.column_name AS name, c.is_nullable = 'NO' AS "notNull",
              EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
                       WHERE i.indrelid = ('outbox.' || c.table_name)::regclass AND i.indisprimary AND a.attname = c.column_name) AS pk
         FROM information_schema.columns c JOIN information_schema.tables t USING (table_schema, table_name)
        WHERE c.table_schema = 'outbox' AND t.table_type = 'BASE TABLE' ORDER BY c.table_name, c.ordinal_position`,
    );
    const { rows: indexes } = await client.query<{ table: string; name: string; unique: boolean; partial: boolean; columns: string[] }>(
      `SELECT t.relname AS table, x.relname AS name, i.indisunique AS unique, i.indpred IS NOT NULL AS partial,
              ARRAY(SELECT a.attname FROM unnest(i.indkey) WITH ORDINALITY k(attnum, n) LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum ORDER BY k.n)::text[] AS columns -- an expression column (attnum 0) is null, as SQLite lists it
         FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_class x ON x.oid = i.indexrelid JOIN pg_namespace n ON n.oid = t.relnamespace
        WHERE n.nspname = 'outbox' AND NOT i.indisprimary`,
    );
    const { rows: keys } = await client.query<{ table: string; column: string; references: string; onDelete: string }>(
      `SELECT t.relname AS table, a.attname AS column, r.relname || '.' || ra.attname AS references, c.confdeltype AS "onDelete"
         FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid JOIN pg_class r ON r.oid = c.confrelid JOIN pg_namespace n ON n.oid = t.relnamespace
         JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1] JOIN pg_attribute ra ON ra.attrelid = c.confrelid AND ra.attnum = c.confkey[1]
        WHERE n.nspname = 'outbox' AND c.contype = 'f'`,
    );
    const schema: Record<string, Table> = {};
    const table = (name: string) => (schema[name] ??= { columns: [], indexes: [], foreignKeys: [] });
    for (const { table: t, ...c } of columns) table(t).columns.push(c);
    for (const { table: t, ...i } of indexes) table(t).indexes.push(i);
    for (const { table: t, ...k } of keys) table(t).foreignKeys.push(k);
    return schema;
  } finally {
    await client.end();
  }
}

/** Every difference between the two, one line each. */
function differences(postgres: Record<string, Table>, sqlite: Record<string, Table>): string[] {
  const out: string[] = [];
  for (const name of new Set([...Object.keys(postgres), ...Object.keys(sqlite)])) {
    const p = postgres[name];
    const s = sqlite[name];
    if (!p || !s) {
      out.push(`table ${name}: ${p ? 'postgresql' : 'sqlite'} only`);
      continue;
    }
    for (const column of new Set([...p.columns, ...s.columns].map((c) => c.name))) {
      const pc = p.columns.find((c) => c.name === column);
      const sc = s.columns.find((c) => c.name === column);
      if (!pc || !sc) out.push(`column ${name}.${column}: ${pc ? 'postgresql' : 'sqlite'} only`);
      else {
        if (pc.notNull !== sc.notNull) out.push(`not null ${name}.${column}: postgresql ${pc.notNull ? 'not null' : 'null'}, sqlite ${sc.notNull ? 'not null' : 'null'}`);
        if (pc.pk !== sc.pk) out.push(`primary key ${name}.${column}: ${pc.pk ? 'postgresql' : 'sqlite'} only`);
      }
    }
    for (const index of new Set([...p.indexes, ...s.indexes].map((i) => i.name))) {
      const pi = p.indexes.find((i) => i.name === index);
      const si = s.indexes.find((i) => i.name === index);
      if (!pi || !si) out.push(`index ${index}: ${pi ? 'postgresql' : 'sqlite'} only`);
      else if (JSON.stringify(pi) !== JSON.stringify(si)) out.push(`index ${index}: postgresql ${JSON.stringify(pi)}, sqlite ${JSON.stringify(si)}`);
    }
    for (const key of new Set([...p.foreignKeys, ...s.foreignKeys].map((k) => k.column))) {
      const pk = p.foreignKeys.find((k) => k.column === key);
      const sk = s.foreignKeys.find((k) => k.column === key);
      if (!pk || !sk) out.push(`foreign key ${name}.${key}: ${pk ? 'postgresql' : 'sqlite'} only`);
    }
  }
  return out.sort();
}

test('the SQLite tables are the migrations\' tables, but for the differences the designs mean', async () => {
  const res = await worker.fetch('/schema');
  assert.equal(res.status, 200, await res.clone().text());
  const sqlite = (await res.json()) as Record<string, Table & { columns: (Column & { generated?: boolean })[] }>;
  for (const t of Object.values(sqlite)) t.columns = t.columns.map(({ name, notNull, pk }) => ({ name, notNull, pk: Boolean(pk) }));
  const postgres = await postgresSchema();
  // Both sides are real: the job table, its columns and its claim index are there on each.
  for (const side of [postgres, sqlite]) {
    assert.ok(side.job?.columns.some((c) => c.name === 'attempt_seq'));
    assert.ok(side.job?.indexes.some((i) => i.name === 'job_claimable' && i.partial));
  }
  assert.deepEqual(differences(postgres, sqlite), Object.keys(INTENDED).sort());
});
