// Type-level tests of the SQLite stores: both implement OutboxStore over Cloudflare's own
// handle types, the suite takes them, and createSqliteOutbox types payloads by the job and refuses a job
// that may return ok({ commit }).
import { createOutbox, defer, defineJob, fail, ok, retry, type OutboxStore } from 'postbox';
import { createPgConnector } from 'postbox/pg';
import { createD1OutboxStore, createSqliteOutbox, type D1Transaction } from 'postbox/d1';
import { createDurableObjectOutboxStore } from 'postbox/durable-object';
import { outboxStoreContract } from 'postbox/testing';
import { z } from 'zod';

declare const db: D1Database;
declare const storage: DurableObjectStorage;

const d1: OutboxStore<D1Database, D1Transaction | D1Database> = createD1OutboxStore({ name: 'billing' });
const durable: OutboxStore<DurableObjectStorage> = createDurableObjectOutboxStore();
outboxStoreContract({ makeStore: (name) => createD1OutboxStore({ name }), db: () => db, runBatch: (h, statements) => h.batch(statements as D1PreparedStatement[]) });
outboxStoreContract({ makeStore: (name) => createDurableObjectOutboxStore({ name }), db: () => storage });

const mail = defineJob({ kind: 'mail', payload: z.object({ to: z.string() }), timeoutMs: 1_000, handle: async () => ok() });
const outbox = createSqliteOutbox({ store: createD1OutboxStore(), jobs: [mail] });
void outbox.enqueueStatements(db, mail, [{ payload: { to: 'a' } }]);
// @ts-expect-error: the payload is the job's
void outbox.enqueueStatements(db, mail, [{ payload: { to: 1 } }]);

// A job that may commit work in its settlement is refused where it meets a SQLite store.
const commits = defineJob({
  kind: 'audit',
  payload: z.object({ id: z.string() }),
  timeoutMs: 1_000,
  handle: async ({ id }) => (id ? ok({ commit: async (tx) => tx.query('SELECT 1') }) : retry({ code: 'no_id' })),
});
// @ts-expect-error: ok({ commit }) needs a store that runs user code in its settlement (PostgreSQL)
createSqliteOutbox({ store: createD1OutboxStore(), jobs: [mail, commits] });
// Every other outcome is fine, and so is the same job on PostgreSQL.
const plain = defineJob({ kind: 'plain', payload: z.object({}), timeoutMs: 1_000, handle: async (_p, ctx) => (ctx.attempt > 2 ? fail({ code: 'x' }) : ctx.attempt > 1 ? defer({ code: 'y', after: 1 }) : ok()) });
createSqliteOutbox({ store: createDurableObjectOutboxStore(), jobs: [mail, plain] });
createOutbox({ jobs: [commits, plain], connect: createPgConnector('postgres://u:p@h/db') });

void createDurableObjectOutboxStore().transaction(storage, async (tx) => tx.sql.exec('SELECT 1').toArray());

export { d1, durable };
