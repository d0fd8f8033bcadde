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
      // The stuck one times out inside its query; the others' queries wait behind it on the
      // lane session. Replacing the session then lets one of them connect at the same time as
      // the drain's next statement: two connections, and the session keeps one.
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
  assert.ok(connector.opened() >= 2, `the session was replaced (${connector.opened()} connections)`);
  assert.equal(connector.ended(), connector.opened(), `${connector.opened()} connections opened, ${connector.ended()} ended`);
});
