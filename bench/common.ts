// What the benchmarks share: options, round-trip counting, statement timing, CPU accounting,
// peers' versions, the machine line, the results file.
import { readdirSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { runDrain, type Outbox } from 'postbox';

const here = path.dirname(fileURLToPath(import.meta.url));

/** `--name value` or `--name=value` from the command line. */
export function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  if (i >= 0) return process.argv[i + 1];
  return process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
}

export const flag = (name: string) => process.argv.includes(`--${name}`);

// Round trips: every query any pg.Client sends, by database (or by the key `countAs` gave the
// client). All systems use the same (deduplicated) `pg` package, so one patch sees them all.
// With --profile, each named statement's round-trip times too (client-side); `onStatement`
// listeners get every named statement's time whatever the flag.
const queriesByDb = new Map<string, number>();
const PROFILE = flag('profile');
const statementMs = new Map<string, number[]>();
const countKeys = new WeakMap<pg.Client, string>();
type StatementListener = (name: string, ms: number, db: string) => void;
const statementListeners = new Set<StatementListener>();
const watches: { match: (sql: string) => boolean; spans: QuerySpan[] }[] = [];
const originalQuery = pg.Client.prototype.query;
(pg.Client.prototype as any).query = function patchedQuery(this: pg.Client, ...args: unknown[]) {
  const db = (this as any).connectionParameters?.database ?? '?';
  const key = countKeys.get(this) ?? db;
  queriesByDb.set(key, (queriesByDb.get(key) ?? 0) + 1);
  const result = (originalQuery as any).apply(this, args);
  const name = (args[0] as { name?: string } | null)?.name;
  if ((PROFILE || statementListeners.size > 0) && name && result && typeof result.then === 'function') {
    const t0 = performance.now();
    result.then(() => {
      const ms = performance.now() - t0;
      if (PROFILE) statementMs.set(name, [...(statementMs.get(name) ?? []), ms]);
      for (const listener of statementListeners) listener(name, ms, db);
    }, () => undefined);
  }
  const sql = typeof args[0] === 'string' ? args[0] : ((args[0] as { text?: string } | null)?.text ?? '');
  for (const w of watches) {
    if (!w.match(sql) || !result || typeof result.then !== 'function') continue;
    const start = performance.now();
    result.then(() => w.spans.push({ start, ms: performance.now() - start }), () => undefined);
  }
  return result;
};

/**
 * Counts `client`'s queries under `key` instead of its database's name, so a bench's own
 * connections (a producer, a monitor) stay out of the system's round trips.
 */
export function countAs(client: pg.Client, key: string): void {
  countKeys.set(client, key);
}

/** Calls `listener` with each named statement's client-side time (ms) once it resolves; returns the unsubscribe. */
export function onStatement(listener: StatementListener): () => void {
  statementListeners.add(listener);
  return () => void statementListeners.delete(listener);
}

/** One query's client-side time: when it was sent (performance.now()) and how long until its result. */
export interface QuerySpan {
  start: number;
  ms: number;
}

/** From now on, times every query (any pg.Client) whose SQL text `match`es; the list fills as they finish. */
export function timeQueries(match: (sql: string) => boolean): QuerySpan[] {
  const spans: QuerySpan[] = [];
  watches.push({ match, spans });
  return spans;
}

/** With --profile: each named statement's count and median time since the last call; else null. */
export function takeProfile(): string | null {
  if (!PROFILE) return null;
  const parts = [...statementMs].map(([name, times]) => {
    times.sort((a, b) => a - b);
    return `${name.replace(/^postbox_/, '')} ×${times.length} median ${times[Math.floor(times.length / 2)]!.toFixed(2)} ms`;
  });
  statementMs.clear();
  return parts.join('; ') || 'none named';
}

/** Queries sent so far to the database named `db`, or under a `countAs` key (one node-postgres query = one round trip). */
export const queriesOn = (db: string) => queriesByDb.get(db) ?? 0;

/** The installed version of a package, from node_modules. */
export function pkgVersion(name: string): string {
  try {
    return JSON.parse(readFileSync(path.join(here, '..', 'node_modules', name, 'package.json'), 'utf8')).version;
  } catch {
    return '?';
  }
}

/** The results header's machine line: CPUs, memory, OS, and the load average now. */
export function machineLine(): string {
  const cpus = os.cpus();
  return `- machine: ${cpus.length} × ${cpus[0]?.model ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, ${os.platform()} ${os.release()}, load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`;
}

/** Writes `results/<name>-<date>[-rtt<N>ms].md` and says so on stderr. */
export async function writeResults(name: string, rttMs: number, report: string): Promise<void> {
  const dir = path.join(here, 'results');
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, `${name}-${new Date().toISOString().slice(0, 10)}${rttMs > 0 ? `-rtt${rttMs}ms` : ''}.md`);
  await writeFile(file, report);
  process.stderr.write(`wrote ${path.relative(process.cwd(), file)}\n`);
}

/**
 * CPU time (ms) the PostgreSQL server has used so far: the postmaster and every live child
 * (utime + stime from /proc), plus what exited children left in the postmaster's cutime/cstime.
 * Unlike wall time it barely moves when other work shares the machine, so per job it shows
 * what a system costs the database. Linux only; null elsewhere.
 */
export function serverCpuMs(postmasterPid: number): number | null {
  const ticks = (pid: number, withChildren: boolean): number => {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After the command: state(0) ppid(1) … utime(11) stime(12) cutime(13) cstime(14).
    return Number(f[11]) + Number(f[12]) + (withChildren ? Number(f[13]) + Number(f[14]) : 0);
  };
  try {
    let total = ticks(postmasterPid, true);
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        if (ppid === postmasterPid) total += ticks(Number(entry), false);
      } catch {
        // the process ended meanwhile: its time is in the postmaster's cutime now
      }
    }
    return total * 10; // USER_HZ is 100 on Linux
  } catch {
    return null;
  }
}

/**
 * The server's CPU time (ms) by process kind, from each child's title ("autovacuum worker",
 * "walwriter", or the database a backend serves): where `serverCpuMs` goes. Children that ended
 * are not listed (their time is only in the postmaster's total).
 */
export function serverCpuByProcess(postmasterPid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(f[1]) !== postmasterPid) continue;
      const title = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
      // "postgres: postgres probe 127.0.0.1(5432) idle" → "backend probe"; "postgres: walwriter" as is.
      const m = /^postgres: (?:\S+ (\S+) \S+\(\d+\)|(.+?))(?: idle| active|$)/.exec(title);
      const key = m?.[1] ? `backend ${m[1]}` : (m?.[2] ?? title).replace(/\s+(idle|active).*$/, '');
      out.set(key, (out.get(key) ?? 0) + (Number(f[11]) + Number(f[12])) * 10);
    } catch {
      // ended meanwhile
    }
  }
  return out;
}

/** The postmaster's pid: the parent of a backend serving `url`. */
export async function postmasterPidOf(url: string): Promise<number | null> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const pid = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return null;
  } finally {
    await client.end();
  }
}

/**
 * Drains `outbox` until a drain claims nothing, measuring the drain alone: wall time, this
 * process's CPU (µs) and the database server's (ms; null where /proc cannot say).
 */
export async function timedDrain(outbox: Outbox, postmasterPid: number | null): Promise<{ claimed: number; wallMs: number; clientCpuUs: number; dbCpuMs: number | null }> {
  const db0 = postmasterPid === null ? null : serverCpuMs(postmasterPid);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let claimed = 0;
  for (;;) {
    const r = await runDrain(outbox);
    claimed += r.claimed;
    if (r.claimed === 0) break;
  }
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const db1 = postmasterPid === null ? null : serverCpuMs(postmasterPid);
  return { claimed, wallMs, clientCpuUs: cpu.user + cpu.system, dbCpuMs: db0 === null || db1 === null ? null : db1 - db0 };
}
