// An in-process PostgreSQL for tests: PGlite (PostgreSQL compiled to WebAssembly) with the
// outbox's migrations applied, shaped as the handles Postbox takes. PGlite is one session, so
// every handle here queues on one lock; a handle that opens a transaction keeps the lock until
// the transaction ends, so no other handle's statement can land inside it.
import { PostboxError } from '../errors.js';
import { checkOutboxName } from '../name.js';
import { migrate } from '../sql/index.js';
import type { Connector, LaneConnection, LaneDb } from '../types.js';

/** The parts of a PGlite instance the test database uses (`@electric-sql/pglite` ≥ 0.3). */
export interface PGliteLike {
  query<T = any>(text: string, params?: unknown[]): Promise<{ rows: T[]; affectedRows?: number }>;
  exec(text: string): Promise<{ rows: any[]; affectedRows?: number }[]>;
  isInTransaction(): boolean;
  close(): Promise<void>;
  readonly closed: boolean;
  /** Used, when there, to start later test databases from a copy of the first migrated one. */
  dumpDataDir?(compression?: 'none'): Promise<Blob>;
}

type PGliteModule = { PGlite: { create(options?: { loadDataDir?: Blob }): Promise<PGliteLike> } };

type QueryResult = { rows: any[]; rowCount: number | null };

/** A handle on the test database: a node-postgres `Pool`'s shape over one PGlite session. */
export interface TestDb {
  /** One statement (several, separated by `;`, when there are no parameters). */
  query(text: string, values?: unknown[]): Promise<QueryResult>;
  /** A client of its own, as `pg.Pool#connect` gives: the lock is held through its transactions. */
  connect(): Promise<TestDbClient>;
  /** Always 1: there is one session. */
  readonly totalCount: number;
}

/** A checked-out client of {@link TestDb}. */
export interface TestDbClient {
  query(text: string, values?: unknown[]): Promise<QueryResult>;
  /** Gives the client back; an open transaction is rolled back first. */
  release(error?: unknown): void;
}

/** What {@link createOutboxTestDatabase} returns. */
export interface OutboxTestDatabase {
  /** For `outbox.transaction(db, …)`, `outbox.enqueue`, `runUntilIdle(…, { db })` and `postbox/inspect`. */
  db: TestDb;
  /** For `createOutbox({ connect })`: each lane session is a handle on the same PGlite. */
  connect: Connector;
  /** The PGlite instance itself. Statements sent to it directly bypass the lock. */
  pglite: PGliteLike;
  /** Closes PGlite (when this call created it). */
  close(): Promise<void>;
}

/** Options of {@link createOutboxTestDatabase}. */
export interface OutboxTestDatabaseOptions {
  /** A PGlite instance to use instead of a fresh in-memory one; it is migrated, and not closed by `close()`. */
  pglite?: PGliteLike;
  /** Named outboxes (`createOutbox({ name })`) to migrate too, each in its own schema, besides the default one. */
  names?: readonly string[];
}

/** The first migrated test database of this process, as a data directory (about 40 MB). */
let template: Promise<Blob> | undefined;

// A variable, so that bundlers (esbuild for a test Worker, say) leave this optional peer out.
const PGLITE_MODULE = '@electric-sql/pglite';

/**
 * A fresh in-memory PostgreSQL (PGlite) with Postbox's migrations applied. PGlite is an
 * optional peer dependency: install `@electric-sql/pglite` to use this; nothing else in
 * Postbox loads it.
 *
 * PGlite is a single session: it cannot show what several connections racing each other do
 * (row locks, `SKIP LOCKED`), and a statement on one handle waits while another handle has a
 * transaction open. Test races against a real PostgreSQL.
 */
export async function createOutboxTestDatabase(options: OutboxTestDatabaseOptions = {}): Promise<OutboxTestDatabase> {
  const names = (options.names ?? []).map((name) => checkOutboxName(name, 'createOutboxTestDatabase: names')!);
  let pglite = options.pglite;
  const owned = !pglite;
  if (!pglite) {
    let mod: PGliteModule;
    try {
      mod = await import(PGLITE_MODULE);
    } catch (error) {
      throw new PostboxError('missing_dependency', 'createOutboxTestDatabase needs @electric-sql/pglite: npm install --save-dev @electric-sql/pglite', { cause: error });
    }
    // A fresh PGlite runs initdb (seconds); a copy of the migrated first one starts far faster.
    const dump = template ? await template.catch(() => null) : null;
    pglite = await mod.PGlite.create(dump ? { loadDataDir: dump } : {});
  }
  const lock = new Lock();
  const session = (): Handle => new Handle(pglite!, lock);
  const shared = session();
  await migrate(shared);
  if (owned && !template && pglite.dumpDataDir) {
    const copy = pglite.dumpDataDir('none');
    template = copy;
    await copy.catch(() => undefined);
  }
  // After the copy: later test databases start with the default schema only.
  for (const name of names) await migrate(shared, { name });
  const db: TestDb = {
    query: (text, values) => shared.query(text, values),
    async connect() {
      const client = session();
      return {
        query: (text, values) => client.query(text, values),
        release: () => void client.end(),
      };
    },
    totalCount: 1,
  };
  const connect: Connector = async () => {
    const handle = session();
    const connection: LaneConnection = {
      db: handle as LaneDb,
      close: () => handle.end(),
      destroy: () => handle.end(),
      isBroken: () => handle.ended || pglite!.closed,
    };
    return connection;
  };
  return {
    db,
    connect,
    pglite,
    async close() {
      if (owned && !pglite!.closed) await lock.run(() => pglite!.close());
    },
  };
}

/** A FIFO lock: one holder at a time. */
class Lock {
  #tail: Promise<void> = Promise.resolve();

  /** Resolves, once it is this caller's turn, with the function that lets the next one in. */
  acquire(): Promise<() => void> {
    let release!: () => void;
    const turn = new Promise<void>((resolve) => (release = resolve));
    const ready = this.#tail.then(() => release);
    this.#tail = this.#tail.then(() => turn);
    return ready;
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    const release = await this.acquire();
    try {
      return await fn();
    } finally {
      release();
    }
  }
}

/**
 * One connection's view of the shared session. It takes the lock for each statement, and
 * keeps it while the session is inside a transaction that this handle opened.
 */
class Handle {
  #release: (() => void) | null = null;
  ended = false;

  constructor(
    readonly pglite: PGliteLike,
    readonly lock: Lock,
  ) {}

  /** node-postgres's `query(text, values)` and `query({ name, text, values })`. */
  async query(textOrConfig: string | { name?: string; text: string; values?: unknown[] }, values?: unknown[]): Promise<QueryResult> {
    const text = typeof textOrConfig === 'string' ? textOrConfig : textOrConfig.text;
    const params = typeof textOrConfig === 'string' ? values : textOrConfig.values;
    if (this.ended) throw new PostboxError('session_closed', 'this test database connection has ended');
    this.#release ??= await this.lock.acquire();
    try {
      // Without parameters, several statements may come in one string, as node-postgres allows.
      const result = params && params.length > 0 ? await this.pglite.query(text, params) : (await this.pglite.exec(text)).at(-1) ?? { rows: [] };
      return { rows: result.rows, rowCount: Math.max(result.affectedRows ?? 0, result.rows.length) };
    } finally {
      if (!this.pglite.isInTransaction()) this.#unlock();
    }
  }

  /** Ends the handle: a transaction it left open is rolled back, and the lock is let go. */
  async end(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    if (!this.#release) return;
    try {
      if (!this.pglite.closed && this.pglite.isInTransaction()) await this.pglite.exec('ROLLBACK');
    } finally {
      this.#unlock();
    }
  }

  #unlock(): void {
    const release = this.#release;
    this.#release = null;
    release?.();
  }
}
