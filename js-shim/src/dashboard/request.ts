// The dashboard's request: what a page or an action is given (the caller's access, the outbox,
// the settings), the page frame and the helpers every page shares.
import { PostboxError } from '../errors.js';
import type { BacklogThresholds, JobFilter } from '../inspect/index.js';
import type { OperatorAction } from '../operate.js';
import type { Outbox, TenantScope } from '../outbox.js';
import type { TransactionalDb } from '../stores/pg/db.js';
import type { JobStatus } from '../types.js';
import { html, type Html } from './html.js';

export const STATUSES: readonly JobStatus[] = ['pending', 'waiting', 'running', 'retrying', 'succeeded', 'dead', 'cancelled'];
export const ACTIONS: readonly OperatorAction[] = ['cancel', 'replay', 'retryNow'];
export const ACTION_LABEL: Record<OperatorAction, string> = { cancel: 'Cancel', replay: 'Replay', retryNow: 'Retry now' };
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** A selection is one `cancelMany`-style statement; past this, act by filter instead. */
export const MAX_SELECTION = 1000;
/** Form bodies are small (ids and filter fields); anything bigger is not ours. */
export const MAX_FORM_BYTES = 256 * 1024;
export const FILTER_KEYS = ['status', 'kind', 'tenant', 'correlation', 'from', 'to'] as const;
export const NOTICE_KEYS = ['done', 'changed', 'refused', 'missing', 'truncated'] as const;

export const SECURITY_HEADERS: Record<string, string> = {
  'cache-control': 'no-store',
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
};

/** A problem the operator caused (bad input, forbidden action): shown with its status. */
export class HttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

export interface Access {
  scope: TenantScope | undefined;
  tenantKey: string | null | undefined;
  readOnly: boolean;
}

export interface Req<Env> {
  request: Request;
  url: URL;
  env: Env;
  base: string;
  access: Access;
  now: number;
  db(): Promise<TransactionalDb>;
  outbox(): Outbox<any>;
  /** The outbox's name and schema (from `outboxFor(env)`, checked against the `name` option). */
  named(): { name: string | null; schema: string };
  /** The CSRF token for forms ('' in read-only mode). */
  token: string;
}

export interface Settings {
  name: string | null | undefined;
  pageSize: number;
  statementTimeoutMs: number;
  windowMs: number;
  buckets: number;
  bulkMax: number;
  /** As given; the core's default applies when unset (pb_backlog window). */
  agedMs: number | undefined;
  thresholds: BacklogThresholds;
}

export function plain(status: number, text: string, extra: Record<string, string> = {}): Response {
  return new Response(text, { status, headers: { ...SECURITY_HEADERS, 'content-type': 'text/plain; charset=utf-8', ...extra } });
}

export function asset(body: string, type: string): Response {
  return new Response(body, { status: 200, headers: { ...SECURITY_HEADERS, 'content-type': type } });
}

/** The outbox a request shows: `outboxFor(env)`'s, which must be the one the `name` option names. */
export function outboxOf(outbox: Outbox<any>, name: string | null | undefined): { name: string | null; schema: string } {
  if (name !== undefined && outbox.name !== name) {
    throw new PostboxError('invalid_config', `createDashboard: name is ${JSON.stringify(name)}, but outboxFor returns the ${outbox.name === null ? 'default outbox' : `outbox ${JSON.stringify(outbox.name)}`}`);
  }
  return { name: outbox.name, schema: outbox.schema };
}

/** Reads of this request: its statement timeout, in the outbox's schema. */
export function reads<Env>(r: Req<Env>, s: Settings): { statementTimeoutMs: number; outbox?: string } {
  const { name } = r.named();
  return name === null ? { statementTimeoutMs: s.statementTimeoutMs } : { statementTimeoutMs: s.statementTimeoutMs, outbox: name };
}

export function page<Env>(r: Req<Env>, status: number, title: string, body: Html): Response {
  let label: string | null = null;
  try {
    label = r.named().name;
  } catch {
    // A misconfigured name is what the error page explains; the header goes without it.
  }
  const who = [
    label === null ? null : `outbox ${label}`,
    r.access.tenantKey === undefined ? 'all tenants' : r.access.tenantKey === null ? 'jobs without a tenant' : `tenant ${r.access.tenantKey}`,
    r.access.readOnly ? 'read-only' : null,
  ].filter(Boolean).join(' · ');
  const doc = html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${title} · Postbox</title>
<link rel="stylesheet" href="${r.base}/assets/app.css"><script src="${r.base}/assets/app.js" defer></script>
</head><body>
<header><strong>Postbox</strong><a href="${r.base}/">Overview</a><a href="${r.base}/jobs">Jobs</a><a href="${r.base}/jobs?status=dead">Dead letters</a><span class="who">${who}</span></header>
<main>${notice(r.url)}${body}</main>
</body></html>`;
  return new Response(doc.value, { status, headers: { ...SECURITY_HEADERS, 'content-type': 'text/html; charset=utf-8' } });
}

export function errorPage<Env>(r: Req<Env>, error: unknown): Response {
  const [status, message] =
    error instanceof HttpError ? [error.status, error.message]
    : error instanceof PostboxError ? [error.code === 'wrong_tenant' ? 403 : error.code === 'invalid_input' ? 400 : 500, error.message]
    : [500, error instanceof Error ? error.message : String(error)];
  return page(r, status, status >= 500 ? 'Error' : 'Bad request', html`<h1>${status >= 500 ? 'Something failed' : 'Request refused'}</h1><div class="failure">${message}</div>`);
}

/** The result of an action, carried in the redirect's query (numbers and an action name only). */
export function notice(url: URL): Html | null {
  const done = url.searchParams.get('done');
  if (!done || !(ACTIONS as readonly string[]).includes(done)) return null;
  const n = (k: string) => Math.max(0, Number.parseInt(url.searchParams.get(k) ?? '0', 10) || 0);
  const refused = n('refused');
  const missing = n('missing');
  return html`<div class="notice" role="status">${ACTION_LABEL[done as OperatorAction]}: ${n('changed')} job(s) changed${
    refused > 0 ? html`, ${refused} refused (the job's status does not allow it)` : null
  }${missing > 0 ? html`, ${missing} not found` : null}${url.searchParams.get('truncated') === '1' ? html`; stopped at the bulk limit, run it again for the rest` : null}.</div>`;
}

// ---- formatting --------------------------------------------------------------------------------

/** Times are shown in UTC, as the filters read them, and say so. */
export const when = (d: Date | null) => (d ? `${d.toISOString().replace('T', ' ').slice(0, 19)} UTC` : '');
export const short = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(1));
export const duration = (ms: number | null) =>
  ms === null ? '' : ms < 1000 ? `${ms} ms` : ms < 120_000 ? `${short(Math.round(ms / 100) / 10)} s` : ms < 7_200_000 ? `${short(Math.round(ms / 6_000) / 10)} min` : `${short(Math.round(ms / 360_000) / 10)} h`;
export const sev = (s: 'ok' | 'warn' | 'error') => html`<span class="sev-${s}">${s}</span>`;
export const statusCell = (s: string) => html`<span class="status-${s}">${s}</span>`;

/** Query string of `params`, dropping empty values. */
export function qs(params: Record<string, string | undefined>): string {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') u.set(k, v);
  const s = u.toString();
  return s ? `?${s}` : '';
}

// ---- filters -----------------------------------------------------------------------------------

export interface Filters {
  raw: Record<(typeof FILTER_KEYS)[number], string>;
  filter: JobFilter;
}

/** Parses the list filters (query string, or an action form's `f_` fields). */
export function parseFilters(get: (key: string) => string | null, access: Access): Filters {
  const rawValues = Object.fromEntries(FILTER_KEYS.map((k) => [k, (get(k) ?? '').trim()])) as Filters['raw'];
  const filter: JobFilter = {};
  if (rawValues.status) {
    if (!(STATUSES as readonly string[]).includes(rawValues.status)) throw new HttpError(400, `status must be one of ${STATUSES.join(', ')}`);
    filter.status = rawValues.status as JobStatus;
  }
  if (rawValues.kind) filter.kind = rawValues.kind;
  if (rawValues.correlation) filter.correlationId = rawValues.correlation;
  if (access.scope) {
    // A scoped operator's filter is their tenant, whatever the form says.
    rawValues.tenant = '';
  } else if (rawValues.tenant) {
    filter.tenantKey = rawValues.tenant;
  }
  if (rawValues.from) filter.createdAtOrAfter = parseTime('from', rawValues.from);
  if (rawValues.to) filter.createdBefore = parseTime('to', rawValues.to);
  for (const [k, v] of Object.entries(rawValues)) if (v.length > 500) throw new HttpError(400, `${k} is too long`);
  return { raw: rawValues, filter };
}

/** A time from a `datetime-local` field (read as UTC) or an ISO string. */
export function parseTime(name: string, text: string): Date {
  const withZone = /(Z|[+-]\d\d:?\d\d)$/i.test(text) ? text : `${text}Z`;
  const t = Date.parse(withZone);
  if (!/^\d{4}-\d\d-\d\d/.test(text) || !Number.isFinite(t)) throw new HttpError(400, `${name} must be a date and time like 2026-01-31T12:00 (UTC)`);
  return new Date(t);
}

// ---- pages -------------------------------------------------------------------------------------

