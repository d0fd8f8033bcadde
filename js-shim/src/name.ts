/**
 * Named outboxes: each name is its own PostgreSQL schema, so two outboxes in one database never
 * see each other's rows. The default outbox (no name) is schema `outbox`, as it always was; the
 * outbox named `billing` is schema `outbox_billing`. Only a validated name ever reaches SQL, and
 * then as a quoted identifier.
 * @module
 */
import { PostboxError } from './errors.js';

/**
 * What a name may be: a lowercase letter, then up to 31 lowercase letters, digits or `_`.
 * The bound keeps every prepared-statement name (`<name>:<statement>`) within PostgreSQL's 63
 * bytes, past which the server would cut two of them to the same name.
 */
export const OUTBOX_NAME_PATTERN = /^[a-z][a-z0-9_]{0,31}$/;

/** The default outbox's schema. */
export const DEFAULT_SCHEMA = 'outbox';

/**
 * Checks an outbox name; `undefined` and `null` mean the default outbox. Throws
 * `PostboxError('invalid_config')` for anything else that is not a valid name.
 * @returns the name, or `null` for the default outbox.
 */
export function checkOutboxName(name: unknown, where = 'outbox name'): string | null {
  if (name === undefined || name === null) return null;
  if (typeof name !== 'string' || !OUTBOX_NAME_PATTERN.test(name)) {
    throw new PostboxError(
      'invalid_config',
      `${where}: ${JSON.stringify(name)} is not a valid outbox name (a lowercase letter, then up to 31 lowercase letters, digits or _)`,
    );
  }
  return name;
}

/**
 * The schema an outbox lives in: `outbox` for the default one, `outbox_<name>` for a named one.
 * Throws `PostboxError('invalid_config')` for an invalid name.
 */
export function outboxSchemaName(name?: string | null): string {
  const checked = checkOutboxName(name);
  return checked === null ? DEFAULT_SCHEMA : `${DEFAULT_SCHEMA}_${checked}`;
}

/**
 * The schema as it is written in SQL. The default stays the bare `outbox` the statements always
 * used; a named one is quoted (its characters are already checked, so no quote can occur).
 */
export function schemaIdent(name: string | null): string {
  return name === null ? DEFAULT_SCHEMA : `"${DEFAULT_SCHEMA}_${name}"`;
}
