import { beforeDeadline, deadlineError, type Deadline } from './deadline.js';
import { PostboxError, errorMessage } from '../errors.js';
import type { Connector, LaneConnection, LaneDb } from '../types.js';
import type { DependentChange } from '../stores/contract.js';

/**
 * What the engine needs of a store's session for one invocation: the handle to itself, a
 * transaction, and a fresh start after a failure. PostgreSQL's is {@link LaneSession} (a
 * connection that can break and be replaced); a D1 binding or a Durable Object's storage has a
 * {@link DirectSession}.
 */
export interface Session<Db> {
  /** Runs `fn` with the session to itself. */
  exclusive<T>(fn: (q: Db) => Promise<T>): Promise<T>;
  /** Runs `fn` in a transaction, with the session to itself (only stores that run user code in one: `runsUserCode`). */
  transaction<T>(fn: (q: Db) => Promise<T>): Promise<T>;
  /** Drops what may be stuck; the next use starts afresh. */
  replace(): Promise<void>;
  /** Whether the session reported itself closed or errored. */
  isBroken(): boolean;
  close(): Promise<void>;
  /** Where handlers' `ctx.db` runs apart from the session (PostgreSQL's pool); null: on the session, if the store has `ctx.db` at all. */
  readonly handlers: HandlerSessions | null;
  /**
   * Waiting children that settlements written on this session released (now due), until its
   * drain takes them (settle.ts, takeReleased): whichever writer settled, the drain learns of them.
   */
  readonly released: DependentChange[];
}

/**
 * What a failure showed of the session, for the core to judge (pb_settle `failure`: a lost
 * connection is retried on a fresh one; a refusal is the statement's own), gathered one way for
 * settlements and schedule occurrences alike. The session counts as broken when it reported
 * itself so, when it could not connect at all, or when a deadline gave up on it (and dropped it);
 * the SQLSTATE is the first one on the error or its causes.
 */
export function failureFacts(session: Session<unknown>, error: unknown): { sessionBroken: boolean; sqlState: string | null } {
  const code = error instanceof PostboxError ? error.code : null;
  const sessionBroken = session.isBroken() || code === 'connection_failed' || code === 'deadline_exceeded';
  return { sessionBroken, sqlState: sqlStateOf(error) };
}

function sqlStateOf(error: unknown): string | null {
  for (let e = error, depth = 0; e && depth < 3; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code;
  }
  return null;
}

/**
 * The session of a store whose handle never breaks and holds no connection (a D1 binding, a
 * Durable Object's storage): uses run one at a time on that handle, as on a lane's connection.
 */
export class DirectSession<Db> implements Session<Db> {
  readonly handlers = null;
  readonly released: DependentChange[] = [];
  #tail: Promise<unknown> = Promise.resolve();

  constructor(readonly db: Db) {}

  exclusive<T>(fn: (q: Db) => Promise<T>): Promise<T> {
    const run = this.#tail.then(() => fn(this.db));
    this.#tail = run.catch(() => undefined);
    return run;
  }

  transaction<T>(): Promise<T> {
    // The engine opens one only for hooks, which such a store refuses when the outbox is made.
    return Promise.reject(new PostboxError('invalid_config', 'this store cannot run user code inside a transaction of its own'));
  }

  async replace(): Promise<void> {
    // Nothing to drop: the handle is the platform's.
  }

  isBroken(): boolean {
    return false;
  }

  async close(): Promise<void> {
    await this.#tail;
  }
}

/**
 * One lane's database session for one invocation. Acquires lazily, serialises use (a
 * node-postgres client runs one transaction at a time), and replaces a broken or
 * abandoned connection: `destroy()` first, then a fresh `connect()` on next use.
 */
export class LaneSession implements Session<LaneDb> {
  #connect: Connector;
  #conn: LaneConnection | null = null;
  #tail: Promise<unknown> = Promise.resolve();
  /** Bumped by replace(): callers queued before it must not share the next connection with those after. */
  #generation = 0;
  #closed = false;
  #deadline: Deadline | undefined;
  /**
   * Where this lane's handlers run `ctx.db` (null: on this session), so that a handler's
   * transaction never holds up the drain's claims, settlements and heartbeats.
   */
  readonly handlers: HandlerSessions | null;
  readonly released: DependentChange[] = [];

  /** With `deadline`, every use (connecting included) gives up at it: see deadline.ts. */
  constructor(connect: Connector, deadline?: Deadline, handlers?: HandlerSessions | null) {
    this.#connect = connect;
    this.#deadline = deadline;
    this.handlers = handlers ?? null;
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

  /** Ends the session at once, without waiting for its queue: the connection may be stuck mid-statement. */
  abandon(): void {
    this.#closed = true;
    this.#generation++;
    this.#tail = Promise.resolve();
    this.#discard();
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

/**
 * The sessions handlers' `ctx.db` runs on during one drain (or sweep), apart from its lane
 * sessions: at most `size` connections, each opened on first need, lent to one attempt at a
 * time and returned when that attempt's ctx.db work ends. `close()` ends them with the drain.
 */
export class HandlerSessions {
  #connect: Connector;
  #size: number;
  #deadline: Deadline | undefined;
  readonly #idle: LaneSession[] = [];
  /** Every session made and not yet discarded: idle or lent. */
  readonly #all = new Set<LaneSession>();
  readonly #waiters: ((session: LaneSession) => void)[] = [];
  #closed = false;

  /** `size` (at least 1) is the core's `handlerSessions`; `deadline` bounds every use of each session. */
  constructor(connect: Connector, size: number, deadline?: Deadline) {
    this.#connect = connect;
    this.#size = size;
    this.#deadline = deadline;
  }

  /**
   * A session for one attempt alone, until `release` or `discard`. While all are lent, waits
   * for one, up to `until` (the attempt's deadline): `deadline_exceeded` then.
   */
  acquire(until: Deadline): Promise<LaneSession> {
    if (this.#closed) return Promise.reject(closedError());
    const idle = this.#idle.pop();
    if (idle) return Promise.resolve(idle);
    if (this.#all.size < this.#size) return Promise.resolve(this.#open());
    return new Promise<LaneSession>((resolve, reject) => {
      const waiter = (session: LaneSession) => {
        clearTimeout(timer);
        resolve(session);
      };
      // Real time from the clock's reading, like the handler's timer (deadline.ts).
      const timer = setTimeout(() => {
        const at = this.#waiters.indexOf(waiter);
        if (at >= 0) this.#waiters.splice(at, 1);
        reject(deadlineError('ctx.db waiting for a free handler session'));
      }, Math.max(0, until.at - until.now()));
      this.#waiters.push(waiter);
    });
  }

  /** Gives a lent session back: to the first waiter, else to the idle ones. */
  release(session: LaneSession): void {
    if (!this.#all.has(session)) return;
    if (this.#closed) {
      this.#all.delete(session);
      void session.close();
      return;
    }
    const waiter = this.#waiters.shift();
    if (waiter) waiter(session);
    else this.#idle.push(session);
  }

  /** Drops a lent session that may be stuck (its attempt ended mid-statement); a waiter gets a fresh one. */
  discard(session: LaneSession): void {
    if (!this.#all.delete(session)) return;
    session.abandon();
    const waiter = !this.#closed && this.#waiters.shift();
    if (waiter) waiter(this.#open());
  }

  #open(): LaneSession {
    const session = new LaneSession(this.#connect, this.#deadline);
    this.#all.add(session);
    return session;
  }

  /** Ends every session: idle ones close (a broken one is destroyed), any still lent is dropped. */
  async close(): Promise<void> {
    this.#closed = true;
    const idle = new Set(this.#idle.splice(0));
    const all = [...this.#all];
    this.#all.clear();
    await Promise.all(all.map((session) => (idle.has(session) ? session.close() : session.abandon())));
  }
}

const closedError = (): PostboxError =>
  new PostboxError('session_closed', 'the outbox session has ended (a query queued before its connection was replaced ran after the end)');
