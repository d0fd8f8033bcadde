/**
 * Commands that change jobs. They go through an outbox without job definitions: the outbox
 * locks the jobs and the core decides per job whether the action applies. The command line
 * has no Queue binding, so replayed and retried jobs are not nudged: the next cron sweep runs
 * them.
 * @module
 */
import { createInterface } from 'node:readline/promises';
import type { TransactionalDb } from '../stores/pg/db.js';
import { countJobs, getJob } from '../inspect/index.js';
import { readOnly } from '../inspect/read.js';
import { operateMatching, type OperateMatchingReport, type OperatorAction } from '../operate.js';
import { createOutbox, type OperateResult } from '../outbox.js';
import { createPgConnector } from '../pg/index.js';
import { checkUuid, hasSelection, toFilter, toScope, UsageError, type FilterFlags } from './args.js';
import { withClient } from './connect.js';
import { EXIT, note, print, printJson, table } from './output.js';

/** The command names of the operator actions. */
export type ActionCommand = 'cancel' | 'replay' | 'retry-now';

const ACTIONS: Record<ActionCommand, OperatorAction> = { cancel: 'cancel', replay: 'replay', 'retry-now': 'retryNow' };
const DONE: Record<OperatorAction, string> = { cancel: 'cancelled', replay: 'replayed', retryNow: 'made due now' };
const SWEEP_NOTE = 'note: the command line has no queue to nudge; the next cron sweep runs these jobs';

export interface ActFlags extends FilterFlags {
  all?: boolean;
  dryRun?: boolean;
  yes?: boolean;
  max?: number;
  reason?: string;
  json?: boolean;
  /** `--name`: the named outbox (default: the default outbox). */
  name?: string;
}

/** An outbox without jobs for the operator's actions: the default one, or the one `--name` names. */
const operatorOutbox = (databaseUrl: string, name: string | undefined) =>
  createOutbox({ jobs: [], connect: createPgConnector(databaseUrl), ...(name === undefined ? {} : { name }) });

/** The inspection option for `--name`. */
const outboxOf = (name: string | undefined) => (name === undefined ? {} : { outbox: name });

/** `cancel` / `replay` / `retry-now`, by ids or by filter. */
export async function actCommand(databaseUrl: string, command: ActionCommand, rawIds: string[], flags: ActFlags): Promise<number> {
  const action = ACTIONS[command];
  const ids = [...new Set(rawIds.map((id) => checkUuid(id, 'job id')))];
  const scope = toScope(flags);
  const selecting = hasSelection(flags) || flags.all === true;
  if (ids.length > 0 && selecting) throw new UsageError(`${command}: name job ids or filter flags, not both (--tenant may scope either)`);
  if (ids.length === 0 && !selecting) {
    throw new UsageError(`${command}: name job ids, or select jobs with filter flags (--status, --kind, …) or --all`);
  }
  if (ids.length > 0 && flags.max !== undefined) throw new UsageError('--max limits a filter; it does not apply to ids');
  if (flags.reason !== undefined && flags.reason.trim() === '') throw new UsageError('--reason must not be empty');
  const outbox = operatorOutbox(databaseUrl, flags.name);
  const reason = flags.reason ?? 'cancelled';

  if (ids.length > 0) {
    if (flags.dryRun) return previewIds(databaseUrl, command, ids, flags);
    const results =
      action === 'cancel' ? await outbox.cancelMany(ids, reason, scope)
      : action === 'replay' ? await outbox.replayMany(ids, scope)
      : await outbox.retryNowMany(ids, scope);
    return finish(summarize(action, ids, results), flags);
  }

  const filter = toFilter(flags);
  const common = { ...(scope ? { scope } : {}), ...(flags.max !== undefined ? { max: flags.max } : {}), reason };
  return withClient(databaseUrl, async (client) => {
    if (flags.dryRun) {
      const preview = await operateMatching(outbox, client, action, filter, { ...common, dryRun: true });
      if (flags.json) printJson(preview);
      else {
        print(`would ${command} ${plural(preview.matched)} (dry run: nothing changed; the core decides per job when the action runs)`);
        for (const id of preview.ids) print(`  ${id}`);
        if (preview.truncated) print(`stopped at --max ${flags.max}; more jobs match`);
      }
      return EXIT.ok;
    }
    let max = flags.max;
    if (!flags.yes) {
      requireTerminal(`${command} by filter acts on every matching job`);
      const preview = await operateMatching(outbox, client, action, filter, { ...common, dryRun: true });
      if (preview.matched === 0) {
        print('no jobs match: nothing to do');
        return EXIT.ok;
      }
      if (!(await confirm(`${command} ${plural(preview.matched)} matching the filter${preview.truncated ? ' (the first ones, by --max)' : ''}?`))) {
        note('aborted: nothing changed');
        return EXIT.failed;
      }
      // What was confirmed bounds what is done, even if more jobs match by now.
      max = Math.min(max ?? Infinity, preview.matched);
    }
    const report = await operateMatching(outbox, client, action, filter, { ...common, ...(max !== undefined ? { max } : {}) });
    return finish(report, flags);
  });
}

async function previewIds(databaseUrl: string, command: ActionCommand, ids: string[], flags: ActFlags): Promise<number> {
  const tenant = flags.tenant === undefined ? {} : { tenantKey: flags.tenant === false ? null : flags.tenant };
  const jobs = await withClient(databaseUrl, async (client) => {
    const out: { id: string; kind: string | null; status: string | null }[] = [];
    for (const id of ids) {
      const job = await getJob(client, { id, ...tenant, ...outboxOf(flags.name) });
      out.push({ id, kind: job?.kind ?? null, status: job?.status ?? null });
    }
    return out;
  });
  if (flags.json) printJson({ action: ACTIONS[command], dryRun: true, matched: jobs.filter((j) => j.status).length, jobs });
  else {
    print(`would ${command} these jobs (dry run: nothing changed; the core decides per job when the action runs)`);
    print(table(['ID', 'KIND', 'STATUS'], jobs.map((j) => [j.id, j.kind, j.status ?? 'not found'])));
  }
  return EXIT.ok;
}

function summarize(action: OperatorAction, ids: string[], results: OperateResult[]): OperateMatchingReport {
  return {
    action, dryRun: false, matched: ids.length, ids, results, truncated: false,
    changed: results.filter((r) => r.status === 'ok').length,
    invalidState: results.filter((r) => r.status === 'invalid_state').length,
    notFound: results.filter((r) => r.status === 'not_found').length,
  };
}

function finish(report: OperateMatchingReport, flags: ActFlags): number {
  if (flags.json) printJson(report);
  else {
    print(`${DONE[report.action]}: ${report.changed} of ${plural(report.matched)}; refused: ${report.invalidState}; not found: ${report.notFound}`);
    const problems = report.results.filter((r) => r.status !== 'ok');
    if (problems.length > 0) {
      print(table(['ID', 'RESULT', 'STATUS'], problems.map((r) => [r.id, r.status === 'invalid_state' ? 'refused' : 'not found', r.jobStatus])));
    }
    if (report.truncated) print(`stopped at --max ${flags.max}; more jobs match`);
  }
  if (report.action !== 'cancel' && report.changed > 0) note(SWEEP_NOTE);
  return report.invalidState + report.notFound > 0 ? EXIT.failed : EXIT.ok;
}

/** `erase-tenant <tenantKey>`: deletes the tenant's jobs and their attempts. */
export async function eraseTenantCommand(databaseUrl: string, tenantKey: string, flags: { dryRun?: boolean; yes?: boolean; json?: boolean; name?: string }): Promise<number> {
  if (tenantKey.length === 0) throw new UsageError('erase-tenant: the tenant key must not be empty');
  if (flags.dryRun) {
    const counts = await withClient(databaseUrl, (client) => countJobs(client, { tenantKey, ...outboxOf(flags.name) }));
    const jobs = Object.values(counts).reduce((a, b) => a + b, 0);
    if (flags.json) printJson({ tenantKey, dryRun: true, jobs });
    else print(`would erase ${plural(jobs)} of tenant ${JSON.stringify(tenantKey)} (dry run: nothing changed)`);
    return EXIT.ok;
  }
  const outbox = operatorOutbox(databaseUrl, flags.name);
  let erased: number;
  if (flags.yes) {
    erased = await outbox.eraseTenant(tenantKey);
  } else {
    requireTerminal('erase-tenant deletes jobs for good');
    // The ids counted are the ids erased: a job of the tenant committed while the question
    // waits for an answer was not in the count, so it is not erased.
    const ids = await withClient(databaseUrl, (client) => tenantJobIds(client, tenantKey, flags.name));
    if (ids.length === 0) {
      print(`no jobs of tenant ${JSON.stringify(tenantKey)}: nothing to do`);
      return EXIT.ok;
    }
    if (!(await confirm(`erase ${plural(ids.length)} of tenant ${JSON.stringify(tenantKey)} and their attempts? This cannot be undone.`))) {
      note('aborted: nothing changed');
      return EXIT.failed;
    }
    erased = await outbox.eraseTenant(tenantKey, { ids });
  }
  if (flags.json) printJson({ tenantKey, dryRun: false, erased });
  else print(`erased ${plural(erased)} of tenant ${JSON.stringify(tenantKey)}`);
  return EXIT.ok;
}

/** Every job id of the tenant (ids only: payloads stay in the database), in one read-only query. */
async function tenantJobIds(client: TransactionalDb, tenantKey: string, name: string | undefined): Promise<string[]> {
  return readOnly(client, outboxOf(name), async (q, schema) => {
    const { rows } = await q.query(`SELECT id FROM ${schema}.job WHERE tenant_key = $1`, [tenantKey]);
    return (rows as { id: string }[]).map((r) => r.id);
  });
}

const plural = (n: number) => `${n} job${n === 1 ? '' : 's'}`;

function requireTerminal(what: string): void {
  if (!process.stdin.isTTY || !process.stderr.isTTY) {
    throw new UsageError(`${what}: pass --yes to confirm (no terminal to ask on), or --dry-run to see what it would change`);
  }
}

async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(`${question} [y/N] `)).trim());
  } finally {
    rl.close();
  }
}
