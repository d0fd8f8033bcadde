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
import { PostboxError } from '../errors.js';
import type { BacklogThresholds } from '../inspect/index.js';
import { checkOutboxName } from '../name.js';
import { type Outbox, RUN } from '../outbox.js';
import type { TransactionalDb } from '../stores/pg/db.js';
import type { LaneConnection } from '../types.js';
import { handleAction } from './actions.js';
import { SCRIPT, STYLE } from './assets.js';
import { CSRF_COOKIE, isNonce, newNonce, readCookie, tokenFor } from './csrf.js';
import { html } from './html.js';
import { jobPage, jobsPage, overviewPage } from './pages.js';
import { type Access, asset, errorPage, HttpError, outboxOf, page, plain, type Req, type Settings } from './request.js';

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

