// createSqliteOutbox's options are checked and defaulted by the core, as createOutbox's are.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryOutboxStore } from 'postbox';
import { createSqliteOutbox } from 'postbox/durable-object';

test('createSqliteOutbox: the core refuses out-of-range options with invalid_config naming the field', () => {
  const store = new MemoryOutboxStore();
  for (const concurrency of [0, 101, 2.5]) {
    assert.throws(() => createSqliteOutbox({ store, jobs: [], concurrency }), (e: { code?: string; message?: string }) => e.code === 'invalid_config' && /concurrency/.test(e.message ?? ''));
  }
  assert.throws(() => createSqliteOutbox({ store, jobs: [], maxPayloadBytes: 2 * 1024 * 1024 }), (e: { code?: string; message?: string }) => e.code === 'invalid_config' && /maxPayloadBytes/.test(e.message ?? ''));
  assert.doesNotThrow(() => createSqliteOutbox({ store, jobs: [], concurrency: 100, maxPayloadBytes: 1024 }));
});
