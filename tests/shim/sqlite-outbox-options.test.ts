// createSqliteOutbox's options are checked and defaulted by the core, as createOutbox's are.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { defineJob, MemoryOutboxStore, ok } from 'postbox';
import { createSqliteOutbox } from 'postbox/durable-object';

test('createSqliteOutbox: the core refuses out-of-range options with invalid_config naming the field', () => {
  const store = new MemoryOutboxStore();
  for (const concurrency of [0, 101, 2.5]) {
    assert.throws(() => createSqliteOutbox({ store, jobs: [], concurrency }), (e: { code?: string; message?: string }) => e.code === 'invalid_config' && /concurrency/.test(e.message ?? ''));
  }
  assert.throws(() => createSqliteOutbox({ store, jobs: [], maxPayloadBytes: 2 * 1024 * 1024 }), (e: { code?: string; message?: string }) => e.code === 'invalid_config' && /maxPayloadBytes/.test(e.message ?? ''));
  assert.doesNotThrow(() => createSqliteOutbox({ store, jobs: [], concurrency: 100, maxPayloadBytes: 1024 }));
});

test('createSqliteOutbox refuses onTransition at once: a SQLite store cannot run user code inside its settlement', () => {
  const store = new MemoryOutboxStore();
  const options = { store, jobs: [], onTransition: async () => undefined };
  assert.throws(() => createSqliteOutbox(options), (e: { code?: string; message?: string }) => e.code === 'invalid_config' && /onTransition/.test(e.message ?? ''));
});

test('createSqliteOutbox: ok({ commit }) fails its job at once as commit_unsupported; no outcome and unclassified throws are the core\'s to classify', async () => {
  const store = new MemoryOutboxStore();
  const runs: Record<string, number> = {};
  const job = defineJob({
    kind: 'sqlite.outcomes',
    payload: z.object({ do: z.enum(['commit', 'nothing', 'throw']) }),
    timeoutMs: 1_000,
    async handle({ do: what }) {
      runs[what] = (runs[what] ?? 0) + 1;
      if (what === 'commit') return ok({ commit: async () => undefined });
      if (what === 'throw') throw new Error('boom');
      return undefined as never;
    },
  });
  const outbox = createSqliteOutbox({ store, jobs: [job] });
  const [commit, nothing, thrown] = await outbox.enqueueMany(undefined, job, [{ payload: { do: 'commit' } }, { payload: { do: 'nothing' } }, { payload: { do: 'throw' } }]);
  await outbox.drain(undefined);
  const view = async (r: typeof commit) => (await store.getJob(undefined, { id: (r as { id: string }).id }))!;
  // Dead after one run: a retry would only repeat the side effect, and the commit could never run.
  const dead = await view(commit);
  assert.deepEqual([dead.status, dead.attempts, dead.lastErrorCode], ['dead', 1, 'commit_unsupported']);
  assert.match(dead.lastErrorMessage ?? '', /cannot run user code inside its settlement transaction/);
  assert.equal(runs.commit, 1);
  const none = await view(nothing);
  assert.deepEqual([none.status, none.lastErrorCode], ['retrying', 'invalid_outcome']);
  const boom = await view(thrown);
  assert.deepEqual([boom.status, boom.lastErrorCode, boom.lastErrorMessage], ['retrying', 'unexpected', 'boom']);
});

test('createSqliteOutbox drains as a pipeline: a slot that frees starts the next job at once, not after its batch', async () => {
  const store = new MemoryOutboxStore();
  const finished: string[] = [];
  const job = defineJob({
    kind: 'sqlite.pipeline',
    payload: z.object({ name: z.string(), ms: z.number() }),
    timeoutMs: 5_000,
    async handle({ name, ms }) {
      await new Promise((r) => setTimeout(r, ms));
      finished.push(name);
      return ok();
    },
  });
  const outbox = createSqliteOutbox({ store, jobs: [job], concurrency: 2 });
  // Enqueued in this order and claimed oldest first: a and slow take the two slots.
  for (const [name, ms] of [['a', 20], ['slow', 600], ['c', 20]] as const) await outbox.enqueue(undefined, job, { payload: { name, ms } });
  const report = await outbox.drain(undefined);
  assert.equal(report.succeeded, 3);
  // A loop of batches (claim 2, run both, settle, claim again) would finish c after slow.
  assert.deepEqual(finished, ['a', 'c', 'slow']);
});

test('createSqliteOutbox raises the engine\'s events, redacts stored errors, and refuses ctx.db with unsupported', async () => {
  const store = new MemoryOutboxStore();
  const events: { type: string; jobId?: string }[] = [];
  const seen: string[] = [];
  const job = defineJob({
    kind: 'sqlite.events',
    payload: z.object({ do: z.enum(['db', 'secret']) }),
    timeoutMs: 1_000,
    retry: { maxAttempts: 1 },
    async handle({ do: what }, ctx) {
      if (what === 'db') {
        try {
          void ctx.db;
        } catch (error) {
          seen.push((error as { code?: string }).code ?? 'no code');
        }
        return ok();
      }
      throw new Error('token=abc123 rejected');
    },
  });
  const outbox = createSqliteOutbox({ store, jobs: [job], events: (e) => events.push(e as never), redactError: (m) => m.replace(/token=\S+/, 'token=[redacted]') });
  const [db, secret] = await outbox.enqueueMany(undefined, job, [{ payload: { do: 'db' } }, { payload: { do: 'secret' } }]);
  await outbox.drain(undefined);
  assert.deepEqual(seen, ['unsupported']);
  const dbId = (db as { id: string }).id;
  const secretId = (secret as { id: string }).id;
  assert.equal((await store.getJob(undefined, { id: dbId }))?.status, 'succeeded');
  const dead = (await store.getJob(undefined, { id: secretId }))!;
  assert.deepEqual([dead.status, dead.lastErrorMessage], ['dead', 'token=[redacted] rejected']);
  assert.deepEqual(events.filter((e) => e.type === 'job_settled').map((e) => e.jobId).sort(), [dbId, secretId].sort());
  assert.deepEqual(events.filter((e) => e.type === 'dead_letter').map((e) => e.jobId), [secretId]);
});

test('createSqliteOutbox enqueues by createOutbox\'s rules: key lengths, metadata, unstorable text, and a custom id that is not a UUID', async () => {
  const store = new MemoryOutboxStore();
  const job = defineJob({ kind: 'sqlite.enqueue', payload: z.object({ n: z.number() }), timeoutMs: 1_000, handle: async () => ok() });
  const outbox = createSqliteOutbox({ store, jobs: [job] });
  // The core's bound on keys (1,024 characters), named: nothing is written.
  await assert.rejects(outbox.enqueue(undefined, job, { payload: { n: 1 }, dedupeKey: 'k'.repeat(1_025) }), (e: { code?: string; message?: string }) => e.code === 'invalid_input' && /dedupeKey/.test(e.message ?? ''));
  await assert.rejects(outbox.enqueueMany(undefined, job, [{ payload: { n: 1 }, metadata: [1] as never }]), (e: { code?: string; message?: string }) => e.code === 'invalid_input' && /items\[0\]: metadata/.test(e.message ?? ''));
  // A text the database refuses is the item's own refusal, not the list's.
  const [nul, fine] = await outbox.enqueueMany(undefined, job, [{ payload: { n: 1 }, tenantKey: 'a\u0000b' }, { payload: { n: 2 } }]);
  assert.equal(nul!.status, 'invalid_payload');
  assert.equal(fine!.status, 'created');
  // Ids are UUID v7 by default (time-ordered, as createOutbox's).
  assert.match((fine as { id: string }).id, /^[0-9a-f]{8}-[0-9a-f]{4}-7/);
  const bad = createSqliteOutbox({ store, jobs: [job], generateId: () => 'job-1' });
  await assert.rejects(bad.enqueue(undefined, job, { payload: { n: 3 } }), (e: { code?: string }) => e.code === 'invalid_id');
  assert.equal((await store.countJobs(undefined, {})).pending, 1, 'only the one created job was written');
});

test('createSqliteOutbox with deploy versions: an older deploy\'s drain and nextDueAt leave a newer deploy\'s jobs alone', async () => {
  const store = new MemoryOutboxStore();
  const ran: string[] = [];
  const job = defineJob({
    kind: 'sqlite.versioned',
    payload: z.object({ by: z.string() }),
    timeoutMs: 1_000,
    async handle({ by }) {
      ran.push(by);
      return ok();
    },
  });
  const older = createSqliteOutbox({ store, jobs: [job], version: { id: 'v1', timestamp: '2026-12-01T00:00:00Z' } });
  const newer = createSqliteOutbox({ store, jobs: [job], version: { id: 'v2', timestamp: '2026-12-02T00:00:00Z' } });
  await newer.enqueue(undefined, job, { payload: { by: 'newer' } });
  await older.enqueue(undefined, job, { payload: { by: 'older' } });
  assert.equal((await older.drain(undefined)).succeeded, 1);
  assert.deepEqual(ran, ['older']);
  assert.equal(await older.nextDueAt(undefined), null, 'the newer deploy\'s job is not the older one\'s to wake for');
  assert.ok((await newer.nextDueAt(undefined)) !== null);
  assert.equal((await newer.drain(undefined)).succeeded, 1);
  assert.deepEqual(ran, ['older', 'newer']);
});

test('a store that keeps no dependencies refuses dependsOn, batches and cancelBatch with unsupported, and writes nothing', async () => {
  // The store contract makes `dependencies` optional: a store of one's own may leave it out.
  const store = new MemoryOutboxStore();
  Object.defineProperty(store, 'dependencies', { value: undefined });
  const job = defineJob({ kind: 'nodeps.step', payload: z.object({ n: z.number() }), timeoutMs: 1_000, handle: async () => ok() });
  const outbox = createSqliteOutbox({ store, jobs: [job] });
  const [parent] = await outbox.enqueueMany(undefined, job, [{ payload: { n: 1 } }]);
  const parentId = (parent as { id: string }).id;
  await assert.rejects(outbox.enqueue(undefined, job, { payload: { n: 2 }, dependsOn: [parentId] }), { code: 'unsupported' });
  await assert.rejects(outbox.enqueueMany(undefined, job, [{ payload: { n: 3 } }, { payload: { n: 4 }, dependsOn: [0] }]), { code: 'unsupported' });
  await assert.rejects(
    store.transaction(undefined, (tx) => outbox.batch(tx, { onComplete: { job, payload: { n: 5 } } }, async (m) => { await m.enqueue(job, { payload: { n: 6 } }); })),
    { code: 'unsupported' },
  );
  await assert.rejects(outbox.cancelBatch(undefined, parentId), { code: 'unsupported' });
  assert.equal((await store.countJobs(undefined, {})).pending, 1, 'only the first job, enqueued alone');
});
