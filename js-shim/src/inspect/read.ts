/**
 * The inspection path every operator read takes: a read-only transaction bounded by a
 * statement timeout. Internal: shared by `postbox/inspect` and `postbox/dashboard`.
 * @module
 */
import { runTransaction, type TransactionalDb } from '../stores/pg/db.js';
import { getCore } from '../core/core.js';
import { PostboxError, errorMessage } from '../errors.js';
import { checkOutboxName, schemaIdent } from '../name.js';
import type { Queryable } from '../types.js';

/** Options every read takes. */
export interface ReadOptions {
  /** Bound on each statement, ms: 1 to 2147483647. Default 30 s. */
  statementTimeoutMs?: number;
  /** A named outbox (`createOutbox({ name })`) to read; default the default outbox (schema `outbox`). */
  outbox?: string;
}

/**
 * Runs `fn` in a read-only transaction whose statements time out after `statementTimeoutMs`.
 * `fn` gets the outbox's schema as written in SQL (checked before anything runs).
 */
export async function readOnly<T>(db: TransactionalDb, opts: ReadOptions, fn: (q: Queryable, schema: string) => Promise<T>): Promise<T> {
  // The default and bounds are the core's (docs/ABI.md, pb_backlog `read`).
  let timeout: number;
  try {
    timeout = getCore().call<{ statementTimeoutMs: number }>('backlog', {
      op: 'read', ...(opts.statementTimeoutMs === undefined ? {} : { statementTimeoutMs: opts.statementTimeoutMs }),
    }).statementTimeoutMs;
  } catch (error) {
    throw new PostboxError('invalid_input', errorMessage(error).replace(/^core backlog: backlog: field /, ''));
  }
  const schema = schemaIdent(checkOutboxName(opts.outbox, 'outbox'));
  return runTransaction(db, async (q) => {
    await q.query('SET TRANSACTION READ ONLY');
    await q.query(`SET LOCAL statement_timeout = ${timeout}`);
    return fn(q, schema);
  });
}

export { tenantFilter } from '../stores/pg/store.js';
