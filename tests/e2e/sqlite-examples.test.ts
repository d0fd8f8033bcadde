// The SQLite examples end to end under the real `wrangler dev` (each with its own wrangler.jsonc):
// a signup writes the app's row and enqueues its job atomically, and the job runs — on the
// Durable Object by its alarm(), on D1 by a Queue nudge (createQueueHandler) and the Cron Trigger's tick.
//
// Run: node --import tsx --test tests/e2e/sqlite-examples.test.ts
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { ensureBuilt, guardTeardown, ROOT, sleep } from '../../scripts/reference-stack.ts';
import { freePort } from '../support/postgres.ts';

const HARD_TIMEOUT_MS = 6 * 60_000;

interface Dev {
  url: string;
  output(): string;
  stop(): Promise<void>;
}

const running = new Set<Dev>();
const guard = guardTeardown('sqlite-examples e2e', HARD_TIMEOUT_MS, async () => {
  await Promise.all([...running].map((d) => d.stop()));
});
after(() => guard.done());

/** `wrangler dev --config examples/<name>/wrangler.jsonc`, in its own process group and state dir. */
async function startExample(name: string): Promise<Dev> {
  const port = await freePort();
  const persistTo = mkdtempSync(path.join(os.tmpdir(), `postbox-example-${name}-`));
  const child: ChildProcess = spawn(
    process.execPath,
    [
      path.join(ROOT, 'node_modules/wrangler/bin/wrangler.js'), 'dev',
      '--config', path.join(ROOT, 'examples', name, 'wrangler.jsonc'),
      '--test-scheduled', '--ip', '127.0.0.1', '--port', String(port),
      '--inspector-port', String(await freePort()), '--persist-to', persistTo, '--show-interactive-dev-session=false',
    ],
    { cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, WRANGLER_SEND_METRICS: 'false', FORCE_COLOR: '0' } },
  );
  let buffer = '';
  const onData = (d: Buffer) => void (buffer = (buffer + d.toString('utf8')).slice(-100_000));
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const kill = () => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
  };
  process.on('exit', kill);
  let stopping: Promise<void> | undefined;
  const dev: Dev = {
    url: `http://127.0.0.1:${port}`,
    output: () => buffer,
    stop: () =>
      (stopping ??= (async () => {
        kill();
        await Promise.race([exited, sleep(5_000)]);
        rmSync(persistTo, { recursive: true, force: true });
        running.delete(dev);
      })()),
  };
  running.add(dev);
  await until(dev, `${name} ready`, async () => (await fetch(`${dev.url}/jobs`).catch(() => null))?.ok, 120_000);
  return dev;
}

async function until<T>(dev: Dev, what: string, fn: () => Promise<T | undefined | null | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value !== undefined && value !== null && value !== false) return value as T;
    if (performance.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms\n--- wrangler ---\n${dev.output().slice(-3000)}`);
    await sleep(200);
  }
}

interface JobView {
  id: string;
  status: string;
  attempts: number;
  payload: { userId: string; email: string };
}

const signup = (dev: Dev, email: string) =>
  fetch(`${dev.url}/signup`, { method: 'POST', body: JSON.stringify({ email }), headers: { 'content-type': 'application/json' } });
const jobs = async (dev: Dev): Promise<JobView[]> => (await fetch(`${dev.url}/jobs`)).json() as Promise<JobView[]>;
const users = async (dev: Dev): Promise<{ id: string; email: string; welcomed_at: number | null }[]> => (await fetch(`${dev.url}/users`)).json() as never;

/** What both examples must show: the job committed with the user runs; a failed write leaves neither. */
async function checkSignupFlow(dev: Dev, driveSweep: () => Promise<void>): Promise<void> {
  const res = await signup(dev, 'ada@example.com');
  assert.equal(res.status, 201, await res.clone().text());
  const body = (await res.json()) as { user: { id: string }; job: { status: string; id: string } };
  assert.equal(body.job.status, 'created');
  const done = await until(dev, 'the welcome job succeeds', async () => (await jobs(dev)).find((j) => j.id === body.job.id && j.status === 'succeeded'));
  assert.equal(done.attempts, 1);
  assert.ok((await users(dev)).find((u) => u.id === body.user.id)?.welcomed_at, 'the handler marked the user welcomed');

  // A retry the core schedules 1 s later runs on a later sweep (two attempts prove it; the
  // 'retrying' state lasts only that second, too short to poll for reliably).
  const flaky = (await (await signup(dev, 'flaky@example.com')).json()) as { job: { id: string } };
  const retried = await until(dev, 'the flaky job succeeds on its second attempt', async () => {
    await driveSweep();
    return (await jobs(dev)).find((j) => j.id === flaky.job.id && j.status === 'succeeded');
  });
  assert.equal(retried.attempts, 2);

  // The same email again: the user's INSERT fails, so no job is written either.
  const before = (await jobs(dev)).length;
  const taken = await signup(dev, 'ada@example.com');
  assert.equal(taken.status, 409, await taken.clone().text());
  assert.equal((await jobs(dev)).length, before);
}

describe('SQLite examples under wrangler dev', { timeout: HARD_TIMEOUT_MS - 30_000 }, () => {
  test('build the core and the package if needed', () => {
    ensureBuilt();
  });

  test('examples/durable-object: one storage transaction, alarm() as the sweep', async () => {
    const dev = await startExample('durable-object');
    try {
      // The object re-arms its alarm for the retry's due time: nothing to drive from outside.
      await checkSignupFlow(dev, async () => undefined);
    } finally {
      await dev.stop();
    }
  });

  test('examples/d1: one db.batch for the user and its job, the Queue consumer runs it (no sweep before it succeeds), the Cron Trigger tick runs retries', async () => {
    const dev = await startExample('d1');
    try {
      await checkSignupFlow(dev, async () => {
        const res = await fetch(`${dev.url}/__scheduled?cron=${encodeURIComponent('* * * * *')}`);
        assert.equal(res.status, 200, await res.text());
      });
    } finally {
      await dev.stop();
    }
  });
});
