// The array literals the PostgreSQL store writes itself for settlement batches (plainArray,
// textArray) read back from a real server exactly as given: quotes, backslashes, braces,
// commas, the word NULL, empty and non-ASCII text, nulls, uuids, numbers and booleans.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { plainArray, textArray } from '../../js-shim/src/stores/pg/store.ts';
import { startPostgres, type PgServer } from '../support/postgres.ts';

let server: PgServer;
let client: pg.Client;
before(async () => {
  server = await startPostgres();
  client = new pg.Client({ connectionString: await server.createDatabase('arrays') });
  await client.connect();
});
after(async () => {
  await client?.end();
  await server?.stop();
});

const id = <T>(v: T) => v;

test('textArray: every text comes back as written, and null as null', async () => {
  const texts = ['plain', '', 'NULL', 'null', 'a "quoted" word', 'back\\slash', '\\"', '{braces}', 'a,b', ' spaced ', 'line\nbreak', 'tab\there', 'ünïcødé ✓', '😀', null, '"', '\\'];
  const { rows } = await client.query('SELECT $1::text[] AS a', [textArray(texts, id)]);
  assert.deepEqual(rows[0].a, texts);
  assert.deepEqual((await client.query('SELECT $1::text[] AS a', [textArray([], id)])).rows[0].a, []);
});

test('plainArray: uuids, whole numbers, booleans and nulls come back as written', async () => {
  const ids = ['0190a000-0000-7000-8000-000000000001', null, 'ffffffff-ffff-ffff-ffff-ffffffffffff'];
  const numbers = [0, 1, 1_700_000_000_000, 9_007_199_254_740_991, null];
  const flags = [true, false, null];
  const { rows } = await client.query('SELECT $1::uuid[] AS u, $2::bigint[] AS n, $3::bool[] AS b', [plainArray(ids, id), plainArray(numbers, id), plainArray(flags, id)]);
  assert.deepEqual(rows[0].u, ids);
  assert.deepEqual(rows[0].n, numbers.map((n) => (n === null ? null : String(n))));
  assert.deepEqual(rows[0].b, flags);
});
