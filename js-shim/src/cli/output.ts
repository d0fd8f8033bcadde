/**
 * What the command line prints: aligned tables for people, JSON for scripts, and one line per
 * error with the exit code that classifies it.
 * @module
 */
import { CommanderError } from 'commander';
import { PostboxError } from '../errors.js';
import { UsageError } from './args.js';

/** Exit codes; README "Command line" documents them. */
export const EXIT = {
  ok: 0,
  /** The command ran and found problems: schema drift, refused or missing jobs, a declined confirmation. */
  failed: 1,
  usage: 2,
  /** The database could not be reached, refused the login, or failed a statement. */
  database: 3,
  /** A bug: anything else, printed with its stack. */
  internal: 4,
} as const;

/**
 * Text from the database made safe for a terminal: control characters (an escape sequence in
 * a payload or error message could recolour, retitle or clear the operator's screen) print as
 * `\u001b`-style escapes.
 */
export function safe(text: string): string {
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** A cell: numbers align right, everything else left; `null` prints as `-`. */
export type Cell = string | number | null | undefined;

/** An aligned plain-text table: a header row, then one row per item. */
export function table(headers: readonly string[], rows: readonly (readonly Cell[])[]): string {
  const text = rows.map((row) => row.map((cell) => (cell === null || cell === undefined || cell === '' ? '-' : safe(String(cell).replace(/\s+/g, ' ')))));
  const numeric = headers.map((_, i) => rows.some((row) => typeof row[i] === 'number') && rows.every((row) => typeof row[i] === 'number' || row[i] === null || row[i] === undefined));
  const widths = headers.map((h, i) => Math.max(h.length, ...text.map((row) => row[i]!.length)));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => (numeric[i] ? c.padStart(widths[i]!) : i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ').trimEnd();
  return [line(headers), ...text.map(line)].join('\n');
}

/** `2026-05-01 12:00:00Z`: UTC to the second, for tables. */
export function time(date: Date | null | undefined): string | null {
  if (!date) return null;
  return `${date.toISOString().slice(0, 19).replace('T', ' ')}Z`;
}

/** Shortens a long cell (error messages) so that one row stays one line. */
export function clip(text: string | null | undefined, max = 60): string | null {
  if (text === null || text === undefined) return null;
  const flat = text.replace(/\s+/g, ' ');
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export function print(text: string): void {
  process.stdout.write(`${text}\n`);
}

export function note(text: string): void {
  process.stderr.write(`${text}\n`);
}

// Errors of the network or the server, as node and node-postgres raise them.
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', 'ENOENT']);
const SQLSTATE_RE = /^[0-9A-Z]{5}$/;
// node-postgres's own messages for a lost or timed-out connection (they carry no code).
const PG_CONNECTION_RE = /^(Connection terminated|Query read timeout|timeout exceeded when trying to connect)/;

/** A connection that could not be made; `target` is the URL without its password. */
export class ConnectionError extends Error {
  constructor(target: string, cause: unknown) {
    super(`cannot connect to ${target}: ${describe(cause)}`, { cause });
    this.name = 'ConnectionError';
  }
}

function describe(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) return describe(error.errors[0]);
  if (error instanceof Error) return error.message || (error as { code?: string }).code || error.name;
  return String(error);
}

/** Prints `error` the way its class calls for and returns the exit code. */
export function report(error: unknown): number {
  const say = (text: string) => process.stderr.write(`postbox: ${text}\n`);
  if (error instanceof CommanderError) {
    // commander has already printed its message (or the help).
    return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
  }
  if (error instanceof UsageError) {
    say(`${error.message} (see --help)`);
    return EXIT.usage;
  }
  if (error instanceof ConnectionError) {
    say(error.message);
    return EXIT.database;
  }
  if (error instanceof PostboxError) {
    say(`${error.message} (${error.code})`);
    if (error.code === 'invalid_input' || error.code === 'invalid_config' || error.code === 'wrong_tenant') return EXIT.usage;
    if (error.code === 'unsupported_server' || error.code === 'connection_failed' || error.code === 'timeout') return EXIT.database;
    return EXIT.failed;
  }
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && SQLSTATE_RE.test(code) && (error as { severity?: unknown }).severity !== undefined) {
    // A named outbox's missing relation is "outbox_<name>.job": the hint names it back.
    const named = /\boutbox_([a-z][a-z0-9_]*)\./.exec(describe(error))?.[1];
    const hint = code === '42P01' || code === '3F000' ? ` — is the schema migrated? run \`postbox migrate${named ? ` --name ${named}` : ''}\`` : '';
    say(`database error: ${describe(error)} (SQLSTATE ${code})${hint}`);
    return EXIT.database;
  }
  if ((typeof code === 'string' && NETWORK_CODES.has(code)) || PG_CONNECTION_RE.test(describe(error))) {
    say(`database connection failed: ${describe(error)}`);
    return EXIT.database;
  }
  say(`internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  return EXIT.internal;
}
