/**
 * The reference Worker's local stack, shared by `npm run dev` (scripts/dev.mjs) and the
 * end-to-end test (tests/e2e/reference-worker.test.ts):
 *
 * - {@link ensureBuilt}: builds the core (`scripts/build-core.sh`) and the shim
 *   (`npm run -w postbox build`) when their outputs are missing or the shim's are stale;
 * - {@link startDatabase}: a throw-away PostgreSQL 17 (tests/support/postgres.ts) with the role
 *   and database `postbox`/`postbox`, the outbox migrations and worker/schema.sql applied;
 * - {@link startWrangler}: `wrangler dev --test-scheduled` in its own process group, pointed at
 *   that database through `CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_OUTBOX_DB`;
 * - small HTTP helpers and a job-table formatter.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import pg from 'pg';
import { freePort, startPostgres, type PgServer } from '../tests/support/postgres.ts';
import type { JobRow } from '../worker/src/index.ts';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const CORE_WASM = path.join(ROOT, 'js-shim/core/postbox-core.wasm');
const SHIM_DIST = path.join(ROOT, 'js-shim/dist/index.js');
/** The port wrangler.jsonc's localConnectionString names. */
export const DEFAULT_PG_PORT = 54329;
export const SWEEP_CRON = '*/5 * * * *';

type Log = (line: string) => void;

function newestMtime(dir: string): number {
  if (!existsSync(dir)) return 0;
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}

function run(cmd: string, args: string[], what: string): void {
  // Build output goes to stderr: under `node --test`, stdout is the TAP stream.
  const res = spawnSync(cmd, args, { cwd: ROOT, stdio: ['ignore', 2, 2] });
  if (res.status !== 0) throw new Error(`${what} failed (${res.status ?? res.signal}): ${cmd} ${args.join(' ')}`);
}

/**
 * Builds what the Worker imports: the core wasm if missing (or `force`), then the shim's dist
 * if missing, older than its sources or migrations, or older than the core.
 */
export function ensureBuilt(opts: { force?: boolean; log?: Log } = {}): { core: boolean; shim: boolean } {
  const log = opts.log ?? (() => undefined);
  let core = false;
  let shim = false;
  if (opts.force || !existsSync(CORE_WASM)) {
    if (!existsSync(path.join(ROOT, 'scripts/build-core.sh'))) {
      throw new Error(`${path.relative(ROOT, CORE_WASM)} is missing and scripts/build-core.sh does not exist yet`);
    }
    // Only the preset that ships js-shim/core/postbox-core.wasm (the full script also runs the
    // native test suite and the Emscripten variant).
    log('building the core: bash scripts/build-core.sh wasi');
    run('bash', ['scripts/build-core.sh', 'wasi'], 'core build');
    if (!existsSync(CORE_WASM)) throw new Error(`scripts/build-core.sh did not produce ${CORE_WASM}`);
    core = true;
  }
  const distAt = existsSync(SHIM_DIST) ? statSync(SHIM_DIST).mtimeMs : 0;
  const sourcesAt = Math.max(newestMtime(path.join(ROOT, 'js-shim/src')), newestMtime(path.join(ROOT, 'migrations')));
  if (opts.force || core || distAt === 0 || sourcesAt > distAt) {
    log('building the shim: npm run -w postbox build');
    run('npm', ['run', '-s', '-w', 'postbox', 'build'], 'shim build');
    shim = true;
  }
  return { core, shim };
}

/** True when nothing listens on 127.0.0.1:port. */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

export interface Database {
  server: PgServer;
  /** `postgres://postbox:postbox@127.0.0.1:PORT/postbox`: what the Worker connects with. */
  url: string;
  port: number;
  sql<T = any>(text: string, values?: unknown[]): Promise<T[]>;
  stop(): Promise<void>;
}

/**
 * Starts PostgreSQL 17 on `port` (default: {@link DEFAULT_PG_PORT} if free, else any free
 * port), creates role and database `postbox` (password `postbox`), and applies the outbox
 * migrations (the built shim's `migrate`) and worker/schema.sql.
 */
export async function startDatabase(opts: { port?: number | 'any'; log?: Log } = {}): Promise<Database> {
  const log = opts.log ?? (() => undefined);
  let port: number | undefined;
  if (opts.port === 'any') port = undefined;
  else if (typeof opts.port === 'number') port = opts.port;
  else if (await portIsFree(DEFAULT_PG_PORT)) port = DEFAULT_PG_PORT;
  else log(`port ${DEFAULT_PG_PORT} is busy: using another one`);
  const server = await startPostgres({ flavor: 'embedded', ...(port === undefined ? {} : { port }) });
  let client: pg.Client | undefined;
  try {
    const admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
    try {
      await admin.query("CREATE ROLE postbox LOGIN PASSWORD 'postbox'");
      await admin.query('CREATE DATABASE postbox OWNER postbox');
    } finally {
      await admin.end();
    }
    const url = `postgres://postbox:postbox@127.0.0.1:${server.port}/postbox`;
    client = new pg.Client({ connectionString: url });
    // Ctrl-C in a terminal reaches the server too (same process group): it then ends this
    // session, which must not crash the process.
    client.on('error', () => undefined);
    await client.connect();
    const { migrate } = (await import(pathToFileURL(path.join(ROOT, 'js-shim/dist/sql/index.js')).href)) as typeof import('../js-shim/src/sql/index.ts');
    const { applied } = await migrate(client);
    log(`PostgreSQL ${server.serverVersion} on 127.0.0.1:${server.port}; outbox migrations applied: ${applied.join(', ') || 'none'}`);
    await client.query(readFileSync(path.join(ROOT, 'worker/schema.sql'), 'utf8'));
    const c = client;
    let stopped: Promise<void> | undefined;
    return {
      server,
      url,
      port: server.port,
      sql: async (text, values) => (await c.query(text, values)).rows,
      stop: () =>
        (stopped ??= (async () => {
          await c.end().catch(() => undefined);
          await server.stop();
        })()),
    };
  } catch (error) {
    await client?.end().catch(() => undefined);
    await server.stop();
    throw error;
  }
}

export interface WranglerDev {
  /** `http://127.0.0.1:PORT` */
  url: string;
  child: ChildProcess;
  /** Everything wrangler printed so far (stdout and stderr, capped). */
  output(): string;
  /** Calls `fn` with each further chunk of output (e.g. to stream it to the terminal). */
  onOutput(fn: (chunk: string) => void): void;
  /** Resolves when the process has exited. */
  exited: Promise<number | null>;
  /** SIGTERM to the whole process group (wrangler and workerd), SIGKILL after 5 s. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts `wrangler dev --test-scheduled` for wrangler.jsonc in its own process group. Local
 * state (queues) goes to a fresh temporary directory unless `persistTo` is given.
 */
export async function startWrangler(opts: { port: number; databaseUrl: string; inspectorPort?: number; persistTo?: string; logFile?: string }): Promise<WranglerDev> {
  const persistTo = opts.persistTo ?? mkdtempSync(path.join(os.tmpdir(), 'postbox-wrangler-'));
  const ownsPersist = opts.persistTo === undefined;
  const inspectorPort = opts.inspectorPort ?? (await freePort());
  const args = [
    path.join(ROOT, 'node_modules/wrangler/bin/wrangler.js'),
    'dev',
    '--config', path.join(ROOT, 'wrangler.jsonc'),
    '--test-scheduled',
    '--ip', '127.0.0.1',
    '--port', String(opts.port),
    '--inspector-port', String(inspectorPort),
    '--persist-to', persistTo,
    '--show-interactive-dev-session=false',
  ];
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    detached: true, // its own process group: stop() kills wrangler and workerd together
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_OUTBOX_DB: opts.databaseUrl,
      WRANGLER_SEND_METRICS: 'false',
      FORCE_COLOR: '0',
    },
  });
  const file = opts.logFile ? createWriteStream(opts.logFile) : undefined;
  let buffer = '';
  const listeners: ((chunk: string) => void)[] = [];
  const onData = (data: Buffer) => {
    const chunk = data.toString('utf8');
    buffer = (buffer + chunk).slice(-200_000);
    file?.write(chunk);
    for (const fn of listeners) fn(chunk);
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const killGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, signal);
    } catch {
      /* already gone */
    }
  };
  // If this process dies without stop(), take the group down with it (and its state dir).
  const onExit = () => {
    killGroup('SIGKILL');
    if (ownsPersist) rmSync(persistTo, { recursive: true, force: true });
  };
  process.on('exit', onExit);
  let stopping: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${opts.port}`,
    child,
    output: () => buffer,
    onOutput: (fn) => void listeners.push(fn),
    exited,
    stop: () =>
      (stopping ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) {
          killGroup('SIGTERM');
          const timer = setTimeout(() => killGroup('SIGKILL'), 5_000);
          await exited;
          clearTimeout(timer);
        }
        killGroup('SIGKILL'); // stragglers (workerd) in the group
        process.off('exit', onExit);
        file?.end();
        if (ownsPersist) rmSync(persistTo, { recursive: true, force: true });
      })()),
  };
}

/** Polls `GET /health` until it answers 200; fails early if wrangler exits. */
export async function waitForHealth(dev: WranglerDev, timeoutMs = 90_000): Promise<number> {
  const started = Date.now();
  let exitCode: number | null | undefined;
  void dev.exited.then((c) => (exitCode = c));
  for (;;) {
    if (exitCode !== undefined) throw new Error(`wrangler dev exited (${exitCode}) before /health answered:\n${dev.output().slice(-4000)}`);
    try {
      const res = await fetch(`${dev.url}/health`, { signal: AbortSignal.timeout(5_000) });
      if (res.status === 200) return Date.now() - started;
      await res.body?.cancel();
    } catch {
      /* not listening yet */
    }
    if (Date.now() - started > timeoutMs) throw new Error(`/health did not answer 200 within ${timeoutMs} ms:\n${dev.output().slice(-4000)}`);
    await sleep(250);
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Polls `fn` every `everyMs` until it returns a value (not undefined, null or false); past
 * `timeoutMs` throws, with the end of wrangler's output when a stack is given.
 */
export async function pollUntil<T>(
  what: string,
  fn: () => Promise<T | undefined | null | false>,
  opts: { timeoutMs?: number; everyMs?: number; dev?: () => WranglerDev | undefined } = {},
): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value !== undefined && value !== null && value !== false) return value as T;
    if (performance.now() > deadline) {
      const dev = opts.dev?.();
      throw new Error(`${what}: not within ${timeoutMs} ms${dev ? `\n--- wrangler ---\n${dev.output().slice(-3000)}` : ''}`);
    }
    await sleep(opts.everyMs ?? 250);
  }
}

/**
 * Tears down what a test started once (`stop`), and as a last resort after `hardTimeoutMs`:
 * never leave wrangler, workerd, postgres or a browser behind, never hang CI. Call `done()` in
 * the suite's `after`.
 */
export function guardTeardown(name: string, hardTimeoutMs: number, stop: () => Promise<void>): { stopAll: () => Promise<void>; done: () => Promise<void> } {
  let teardown: Promise<void> | undefined;
  const stopAll = () => (teardown ??= stop());
  const watchdog = setTimeout(() => {
    console.error(`${name}: hard timeout (${hardTimeoutMs} ms); tearing down`);
    void stopAll().finally(() => process.exit(1));
  }, hardTimeoutMs);
  watchdog.unref();
  return {
    stopAll,
    done: async () => {
      await stopAll();
      clearTimeout(watchdog);
    },
  };
}

export async function postJson(base: string, pathname: string, body: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}${pathname}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, body: parsed };
}

export type { JobRow };

export async function listJobs(base: string, limit = 100): Promise<JobRow[]> {
  const res = await fetch(`${base}/jobs?limit=${limit}`);
  if (res.status !== 200) throw new Error(`GET /jobs: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { jobs: JobRow[] }).jobs;
}

/** Triggers the cron sweep through `wrangler dev --test-scheduled`. */
export async function triggerSweep(base: string): Promise<number> {
  const res = await fetch(`${base}/__scheduled?cron=${SWEEP_CRON.replaceAll(' ', '+')}`);
  await res.body?.cancel();
  return res.status;
}

/** A fixed-width table of jobs, oldest first; `labels` maps job ids to a short name (e.g. the user). */
export function formatJobs(jobs: readonly JobRow[], labels: ReadonlyMap<string, string> = new Map(), now = Date.now()): string {
  const rows = [...jobs]
    .sort((a, b) => a.created_at.localeCompare(b.created_at) || a.kind.localeCompare(b.kind))
    .map((j) => {
      const due = Date.parse(j.due_at) - now;
      return [
        j.id.slice(-8),
        labels.get(j.id) ?? '',
        j.kind,
        j.status,
        String(j.attempts),
        j.last_error_code ?? '',
        j.finished_at ? '' : due > 0 ? `in ${(due / 1000).toFixed(1)}s` : 'now',
      ];
    });
  const header = ['job', 'user', 'kind', 'status', 'attempts', 'last error', 'due'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}
