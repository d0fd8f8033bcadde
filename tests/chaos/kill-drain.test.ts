// The kill-drain run (kill-drain.ts) at a small size: 1,500 jobs, 4 worker kills and one
// PostgreSQL restart. The script verifies every job and attempt itself; this checks its exit
// code and its summary, so a script that silently did less (no chaos, fewer jobs) fails too.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const script = path.join(path.dirname(fileURLToPath(import.meta.url)), 'kill-drain.ts');
const JOBS = 1500;

test('killed workers and a database restart lose no job and apply no stale settle', { timeout: 240_000 }, async () => {
  const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', script, '--jobs', String(JOBS), '--kills', '4', '--restarts', '1'],
      { maxBuffer: 16 * 1024 * 1024, timeout: 220_000, killSignal: 'SIGKILL' },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number | null }).code ?? null) : 0, stdout, stderr }),
    );
  });
  const output = `${stdout}\n--- stderr ---\n${stderr}`;
  const line = stdout.split('\n').find((l) => l.startsWith('KILL-DRAIN-SUMMARY '));
  assert.ok(line, `no summary line:\n${output}`);
  const summary = JSON.parse(line.slice('KILL-DRAIN-SUMMARY '.length));
  assert.equal(code, 0, `kill-drain exited ${code}:\n${output}`);
  assert.equal(summary.ok, true, output);
  assert.equal(summary.violations, 0, output);
  assert.equal(summary.jobs, JOBS);
  assert.equal(summary.succeeded, JOBS, output);
  // Every job's attempt that won, and every batch's completion's (a batch per 100 jobs).
  assert.equal(summary.outcomes.ok, JOBS + JOBS / 100, output);
  assert.equal(summary.outcomes['(open)'], undefined, output);
  assert.equal(summary.kills, 4);
  assert.equal(summary.restarts, 1);
  assert.equal(summary.batches, JOBS / 100, output);
  // The chaos hit live work: some attempts were recovered as crashes.
  assert.ok(summary.outcomes.crash > 0, output);
  assert.ok(summary.runs >= JOBS && summary.runs <= summary.attempts, output);
});
