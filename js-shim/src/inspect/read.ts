/**
 * The inspection path every operator read takes: a read-only transaction bounded by a
 * statement timeout. Internal: shared by `postbox/inspect` and `postbox/dashboard`.
 * @module
 */
import { runTransaction, type TransactionalDb } from '../db.js';
import { PostboxError } from '../errors.js';
import { checkOutboxName, schemaIdent } from '../name.js';
import type { Queryable } from '../types.js';

/** Options every read takes. */
export interface ReadOptions {
  /** Bound on each statement, ms. Default 30 s. */
  statementTimeoutMs?: number;
  /** A named outbox (`createOutbox({ name })`) to read; default the default outbox (schema `outbox`). */
  outbox?: string;
}

/**
 * Runs `fn` in a read-only transaction whose statements time out after `statementTimeoutMs`.
 * `fn` gets the outbox's schema as written in SQL (checked before anything runs).
 */
export async function readOnly<T>(db: TransactionalDb, opts: ReadOptions, fn: (q: Queryable, schema: string) => Promise<T>): Promise<T> {
  const timeout = opts.statementTimeoutMs ?? 30_000;
  if (!Number.isInteger(timeout) || timeout <= 0) throw new PostboxError('invalid_input', 'statementTimeoutMs must be a positive integer');
  const schema = schemaIdent(checkOutboxName(opts.outbox, 'outbox'));
  return runTransaction(db, async (q) => {
    await q.query('SET TRANSACTION READ ONLY');
    await q.query(`SET LOCAL statement_timeout = ${timeout}`);
    return fn(q, schema);
  });
}

export { tenantFilter } from '../store/postgres.js';
