/**
 * Parsing and checking of the command line's values. Every bad value becomes a `UsageError`
 * (exit code 2) that names the flag and the reason, before anything touches the database.
 * @module
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import type { JobFilter } from '../inspect/index.js';
import { OUTBOX_NAME_PATTERN } from '../name.js';
import type { TenantScope } from '../outbox.js';
import type { JobStatus } from '../types.js';

/** A mistake in how the command was called: exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export const JOB_STATUSES: readonly JobStatus[] = ['pending', 'running', 'retrying', 'succeeded', 'dead', 'cancelled', 'waiting'];

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
// A date, or a date and time with an optional zone; a zoneless time is read as UTC, so the
// same command means the same instant on every operator's machine.
const TIME_RE = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?(Z|[+-]\d{2}:?\d{2})?)?$/i;

export function checkUuid(value: string, what: string): string {
  if (!UUID_RE.test(value)) throw new UsageError(`${what} ${JSON.stringify(value)} is not a uuid`);
  return value.toLowerCase();
}

/** `2026-05-01`, `2026-05-01T12:00`, `2026-05-01 12:00:00Z`, `2026-05-01T12:00:00.5+02:00`. */
export function parseTime(value: string): Date {
  const match = TIME_RE.exec(value.trim());
  if (!match) throw new InvalidArgumentError('expected an ISO 8601 date or time, e.g. 2026-05-01 or 2026-05-01T12:00:00Z');
  const [y, mo, d, h, mi, s] = match.slice(1, 7).map((part) => Number(part ?? 0)) as [number, number, number, number, number, number];
  const msPart = Number((match[7] ?? '').padEnd(3, '0'));
  const utc = Date.UTC(y, mo - 1, d, h, mi, s, msPart);
  const back = new Date(utc);
  // Date.UTC rolls 2026-02-31 over into March; an operator who typed it meant something else.
  if (back.getUTCFullYear() !== y || back.getUTCMonth() !== mo - 1 || back.getUTCDate() !== d || back.getUTCHours() !== h || back.getUTCMinutes() !== mi || back.getUTCSeconds() !== s) {
    throw new InvalidArgumentError(`${JSON.stringify(value)} is not a valid date`);
  }
  const zone = match[8];
  if (!zone || zone.toUpperCase() === 'Z') return back;
  const sign = zone.startsWith('-') ? -1 : 1;
  const digits = zone.slice(1).replace(':', '');
  const offsetMin = Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2));
  if (Number(digits.slice(0, 2)) > 23 || Number(digits.slice(2)) > 59) throw new InvalidArgumentError(`${JSON.stringify(value)} has an invalid zone`);
  return new Date(utc - sign * offsetMin * 60_000);
}

export function parseIntIn(min: number, max: number): (value: string) => number {
  return (value) => {
    const n = /^\d+$/.test(value) ? Number(value) : NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) throw new InvalidArgumentError(`expected an integer in ${min}..${max}`);
    return n;
  };
}

/** `--name`: a named outbox's name, checked as `createOutbox({ name })` checks it. */
export function parseOutboxName(value: string): string {
  if (!OUTBOX_NAME_PATTERN.test(value)) {
    throw new InvalidArgumentError('expected an outbox name: a lowercase letter, then up to 31 lowercase letters, digits or _');
  }
  return value;
}

export function parseCursor(value: string): string {
  if (!/^\d+\.[0-9a-f-]{36}$/i.test(value)) throw new InvalidArgumentError('malformed: pass back the cursor a previous page printed');
  return value;
}

/** The filter flags `list` and the bulk actions share. */
export interface FilterFlags {
  status?: JobStatus;
  kind?: string;
  /** A key, or `false` from `--no-tenant`. */
  tenant?: string | false;
  correlationId?: string;
  createdAfter?: Date;
  createdBefore?: Date;
}

/** Adds the filter flags; `tenantHelp` says what `--tenant` means for this command. */
export function addFilterOptions(cmd: Command, tenantHelp: string): Command {
  return cmd
    .addOption(new Option('--status <status>', 'only jobs in this status').choices(JOB_STATUSES))
    .option('--kind <kind>', 'only jobs of this kind')
    .option('--tenant <key>', tenantHelp)
    .option('--no-tenant', 'only jobs without a tenant')
    .option('--correlation-id <id>', 'only jobs with this correlation id')
    .option('--created-after <time>', 'only jobs created after this time (ISO 8601; UTC unless a zone is given)', parseTime)
    .option('--created-before <time>', 'only jobs created before this time', parseTime);
}

export function toFilter(flags: FilterFlags): JobFilter {
  const filter: JobFilter = {};
  if (flags.status) filter.status = flags.status;
  if (flags.kind !== undefined) filter.kind = nonEmpty(flags.kind, '--kind');
  if (flags.tenant !== undefined) filter.tenantKey = flags.tenant === false ? null : nonEmpty(flags.tenant, '--tenant');
  if (flags.correlationId !== undefined) filter.correlationId = nonEmpty(flags.correlationId, '--correlation-id');
  if (flags.createdAfter) filter.createdAfter = flags.createdAfter;
  if (flags.createdBefore) filter.createdBefore = flags.createdBefore;
  if (filter.createdAfter && filter.createdBefore && filter.createdAfter >= filter.createdBefore) {
    throw new UsageError('--created-after must be earlier than --created-before');
  }
  return filter;
}

/** `--tenant` as an operator scope: absent means any tenant. */
export function toScope(flags: FilterFlags): TenantScope | undefined {
  if (flags.tenant === undefined) return undefined;
  return { tenantKey: flags.tenant === false ? null : nonEmpty(flags.tenant, '--tenant') };
}

/** True when a flag other than the tenant scope narrows the selection. */
export function hasSelection(flags: FilterFlags): boolean {
  return flags.status !== undefined || flags.kind !== undefined || flags.correlationId !== undefined || flags.createdAfter !== undefined || flags.createdBefore !== undefined;
}

export function nonEmpty(value: string, flag: string): string {
  if (value.length === 0) throw new UsageError(`${flag} must not be empty`);
  return value;
}
