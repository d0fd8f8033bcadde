/**
 * The command line's database: one node-postgres client for reads and migrations; operator
 * actions open their own connections through an outbox.
 * @module
 */
import pg from 'pg';
import { UsageError } from './args.js';
import { ConnectionError } from './output.js';

const CONNECT_TIMEOUT_MS = 10_000;

/** Checks `--database-url` / `DATABASE_URL` before any connection is tried. */
export function checkDatabaseUrl(value: string | undefined): string {
  if (value === undefined || value.trim() === '') {
    throw new UsageError('no database: pass --database-url postgres://… or set DATABASE_URL');
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError('the database URL is not a URL: expected postgres://user:password@host:port/database');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new UsageError(`the database URL must start with postgres:// or postgresql://, not ${url.protocol}//`);
  }
  return value;
}

/** The URL as messages may show it: without its password. */
export function redact(value: string): string {
  try {
    const url = new URL(value);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return '(the database URL)';
  }
}

/** Connects one client; a failure is a `ConnectionError` (exit code 3). */
export async function openClient(databaseUrl: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  // An error while idle (the server went away) must not crash the process: the next query fails instead.
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (error) {
    await client.end().catch(() => undefined);
    throw new ConnectionError(redact(databaseUrl), error);
  }
  return client;
}

/** Runs `fn` with a connected client and always closes it. */
export async function withClient<T>(databaseUrl: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = await openClient(databaseUrl);
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}
