/**
 * One worker of the kill-drain run (spawned by kill-drain.ts, never run by hand): the real
 * engine draining the default lane with concurrency 8 until told to stop, and, whenever a
 * drain finds nothing due, a sweep (recovery of expired leases, then a drain), as the cron
 * backstop does next to queue consumers. Its clock is real time plus an offset the parent
 * only ever moves forward: a jump past the lease is how leases run out without waiting 32 s.
 *
 * Env: CHAOS_DB_URL, CHAOS_CLOCK_OFFSET_MS. IPC: see ToWorker / FromWorker.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { createOutbox, runDrain, runSweep } from 'postbox';
import { createPgConnector } from 'postbox/pg';
import { CONCURRENCY, LANE, SWEEP_OPTIONS, batchDoneJob, chaosJob, type FromWorker, type ToWorker } from './kill-drain-job.ts';

const url = process.env.CHAOS_DB_URL;
if (!url || !process.send) throw new Error('kill-drain-worker runs under kill-drain.ts (CHAOS_DB_URL and an IPC channel)');

let offsetMs = Number(process.env.CHAOS_CLOCK_OFFSET_MS ?? 0);
let stopping = false;
let wake: (() => void) | null = null;
const counts: Record<string, number> = {};
const bump = (key: string, by = 1): void => {
  counts[key] = (counts[key] ?? 0) + by;
};

const send = (message: FromWorker): void => {
  if (process.connected) process.send!(message);
};

// Every query in flight, for the report of a worker that does not stop (below).
const inFlight = new Map<object, { what: string; since: number }>();
const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
(pg.Client.prototype as unknown as { query: unknown }).query = function tracked(this: pg.Client, ...args: unknown[]) {
  const result = query.apply(this, args);
  if (result instanceof Promise) {
    const first = args[0] as { name?: string; text?: string } | string;
    const key = {};
    inFlight.set(key, { what: typeof first === 'string' ? first.slice(0, 60) : first.name ?? first.text?.slice(0, 60) ?? '?', since: performance.now() });
    result.then(() => inFlight.delete(key), () => inFlight.delete(key));
  }
  return result;
};
let phase = 'starting';

process.on('message', (message: ToWorker) => {
  if (message.type === 'clock') offsetMs = Math.max(offsetMs, message.offsetMs);
  else if (message.type === 'stop') {
    stopping = true;
    // The parent gives a worker 20 s to stop; past 10, say where it is stuck.
    setTimeout(() => {
      const queries = [...inFlight.values()].map((q) => `${q.what} (${Math.round(performance.now() - q.since)} ms)`);
      process.stderr.write(`still in ${phase} 10 s after stop; queries in flight: ${queries.join('; ') || 'none'}; resources: ${process.getActiveResourcesInfo().join(',')}\n`);
    }, 10_000).unref();
  }
  wake?.();
});
// An orphan must not keep draining: the parent's verification assumes its workers are gone.
const orphaned = (): never => process.exit(3);
process.on('disconnect', orphaned);

const outbox = createOutbox({
  jobs: [chaosJob, batchDoneJob],
  // A database restart must fail statements within seconds, not the default minute.
  connect: createPgConnector(url, { connectionTimeoutMs: 2_000, queryTimeoutMs: 10_000 }),
  concurrency: CONCURRENCY,
  clock: { now: () => Date.now() + offsetMs },
  events: (event) => bump(`event.${event.type}`),
});

const report = setInterval(() => send({ type: 'counts', counts }), 100);
send({ type: 'ready' });

while (!stopping) {
  try {
    phase = 'drain';
    const drained = await runDrain(outbox, { lane: LANE });
    for (const [key, n] of Object.entries(drained)) bump(`drain.${key}`, n);
    if (drained.claimed > 0) continue;
    phase = 'sweep';
    const swept = await runSweep(outbox, SWEEP_OPTIONS);
    for (const [key, n] of Object.entries(swept)) if (typeof n === 'number') bump(`sweep.${key}`, n);
    if (swept.failedSteps.length > 0) bump('sweep.failedSteps', swept.failedSteps.length);
    if (swept.claimed > 0 || swept.recovered > 0) continue;
    phase = 'idle';
    await idle(25);
  } catch {
    // The database is restarting (or the session broke): the drain settled what it could;
    // what it could not, the sweep recovers once the lease has run out.
    bump('loop.errors');
    phase = 'idle after an error';
    await idle(100);
  }
}
phase = 'stopped (the loop is over; something keeps the process alive)';
clearInterval(report);
process.off('disconnect', orphaned);
// Every session has been closed: a database socket still open now was leaked (ending ones get a second).
const sockets = (): number => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;
for (let i = 0; i < 20 && sockets() > 0; i++) await sleep(50);
const leaked = sockets();
if (leaked > 0) counts['leak.sockets'] = leaked;
// The last counts go out before the channel closes; then nothing keeps the process alive but a
// leaked socket, which the parent reports: exit anyway.
process.send({ type: 'counts', counts } satisfies FromWorker, undefined, {}, () => {
  process.disconnect();
  if (leaked > 0) process.exit(0);
});

async function idle(ms: number): Promise<void> {
  await new Promise<void>((resolve) => {
    wake = resolve;
    sleep(ms).then(resolve, resolve);
  });
  wake = null;
}
