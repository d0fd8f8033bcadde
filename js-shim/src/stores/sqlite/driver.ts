/**
 * The one thing the SQLite store needs from a database: run a list of statements as ONE atomic
 * unit and hand back each statement's rows. That is D1's `db.batch([...])` (its only atomic
 * unit: D1 has no interactive transactions) and, on a Durable Object, `ctx.storage.sql.exec`
 * inside `ctx.storage.transactionSync`. Every store operation is written as such a batch, with
 * no JavaScript between its statements, so both databases run the same SQL.
 * @module
 */

/** A value SQLite is given or gives back (booleans go in as 0 / 1). */
export type SqlValue = string | number | null;

/** One statement with its `?N` parameters. */
export interface SqlStatement {
  readonly sql: string;
  readonly params: readonly SqlValue[];
}

/** A result row, by column name. */
export type SqlRow = Record<string, SqlValue>;

/** Runs statements in order, all or none; resolves with every statement's rows, in order. */
export interface SqliteDriver {
  batch(statements: readonly SqlStatement[]): Promise<SqlRow[][]>;
}

/** The part of `DurableObjectStorage` the driver uses. */
export interface DurableObjectSqlStorage {
  readonly sql: { exec(query: string, ...bindings: unknown[]): Iterable<Record<string, unknown>> };
  transactionSync<T>(closure: () => T): T;
}

/**
 * A driver over a Durable Object's SQLite storage (`ctx.storage`). Synchronous underneath: the
 * batch runs inside `transactionSync`, which nests (as a savepoint) inside a transaction the
 * caller already holds.
 */
export function durableObjectDriver(storage: DurableObjectSqlStorage): SqliteDriver {
  return {
    async batch(statements) {
      if (statements.length === 0) return [];
      return storage.transactionSync(() =>
        statements.map((s) => Array.from(storage.sql.exec(s.sql, ...s.params)) as SqlRow[]),
      );
    },
  };
}

/** The part of a D1 binding the driver uses. */
export interface D1Like {
  prepare(query: string): D1StatementLike;
  batch(statements: D1StatementLike[]): Promise<{ results?: unknown[] }[]>;
}

/** A D1 prepared statement, as far as the driver uses it. */
export interface D1StatementLike {
  bind(...values: unknown[]): D1StatementLike;
}

/** Binds a statement for D1. */
export function d1Statement(db: D1Like, s: SqlStatement): D1StatementLike {
  return s.params.length === 0 ? db.prepare(s.sql) : db.prepare(s.sql).bind(...s.params);
}

/** A driver over a D1 database binding: each batch is one `db.batch([...])`. */
export function d1Driver(db: D1Like): SqliteDriver {
  return {
    async batch(statements) {
      if (statements.length === 0) return [];
      const results = await db.batch(statements.map((s) => d1Statement(db, s)));
      return results.map((r) => (r.results ?? []) as SqlRow[]);
    },
  };
}
