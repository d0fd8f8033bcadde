/**
 * Commands that read (and `migrate`): every query but the migrator's goes through the
 * read-only, time-bounded inspection path.
 * @module
 */
import { countBacklog, evaluateBacklog, getJob, listAttempts, listJobs, type JobView } from '../inspect/index.js';
import { migrate, OUTBOX_MIGRATIONS } from '../sql/index.js';
import { outboxSchemaName } from '../name.js';
import { PostboxError } from '../errors.js';
import { checkUuid, nonEmpty, toFilter, type FilterFlags } from './args.js';
import { withClient } from './connect.js';
import { clip, EXIT, print, printJson, safe, table, time } from './output.js';

interface JsonFlag {
  json?: boolean;
  /** `--name`: the named outbox (default: the default outbox). */
  name?: string;
}

/** The inspection option for `--name`. */
const outboxOf = (opts: JsonFlag) => (opts.name === undefined ? {} : { outbox: opts.name });

export async function migrateCommand(databaseUrl: string, opts: JsonFlag): Promise<number> {
  const { applied } = await withClient(databaseUrl, (client) => migrate(client, opts.name === undefined ? {} : { name: opts.name }));
  const latest = OUTBOX_MIGRATIONS.at(-1)?.version ?? 0;
  const schema = outboxSchemaName(opts.name);
  const names = applied.map((v) => {
    const m = OUTBOX_MIGRATIONS.find((x) => x.version === v)!;
    return `${String(m.version).padStart(4, '0')}_${m.name}`;
  });
  // The default outbox's messages stay as they were; a named one's say which schema.
  const where = opts.name === undefined ? '' : ` in schema ${schema}`;
  if (opts.json) printJson({ applied: names, latest, ...(opts.name === undefined ? {} : { schema }) });
  else if (applied.length === 0) print(`schema${opts.name === undefined ? '' : ` ${schema}`} is up to date (migration ${latest})`);
  else print(`applied ${applied.length} migration${applied.length === 1 ? '' : 's'}${where}: ${names.join(', ')}`);
  return EXIT.ok;
}

export async function verifySchemaCommand(databaseUrl: string, opts: JsonFlag): Promise<number> {
  // drizzle-orm is an optional peer of the package: load the check only when asked for.
  let verify: typeof import('../drizzle/index.js').verifyOutboxSchema;
  try {
    ({ verifyOutboxSchema: verify } = await import('../drizzle/index.js'));
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_MODULE_NOT_FOUND') {
      throw new PostboxError('missing_dependency', 'verify-schema needs drizzle-orm installed beside postbox (npm install drizzle-orm)');
    }
    throw error;
  }
  const drift = await withClient(databaseUrl, (client) => verify(client, opts.name === undefined ? {} : { name: opts.name }));
  const schema = outboxSchemaName(opts.name);
  if (opts.json) printJson({ ok: drift.length === 0, drift });
  else if (drift.length === 0) print('schema matches: no drift');
  else {
    print(`schema drift (${drift.length}):`);
    print(table(['PROBLEM', 'WHERE', 'DETAIL'], drift.map((d) => describeDrift(d, schema))));
  }
  return drift.length === 0 ? EXIT.ok : EXIT.failed;
}

function describeDrift(d: Awaited<ReturnType<typeof import('../drizzle/index.js').verifyOutboxSchema>>[number], schema: string): string[] {
  switch (d.type) {
    case 'unsupported_server':
      return [d.type, 'server', `server_version_num ${d.serverVersionNum} (14 or newer needed)`];
    case 'missing_table':
      return [d.type, `${schema}.${d.table}`, ''];
    case 'missing_column':
      return [d.type, `${schema}.${d.table}.${d.column}`, ''];
    case 'changed_column':
      return [d.type, `${schema}.${d.table}.${d.column}`, `expected ${d.expected}, found ${d.actual}`];
    case 'missing_index':
    case 'invalid_index':
      return [d.type, `${schema}.${d.table}`, d.index];
    case 'missing_constraint':
      return [d.type, `${schema}.${d.table}`, d.constraint];
    case 'missing_function':
      return [d.type, `${schema}.${d.function}`, ''];
    case 'missing_trigger':
    case 'disabled_trigger':
      return [d.type, `${schema}.${d.table}`, d.trigger];
  }
}

export async function statusCommand(
  databaseUrl: string,
  opts: JsonFlag & { agedMs: number; failOn?: 'warn' | 'error'; tenant?: string | false },
): Promise<number> {
  const tenant = opts.tenant === undefined ? {} : { tenantKey: opts.tenant === false ? null : nonEmpty(opts.tenant, '--tenant') };
  const backlog = await withClient(databaseUrl, (client) => countBacklog(client, { agedMs: opts.agedMs, ...tenant, ...outboxOf(opts) }));
  // The grading is the core's, per row and for the sums; the command line only adds up.
  // The command line registers no kinds, so `unregistered` (always 0 here) is left out.
  const rows = backlog.map(({ processing, unregistered: _none, ...r }) => ({ ...r, running: processing, severity: evaluateBacklog(r).severity }));
  const sum = (key: 'pending' | 'retrying' | 'due' | 'aged' | 'scheduled' | 'running' | 'stuck') => rows.reduce((n, r) => n + r[key], 0);
  const totals = {
    pending: sum('pending'), retrying: sum('retrying'), due: sum('due'), aged: sum('aged'), scheduled: sum('scheduled'), running: sum('running'), stuck: sum('stuck'),
  };
  const health = evaluateBacklog(totals);
  if (opts.json) {
    printJson({ rows, totals, severity: health.severity, reasons: health.reasons });
  } else if (rows.length === 0) {
    print('backlog: empty (no pending, retrying or running jobs)');
    print(`severity: ${health.severity}`);
  } else {
    const line = (kind: string, lane: string, r: typeof totals, severity: string) =>
      [kind, lane, r.pending, r.retrying, r.due, r.aged, r.scheduled, r.running, r.stuck, severity];
    print(table(['KIND', 'LANE', 'PENDING', 'RETRYING', 'DUE', 'AGED', 'SCHEDULED', 'RUNNING', 'STUCK', 'SEVERITY'], [
      ...rows.map((r) => line(r.kind, r.lane, r, r.severity)),
      line('(total)', '', totals, health.severity),
    ]));
    print('');
    const reasons = health.reasons.map((r) => `${r.metric} ${r.value} (${r.severity})`).join(', ');
    print(`severity: ${health.severity}${reasons ? ` — ${reasons}` : ''}`);
  }
  const failed = opts.failOn === 'warn' ? health.severity !== 'ok' : opts.failOn === 'error' ? health.severity === 'error' : false;
  return failed ? EXIT.failed : EXIT.ok;
}

export async function listCommand(
  databaseUrl: string,
  opts: FilterFlags & JsonFlag & { limit: number; cursor?: string; order: 'asc' | 'desc' },
): Promise<number> {
  const filter = toFilter(opts);
  const page = await withClient(databaseUrl, (client) =>
    listJobs(client, { ...filter, ...outboxOf(opts), limit: opts.limit, order: opts.order, ...(opts.cursor ? { cursor: opts.cursor } : {}) }),
  );
  if (opts.json) {
    printJson(page);
    return EXIT.ok;
  }
  if (page.jobs.length === 0) print('no jobs match');
  else print(table(['ID', 'KIND', 'STATUS', 'TENANT', 'ATTEMPTS', 'DUE', 'CREATED', 'LAST ERROR'], page.jobs.map(jobRow)));
  if (page.nextCursor) print(`\nmore: --cursor ${page.nextCursor}`);
  return EXIT.ok;
}

const jobRow = (j: JobView) => [j.id, j.kind, j.status, j.tenantKey, j.attempts, time(j.dueAt), time(j.createdAt), clip(j.lastErrorCode && `${j.lastErrorCode}${j.lastErrorMessage ? `: ${j.lastErrorMessage}` : ''}`)];

export async function showCommand(databaseUrl: string, rawId: string, opts: JsonFlag & { tenant?: string | false }): Promise<number> {
  const id = checkUuid(rawId, 'job id');
  const tenant = opts.tenant === undefined ? {} : { tenantKey: opts.tenant === false ? null : opts.tenant };
  const found = await withClient(databaseUrl, async (client) => {
    const job = await getJob(client, { id, ...tenant, ...outboxOf(opts) });
    // The job was found in the tenant scope, so its attempts are the operator's to see.
    return job ? { job, attempts: await listAttempts(client, { jobId: id, ...outboxOf(opts) }) } : null;
  });
  if (!found) {
    process.stderr.write(`postbox: no job ${id}${opts.tenant === undefined ? '' : ' in that tenant scope'}\n`);
    return EXIT.failed;
  }
  if (opts.json) {
    printJson(found);
    return EXIT.ok;
  }
  const { job, attempts } = found;
  const fields: [string, unknown][] = [
    ['id', job.id], ['kind', job.kind], ['lane', job.lane], ['status', job.status], ['tenant', job.tenantKey],
    ['dedupe key', job.dedupeKey], ['correlation id', job.correlationId], ['attempts', job.attempts], ['crashes', job.crashes],
    ['due', time(job.dueAt)], ['created', time(job.createdAt)], ['finished', time(job.finishedAt)],
    ['last error', job.lastErrorCode && `${job.lastErrorCode}${job.lastErrorMessage ? `: ${job.lastErrorMessage}` : ''}`],
  ];
  const width = Math.max(...fields.map(([k]) => k.length));
  for (const [k, v] of fields) print(`${k.padEnd(width)}  ${v === null || v === undefined ? '-' : safe(String(v))}`);
  print(`\npayload:\n${indent(JSON.stringify(job.payload, null, 2))}`);
  if (job.metadata) print(`metadata:\n${indent(JSON.stringify(job.metadata, null, 2))}`);
  print('');
  if (attempts.length === 0) print('attempts: none');
  else {
    print('attempts:');
    print(table(['#', 'OUTCOME', 'CODE', 'STARTED', 'FINISHED', 'DURATION MS', 'MESSAGE'], attempts.map((a) => [
      a.attempt, a.outcome ?? 'running', a.code, time(a.startedAt), time(a.finishedAt), a.durationMs, clip(a.message),
    ])));
  }
  return EXIT.ok;
}

// JSON.stringify escapes C0 controls but not C1 ones (U+0080..U+009F): safe() covers both.
const indent = (text: string) => safe(text).split('\n').map((l) => `  ${l}`).join('\n');
