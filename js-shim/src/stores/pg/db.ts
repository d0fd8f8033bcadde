import { PostboxError } from '../../errors.js';
import type { OutboxDb, Queryable } from '../../types.js';

/**
 * Marks `ctx.db`. Its statements share the lane session with other handlers and the drain, so
 * a transaction on it must go through its own `transaction`, which keeps the session to itself
 * until the transaction ends; a BEGIN sent as a plain query would let others' statements in.
 */
export const LANE_DB = Symbol('postbox.laneDb');
const isLaneDb = (db: unknown): db is OutboxDb => (db as { [LANE_DB]?: boolean } | null)?.[LANE_DB] === true;

/**
 * The database handles `outbox.transaction` accepts: a node-postgres `Pool`, `Client` or
 * `PoolClient`, a drizzle database, or a Kysely instance.
 */
export type TransactionalDb = Queryable | DrizzleLike | KyselyLike;

interface PoolLike extends Queryable {
  connect(): Promise<Queryable & { release(err?: unknown): void }>;
  totalCount: number;
}
interface DrizzleLike {
  transaction<T>(fn: (tx: any) => Promise<T>): Promise<T>;
  execute(query: unknown): Promise<unknown>;
}
interface KyselyLike {
  transaction(): { execute<T>(fn: (trx: any) => Promise<T>): Promise<T> };
  executeQuery(query: unknown): Promise<{ rows: any[] }>;
}

const isPool = (db: unknown): db is PoolLike =>
  typeof (db as PoolLike).connect === 'function' && typeof (db as PoolLike).totalCount === 'number';
const isDrizzle = (db: unknown): db is DrizzleLike =>
  typeof (db as DrizzleLike).transaction === 'function' && typeof (db as DrizzleLike).execute === 'function';
const isKysely = (db: unknown): db is KyselyLike =>
  typeof (db as KyselyLike).transaction === 'function' && typeof (db as KyselyLike).executeQuery === 'function';

/**
 * Runs `fn` in a transaction on `db` and gives it a `Queryable` bound to that transaction,
 * plus the handle the caller's own code expects (`tx`).
 */
export async function runTransaction<T>(db: TransactionalDb, fn: (q: Queryable, tx: unknown) => Promise<T>): Promise<T> {
  if (isLaneDb(db)) return db.transaction((tx) => fn(tx, tx));
  if (isPool(db)) {
    const client = await db.connect();
    // A connection lost mid-transaction also emits 'error' on the client, which the pool only
    // listens for while it is idle: unheard, Node would crash. Heard, it marks the client broken.
    const events = client as { on?(event: 'error', fn: () => void): unknown; off?(event: 'error', fn: () => void): unknown };
    let broken = false;
    const onError = () => {
      broken = true;
    };
    events.on?.('error', onError);
    let result: T;
    try {
      result = await withBeginCommit(client, () => fn(client, client), () => {
        broken = true;
      });
    } catch (error) {
      // The callback's error (or a refusal) says nothing about the connection: it goes back to
      // the pool unless it broke (an 'error' event, or a ROLLBACK that could not be sent).
      // A discarded client keeps the listener, since its dying socket may still report.
      if (broken) client.release(error instanceof Error ? error : new Error(String(error)));
      else {
        events.off?.('error', onError);
        client.release();
      }
      throw error;
    }
    events.off?.('error', onError);
    client.release();
    return result;
  }
  if (isKysely(db)) {
    return db.transaction().execute((trx) => fn(kyselyQueryable(trx), trx));
  }
  if (isDrizzle(db)) {
    return db.transaction((tx) => fn(toQueryable(tx), tx));
  }
  if (typeof (db as Queryable).query === 'function') {
    return withBeginCommit(db as Queryable, () => fn(db as Queryable, db));
  }
  throw new PostboxError('invalid_db', 'expected a node-postgres Pool/Client, a drizzle database or a Kysely instance');
}

/**
 * BEGIN, `fn`, COMMIT; on any error ROLLBACK and rethrow the error. `onRollbackFailed` hears a
 * ROLLBACK that could not be sent or was refused: the session is then in no known state.
 */
async function withBeginCommit<T>(client: Queryable, fn: () => Promise<T>, onRollbackFailed: () => void = () => undefined): Promise<T> {
  try {
    await client.query('BEGIN');
    const result = await fn();
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(onRollbackFailed);
    throw error;
  }
}

/**
 * Turns a transaction handle the caller passed to `outbox.enqueue(tx, …)` into a `Queryable`:
 * node-postgres clients as they are; drizzle through its underlying session client.
 */
export function toQueryable(tx: unknown): Queryable {
  if (typeof (tx as Queryable).query === 'function' && !isDrizzle(tx)) return tx as Queryable;
  if (isKysely(tx)) return kyselyQueryable(tx);
  const session = (tx as { session?: { client?: Queryable } }).session;
  if (session?.client && typeof session.client.query === 'function') return session.client;
  const client = (tx as { $client?: Queryable }).$client;
  if (client && typeof client.query === 'function' && !isPool(client)) return client;
  throw new PostboxError('invalid_db', 'cannot run SQL on this transaction handle: pass a node-postgres client, a drizzle tx or a Kysely transaction');
}

function kyselyQueryable(trx: KyselyLike): Queryable {
  return {
    async query(text, values) {
      const result = await trx.executeQuery({ sql: text, parameters: values ?? [], query: { kind: 'RawNode' }, queryId: { queryId: 'postbox' } });
      return { rows: result.rows, rowCount: result.rows.length };
    },
  };
}
