/**
 * `postbox <command>`: the operator's command line. Node only; nothing a Worker loads imports
 * this folder. Commands, flags and exit codes are documented in the README ("Command line").
 * @module
 */
import { createRequire } from 'node:module';
import { Command, Option } from 'commander';
import { actCommand, eraseTenantCommand, type ActionCommand } from './act.js';
import { addFilterOptions, parseCursor, parseIntIn, parseOutboxName } from './args.js';
import { checkDatabaseUrl } from './connect.js';
import { EXIT, report } from './output.js';
import { listCommand, migrateCommand, showCommand, statusCommand, verifySchemaCommand } from './read.js';

const { version } = createRequire(import.meta.url)('../../package.json') as { version: string };

const EXIT_HELP = `
Exit codes:
  0  done
  1  done, with problems: schema drift, refused or missing jobs, a declined confirmation
  2  usage: unknown command or flag, a bad value, no database URL, no --yes without a terminal
  3  database: cannot connect, login refused, or a statement failed
  4  internal error (a bug; printed with its stack)`;

/** Builds the program; `setExit` receives each command's exit code. */
function buildProgram(setExit: (code: number) => void): Command {
  const program = new Command('postbox')
    .description('Operate a Postbox outbox: migrate and check its schema, inspect jobs, cancel, replay, retry now, erase a tenant.')
    .version(version)
    .addOption(new Option('--database-url <url>', 'PostgreSQL connection URL').env('DATABASE_URL'))
    .addOption(new Option('--name <name>', 'a named outbox (schema outbox_<name>); default: the default outbox (schema outbox)').argParser(parseOutboxName))
    .configureHelp({ showGlobalOptions: true })
    // One prefix for every error, commander's own included, so scripts can grep for it.
    .configureOutput({ outputError: (text, write) => write(`postbox: ${text.replace(/^error: /, '')}`) })
    .showHelpAfterError('(add --help for usage)')
    .addHelpText('after', EXIT_HELP)
    .exitOverride();

  const url = (cmd: Command) => checkDatabaseUrl(cmd.optsWithGlobals<{ databaseUrl?: string }>().databaseUrl);
  // Every command reads or acts on one outbox: the default one, or the one --name names.
  const named = <T extends object>(opts: T, cmd: Command): T & { name?: string } => {
    const name = cmd.optsWithGlobals<{ name?: string }>().name;
    return name === undefined ? opts : { ...opts, name };
  };
  const json = () => new Option('--json', 'print JSON instead of a table');
  const command = (name: string, description: string) =>
    program.command(name).description(description).configureHelp({ showGlobalOptions: true }).exitOverride();

  command('migrate', 'apply the outbox migrations that are not applied yet (safe to repeat)')
    .addOption(json())
    .action(async (opts, cmd: Command) => setExit(await migrateCommand(url(cmd), named(opts, cmd))));

  command('verify-schema', 'compare the live outbox schema with the one Postbox expects; exit 1 on drift')
    .addOption(json())
    .action(async (opts, cmd: Command) => setExit(await verifySchemaCommand(url(cmd), named(opts, cmd))));

  command('status', 'the backlog per kind and lane (pending, retrying, due, aged, scheduled, running, stuck), graded')
    .option('--tenant <key>', 'only this tenant\'s jobs')
    .option('--no-tenant', 'only jobs without a tenant')
    .option('--aged-ms <ms>', 'a due job counts as aged once overdue by this long', parseIntIn(1, 2_147_483_647), 300_000)
    .addOption(new Option('--fail-on <severity>', 'exit 1 when the severity reaches warn or error').choices(['warn', 'error']))
    .addOption(json())
    .action(async (opts, cmd: Command) => setExit(await statusCommand(url(cmd), named(opts, cmd))));

  addFilterOptions(command('list', 'list jobs, oldest first, a page at a time'), 'only this tenant\'s jobs')
    .option('--limit <n>', 'jobs per page (1..1000)', parseIntIn(1, 1000), 50)
    .option('--cursor <cursor>', 'the next page: the cursor the previous page printed', parseCursor)
    .addOption(new Option('--order <order>', 'by creation time').choices(['asc', 'desc']).default('asc'))
    .addOption(json())
    .action(async (opts, cmd: Command) => setExit(await listCommand(url(cmd), named(opts, cmd))));

  command('show', 'one job with its payload, metadata and every attempt')
    .argument('<id>', 'job id (uuid)')
    .option('--tenant <key>', 'only if the job belongs to this tenant')
    .option('--no-tenant', 'only if the job has no tenant')
    .addOption(json())
    .action(async (id: string, opts, cmd: Command) => setExit(await showCommand(url(cmd), id, named(opts, cmd))));

  const actions: [ActionCommand, string][] = [
    ['cancel', 'cancel pending, retrying or running jobs'],
    ['replay', 'dead or cancelled jobs back to pending, with a fresh retry budget'],
    ['retry-now', 'make pending or retrying jobs due now'],
  ];
  for (const [name, description] of actions) {
    const cmd = addFilterOptions(
      command(name, `${description}: by ids, or every job the filter flags match`).argument('[ids...]', 'job ids (uuids); omit to act by filter'),
      'act only on this tenant\'s jobs (a scope: ids of other tenants are not found)',
    )
      .option('--all', 'match every job (when no other filter flag is given)')
      .option('--max <n>', 'act on at most this many matching jobs', parseIntIn(1, Number.MAX_SAFE_INTEGER))
      .option('--dry-run', 'list what would be acted on; change nothing')
      .option('-y, --yes', 'do not ask before acting on a filter (required without a terminal)');
    if (name === 'cancel') cmd.option('--reason <code>', 'stored as the job\'s last error code', 'cancelled');
    cmd.addOption(json()).action(async (ids: string[], opts, c: Command) => setExit(await actCommand(url(c), name, ids, named(opts, c))));
  }

  command('erase-tenant', 'delete every job (and attempt) of one tenant, for good')
    .argument('<tenantKey>', 'the tenant key')
    .option('--dry-run', 'count the jobs it would erase; change nothing')
    .option('-y, --yes', 'do not ask first (required without a terminal)')
    .addOption(json())
    .action(async (tenantKey: string, opts, cmd: Command) => setExit(await eraseTenantCommand(url(cmd), tenantKey, named(opts, cmd))));

  return program;
}

/** Runs the command line on `argv` (without `node` and the script) and returns the exit code. */
export async function run(argv: readonly string[]): Promise<number> {
  let code: number = EXIT.ok;
  try {
    await buildProgram((c) => (code = c)).parseAsync([...argv], { from: 'user' });
    return code;
  } catch (error) {
    return report(error);
  }
}
