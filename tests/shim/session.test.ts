// The lane session's connections in Node against a real PostgreSQL: every connection a drain
// opens is ended by the time the drain returns, even when a handler stuck in a query makes the
// session replace its connection while others are queued on it.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { z } from 'zod';
import { createOutbox, defineJob, ok, type Connector } from 'postbox';
import { createPgConnector } from 'postbox/pg';
import { migrate } from 'postbox/sql';
import { runUntilIdle } from 'postbox/testing';
import { startPostgres, withClient, type PgServer } from '../support/postgres.ts';

let server: PgServer;
let url: string;

before(async () => {
  server = await startPostgres();
  url = await server.createDatabase('session');
  await withClient(url, (c) => migrate(c));
});
after(async () => {
  await server?.stop();
});

/** A connector that counts the connections it opened and the ones ended (closed or destroyed). */
function counting(connect: Connector): { connect: Connector; opened: () => number; ended: () => number } {
  let opened = 0;
  let ended = 0;
  return {
    opened: () => opened,
    ended: () => ended,
    async connect() {
      const conn = await connect();
      opened++;
      let done = false;
      const end = (f: () => Promise<void>) => async () => {
        if (!done) ended++;
        done = true;
        await f();
      };
      return { ...conn, close: end(conn.close), destroy: end(conn.destroy) };
    },
  };
}

test('a handler stuck in a query past its timeout leaves no connection open once the drain returns', async () => {
  const job = defineJob({
    kind: 'session.stuck',
    payload: z.object({ stuck: z.boolean() }),
    timeoutMs: 1_000,
    async handle({ stuck }, ctx) {
      // The stuck one times out inside its query on a handler session, which is then dropped;
      // the others' queries run on other handler sessions beside the lane's.
      await ctx.db.query(stuck ? 'SELECT pg_sleep(3)' : 'SELECT 1');
      return ok();
    },
  });
  const connector = counting(createPgConnector(url));
  const outbox = createOutbox({ jobs: [job], connect: connector.connect, concurrency: 4 });
  await withClient(url, async (c) => {
    await outbox.enqueue(c, job, { payload: { stuck: true } });
    for (let i = 0; i < 3; i++) await outbox.enqueue(c, job, { payload: { stuck: false } });
  });
  const report = await runUntilIdle(outbox);
  assert.equal(report.claimed, 4);
  assert.ok(connector.opened() >= 2, `handler sessions beside the lane's (${connector.opened()} connections)`);
  assert.equal(connector.ended(), connector.opened(), `${connector.opened()} connections opened, ${connector.ended()} ended`);
});

test('a caller queued before replace() never runs inside a newer caller\'s transaction', async () => {
  const { LaneSession } = await import('../../js-shim/src/engine/session.ts');
  await withClient(url, (c) => c.query('CREATE TABLE IF NOT EXISTS public.order_check (note text)'));
  const session = new LaneSession(createPgConnector(url));
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  // The first caller holds the session (stuck, say, in a handler past its timeout)...
  const stuck = session.exclusive(() => sleep(400));
  // ...the second waits behind it on the same connection...
  const queued = session.exclusive((q) => q.query(`INSERT INTO public.order_check VALUES ('queued')`));
  // ...the drain gives up on that connection and a newer caller opens a transaction on the next.
  await session.replace();
  let inTx!: () => void;
  const started = new Promise<void>((r) => (inTx = r));
  const rolledBack = session
    .transaction(async (q) => {
      await q.query(`INSERT INTO public.order_check VALUES ('in_tx')`);
      inTx();
      await sleep(800); // the stuck caller ends, and the queued one comes up, meanwhile
      throw new Error('rolled back on purpose');
    })
    .catch((e: Error) => e.message);
  await started;
  await stuck;
  assert.equal(await rolledBack, 'rolled back on purpose');
  await queued;
  await session.close();
  // The queued insert ran after the transaction, not inside it: its row survived the rollback.
  const notes = await withClient(url, async (c) => (await c.query('SELECT note FROM public.order_check')).rows.map((r) => r.note));
  assert.deepEqual(notes, ['queued']);
});
