/**
 * Postbox: a transactional outbox for PostgreSQL on Cloudflare Workers. Every scheduling,
 * retry, lease and settlement decision is made by a C++ core compiled to WebAssembly.
 * @module
 */
export { defineJob, defineJobFor, ok, retry, fail, cancel, defer, defaultClassify, type JobSpec } from './jobs.js';
export { createOutbox, type Outbox, type StrictOutbox, type TxBatch, type TxEnqueue, type TxEnqueueMany, type OperateResult, type TenantScope, type RunReport } from './outbox.js';
export type { BatchCancelled, BatchCompletion, BatchCreated, BatchMembers, BatchOptions } from './engine/batch.js';
export { runDrain, runConsumer, runSweep, runRecovery, type RunDrainOptions, type ConsumerOptions, type SweepOptions, type SweepReport } from './consumer.js';
export type { OutboxOptions, TransitionInfo } from './config.js';
export { createOutboxes, isOutboxFleet, type OutboxFleet, type OutboxesOptions, type DatabaseOptions, type FleetEvent } from './fleet.js';
export { allowedActions, operateMatching, type OperatorAction, type OperateMatchingOptions, type OperateMatchingReport } from './operate.js';
export { PostboxError, EnqueueRefusedError, type PostboxErrorCode, type CoreErrorCode } from './errors.js';
export type { TransactionalDb } from './stores/pg/db.js';
export type * from './types.js';
export { MemoryOutboxStore, MemoryOutboxDatabase, type MemoryOutboxStoreOptions } from './stores/memory.js';
export { PostgresOutboxStore, postgresOutboxStore } from './stores/pg/store.js';
export type * from './stores/contract.js';
