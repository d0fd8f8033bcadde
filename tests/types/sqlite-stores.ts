// Type-level tests of the SQLite stores: both implement OutboxStore over Cloudflare's own
// handle types, the suite takes them, and createSqliteOutbox types payloads by the job.
import { defineJob, ok, type OutboxStore } from 'postbox';
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
void createDurableObjectOutboxStore().transaction(storage, async (tx) => tx.sql.exec('SELECT 1').toArray());

export { d1, durable };
