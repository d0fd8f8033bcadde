// enqueueMany's public API in Node against a real PostgreSQL: every database handle
// `outbox.transaction` and `outbox.enqueueMany` accept, strict mode, the caps, statement
// counts, and a dedupe key raced by a concurrent transaction.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { drizzle } from 'drizzle-orm/node-postgres';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { z } from 'zod';
import { createOutbox, defineJob, EnqueueRefusedError, ok, PostboxError } from 'postbox';
import { createPgConnector } from 'postbox/pg';
import { migrate } from 'postbox/sql';
import { startPostgres, type PgServer } from '../support/postgres.ts';

let server: PgServer;
let url: string;
let pool: pg.Pool;

before(async () => {
  server = await startPostgres();
  url = await server.createDatabase('enqueue_many');
  pool = new pg.Pool({ connectionString: url, max: 4 });
  const client = await pool.connect();
  await migrate(client);
  await client.query('CREATE TABLE public.note (id serial PRIMARY KEY, body text NOT NULL)');
  client.release();
});
after(async () => {
  await pool?.end();
  await server?.stop();
});
beforeEach(async () => {
  await pool.query('DELETE FROM outbox.job; DELETE FROM public.note');
});

const note = defineJob({ kind: 'many.note', payload: z.object({ body: z.string() }), timeoutMs: 5_000, handle: async () => ok() });
const other = defineJob({ kind: 'many.other', payload: z.object({ body: z.string() }), timeoutMs: 5_000, handle: async () => ok() });
const outbox = (opts: { strictEnqueue?: true } = {}) => createOutbox({ jobs: [note, other], connect: createPgConnector(url), ...opts });
const count = async () => (await pool.query('SELECT count(*)::int AS n FROM outbox.job')).rows[0].n as number;
const items = (n: number, prefix = 'i') => Array.from({ length: n }, (_, i) => ({ payload: { body: `${prefix}${i}` } }));

/** A pg client whose statements are counted (the outbox's own: those touching outbox.job). */
async function countingClient() {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const seen = { outbox: 0 };
  const query = client.query.bind(client) as (...args: any[]) => any;
  (client as any).query = (...args: any[]) => {
    if (/outbox\.job/.test(typeof args[0] === 'string' ? args[0] : args[0].text)) seen.outbox++;
    return query(...args);
  };
  return { client, seen };
}

describe('enqueueMany on every handle', () => {
  test('transaction callbacks of a Pool, a Client, drizzle and Kysely: commit keeps the list, a throw drops it', async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const kysely = new Kysely<any>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 1 }) }) });
    const handles: [string, any][] = [['pool', pool], ['client', client], ['drizzle', drizzle(pool)], ['kysely', kysely]];
    for (const [name, db] of handles) {
      const before = await count();
      const results = await outbox().transaction(db, (_tx, _enqueue, enqueueMany) => enqueueMany(note, items(3, name)));
      assert.deepEqual(results.map((r) => r.status), ['created', 'created', 'created'], name);
      assert.equal(await count(), before + 3, name);
      await assert.rejects(outbox().transaction(db, async (_tx, _enqueue, enqueueMany) => {
        await enqueueMany(note, items(3, `${name}-rolled-back`));
        throw new Error('abort');
      }), /abort/);
      assert.equal(await count(), before + 3, `${name}: rolled back`);
    }
    // The caller's own transaction handle works with outbox.enqueueMany too.
    await kysely.transaction().execute(async (trx) => {
      assert.equal((await outbox().enqueueMany(trx, note, items(2, 'kysely-tx'))).length, 2);
    });
    await drizzle(pool).transaction(async (tx) => {
      assert.equal((await outbox().enqueueMany(tx, note, items(2, 'drizzle-tx'))).length, 2);
    });
    assert.equal(await count(), handles.length * 3 + 4);
    await client.end();
    await kysely.destroy();
  });

  test('one statement per call, whatever the length; nothing to write, no statement', async () => {
    const { client, seen } = await countingClient();
    await client.query('BEGIN');
    assert.equal((await outbox().enqueueMany(client, note, items(1000))).length, 1000);
    assert.equal(seen.outbox, 1);
    assert.equal((await outbox().enqueueMany(client, note, items(1))).length, 1);
    assert.equal(seen.outbox, 2);
    const refused = await outbox().enqueueMany(client, note, [{ payload: { body: 1 as unknown as string } }]);
    assert.equal(refused[0]!.status, 'invalid_payload');
    assert.deepEqual(await outbox().enqueueMany(client, note, []), []);
    assert.equal(seen.outbox, 2);
    await client.query('COMMIT');
    await client.end();
  });

  test('dedupe: the first of a repeated key wins; keys are per tenant; a key of another kind conflicts', async () => {
    const [held] = await outbox().transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(other, [{ payload: { body: 'o' }, dedupeKey: 'other' }]));
    const results = await outbox().transaction(pool, (_tx, _enqueue, enqueueMany) =>
      enqueueMany(note, [
        { payload: { body: 'a' }, dedupeKey: 'k' },
        { payload: { body: 'b' }, dedupeKey: 'k' },
        { payload: { body: 'c' }, dedupeKey: 'k', tenantKey: 't' },
        { payload: { body: 'd' }, dedupeKey: 'other' },
      ]),
    );
    assert.equal(held!.status, 'created');
    assert.deepEqual(results.map((r) => r.status), ['created', 'exists', 'created', 'dedupe_conflict']);
    assert.equal((results[1] as { id: string }).id, (results[0] as { id: string }).id);
    assert.deepEqual(results[3], { status: 'dedupe_conflict', reason: 'kind', existingKind: 'many.other' });
    const again = await outbox().transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(note, [{ payload: { body: 'x' }, dedupeKey: 'k' }]));
    assert.deepEqual(again[0], { status: 'exists', id: (results[0] as { id: string }).id, kind: 'many.note' });
    assert.deepEqual((await pool.query(`SELECT payload FROM outbox.job WHERE dedupe_key = 'k' AND tenant_key IS NULL`)).rows, [{ payload: { body: 'a' } }]);
  });

  test('a key a concurrent transaction commits meanwhile is found with one more statement', async () => {
    const first = new pg.Client({ connectionString: url });
    await first.connect();
    const { client: second, seen } = await countingClient();
    await first.query('BEGIN');
    const [mine] = await outbox().enqueueMany(first, note, [{ payload: { body: 'first' }, dedupeKey: 'race' }]);
    await second.query('BEGIN');
    // Blocks on the uncommitted key until `first` commits; its snapshot predates that commit.
    const pending = outbox().enqueueMany(second, note, [{ payload: { body: 'second' }, dedupeKey: 'race' }, { payload: { body: 'free' } }]);
    await new Promise((r) => setTimeout(r, 200));
    await first.query('COMMIT');
    const results = await pending;
    await second.query('COMMIT');
    assert.deepEqual(results.map((r) => r.status), ['exists', 'created']);
    assert.equal((results[0] as { id: string }).id, (mine as { id: string }).id);
    assert.equal(seen.outbox, 2);
    await first.end();
    await second.end();
  });
});

describe('enqueueMany refusals and limits', () => {
  test('strictEnqueue names the first refused item; an invalid payload writes nothing', async () => {
    await assert.rejects(
      outbox({ strictEnqueue: true }).transaction(pool, async (tx, _enqueue, enqueueMany) => {
        await tx.query(`INSERT INTO public.note (body) VALUES ('business')`);
        await enqueueMany(note, [{ payload: { body: 'ok' } }, { payload: { body: 'ok' } }, { payload: { body: 7 as unknown as string } }, { payload: {} as { body: string } }]);
      }),
      (e: unknown) => e instanceof EnqueueRefusedError && e.index === 2 && e.result.status === 'invalid_payload' && /items\[2\]/.test(e.message),
    );
    assert.equal(await count(), 0);
    assert.equal((await pool.query('SELECT count(*)::int AS n FROM public.note')).rows[0].n, 0);
    await outbox().transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(other, [{ payload: { body: 'o' }, dedupeKey: 'held' }]));
    await assert.rejects(
      outbox({ strictEnqueue: true }).transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(note, [{ payload: { body: 'a' } }, { payload: { body: 'b' }, dedupeKey: 'held' }])),
      (e: unknown) => e instanceof EnqueueRefusedError && e.index === 1 && e.result.status === 'dedupe_conflict',
    );
    assert.equal(await count(), 1, 'the transaction rolled back');
  });

  test('more than 5000 items, or more than 16 MiB of payloads, is too_large and writes nothing', async () => {
    const tooLarge = (pattern: RegExp) => (e: unknown) => e instanceof PostboxError && e.code === 'too_large' && pattern.test(e.message);
    await assert.rejects(outbox().transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(note, items(5001))), tooLarge(/at most 5000 items/));
    const big = 'x'.repeat(262_000);
    const heavy = Array.from({ length: 65 }, () => ({ payload: { body: big } }));
    await assert.rejects(outbox().transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(note, heavy)), tooLarge(/16777216 bytes/));
    // Even when the schema refuses some of them, the list's length is what counts.
    await assert.rejects(outbox().transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(note, [...items(5000), { payload: {} as { body: string } }])), tooLarge(/5000/));
    assert.equal(await count(), 0);
    assert.equal((await outbox().transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(note, items(5000)))).length, 5000);
  });

  test('a bad option is a typed error naming the item', async () => {
    const bad = async (item: object, pattern: RegExp) =>
      assert.rejects(
        outbox().transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(note, [...items(2), item as { payload: { body: string } }])),
        (e: unknown) => e instanceof PostboxError && e.code === 'invalid_input' && pattern.test(e.message),
      );
    await bad({ payload: { body: 'x' }, delayMs: 1.5 }, /items\[2\]: delayMs/);
    await bad({ payload: { body: 'x' }, dedupeKey: '' }, /items\[2\]: dedupeKey/);
    await bad({ payload: { body: 'x' }, delayMs: -1 }, /items\[2\]\.delayMs/);
    await assert.rejects(outbox().enqueueMany(pool, note, 'nope' as never), (e: unknown) => e instanceof PostboxError && /array/.test(e.message));
    assert.equal(await count(), 0);
  });
});
