/**
 * An operator dashboard as a `fetch` handler: backlog, jobs, one job with its attempts, charts,
 * health warnings, and cancel / replay / retry now on one job, a selection or a filter.
 * Server-rendered HTML, no framework; runs in Workers and in Node (Web APIs only).
 *
 * @example
 * ```ts
 * import { createDashboard } from 'postbox/dashboard';
 * const dashboard = createDashboard(outboxFor, {
 *   basePath: '/dashboard',
 *   authorize: (request, env) => request.headers.get('cf-access-authenticated-user-email') !== null,
 *   csrfSecret: (env) => env.DASHBOARD_SECRET,
 * });
 * // in fetch: if (new URL(request.url).pathname.startsWith('/dashboard')) return dashboard(request, env, ctx);
 * ```
 * @module
 */
import type { TransactionalDb } from '../stores/pg/db.js';
import { getCore } from '../core/core.js';
import { PostboxError } from '../errors.js';
import {
  countBacklog,
  countJobs,
  evaluateBacklog,
  getJob,
  listAttempts,
  listJobs,
  type BacklogRow,
  type BacklogThresholds,
  type JobFilter,
  type JobView,
} from '../inspect/index.js';
import { readOnly } from '../inspect/read.js';
import { allowedActions, operateMatching, type OperatorAction } from '../operate.js';
import { checkOutboxName } from '../name.js';
import { RUN, type OperateResult, type Outbox, type TenantScope } from '../outbox.js';
import type { JobStatus, LaneConnection } from '../types.js';
import { SCRIPT, STYLE } from './assets.js';
import { failureRateChart, throughputChart } from './charts.js';
import { CSRF_COOKIE, isNonce, newNonce, readCookie, tokenFor, verifyToken } from './csrf.js';
import { html, raw, type Html } from './html.js';
import { gradeHealth, readHealthFacts, type HealthFacts, type HealthGrades, type HorizonHolder } from '../inspect/health.js';
import { attemptRates, deadLetterGrowth, gradeDeadLetters, gradeTableHealth, percentDead, type HealthWarning } from './stats.js';

/** What `authorize` grants: a tenant scope and / or read-only mode. */
export interface DashboardAccess {
  /** Only this tenant's jobs (`null`: only jobs without a tenant), for every read and action. */
  tenantKey?: string | null;
  /** No action buttons, and every POST is refused. */
  readOnly?: boolean;
}

/**
 * Decides every request: `false` denies it (403), `true` grants everything, an object grants
 * a scope. Throwing answers 500 and grants nothing.
 */
export type DashboardAuthorize<Env> = (request: Request, env: Env) => boolean | DashboardAccess | Promise<boolean | DashboardAccess>;

/** Options of `createDashboard`. Only `authorize` is required. */
export interface DashboardOptions<Env> {
  authorize: DashboardAuthorize<Env>;
  /**
   * The named outbox the dashboard shows (`createOutbox({ name })`). Default: the name of the
   * outbox `outboxFor(env)` returns, which the pages read and act on; when given, that outbox
   * must carry this name (otherwise every request fails with `invalid_config`), so reads and
   * actions can never reach two different outboxes.
   */
  name?: string;
  /** Where the handler is mounted, e.g. `/dashboard`. Default: the root. */
  basePath?: string;
  /**
   * The database the pages read with (through the read-only, time-bounded inspection path).
   * Default: one connection per request from the outbox's own `connect`, closed when the
   * response is ready. Pass a handle you own (a node-postgres `Pool`, drizzle or Kysely) to
   * share a pool; the dashboard never closes it. Actions always go through the outbox.
   */
  db?: (env: Env) => TransactionalDb | Promise<TransactionalDb>;
  /** Signs the CSRF tokens (HMAC-SHA256). Without it the token is a plain double-submit cookie. */
  csrfSecret?: string | ((env: Env) => string | undefined);
  /** Read-only for everyone, whatever `authorize` says. */
  readOnly?: boolean;
  /** Backlog thresholds for the core's grading (`evaluateBacklog`); default: the core's. */
  thresholds?: BacklogThresholds;
  /** A due job older than this counts as aged. Default 5 min. */
  agedMs?: number;
  /** Jobs per page. Default 50, at most 1000. */
  pageSize?: number;
  /** Statement timeout of every read. Default 5 s. */
  statementTimeoutMs?: number;
  /** The charts' window and bucket count. Default 1 h in 30 buckets. */
  chart?: { windowMs?: number; buckets?: number };
  /** At most this many jobs per action over a filter (the report says when it stopped). Default 10,000. */
  bulkMax?: number;
  /** The clock the backlog and charts use. Default `Date.now`. */
  clock?: { now(): number };
}

/** The `fetch` handler `createDashboard` returns. `ctx.waitUntil` (if given) closes its connection after the response. */
export type DashboardHandler<Env> = (request: Request, env: Env, ctx?: { waitUntil(promise: Promise<unknown>): void }) => Promise<Response>;

const STATUSES: readonly JobStatus[] = ['pending', 'running', 'retrying', 'succeeded', 'dead', 'cancelled'];
const ACTIONS: readonly OperatorAction[] = ['cancel', 'replay', 'retryNow'];
const ACTION_LABEL: Record<OperatorAction, string> = { cancel: 'Cancel', replay: 'Replay', retryNow: 'Retry now' };
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** A selection is one `cancelMany`-style statement; past this, act by filter instead. */
const MAX_SELECTION = 1000;
/** Form bodies are small (ids and filter fields); anything bigger is not ours. */
const MAX_FORM_BYTES = 256 * 1024;
const FILTER_KEYS = ['status', 'kind', 'tenant', 'correlation', 'from', 'to'] as const;
const NOTICE_KEYS = ['done', 'changed', 'refused', 'missing', 'truncated'] as const;

const SECURITY_HEADERS: Record<string, string> = {
  'cache-control': 'no-store',
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
};

/** A problem the operator caused (bad input, forbidden action): shown with its status. */
class HttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

interface Access {
  scope: TenantScope | undefined;
  tenantKey: string | null | undefined;
  readOnly: boolean;
}

interface Req<Env> {
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

/**
 * Creates the dashboard. `outboxFor(env)` is the same factory the Worker's queue and cron
 * handlers use; actions go through it (`cancelMany`, `replayMany`, `retryNowMany`,
 * `operateMatching`), so the core decides per job, as everywhere else.
 */
export function createDashboard<Env>(outboxFor: (env: Env) => Outbox<any>, options: DashboardOptions<Env>): DashboardHandler<Env> {
  if (typeof outboxFor !== 'function') throw new PostboxError('invalid_config', 'createDashboard: outboxFor must be a function (env) => outbox');
  if (!options || typeof options.authorize !== 'function') {
    throw new PostboxError('invalid_config', 'createDashboard: `authorize` (request, env) => boolean | { tenantKey?, readOnly? } is required');
  }
  const base = normaliseBase(options.basePath);
  const pageSize = options.pageSize ?? 50;
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 1000) throw new PostboxError('invalid_config', 'createDashboard: pageSize must be an integer in 1..1000');
  const statementTimeoutMs = options.statementTimeoutMs ?? 5_000;
  if (!Number.isInteger(statementTimeoutMs) || statementTimeoutMs <= 0) throw new PostboxError('invalid_config', 'createDashboard: statementTimeoutMs must be a positive integer');
  const windowMs = options.chart?.windowMs ?? 3_600_000;
  const buckets = options.chart?.buckets ?? 30;
  if (!Number.isInteger(buckets) || buckets < 1 || buckets > 500 || !Number.isInteger(windowMs) || windowMs < buckets) {
    throw new PostboxError('invalid_config', 'createDashboard: chart.buckets must be in 1..500 and chart.windowMs an integer of at least one ms per bucket');
  }
  const bulkMax = options.bulkMax ?? 10_000;
  if (!Number.isInteger(bulkMax) || bulkMax < 1) throw new PostboxError('invalid_config', 'createDashboard: bulkMax must be a positive integer');
  const clock = options.clock ?? { now: () => Date.now() };
  const name = options.name === undefined ? undefined : checkOutboxName(options.name, 'createDashboard: name');
  const settings: Settings = { name, pageSize, statementTimeoutMs, windowMs, buckets, bulkMax, agedMs: options.agedMs, thresholds: options.thresholds ?? {} };

  return async (request, env, ctx) => {
    const url = new URL(request.url);
    if (url.pathname !== base && !url.pathname.startsWith(`${base}/`)) return plain(404, 'Not found');
    let verdict: boolean | DashboardAccess;
    try {
      verdict = await options.authorize(request, env);
    } catch {
      return plain(500, 'authorize failed');
    }
    if (verdict !== true && (verdict === false || verdict === null || typeof verdict !== 'object')) return plain(403, 'Forbidden');
    const granted: DashboardAccess = verdict === true ? {} : verdict;
    const scoped = granted.tenantKey !== undefined;
    const access: Access = {
      scope: scoped ? { tenantKey: granted.tenantKey ?? null } : undefined,
      tenantKey: scoped ? granted.tenantKey ?? null : undefined,
      readOnly: options.readOnly === true || granted.readOnly === true,
    };
    const rest = url.pathname.slice(base.length) || '/';
    if (rest === '/assets/app.css') return asset(STYLE, 'text/css; charset=utf-8');
    if (rest === '/assets/app.js') return asset(SCRIPT, 'text/javascript; charset=utf-8');

    // One connection per request, opened on first use and closed after the response.
    let connection: Promise<LaneConnection> | undefined;
    let owned: Promise<TransactionalDb> | undefined;
    let outbox: Outbox<any> | undefined;
    const getOutbox = () => (outbox ??= outboxFor(env));
    let resolved: { name: string | null; schema: string } | undefined;
    const named = () => (resolved ??= outboxOf(getOutbox(), name));
    const db = async (): Promise<TransactionalDb> => {
      if (options.db) return (owned ??= Promise.resolve(options.db(env)));
      connection ??= getOutbox()[RUN].runtime.options.connect();
      return (await connection).db as unknown as TransactionalDb;
    };
    const secret = typeof options.csrfSecret === 'function' ? options.csrfSecret(env) : options.csrfSecret;
    const cookieNonce = readCookie(request.headers.get('cookie'), CSRF_COOKIE);
    try {
      if (rest === '/actions') {
        if (request.method !== 'POST') return plain(405, 'Method not allowed', { allow: 'POST' });
        return await handleAction({ request, url, env, base, access, now: clock.now(), db, outbox: getOutbox, named, token: '' }, settings, secret, cookieNonce);
      }
      if (request.method !== 'GET' && request.method !== 'HEAD') return plain(405, 'Method not allowed', { allow: 'GET, HEAD' });
      const nonce = isNonce(cookieNonce) ? cookieNonce : newNonce();
      const token = access.readOnly ? '' : await tokenFor(secret, nonce);
      const r: Req<Env> = { request, url, env, base, access, now: clock.now(), db, outbox: getOutbox, named, token };
      let res: Response;
      try {
        res = await route(r, rest, settings);
      } catch (error) {
        res = errorPage(r, error);
      }
      if (!access.readOnly && nonce !== cookieNonce) {
        const secure = url.protocol === 'https:' ? '; Secure' : '';
        res.headers.append('set-cookie', `${CSRF_COOKIE}=${nonce}; Path=${base || '/'}; HttpOnly; SameSite=Strict${secure}`);
      }
      return res;
    } catch (error) {
      return errorPage({ request, url, env, base, access, now: clock.now(), db, outbox: getOutbox, named, token: '' }, error);
    } finally {
      if (connection) {
        const closing = connection.then((c) => (c.isBroken?.() ? c.destroy() : c.close())).catch(() => undefined);
        if (ctx?.waitUntil) ctx.waitUntil(closing);
        else await closing;
      }
    }
  };
}

interface Settings {
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

function normaliseBase(basePath: string | undefined): string {
  if (basePath === undefined || basePath === '' || basePath === '/') return '';
  if (!/^\/[A-Za-z0-9._~\-/]*$/.test(basePath) || basePath.includes('//')) {
    throw new PostboxError('invalid_config', `createDashboard: basePath ${JSON.stringify(basePath)} must be a path like /dashboard`);
  }
  return basePath.replace(/\/+$/, '');
}

function route<Env>(r: Req<Env>, rest: string, s: Settings): Promise<Response> {
  if (rest === '/') return overviewPage(r, s);
  if (rest === '/jobs' || rest === '/jobs/') return jobsPage(r, s);
  const m = /^\/jobs\/([^/]+)$/.exec(rest);
  if (m) return jobPage(r, s, decodePathSegment(m[1]!));
  return Promise.resolve(page(r, 404, 'Not found', html`<h1>Not found</h1><p>No dashboard page at this address.</p>`));
}

/** A path segment as text; a malformed percent-escape is the client's error (400), not ours. */
function decodePathSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, 'Malformed percent-escape in the address');
  }
}

// ---- responses ---------------------------------------------------------------------------------

function plain(status: number, text: string, extra: Record<string, string> = {}): Response {
  return new Response(text, { status, headers: { ...SECURITY_HEADERS, 'content-type': 'text/plain; charset=utf-8', ...extra } });
}

function asset(body: string, type: string): Response {
  return new Response(body, { status: 200, headers: { ...SECURITY_HEADERS, 'content-type': type } });
}

/** The outbox a request shows: `outboxFor(env)`'s, which must be the one the `name` option names. */
function outboxOf(outbox: Outbox<any>, name: string | null | undefined): { name: string | null; schema: string } {
  if (name !== undefined && outbox.name !== name) {
    throw new PostboxError('invalid_config', `createDashboard: name is ${JSON.stringify(name)}, but outboxFor returns the ${outbox.name === null ? 'default outbox' : `outbox ${JSON.stringify(outbox.name)}`}`);
  }
  return { name: outbox.name, schema: outbox.schema };
}

/** Reads of this request: its statement timeout, in the outbox's schema. */
function reads<Env>(r: Req<Env>, s: Settings): { statementTimeoutMs: number; outbox?: string } {
  const { name } = r.named();
  return name === null ? { statementTimeoutMs: s.statementTimeoutMs } : { statementTimeoutMs: s.statementTimeoutMs, outbox: name };
}

function page<Env>(r: Req<Env>, status: number, title: string, body: Html): Response {
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

function errorPage<Env>(r: Req<Env>, error: unknown): Response {
  const [status, message] =
    error instanceof HttpError ? [error.status, error.message]
    : error instanceof PostboxError ? [error.code === 'wrong_tenant' ? 403 : error.code === 'invalid_input' ? 400 : 500, error.message]
    : [500, error instanceof Error ? error.message : String(error)];
  return page(r, status, status >= 500 ? 'Error' : 'Bad request', html`<h1>${status >= 500 ? 'Something failed' : 'Request refused'}</h1><div class="failure">${message}</div>`);
}

/** The result of an action, carried in the redirect's query (numbers and an action name only). */
function notice(url: URL): Html | null {
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
const when = (d: Date | null) => (d ? `${d.toISOString().replace('T', ' ').slice(0, 19)} UTC` : '');
const short = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(1));
const duration = (ms: number | null) =>
  ms === null ? '' : ms < 1000 ? `${ms} ms` : ms < 120_000 ? `${short(Math.round(ms / 100) / 10)} s` : ms < 7_200_000 ? `${short(Math.round(ms / 6_000) / 10)} min` : `${short(Math.round(ms / 360_000) / 10)} h`;
const sev = (s: 'ok' | 'warn' | 'error') => html`<span class="sev-${s}">${s}</span>`;
const statusCell = (s: string) => html`<span class="status-${s}">${s}</span>`;

/** Query string of `params`, dropping empty values. */
function qs(params: Record<string, string | undefined>): string {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') u.set(k, v);
  const s = u.toString();
  return s ? `?${s}` : '';
}

// ---- filters -----------------------------------------------------------------------------------

interface Filters {
  raw: Record<(typeof FILTER_KEYS)[number], string>;
  filter: JobFilter;
}

/** Parses the list filters (query string, or an action form's `f_` fields). */
function parseFilters(get: (key: string) => string | null, access: Access): Filters {
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
function parseTime(name: string, text: string): Date {
  const withZone = /(Z|[+-]\d\d:?\d\d)$/i.test(text) ? text : `${text}Z`;
  const t = Date.parse(withZone);
  if (!/^\d{4}-\d\d-\d\d/.test(text) || !Number.isFinite(t)) throw new HttpError(400, `${name} must be a date and time like 2026-01-31T12:00 (UTC)`);
  return new Date(t);
}

// ---- pages -------------------------------------------------------------------------------------

async function overviewPage<Env>(r: Req<Env>, s: Settings): Promise<Response> {
  const db = await r.db();
  const tenant = r.access.tenantKey === undefined ? {} : { tenantKey: r.access.tenantKey };
  const counts = await countJobs(db, { ...tenant, ...reads(r, s) });
  const core = getCore();
  // The core's cut-offs: how long "aged" is, and dead letters per window of its length.
  const cut = core.call<{ agedBefore: number; deadLetterWindowMs: number }>('backlog', { op: 'window', now: r.now, agedMs: s.agedMs ?? null });
  const agedMs = r.now - cut.agedBefore;
  const deadLetterWindowMs = cut.deadLetterWindowMs;
  const backlog = await countBacklog(db, { ...tenant, now: r.now, agedMs, registeredKinds: r.outbox().kinds, ...reads(r, s) });
  const bucketMs = Math.floor(s.windowMs / s.buckets);
  const since = Math.floor(r.now / bucketMs) * bucketMs - (s.buckets - 1) * bucketMs;
  const schema = r.named().schema;
  const stats = await readOnly(db, reads(r, s), async (q, ident) => ({
    rates: await attemptRates(q, ident, { since, bucketMs, buckets: s.buckets, ...tenant }),
    dead: await deadLetterGrowth(q, ident, { now: r.now, windowMs: deadLetterWindowMs, ...tenant }),
    // The tables' health is the whole tables': shown only to operators of every tenant.
    health: r.access.scope ? null : await readHealthFacts(q, schema),
  }));

  const totals = backlog.reduce((t, b) => ({ due: t.due + b.due, aged: t.aged + b.aged, stuck: t.stuck + b.stuck }), { due: 0, aged: 0, stuck: 0 });
  const graded = evaluateBacklog(totals, s.thresholds);
  const warnings: HealthWarning[] = graded.reasons.map((reason) => backlogWarning(reason, agedMs));
  const unregistered = backlog.filter((b) => b.unregistered > 0);
  if (unregistered.length > 0) {
    warnings.push({
      severity: 'warn',
      title: 'Jobs of kinds this deploy does not register',
      detail: `${unregistered.reduce((n, b) => n + b.unregistered, 0)} waiting job(s) of ${unregistered.map((b) => b.kind).join(', ')}: nothing here will run them (a kind removed or renamed?). Register the kind again, or cancel them.`,
    });
  }
  const grades = gradeHealth(core, stats.health, stats.dead.lastWindow);
  warnings.push(...gradeDeadLetters(stats.dead, grades.deadLetters, deadLetterWindowMs));
  if (stats.health) warnings.push(...gradeTableHealth(stats.health, grades));

  const totalJobs = STATUSES.reduce((n, st) => n + counts[st], 0);
  const body = html`<h1>Overview</h1>
<h2>Health</h2>
${warnings.length === 0
  ? html`<div class="ok-box">No warnings: backlog ${sev(graded.severity)}, no recent dead letters${stats.health ? ', tables healthy' : ''}.</div>`
  : html`<ul class="warnings">${warnings.map((w) => html`<li class="${w.severity}"><strong>${w.title}</strong> (${w.severity}). ${w.detail}</li>`)}</ul>`}
<h2>Jobs by status</h2>
<div class="tabs">${STATUSES.map((st) => html`<a href="${r.base}/jobs?status=${st}">${st} <b>${counts[st]}</b></a>`)}<a href="${r.base}/jobs">all <b>${totalJobs}</b></a></div>
<h2>Backlog by kind and lane</h2>
${backlogTable(backlog, graded.severity, totals, s.thresholds)}
<p class="muted">Due: ready to run now. Aged: due for more than ${duration(agedMs)}. Stuck: running with a lease past expiry (the sweep recovers them). Grades by the core's backlog rule.</p>
<h2>Throughput and failures, last ${duration(s.windowMs)}</h2>
<div class="charts">${throughputChart(stats.rates, bucketMs)}${failureRateChart(stats.rates, bucketMs)}</div>
${stats.health ? tableHealthSection(stats.health, grades) : null}`;
  return page(r, 200, 'Overview', body);
}

function backlogWarning(reason: { metric: string; severity: 'warn' | 'error'; value: number }, agedMs: number): HealthWarning {
  if (reason.metric === 'aged') return { severity: reason.severity, title: 'The backlog is ageing', detail: `${reason.value} job(s) have been due for more than ${duration(agedMs)} without running.` };
  if (reason.metric === 'stuck') return { severity: reason.severity, title: 'Leases stuck past expiry', detail: `${reason.value} running job(s) hold a lease that has expired: their attempt crashed or hangs; the next sweep recovers them.` };
  return { severity: reason.severity, title: 'Jobs waiting to run', detail: `${reason.value} job(s) are due now.` };
}

function backlogTable(rows: readonly BacklogRow[], overall: 'ok' | 'warn' | 'error', totals: { due: number; aged: number; stuck: number }, thresholds: BacklogThresholds): Html {
  if (rows.length === 0) return html`<p class="muted">No pending, retrying or running jobs. Overall: ${sev(overall)}.</p>`;
  const sum = (k: keyof BacklogRow) => rows.reduce((n, b) => n + (b[k] as number), 0);
  return html`<table><thead><tr><th>kind</th><th>lane</th><th class="n">pending</th><th class="n">due</th><th class="n">running</th><th class="n">retrying</th><th class="n">aged</th><th class="n">stuck</th><th>grade</th></tr></thead><tbody>
${rows.map((b) => html`<tr><td>${b.kind}${b.unregistered > 0 ? html` <span class="warn">(not registered)</span>` : null}</td><td>${b.lane}</td><td class="n">${b.pending}</td><td class="n">${b.due}</td><td class="n">${b.processing}</td><td class="n">${b.retrying}</td><td class="n">${b.aged}</td><td class="n">${b.stuck}</td><td>${sev(evaluateBacklog({ due: b.due, aged: b.aged, stuck: b.stuck }, thresholds).severity)}</td></tr>`)}
<tr><th colspan="2">all</th><th class="n">${sum('pending')}</th><th class="n">${totals.due}</th><th class="n">${sum('processing')}</th><th class="n">${sum('retrying')}</th><th class="n">${totals.aged}</th><th class="n">${totals.stuck}</th><th>${sev(overall)}</th></tr>
</tbody></table>`;
}

function tableHealthSection(h: HealthFacts, grades: HealthGrades): Html {
  const ago = (ms: number | null, never: string) => (ms === null ? never : `${duration(ms)} ago`);
  return html`<h2>Outbox tables</h2>
<table id="tables"><thead><tr><th>table</th><th class="n">live tuples</th><th class="n">dead tuples</th><th class="n">size</th><th>last autovacuum</th><th>last manual vacuum</th><th>grade</th></tr></thead><tbody>
${h.tables.map((t, i) => html`<tr><td>${t.table}</td><td class="n">${t.liveTuples}</td><td class="n">${t.deadTuples} (${percentDead(t)}%)</td><td class="n">${size(t.totalBytes)}</td><td>${ago(t.lastAutovacuumAgeMs, 'never')}</td><td>${ago(t.lastVacuumAgeMs, 'never')}</td><td>${sev(worse(grades.tables[i]?.deadTuples ?? 'ok', grades.tables[i]?.autovacuum ?? 'ok'))}</td></tr>`)}
</tbody></table>
<h3>What holds back cleanup</h3>
${h.horizon.length === 0
  ? html`<p class="muted" id="horizon">Nothing in this database holds back the xmin horizon.</p>`
  : html`<ul id="horizon">${h.horizon.map((x, i) => html`<li>${holderText(x)} ${sev(grades.horizon[i] ?? 'ok')}</li>`)}</ul>`}
<p class="muted">Sessions, prepared transactions and logical slots of this database, physical slots and standbys of every database. Sizes include indexes.</p>`;
}

function holderText(x: HorizonHolder): string {
  const age = `${x.ageMs === null ? '' : `${duration(x.ageMs)}, `}${x.xidAge} transactions back`;
  if (x.kind === 'session') return `session ${x.pid}${x.applicationName ? ` (${x.applicationName})` : ''}, ${x.state ?? 'state hidden'}${x.backendType && x.backendType !== 'client backend' ? `, ${x.backendType}` : ''}: ${age}`;
  if (x.kind === 'prepared') return `prepared transaction ${x.gid}${x.owner ? ` (${x.owner})` : ''}: ${age}`;
  return `${x.active ? 'active' : 'inactive'} ${x.slotType} slot ${x.slotName}: ${age}`;
}

const size = (bytes: number) => (bytes < 1024 * 1024 ? `${Math.round(bytes / 1024)} KiB` : `${(bytes / 1024 / 1024).toFixed(1)} MiB`);

const worse = (a: 'ok' | 'warn' | 'error', b: 'ok' | 'warn' | 'error') => (a === 'error' || b === 'error' ? 'error' : a === 'warn' || b === 'warn' ? 'warn' : 'ok');

async function jobsPage<Env>(r: Req<Env>, s: Settings): Promise<Response> {
  const { raw: f, filter } = parseFilters((k) => r.url.searchParams.get(k), r.access);
  const order = r.url.searchParams.get('order') === 'asc' ? 'asc' : 'desc';
  const cursor = r.url.searchParams.get('cursor') ?? '';
  const where: JobFilter = r.access.scope ? { ...filter, tenantKey: r.access.tenantKey ?? null } : filter;
  const db = await r.db();
  const list = await listJobs(db, { ...where, limit: s.pageSize, order, ...(cursor ? { cursor } : {}), ...reads(r, s) });
  const { status: _status, ...withoutStatus } = where;
  const counts = await countJobs(db, { ...withoutStatus, ...reads(r, s) });
  const matching = filter.status ? counts[filter.status] : STATUSES.reduce((n, st) => n + counts[st], 0);

  const link = (over: Record<string, string | undefined>) => `${r.base}/jobs${qs({ ...f, order: order === 'asc' ? 'asc' : undefined, ...over })}`;
  const here = `${r.base}/jobs${qs({ ...f, order: order === 'asc' ? 'asc' : undefined, cursor: cursor || undefined })}`;
  const editable = !r.access.readOnly;
  const filtersForm = html`<form class="filters" method="get" action="${r.base}/jobs">
<label>status<select name="status"><option value="">any</option>${STATUSES.map((st) => html`<option value="${st}"${raw(f.status === st ? ' selected' : '')}>${st}</option>`)}</select></label>
<label>kind<input name="kind" value="${f.kind}" size="14"></label>
${r.access.scope ? null : html`<label>tenant<input name="tenant" value="${f.tenant}" size="10"></label>`}
<label>correlation id<input name="correlation" value="${f.correlation}" size="14"></label>
<label>created from (UTC)<input type="datetime-local" step="1" name="from" value="${f.from}"></label>
<label>created before (UTC)<input type="datetime-local" step="1" name="to" value="${f.to}"></label>
<label>order<select name="order"><option value="desc">newest first</option><option value="asc"${raw(order === 'asc' ? ' selected' : '')}>oldest first</option></select></label>
<button type="submit">Filter</button> <a href="${r.base}/jobs">clear</a></form>`;
  const tabs = html`<div class="tabs">${STATUSES.map((st) => html`<a class="${f.status === st ? 'on' : ''}" href="${link({ status: st })}">${st} <b>${counts[st]}</b></a>`)}<a class="${f.status ? '' : 'on'}" href="${link({ status: undefined })}">all</a></div>`;
  const rows = list.jobs.map((j) => jobRow(r, j, editable));
  const table = html`<table><thead><tr>${editable ? html`<th><input type="checkbox" id="select-all" aria-label="select all"></th>` : null}<th>id</th><th>kind</th><th>lane</th><th>status</th><th>tenant</th><th class="n">attempts</th><th>last error</th><th>created</th><th>due / finished</th></tr></thead>
<tbody>${rows.length > 0 ? rows : html`<tr><td colspan="10" class="muted">No jobs match.</td></tr>`}</tbody></table>`;
  const paging = html`<p>${cursor ? html`<a href="${link({})}">« first page</a> ` : null}${list.nextCursor ? html`<a rel="next" href="${link({ cursor: list.nextCursor })}">next page »</a>` : null}</p>`;
  const actions = editable
    ? html`<div class="actions"><span>Selected:</span>${ACTIONS.map((a) => html`<button type="submit" name="op" value="${a}:selected"${raw(a === 'cancel' ? ' class="danger"' : '')}>${ACTION_LABEL[a]}</button>`)}
<span>All ${matching} matching the filter:</span>${ACTIONS.map((a) => html`<button type="submit" name="op" value="${a}:filter"${raw(a === 'cancel' ? ' class="danger"' : '')}>${ACTION_LABEL[a]} all…</button>`)}</div>`
    : null;
  const body = html`<h1>Jobs</h1>${filtersForm}${tabs}
${editable
  ? html`<form method="post" action="${r.base}/actions">${hiddenAction(r, here)}${FILTER_KEYS.map((k) => html`<input type="hidden" name="f_${k}" value="${f[k]}">`)}${actions}${table}</form>`
  : table}
${paging}`;
  return page(r, 200, 'Jobs', body);
}

function jobRow<Env>(r: Req<Env>, j: JobView, editable: boolean): Html {
  return html`<tr>${editable ? html`<td><input type="checkbox" name="id" value="${j.id}" aria-label="select ${j.id}"></td>` : null}<td class="mono"><a href="${r.base}/jobs/${j.id}">${j.id}</a></td><td>${j.kind}</td><td>${j.lane}</td><td>${statusCell(j.status)}</td><td>${j.tenantKey ?? ''}</td><td class="n">${j.attempts}</td><td>${j.lastErrorCode ?? ''}</td><td>${when(j.createdAt)}</td><td>${j.finishedAt ? when(j.finishedAt) : when(j.dueAt)}</td></tr>`;
}

function hiddenAction<Env>(r: Req<Env>, returnTo: string): Html {
  return html`<input type="hidden" name="csrf" value="${r.token}"><input type="hidden" name="return" value="${returnTo}">`;
}

async function jobPage<Env>(r: Req<Env>, s: Settings, id: string): Promise<Response> {
  if (!UUID.test(id)) throw new HttpError(404, 'No such job: a job id is a UUID');
  const db = await r.db();
  const job = await getJob(db, { id, ...(r.access.scope ? { tenantKey: r.access.tenantKey ?? null } : {}), ...reads(r, s) });
  if (!job) return page(r, 404, 'Job not found', html`<h1>Job not found</h1><p>No job ${id}${r.access.scope ? ' in your tenant' : ''}.</p>`);
  const attempts = await listAttempts(db, { jobId: id, ...reads(r, s) });
  const here = `${r.base}/jobs/${job.id}`;
  // Only the actions the core would accept for this status (a dead job cannot be cancelled).
  const allowed = allowedActions(job.status);
  const body = html`<h1>Job <span class="mono">${job.id}</span></h1>
${r.access.readOnly || allowed.length === 0 ? null : html`<form method="post" action="${r.base}/actions" class="actions">${hiddenAction(r, here)}<input type="hidden" name="id" value="${job.id}">${allowed.map((a) => html`<button type="submit" name="op" value="${a}:selected"${raw(a === 'cancel' ? ' class="danger"' : '')}>${ACTION_LABEL[a]}</button>`)}</form>`}
<dl class="meta">
<dt>status</dt><dd>${statusCell(job.status)}</dd><dt>kind</dt><dd>${job.kind}</dd><dt>lane</dt><dd>${job.lane}</dd>
<dt>tenant</dt><dd>${job.tenantKey ?? ''}</dd><dt>dedupe key</dt><dd>${job.dedupeKey ?? ''}</dd>
<dt>correlation id</dt><dd>${job.correlationId ? html`<a href="${r.base}/jobs${qs({ correlation: job.correlationId })}">${job.correlationId}</a>` : ''}</dd>
<dt>attempts</dt><dd>${job.attempts} charged since the last replay, ${job.crashes} crash(es)</dd>
<dt>created</dt><dd>${when(job.createdAt)}</dd><dt>due</dt><dd>${when(job.dueAt)}</dd><dt>finished</dt><dd>${when(job.finishedAt)}</dd>
<dt>last error</dt><dd>${job.lastErrorCode ? html`<code>${job.lastErrorCode}</code>` : ''}</dd>
</dl>
${job.lastErrorMessage ? html`<h2>Last error message</h2><pre id="error">${job.lastErrorMessage}</pre>` : null}
<h2>Payload</h2><pre id="payload">${JSON.stringify(job.payload, null, 2)}</pre>
${job.metadata ? html`<h2>Metadata</h2><pre id="metadata">${JSON.stringify(job.metadata, null, 2)}</pre>` : null}
<h2>Attempts</h2>
${attempts.length === 0 ? html`<p class="muted">No attempt yet.</p>` : html`<table id="attempts"><thead><tr><th class="n">#</th><th>outcome</th><th>code</th><th>message</th><th>started</th><th>finished</th><th class="n">duration</th></tr></thead><tbody>
${attempts.map((a) => html`<tr><td class="n">${a.attempt}</td><td>${a.outcome ?? 'running'}</td><td>${a.code ?? ''}</td><td>${a.message ?? ''}</td><td>${when(a.startedAt)}</td><td>${when(a.finishedAt)}</td><td class="n">${duration(a.durationMs)}</td></tr>`)}
</tbody></table>`}`;
  return page(r, 200, `Job ${job.id}`, body);
}

// ---- actions -----------------------------------------------------------------------------------

async function handleAction<Env>(r: Req<Env>, s: Settings, secret: string | undefined, cookieNonce: string | undefined): Promise<Response> {
  if (r.access.readOnly) return plain(403, 'Read-only: actions are disabled');
  // Browsers say where a request came from in Sec-Fetch-Site, which pages cannot forge; our
  // own forms are same-origin. (The Origin header is not compared with the URL: proxies such as
  // `wrangler dev` may rewrite the host the Worker sees.)
  const site = r.request.headers.get('sec-fetch-site');
  if (site !== null && site !== 'same-origin' && site !== 'none') return plain(403, 'Cross-site request refused');
  const type = r.request.headers.get('content-type') ?? '';
  if (!type.startsWith('application/x-www-form-urlencoded') && !type.startsWith('multipart/form-data')) return plain(415, 'Expected a form');
  const length = Number(r.request.headers.get('content-length') ?? '0');
  if (length > MAX_FORM_BYTES) return plain(413, 'Form too large');
  const form = await r.request.formData();
  const field = (k: string) => {
    const v = form.get(k);
    return typeof v === 'string' ? v : null;
  };
  if (!(await verifyToken(secret, cookieNonce, field('csrf')))) return plain(403, 'CSRF token missing or invalid: reload the page and try again');

  const op = /^(cancel|replay|retryNow):(selected|filter)$/.exec(field('op') ?? '');
  if (!op) throw new HttpError(400, 'op must be <cancel|replay|retryNow>:<selected|filter>');
  const action = op[1] as OperatorAction;
  const returnTo = safeReturn(r, field('return'));
  const outbox = r.outbox();
  r.named(); // the outbox acted on must be the one the pages show

  if (op[2] === 'selected') {
    const ids = [...new Set(form.getAll('id').filter((v): v is string => typeof v === 'string'))];
    if (ids.length === 0) throw new HttpError(400, 'Select at least one job');
    if (ids.length > MAX_SELECTION) throw new HttpError(400, `At most ${MAX_SELECTION} jobs per selection: act on the filter instead`);
    const bad = ids.find((id) => !UUID.test(id));
    if (bad !== undefined) throw new HttpError(400, 'A selected id is not a job id');
    const results =
      action === 'cancel' ? await outbox.cancelMany(ids, 'cancelled', r.access.scope)
      : action === 'replay' ? await outbox.replayMany(ids, r.access.scope)
      : await outbox.retryNowMany(ids, r.access.scope);
    return redirect(returnTo, action, summarise(results), false);
  }

  const { raw: f, filter } = parseFilters((k) => field(`f_${k}`), r.access);
  const db = await r.db();
  if (field('confirm') !== '1') {
    const dry = await operateMatching(outbox, db, action, filter, { scope: r.access.scope, dryRun: true, max: s.bulkMax, statementTimeoutMs: s.statementTimeoutMs });
    const described = FILTER_KEYS.filter((k) => f[k]).map((k) => `${k} = ${f[k]}`).join(', ') || 'no filter: every job';
    const body = html`<h1>${ACTION_LABEL[action]} ${dry.matched}${dry.truncated ? '+' : ''} job(s)?</h1>
<p>Matching: <code>${described}</code>${r.access.scope ? ' (your tenant only)' : ''}.${dry.truncated ? html` At most ${s.bulkMax} are acted on per run.` : null}</p>
<p class="muted">The core decides per job: jobs whose status does not allow it are left alone and counted as refused.</p>
<form method="post" action="${r.base}/actions" class="actions">${hiddenAction({ ...r, token: field('csrf')! }, returnTo)}${FILTER_KEYS.map((k) => html`<input type="hidden" name="f_${k}" value="${f[k]}">`)}
<input type="hidden" name="confirm" value="1"><button type="submit" name="op" value="${action}:filter"${raw(action === 'cancel' ? ' class="danger"' : '')}>${ACTION_LABEL[action]} ${dry.matched} job(s)</button> <a href="${returnTo}">back</a></form>`;
    return page(r, 200, 'Confirm', body);
  }
  const report = await operateMatching(outbox, db, action, filter, { scope: r.access.scope, max: s.bulkMax, statementTimeoutMs: s.statementTimeoutMs });
  return redirect(returnTo, action, { changed: report.changed, refused: report.invalidState, missing: report.notFound }, report.truncated);
}

function summarise(results: readonly OperateResult[]) {
  let changed = 0;
  let refused = 0;
  let missing = 0;
  for (const res of results) {
    if (res.status === 'ok') changed++;
    else if (res.status === 'invalid_state') refused++;
    else missing++;
  }
  return { changed, refused, missing };
}

/** Where to go after an action: a dashboard page on this origin, else the job list. */
function safeReturn<Env>(r: Req<Env>, value: string | null): string {
  const fallback = `${r.base}/jobs`;
  if (!value || !value.startsWith('/') || value.startsWith('//') || value.includes('\\')) return fallback;
  let target: URL;
  try {
    target = new URL(value, r.url.origin);
  } catch {
    return fallback;
  }
  if (target.origin !== r.url.origin || (target.pathname !== r.base && !target.pathname.startsWith(`${r.base}/`))) return fallback;
  for (const k of NOTICE_KEYS) target.searchParams.delete(k);
  return target.pathname + target.search;
}

function redirect(to: string, action: OperatorAction, n: { changed: number; refused: number; missing: number }, truncated: boolean): Response {
  const target = new URL(to, 'http://x');
  target.searchParams.set('done', action);
  target.searchParams.set('changed', String(n.changed));
  target.searchParams.set('refused', String(n.refused));
  target.searchParams.set('missing', String(n.missing));
  if (truncated) target.searchParams.set('truncated', '1');
  return new Response(null, { status: 303, headers: { ...SECURITY_HEADERS, location: target.pathname + target.search } });
}
