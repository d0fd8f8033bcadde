import { beforeDeadline, type Deadline } from './deadline.js';
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
  /** Bumped by replace(): callers queued before it must not share the next connection with those after. */
  #generation = 0;
  #closed = false;
  #deadline: Deadline | undefined;

  /** With `deadline`, every use (connecting included) gives up at it: see deadline.ts. */
  constructor(connect: Connector, deadline?: Deadline) {
    this.#connect = connect;
    this.#deadline = deadline;
  }

  async #acquire(): Promise<LaneConnection> {
    // A caller requeued after a replace() may reach here after close(): it must not open a
    // connection that no close() would end.
    if (this.#closed) throw closedError();
    if (this.#conn?.isBroken?.()) this.#discard();
    if (!this.#conn) {
      try {
        this.#conn = await this.#connect();
      } catch (error) {
        throw new PostboxError('connection_failed', `could not open an outbox connection: ${errorMessage(error)}`, { cause: error });
      }
    }
    return this.#conn;
  }

  /** Whether the current connection reported itself closed or errored. */
  isBroken(): boolean {
    return this.#conn?.isBroken?.() ?? false;
  }

  /** Runs `fn` with the session to itself. */
  exclusive<T>(fn: (q: LaneDb) => Promise<T>): Promise<T> {
    const generation = this.#generation;
    const run = this.#tail.then(async (): Promise<T> => {
      // Queued before a replace(): the queue it waited in belongs to the old connection. Take a
      // place behind the new connection's callers rather than run alongside them.
      if (generation !== this.#generation) return this.exclusive(fn);
      // Past the deadline the connection may be stuck mid-statement: drop it, as replace() does.
      return beforeDeadline(this.#deadline, 'outbox session', async () => fn((await this.#acquire()).db), () => void this.replace());
    });
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
   * Discards the connection (it may be stuck behind a runaway query) and starts a new queue:
   * the next use reconnects, and callers that waited behind the stuck one follow in order.
   */
  async replace(): Promise<void> {
    this.#generation++;
    this.#tail = Promise.resolve();
    this.#discard();
  }

  /** `destroy()` is called but not awaited: a dead session may never finish closing. */
  #discard(): void {
    const old = this.#conn;
    this.#conn = null;
    if (old) void old.destroy().catch(() => undefined);
  }

  /** Ends the session: returns a healthy connection, discards a broken one. */
  async close(): Promise<void> {
    this.#closed = true;
    const conn = this.#conn;
    this.#conn = null;
    if (!conn) return;
    await this.#tail;
    if (conn.isBroken?.()) await conn.destroy().catch(() => undefined);
    else await conn.close().catch(() => undefined);
  }
}

const closedError = (): PostboxError =>
  new PostboxError('session_closed', 'the outbox session has ended (a query queued before its connection was replaced ran after the end)');

export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  try {
    return typeof error === 'string' ? error : JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}
