/**
 * Cost of the core's decisions in Node: how long the shim's calls into the wasm core take
 * (JSON in, decision out — exactly the calls the runner makes), per call and per job, and
 * what share of a job's wall time that is in the throughput run.
 *
 *   node --import tsx bench/core.ts [--iterations 20000] [--results bench/results/throughput-YYYY-MM-DD.md]
 *
 * Per job the runner makes: one claim `plan` per batch, one claim `admit` per job and about one
 * `pump` step (both through the core's numeric entries), and for a job that succeeded one `ok`
 * settlement through the numeric entry (other outcomes go in one JSON `settle` call per batch).
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineJob, ok } from 'postbox';
// Internal: the same singleton the outbox uses (node_modules/postbox links to js-shim).
import { getCore } from '../js-shim/dist/core/core.js';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
const ITER = Number(arg('iterations') ?? 20_000);
const here = path.dirname(fileURLToPath(import.meta.url));

const anyPayload = { '~standard': { version: 1 as const, vendor: 'bench', validate: (value: unknown) => ({ value }) } };
const job = defineJob({ kind: 'bench.sleep', payload: anyPayload, timeoutMs: 60_000, handle: async () => ok() });
const core = getCore();
const policy = job.policy;

function planInput(concurrency: number) {
  const now = Date.now();
  return { op: 'plan', now, deadlineAt: now + 840_000, lane: 'default', concurrency, maxBatch: 100, policies: [policy], version: null, target: null };
}
function admitInput() {
  const now = Date.now();
  return { op: 'admit', now, deadlineAt: now + 840_000, leaseExpiresAt: now + 90_000, timeoutMs: 60_000 };
}
/** A settle call as the runner makes it: the kind's policy once, each item naming it by index. */
function settleInput(batch: number, inline = false) {
  const now = Date.now();
  const one = {
    now, seed: 12345, policy: inline ? policy : 0,
    job: { status: 'running', attempts: 0, crashes: 0, streakCode: null, streak: 0, errorCode: null, errorMessage: null },
    outcome: { type: 'ok' },
  };
  return inline ? { batch: Array.from({ length: batch }, () => one) } : { policies: [policy], batch: Array.from({ length: batch }, () => one) };
}

/** µs per call, median of 5 runs of ITER calls each (after a warm-up). */
function time(fn: () => void, iterations = ITER): number {
  for (let i = 0; i < Math.min(2000, iterations); i++) fn();
  const runs: number[] = [];
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now();
    for (let i = 0; i < iterations; i++) fn();
    runs.push(((performance.now() - t0) * 1000) / iterations);
  }
  return runs.sort((a, b) => a - b)[2]!;
}

const plan = (c: number) => time(() => core.call('claim', planInput(c)));
const admitJson = time(() => core.call('claim', admitInput()));
// What the drain calls: the numeric entry (no JSON either way).
const admit = time(() => {
  const { op: _op, ...input } = admitInput();
  core.admit({ ...input, heartbeatMs: null });
});
/** A pump step as the drain asks for one after each handler that ends. */
const pumpInput = () => ({
  concurrency: 8, running: 7, buffered: 12, settles: 3, mayClaim: true, remaining: null,
  slowestRecentMs: 3, oldestSettleAgeMs: 1, slackMs: 20_000, statementMs: 4,
});
const pumpJson = time(() => core.call('claim', { op: 'pump', ...pumpInput() }));
const pump = time(() => core.pump(pumpInput()));
// What the drain calls for a job that succeeded: the numeric entry.
const settleOk = time(() => core.settleOk({ now: 1_700_000_000_000, attempts: 0, crashes: 0, streak: 0, maxAttempts: null }));
const settle = (b: number) => time(() => core.call('settle', settleInput(b)), Math.max(500, Math.floor(ITER / b)));
/** The same batch with the policy inside every item (how the runner called it before shared policies). */
const settleInline = (b: number) => time(() => core.call('settle', settleInput(b, true)), Math.max(500, Math.floor(ITER / b)));

/** Per-job wall ms of Postbox rows in the newest (or given) throughput results file. */
function postboxPerJobMs(): Map<number, number> {
  const out = new Map<number, number>();
  let file = arg('results');
  if (!file) {
    const dir = path.join(here, 'results');
    const files = (() => {
      try {
        return readdirSync(dir).filter((f) => /^throughput-.*\.md$/.test(f)).sort();
      } catch {
        return [];
      }
    })();
    if (files.length === 0) return out;
    file = path.join(dir, files.at(-1)!);
  }
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^\| postbox \| \d+ ms, c=(\d+), conns 1 \| \d+ \| [\d.]+ \| (\d+) \|/.exec(line);
    if (m) out.set(Number(m[1]), 1000 / Number(m[2]));
  }
  return out;
}

const perJob = postboxPerJobMs();
const lines = [
  `# Postbox core decision cost — ${new Date().toISOString()}`,
  '',
  `Node ${process.version}; median of 5 × ${ITER} calls; each call as the runner makes it: JSON.stringify → wasm → JSON.parse for the JSON ops, numbers in and out for the numeric entries.`,
  '',
  '| call | µs per call |',
  '|---|---:|',
  `| claim plan (concurrency 1) | ${plan(1).toFixed(2)} |`,
  `| claim admit (one job), JSON op | ${admitJson.toFixed(2)} |`,
  `| claim admit (one job), numeric entry: what the drain calls | ${admit.toFixed(2)} |`,
  `| claim pump (one step), JSON op | ${pumpJson.toFixed(2)} |`,
  `| claim pump (one step), numeric entry: what the drain calls | ${pump.toFixed(2)} |`,
  `| settle ok (one job), numeric entry: what the drain calls for a success | ${settleOk.toFixed(2)} |`,
  `| settle, batch of 1 | ${settle(1).toFixed(2)} |`,
  `| settle, batch of 8 | ${settle(8).toFixed(2)} |`,
  `| settle, batch of 32 | ${settle(32).toFixed(2)} |`,
  `| settle, batch of 32, policy inline in each item | ${settleInline(32).toFixed(2)} |`,
  '',
  '| concurrency (batch) | core µs per job (plan/batch + admit + pump + settle ok) | Postbox wall ms per job (throughput run) | core share |',
  '|---:|---:|---:|---:|',
];
for (const c of [1, 8, 32]) {
  const us = plan(c) / c + admit + pump + settleOk;
  const ms = perJob.get(c);
  lines.push(`| ${c} | ${us.toFixed(2)} | ${ms === undefined ? 'n/a' : ms.toFixed(3)} | ${ms === undefined ? 'n/a' : `${((us / 1000 / ms) * 100).toFixed(2)} %`} |`);
}
lines.push('');
process.stdout.write(lines.join('\n'));
