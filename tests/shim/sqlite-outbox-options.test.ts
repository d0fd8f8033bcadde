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
