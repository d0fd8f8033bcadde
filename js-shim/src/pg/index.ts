/**
 * node-postgres connectors. Each returns a `Connector`: the outbox calls it lazily, owns the
 * connection, and ends it with exactly one of `close()` or `destroy()`.
 * @module
 */
import pg from 'pg';
import type { Connector, LaneConnection } from '../types.js';
import { corkWrites } from './cork.js';

export interface PgConnectorOptions {
  /** Bound on opening a connection. Default 10 s. */
  connectionTimeoutMs?: number;
  /**
   * Client-side bound on one query. Default 60 s. A session whose server side vanished can
   * leave a query unanswered forever; this turns that into an error the outbox recovers from.
   */
  queryTimeoutMs?: number;
  /** Errors the session raises outside a query (e.g. the server closed it). */
  onError?: (error: Error) => void;
}

/**
 * A fresh `pg.Client` per lane: the shape Hyperdrive expects (never share a client across
 * invocations in Workers).
 *
 * @example
 * ```ts
 * createOutbox({ jobs, connect: createPgConnector(env.OUTBOX_DB.connectionString) });
 * ```
 */
export function createPgConnector(connectionString: string, options: PgConnectorOptions = {}): Connector {
  return async (opts) => {
    const client = new pg.Client({
      connectionString,
      connectionTimeoutMillis: options.connectionTimeoutMs ?? 10_000,
      query_timeout: options.queryTimeoutMs ?? 60_000,
    });
    // In Workers: one socket write per statement, not one per protocol message (see cork.ts).
    corkWrites(client);
    let broken = false;
    let ended = false;
    // An unlistened 'error' would crash the isolate; mark the session broken instead.
    client.on('error', (error) => {
      broken = true;
      options.onError?.(error);
    });
    client.on('end', () => {
      broken = true;
    });
    // An abort tears the half-open socket down, as node-postgres's own connect timeout does.
    const onAbort = () => {
      const connection = (client as unknown as { connection: { _ending: boolean; stream: { destroy(error?: Error): void } } }).connection;
      connection._ending = true;
      connection.stream.destroy(new Error('connect aborted'));
    };
    opts?.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      if (opts?.signal?.aborted) throw new Error('connect aborted');
      await client.connect();
    } catch (error) {
      ended = true;
      await client.end().catch(() => undefined);
      throw error;
    } finally {
      opts?.signal?.removeEventListener('abort', onAbort);
    }
    const close = async () => {
      if (ended) return;
      ended = true;
      await client.end().catch(() => undefined);
    };
    // Never waits: a dead socket may never answer the goodbye that end() waits for.
    const destroy = async () => {
      if (ended) return;
      ended = true;
      broken = true;
      void client.end().catch(() => undefined);
    };
    const connection: LaneConnection = { db: client, close, destroy, isBroken: () => broken };
    return connection;
  };
}

/**
 * Checks clients out of a `pg.Pool` you own. A broken client is destroyed, not returned.
 * A drain holds up to `lanes + handlerSessions` clients at once: size the pool for them.
 * Attach `pool.on('error', …)` yourself: node-postgres re-emits idle clients' errors there.
 */
export function createPgPoolConnector(pool: pg.Pool, options: Pick<PgConnectorOptions, 'onError'> = {}): Connector {
  return async () => {
    const client = await pool.connect();
    // Idempotent, and only ever joins a statement's writes, so patching a client of the
    // caller's pool is safe; in Workers it saves a delayed ACK per statement (see cork.ts).
    corkWrites(client);
    let broken = false;
    let released = false;
    const onError = (error: Error) => {
      broken = true;
      options.onError?.(error);
    };
    client.on('error', onError);
    const release = (destroy: boolean) => {
      if (released) return;
      released = true;
      client.off('error', onError);
      client.release(destroy || broken ? true : undefined);
    };
    const connection: LaneConnection = {
      db: client,
      close: async () => release(false),
      destroy: async () => release(true),
      isBroken: () => broken,
    };
    return connection;
  };
}
