// The dashboard's pages: the overview (backlog, charts, health), the job list and one job.
import { getCore } from '../core/core.js';
import { gradeHealth, type HealthFacts, type HealthGrades, type HorizonHolder, readHealthFacts } from '../inspect/health.js';
import {
  type BacklogRow, type BacklogThresholds, countBacklog, countJobs, type DependencyView, evaluateBacklog, getBatch, type BatchView, getJob, getJobDependencies, type JobFilter, type JobView, listAttempts, listJobs,
} from '../inspect/index.js';
import { readOnly } from '../inspect/read.js';
import { allowedActions } from '../operate.js';
import { failureRateChart, throughputChart } from './charts.js';
import { html, type Html, raw } from './html.js';
import { ACTION_LABEL, ACTIONS, duration, FILTER_KEYS, HttpError, page, parseFilters, qs, reads, type Req, type Settings, sev, statusCell, STATUSES, UUID, when } from './request.js';
import { attemptRates, deadLetterGrowth, gradeDeadLetters, gradeTableHealth, type HealthWarning, percentDead } from './stats.js';
import type { CorePolicy } from '../types.js';

export async function overviewPage<Env>(r: Req<Env>, s: Settings): Promise<Response> {
  const db = await r.db();
  const tenant = r.access.tenantKey === undefined ? {} : { tenantKey: r.access.tenantKey };
  const counts = await countJobs(db, { ...tenant, ...reads(r, s) });
  const core = getCore();
  // The core's cut-offs: how long "aged" is, and dead letters per window of its length.
  const cut = core.call<{ agedBefore: number; deadLetterWindowMs: number }>('backlog', { op: 'window', now: r.now, agedMs: s.agedMs ?? null });
  const agedMs = r.now - cut.agedBefore;
  const deadLetterWindowMs = cut.deadLetterWindowMs;
  const backlog = await countBacklog(db, { ...tenant, now: r.now, agedMs, registeredKinds: r.outbox().kinds, limits: r.outbox().limits, ...reads(r, s) });
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
${flowLimits(r.outbox().limits, backlog)}
<h2>Throughput and failures, last ${duration(s.windowMs)}</h2>
<div class="charts">${throughputChart(stats.rates, bucketMs)}${failureRateChart(stats.rates, bucketMs)}</div>
${stats.health ? tableHealthSection(stats.health, grades) : null}`;
  return page(r, 200, 'Overview', body);
}

export function backlogWarning(reason: { metric: string; severity: 'warn' | 'error'; value: number }, agedMs: number): HealthWarning {
  if (reason.metric === 'aged') return { severity: reason.severity, title: 'The backlog is ageing', detail: `${reason.value} job(s) have been due for more than ${duration(agedMs)} without running.` };
  if (reason.metric === 'stuck') return { severity: reason.severity, title: 'Leases stuck past expiry', detail: `${reason.value} running job(s) hold a lease that has expired: their attempt crashed or hangs; the next sweep recovers them.` };
  return { severity: reason.severity, title: 'Jobs waiting to run', detail: `${reason.value} job(s) are due now.` };
}

export function backlogTable(rows: readonly BacklogRow[], overall: 'ok' | 'warn' | 'error', totals: { due: number; aged: number; stuck: number }, thresholds: BacklogThresholds): Html {
  if (rows.length === 0) return html`<p class="muted">No pending, retrying or running jobs. Overall: ${sev(overall)}.</p>`;
  const sum = (k: keyof BacklogRow) => rows.reduce((n, b) => n + (b[k] as number), 0);
  return html`<table><thead><tr><th>kind</th><th>lane</th><th class="n">pending</th><th class="n">due</th><th class="n">running</th><th class="n">retrying</th><th class="n">aged</th><th class="n">stuck</th><th>grade</th></tr></thead><tbody>
${rows.map((b) => html`<tr><td>${b.kind}${b.unregistered > 0 ? html` <span class="warn">(not registered)</span>` : null}</td><td>${b.lane}</td><td class="n">${b.pending}</td><td class="n">${b.due}</td><td class="n">${b.processing}</td><td class="n">${b.retrying}</td><td class="n">${b.aged}</td><td class="n">${b.stuck}</td><td>${sev(evaluateBacklog({ due: b.due, aged: b.aged, stuck: b.stuck }, thresholds).severity)}</td></tr>`)}
<tr><th colspan="2">all</th><th class="n">${sum('pending')}</th><th class="n">${totals.due}</th><th class="n">${sum('processing')}</th><th class="n">${sum('retrying')}</th><th class="n">${totals.aged}</th><th class="n">${totals.stuck}</th><th>${sev(overall)}</th></tr>
</tbody></table>`;
}

export function tableHealthSection(h: HealthFacts, grades: HealthGrades): Html {
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

export function holderText(x: HorizonHolder): string {
  const age = `${x.ageMs === null ? '' : `${duration(x.ageMs)}, `}${x.xidAge} transactions back`;
  if (x.kind === 'session') return `session ${x.pid}${x.applicationName ? ` (${x.applicationName})` : ''}, ${x.state ?? 'state hidden'}${x.backendType && x.backendType !== 'client backend' ? `, ${x.backendType}` : ''}: ${age}`;
  if (x.kind === 'prepared') return `prepared transaction ${x.gid}${x.owner ? ` (${x.owner})` : ''}: ${age}`;
  return `${x.active ? 'active' : 'inactive'} ${x.slotType} slot ${x.slotName}: ${age}`;
}

export const size = (bytes: number) => (bytes < 1024 * 1024 ? `${Math.round(bytes / 1024)} KiB` : `${(bytes / 1024 / 1024).toFixed(1)} MiB`);

export const worse = (a: 'ok' | 'warn' | 'error', b: 'ok' | 'warn' | 'error') => (a === 'error' || b === 'error' ? 'error' : a === 'warn' || b === 'warn' ? 'warn' : 'ok');

export async function jobsPage<Env>(r: Req<Env>, s: Settings): Promise<Response> {
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

export function jobRow<Env>(r: Req<Env>, j: JobView, editable: boolean): Html {
  return html`<tr>${editable ? html`<td><input type="checkbox" name="id" value="${j.id}" aria-label="select ${j.id}"></td>` : null}<td class="mono"><a href="${r.base}/jobs/${j.id}">${j.id}</a></td><td>${j.kind}</td><td>${j.lane}</td><td>${statusCell(j.status)}</td><td>${j.tenantKey ?? ''}</td><td class="n">${j.attempts}</td><td>${j.lastErrorCode ?? ''}</td><td>${when(j.createdAt)}</td><td>${j.finishedAt ? when(j.finishedAt) : when(j.dueAt)}</td></tr>`;
}

export function hiddenAction<Env>(r: Req<Env>, returnTo: string): Html {
  return html`<input type="hidden" name="csrf" value="${r.token}"><input type="hidden" name="return" value="${returnTo}">`;
}

export async function jobPage<Env>(r: Req<Env>, s: Settings, id: string): Promise<Response> {
  if (!UUID.test(id)) throw new HttpError(404, 'No such job: a job id is a UUID');
  const db = await r.db();
  const job = await getJob(db, { id, ...(r.access.scope ? { tenantKey: r.access.tenantKey ?? null } : {}), ...reads(r, s) });
  if (!job) return page(r, 404, 'Job not found', html`<h1>Job not found</h1><p>No job ${id}${r.access.scope ? ' in your tenant' : ''}.</p>`);
  const attempts = await listAttempts(db, { jobId: id, ...reads(r, s) });
  const scoped = r.access.scope ? { tenantKey: r.access.tenantKey ?? null } : {};
  const deps = await getJobDependencies(db, { id, ...scoped, limit: LISTED_DEPENDENCIES, ...reads(r, s) });
  const tally = deps && deps.parents.length > 0 ? await getBatch(db, { id, ...scoped, ...reads(r, s) }) : null;
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
${parentTally(tally)}
${dependencyTable(r, 'Parents', 'parents', deps?.parents ?? [], job.status === 'waiting' ? 'it waits until every one has finished' : null)}
${dependencyTable(r, 'Children', 'children', deps?.children ?? [], null)}
<h2>Attempts</h2>
${attempts.length === 0 ? html`<p class="muted">No attempt yet.</p>` : html`<table id="attempts"><thead><tr><th class="n">#</th><th>outcome</th><th>code</th><th>message</th><th>started</th><th>finished</th><th class="n">duration</th></tr></thead><tbody>
${attempts.map((a) => html`<tr><td class="n">${a.attempt}</td><td>${a.outcome ?? 'running'}</td><td>${a.code ?? ''}</td><td>${a.message ?? ''}</td><td>${when(a.startedAt)}</td><td>${when(a.finishedAt)}</td><td class="n">${duration(a.durationMs)}</td></tr>`)}
</tbody></table>`}`;
  return page(r, 200, `Job ${job.id}`, body);
}

/** How many parents (a batch's members) a job page lists, and children. */
const LISTED_DEPENDENCIES = 100;

/** A job's parents counted (a batch's members): how many, in which status now, and how many ended failing. */
function parentTally(b: BatchView | null): Html | null {
  if (!b) return null;
  const now = STATUSES.filter((status) => b.byStatus[status]).map((status) => `${b.byStatus[status]} ${status}`);
  if (b.gone > 0) now.push(`${b.gone} deleted by retention`);
  return html`<h2>Parents' ends</h2><p id="parent-tally">${b.members} parent(s) (a batch's members, if this job completes one): ${now.join(', ')}; ${b.ended.dead} ended dead and ${b.ended.cancelled} cancelled as counted.</p>`;
}

/** A job's parents or children (dependsOn), linked to their pages; nothing when it has none. */
function dependencyTable<Env>(r: Req<Env>, title: string, id: string, rows: readonly DependencyView[], note: string | null): Html | null {
  if (rows.length === 0) return null;
  if (rows.length >= LISTED_DEPENDENCIES) note = `${note ? `${note}; ` : ''}the first ${LISTED_DEPENDENCIES} by id`;
  return html`<h2>${title}</h2>${note ? html`<p class="muted">${note}</p>` : null}
<table id="${id}"><thead><tr><th>Job</th><th>kind</th><th>status</th></tr></thead><tbody>
${rows.map((d) => html`<tr><td class="mono">${d.kind === null ? d.id : html`<a href="${r.base}/jobs/${d.id}">${d.id}</a>`}</td><td>${d.kind ?? 'deleted by retention'}</td><td>${d.status ? statusCell(d.status) : ''}</td></tr>`)}
</tbody></table>`;
}

// ---- actions -----------------------------------------------------------------------------------

/** The flow limits in force, and how many due jobs each holds back now. */
function flowLimits(limits: readonly { kind: string; policy: CorePolicy }[], backlog: readonly BacklogRow[]): Html | null {
  if (limits.length === 0) return null;
  const held = (kind: string) => backlog.filter((b) => b.kind === kind).reduce((n, b) => n + (b.throttled ?? 0), 0);
  const rate = (p: CorePolicy) => (p.rateSlots ? `${p.rateSlots} starts per ${duration(p.rateHoldMs ?? 0)}` : '—');
  return html`<h2>Flow limits</h2>
<table class="flow-limits"><thead><tr><th>Kind</th><th>Concurrency</th><th>Per tenant</th><th>Rate</th><th>Held back now</th></tr></thead>
<tbody>${limits.map((l) => html`<tr><td>${l.kind}</td><td>${l.policy.concurrency ?? '—'}</td><td>${l.policy.tenantConcurrency ?? '—'}</td><td>${rate(l.policy)}</td><td>${held(l.kind)}</td></tr>`)}</tbody></table>`;
}
