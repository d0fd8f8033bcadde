import { PostboxError } from './errors.js';
import type { Connector, LaneConnection, LaneDb } from './types.js';

/**
 * One lane's database session for one invocation. Acquires lazily, serialises use (a
 * node-postgres client runs one transaction at a time), and replaces a broken or
 * abandoned connection: `destroy()` first, then a fresh `connect()` on next use.
 */
export class LaneSession {
  #connect: Connector;
  #conn: LaneConnection | null = null;
  #tail: Promise<unknown> = Promise.resolve();
  /** Connections opened by callers that raced another connect after a replace(); ended on close(). */
  #strays = new Set<LaneConnection>();
  #closed = false;

  constructor(connect: Connector) {
    this.#connect = connect;
  }

  async #acquire(): Promise<LaneConnection> {
    // replace() restarts the queue, so callers queued before it still run after it, possibly
    // after close(): nothing may open a connection that no close() will end.
    if (this.#closed) throw closedError();
    if (this.#conn?.isBroken?.()) await this.replace();
    if (this.#conn) return this.#conn;
    let conn: LaneConnection;
    try {
      conn = await this.#connect();
    } catch (error) {
      throw new PostboxError('connection_failed', `could not open an outbox connection: ${errorMessage(error)}`, { cause: error });
    }
    if (this.#closed) {
      void conn.destroy().catch(() => undefined);
      throw closedError();
    }
    // A caller queued before a replace() and one queued after it may connect at once: the
    // first connection becomes the session's, the other serves its caller and ends on close().
    if (this.#conn) this.#strays.add(conn);
    else this.#conn = conn;
    return conn;
  }

  /** Whether the current connection reported itself closed or errored. */
  isBroken(): boolean {
    return this.#conn?.isBroken?.() ?? false;
  }

  /** Runs `fn` with the session to itself. */
  exclusive<T>(fn: (q: LaneDb) => Promise<T>): Promise<T> {
    const run = this.#tail.then(async () => fn((await this.#acquire()).db));
    this.#tail = run.catch(() => undefined);
    return run;
  }

  /** Runs `fn` in a transaction, with the session to itself. */
  transaction<T>(fn: (q: LaneDb) => Promise<T>): Promise<T> {
    return this.exclusive(async (q) => {
      await q.query('BEGIN');
      try {
        const result = await fn(q);
        await q.query('COMMIT');
        return result;
      } catch (error) {
        await q.query('ROLLBACK').catch(() => undefined);
        throw error;
      }
    });
  }

  /**
   * Discards the connection (it may be stuck behind a runaway query); the next use reconnects.
   * `destroy()` is called first but not awaited: a dead session may never finish closing.
   */
  async replace(): Promise<void> {
    const old = this.#conn;
    this.#conn = null;
    this.#tail = Promise.resolve();
    if (old) void old.destroy().catch(() => undefined);
  }

  /** Ends the session: returns a healthy connection, discards a broken one. */
  async close(): Promise<void> {
    this.#closed = true;
    const conn = this.#conn;
    this.#conn = null;
    // A stray's caller came from before a replace(): it may still be stuck, so do not wait.
    for (const stray of this.#strays) void stray.destroy().catch(() => undefined);
    this.#strays.clear();
    if (!conn) return;
    await this.#tail;
    if (conn.isBroken?.()) await conn.destroy().catch(() => undefined);
    else await conn.close().catch(() => undefined);
  }
}

const closedError = (): PostboxError =>
  new PostboxError('session_closed', 'the outbox session has ended (a query queued before its connection was replaced ran too late)');

export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  try {
    return typeof error === 'string' ? error : JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}
