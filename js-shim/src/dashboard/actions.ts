// The dashboard's actions: cancel, replay or retry now on one job, a selection or a filter, each
// decided per job by the core through the outbox, behind the CSRF check.
import { operateMatching, type OperatorAction } from '../operate.js';
import type { OperateResult } from '../outbox.js';
import { verifyToken } from './csrf.js';
import { html, raw } from './html.js';
import { hiddenAction } from './pages.js';
import { ACTION_LABEL, FILTER_KEYS, HttpError, MAX_FORM_BYTES, MAX_SELECTION, NOTICE_KEYS, page, parseFilters, plain, type Req, SECURITY_HEADERS, type Settings, UUID } from './request.js';

export async function handleAction<Env>(r: Req<Env>, s: Settings, secret: string | undefined, cookieNonce: string | undefined): Promise<Response> {
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

export function summarise(results: readonly OperateResult[]) {
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
export function safeReturn<Env>(r: Req<Env>, value: string | null): string {
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

export function redirect(to: string, action: OperatorAction, n: { changed: number; refused: number; missing: number }, truncated: boolean): Response {
  const target = new URL(to, 'http://x');
  target.searchParams.set('done', action);
  target.searchParams.set('changed', String(n.changed));
  target.searchParams.set('refused', String(n.refused));
  target.searchParams.set('missing', String(n.missing));
  if (truncated) target.searchParams.set('truncated', '1');
  return new Response(null, { status: 303, headers: { ...SECURITY_HEADERS, location: target.pathname + target.search } });
}

