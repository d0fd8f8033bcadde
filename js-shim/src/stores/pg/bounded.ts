// One operator action's whole life under one bound: connecting, its transaction and closing.
// A server that never answers (a wedged proxy, a stopped backend) or a lock held elsewhere
// must fail the action within the bound, and leave no connection behind.
import { PostboxError, errorMessage } from '../../errors.js';
import type { Connector, LaneConnection, LaneDb } from '../../types.js';

const timeoutError = (what: string, timeoutMs: number, cause?: unknown): PostboxError =>
  new PostboxError('timeout', `${what}: not done within operationTimeoutMs (${timeoutMs} ms)${cause === undefined ? '' : `: ${errorMessage(cause)}`}`, cause === undefined ? undefined : { cause });

/**
 * Runs `fn` in one transaction on a connection of its own. Everything (acquisition, the SQL
 * under `statement_timeout` and `lock_timeout` of `timeoutMs`, COMMIT and close) ends within
 * `timeoutMs`: when it passes, the connection is destroyed (a connect still under way is
 * aborted through the connector's signal, or destroyed when it lands) and the call rejects
 * with `PostboxError('timeout')`, the transaction rolled back by the server.
 */
export async function boundedTransaction<T>(connect: Connector, timeoutMs: number, what: string, fn: (q: LaneDb) => Promise<T>): Promise<T> {
  const abort = new AbortController();
  let conn: LaneConnection | null = null;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      abort.abort();
      // Not awaited: a connection that stopped answering may never finish closing.
      if (conn) void conn.destroy().catch(() => undefined);
      reject(timeoutError(what, timeoutMs));
    }, timeoutMs);
  });
  const work = (async () => {
    let c: LaneConnection;
    try {
      c = await connect({ signal: abort.signal });
    } catch (error) {
      if (abort.signal.aborted) throw timeoutError(what, timeoutMs, error);
      throw new PostboxError('connection_failed', `could not open an outbox connection: ${errorMessage(error)}`, { cause: error });
    }
    // A connector that ignored the signal answered after the bound: nobody will use it.
    if (abort.signal.aborted) {
      void c.destroy().catch(() => undefined);
      throw timeoutError(what, timeoutMs);
    }
    conn = c;
    let result: T;
    try {
      await c.db.query('BEGIN');
      const bound = String(timeoutMs);
      await c.db.query(`SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $1, true)`, [bound]);
      result = await fn(c.db);
      await c.db.query('COMMIT');
    } catch (error) {
      await c.db.query('ROLLBACK').catch(() => undefined);
      if (c.isBroken?.() || abort.signal.aborted) await c.destroy().catch(() => undefined);
      else await c.close().catch(() => undefined);
      const code = (error as { code?: unknown } | null)?.code;
      // 57014: statement_timeout cancelled it; 55P03: lock_timeout gave up on a lock.
      if (code === '57014' || code === '55P03' || abort.signal.aborted) throw timeoutError(what, timeoutMs, error);
      throw error;
    }
    if (c.isBroken?.()) await c.destroy().catch(() => undefined);
    else await c.close().catch(() => undefined);
    return result;
  })();
  // The loser of the race must not surface as an unhandled rejection.
  work.catch(() => undefined);
  try {
    return await Promise.race([work, expired]);
  } finally {
    clearTimeout(timer);
  }
}
