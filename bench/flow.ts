/**
 * Flow limits under several consumer processes: what the issue's measurements ask of a kind's
 * `concurrency` and `rateLimit`, against one PostgreSQL, each consumer a process of its own
 * (this file run with `--consumer`), running `runDrain` in a loop with concurrency 8.
 *
 *   concurrency: a kind limited to 5, 2,000 jobs of 20 ms, 4 consumers: the most handlers
 *     running at once (each handler notes its start and end; the intervals of every process are
 *     merged) and the most attempts the ledger shows between claim and settlement.
 *   rate: a kind limited to 20 starts a second bursting to 5, 4 consumers, 60 s of backlog:
 *     the starts in each 10 s window after the first (target within 5 % of 200) and the most in
 *     any 250 ms window (the burst, 5), by the ledger's claim times and by the handlers' own.
 *   per tenant: a kind limited to 2 attempts per tenant, 10 tenants with 200 jobs of 20 ms each
 *     (one tenant's after another's), then a quiet tenant's 20, 4 consumers: the most of one
 *     tenant's handlers running at once, by the handlers and by the ledger, the most of the kind
 *     at once (10 tenants × 2 allow 20), and when the quiet tenant's jobs started.
 *   fair share: tenant A's 50,000 jobs of 2 ms fall due at once, then tenant B enqueues 100, one
 *     every 100 ms, 4 consumers: B's enqueue-to-start p50/p99 against the same 100 on an idle
 *     outbox, and A's starts per second during B's 10 s (while A's backlog lasts); with
 *     `fairShare` on and off, side by side. The concurrency phases also count the jobs running in
 *     back-to-back database snapshots (the limit as the database holds it).
 *
 *   node --import tsx bench/flow.ts [--consumers 4] [--rate-seconds 60] [--fair-jobs 50000] [--fair-rounds 3] [--no-write]
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createOutbox, defineJob, ok, runDrain } from 'postbox';
import { createPgConnector } from 'postbox/pg';
import { migrate } from 'postbox/sql';
import { startPostgres, withClient } from '../tests/support/postgres.ts';
import { arg, machineLine, writeResults } from './common.ts';
import { ATTEMPTS } from '../tests/support/ledger.ts';

const CONSUMERS = Number(arg('consumers') ?? 4);
const RATE_SECONDS = Number(arg('rate-seconds') ?? 60);
const FAIR_JOBS = Number(arg('fair-jobs') ?? 50_000);
/** Pairs of fair-share runs (on and off), in balanced order; the medians are compared. */
const FAIR_ROUNDS = Number(arg('fair-rounds') ?? 3);
const WRITE = !process.argv.includes('--no-write');
const anyPayload = { '~standard': { version: 1 as const, vendor: 'bench', validate: (value: unknown) => ({ value }) } };
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const capped = defineJob({ kind: 'bench.capped', payload: anyPayload, timeoutMs: 30_000, concurrency: 5, handle: async () => (await sleep(20), ok()) });
const rated = defineJob({ kind: 'bench.rated', payload: anyPayload, timeoutMs: 30_000, rateLimit: { starts: 20, perMs: 1_000, burst: 5 }, handle: async () => ok() });
const tenanted = defineJob({ kind: 'bench.tenanted', payload: anyPayload, timeoutMs: 30_000, tenantConcurrency: 2, handle: async () => (await sleep(20), ok()) });
const shared = defineJob({ kind: 'bench.shared', payload: anyPayload, timeoutMs: 30_000, handle: async () => (await sleep(2), ok()) });

/** A handler's start and end (Date.now()) and its job's tenant key ('' without one). */
type Span = [number, number, string];

/** A fair-share run's consumers: `fairShare` on or off, with only the unlimited kind registered. */
type FairMode = 'on' | 'off';

/** A consumer process: drains until told to stop, noting each handler's start and end (Date.now()). */
async function consumer(url: string, fair: FairMode | undefined): Promise<void> {
  const spans: Span[] = [];
  const noted = (job: typeof capped) =>
    defineJob({
      kind: job.kind, payload: anyPayload, timeoutMs: 30_000, ...(job.policy.concurrency ? { concurrency: job.policy.concurrency } : {}),
      ...(job.policy.tenantConcurrency ? { tenantConcurrency: job.policy.tenantConcurrency } : {}),
      ...(job.kind === rated.kind ? { rateLimit: { starts: 20, perMs: 1_000, burst: 5 } } : {}),
      async handle(p, ctx) {
        const start = Date.now();
        try {
          return await job.handle(p, ctx);
        } finally {
          spans.push([start, Date.now(), ctx.tenantKey ?? '']);
        }
      },
    });
  // The fair-share runs register the unlimited kind alone: a lane with a limited kind claims with
  // other statements (sql/limits.ts), and both runs must claim the same way bar the option.
  const jobs = fair ? [shared] : [noted(capped), noted(rated), noted(tenanted), shared];
  const outbox = createOutbox({ jobs, connect: createPgConnector(url), concurrency: 8, fairShare: fair === 'on' });
  let stop = false;
  process.on('message', (m) => {
    if (m === 'stop') stop = true;
  });
  process.send!('ready');
  while (!stop) {
    const r = await runDrain(outbox);
    if (r.claimed === 0) await sleep(50);
  }
  process.send!({ spans });
  process.disconnect();
}

/**
 * Runs `n` consumer processes until `done()` says so (`ready` called once all are up, `first`
 * once the first is: it drains from then on); every handler span they noted.
 */
async function withConsumers(url: string, n: number, done: () => Promise<boolean>, fair?: FairMode, ready?: () => void, first?: () => void): Promise<Span[]> {
  const here = fileURLToPath(import.meta.url);
  const children = Array.from({ length: n }, () => fork(here, ['--consumer', url, ...(fair ? ['--fair', fair] : [])], { execArgv: ['--import', 'tsx'] }));
  let up = 0;
  await Promise.all(children.map((c) => new Promise((resolve) => c.once('message', (m) => (up++ === 0 && first?.(), resolve(m))))));
  ready?.();
  while (!(await done())) await sleep(200);
  const spans = await Promise.all(
    children.map((c) => new Promise<Span[]>((resolve) => {
      c.on('message', (m: any) => m?.spans && resolve(m.spans));
      c.send('stop');
    })),
  );
  return spans.flat();
}

/** The most intervals open at once (an end at t closes before a start at t opens). */
function peak(spans: readonly (readonly [number, number, ...unknown[]])[]): number {
  const edges = spans.flatMap(([s, e]) => [[s, 1], [e, -1]] as [number, number][]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let open = 0;
  let most = 0;
  for (const [, d] of edges) most = Math.max(most, (open += d));
  return most;
}

/** The most of `times` (sorted) inside any window of `ms` (half open). */
function mostInWindow(times: number[], ms: number): number {
  let most = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[i]! - times[j]! >= ms) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

/**
 * Counts what `sql` returns (one number) in back-to-back snapshots until stopped, and keeps the
 * most: each read sees one committed state, so a limit the claims exceed shows up here whatever
 * the consumers' clocks say.
 */
function sampleMost(url: string, sql: string, params: unknown[]): { stop: () => Promise<{ most: number; samples: number }> } {
  let stopping = false;
  const done = (async () => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    let most = 0;
    let samples = 0;
    try {
      while (!stopping) {
        most = Math.max(most, Number((await c.query(sql, params)).rows[0]?.n ?? 0));
        samples++;
      }
    } finally {
      await c.end();
    }
    return { most, samples };
  })();
  return { stop: async () => ((stopping = true), done) };
}

async function main(): Promise<void> {
  const server = await startPostgres();
  const lines: string[] = [];
  try {
    const url = await server.createDatabase('flow');
    await withClient(url, (c) => migrate(c));
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const producer = createOutbox({ jobs: [capped, rated, tenanted], connect: createPgConnector(url) });
    const count = async (kind: string) => Number((await client.query(`SELECT count(*) FROM outbox.job WHERE kind = $1 AND status = 'succeeded'`, [kind])).rows[0].count);

    // Concurrency.
    const JOBS = 2000;
    for (let i = 0; i < JOBS; i += 1000) await producer.enqueueMany(client, capped, Array.from({ length: 1000 }, (_, k) => ({ payload: { i: i + k } })));
    const t0 = performance.now();
    const cSampler = sampleMost(url, `SELECT count(*) AS n FROM outbox.job WHERE kind = $1 AND status = 'running'`, [capped.kind]);
    const cSpans = await withConsumers(url, CONSUMERS, async () => (await count(capped.kind)) === JOBS);
    const cWall = (performance.now() - t0) / 1000;
    const cSnap = await cSampler.stop();
    const ledger = (await client.query(`SELECT (extract(epoch FROM started_at) * 1000)::float8 AS s, (extract(epoch FROM finished_at) * 1000)::float8 AS f FROM ${ATTEMPTS} a WHERE kind = $1`, [capped.kind])).rows;
    const handlerPeak = peak(cSpans);
    const ledgerPeak = peak(ledger.map((r) => [r.s, r.f]));
    process.stderr.write(`concurrency: ${JOBS} jobs in ${cWall.toFixed(1)} s; handlers at once ${handlerPeak}, running jobs ${cSnap.most} (${cSnap.samples} snapshots), ledger ${ledgerPeak}\n`);

    // Rate.
    const RATE_JOBS = 20 * RATE_SECONDS + 100;
    for (let i = 0; i < RATE_JOBS; i += 1000) await producer.enqueueMany(client, rated, Array.from({ length: Math.min(1000, RATE_JOBS - i) }, (_, k) => ({ payload: { i: i + k } })));
    const r0 = Date.now();
    const rSpans = await withConsumers(url, CONSUMERS, async () => Date.now() - r0 >= RATE_SECONDS * 1000);
    const claims = (await client.query(`SELECT (extract(epoch FROM started_at) * 1000)::float8 AS s FROM ${ATTEMPTS} a WHERE kind = $1 ORDER BY 1`, [rated.kind])).rows.map((r) => Number(r.s));
    const starts = rSpans.map(([s]) => s).sort((a, b) => a - b);
    const first = claims[0]!;
    const windows: number[] = [];
    for (let w = 1; w < RATE_SECONDS / 10; w++) windows.push(claims.filter((t) => t >= first + w * 10_000 && t < first + (w + 1) * 10_000).length / 10);
    const worst = Math.max(...windows.map((r) => Math.abs(r - 20) / 20));
    process.stderr.write(`rate: windows ${windows.map((r) => r.toFixed(1)).join(' ')} /s; burst ${mostInWindow(claims, 250)} (ledger), ${mostInWindow(starts, 250)} (handlers)\n`);

    // Per tenant: 10 tenants' backlogs one after another, then a quiet tenant's few.
    const TENANTS = 10;
    const PER_TENANT = 200;
    for (let t = 0; t < TENANTS; t++) {
      await producer.enqueueMany(client, tenanted, Array.from({ length: PER_TENANT }, (_, k) => ({ payload: { k }, tenantKey: `t${t}` })));
    }
    await producer.enqueueMany(client, tenanted, Array.from({ length: 20 }, (_, k) => ({ payload: { k }, tenantKey: 'quiet' })));
    const tJobs = TENANTS * PER_TENANT + 20;
    // Timed from when the first consumer process is up (each takes about a second to start, and
    // each drains as soon as it is).
    let t1 = Date.now();
    const tSampler = sampleMost(
      url,
      `SELECT coalesce(max(n), 0) AS n FROM (SELECT count(*) AS n FROM outbox.job WHERE kind = $1 AND status = 'running' GROUP BY tenant_key) t`,
      [tenanted.kind],
    );
    const tSpans = await withConsumers(url, CONSUMERS, async () => (await count(tenanted.kind)) === tJobs, undefined, undefined, () => (t1 = Date.now()));
    const tWall = (Date.now() - t1) / 1000;
    const tSnap = await tSampler.stop();
    const tLedger = (await client.query(
      `SELECT j.tenant_key AS t, (extract(epoch FROM a.started_at) * 1000)::float8 AS s, (extract(epoch FROM a.finished_at) * 1000)::float8 AS f
         FROM ${ATTEMPTS} a JOIN outbox.job j ON j.id = a.job_id WHERE a.kind = $1`, [tenanted.kind])).rows;
    const tenantsSeen = [...new Set(tSpans.map((x) => x[2]))];
    const tenantPeak = Math.max(...tenantsSeen.map((t) => peak(tSpans.filter((x) => x[2] === t))));
    const tenantLedgerPeak = Math.max(...tenantsSeen.map((t) => peak(tLedger.filter((r) => r.t === t).map((r) => [Number(r.s), Number(r.f)] as [number, number]))));
    const kindPeak = peak(tSpans);
    const quietStarts = tSpans.filter((x) => x[2] === 'quiet').map((x) => x[0] - t1).sort((a, b) => a - b);
    const lastBigStart = Math.max(...tSpans.filter((x) => x[2] === `t${TENANTS - 1}`).map((x) => x[0] - t1));
    process.stderr.write(`per tenant: ${tJobs} jobs in ${tWall.toFixed(1)} s; one tenant at once ${tenantPeak} (running jobs ${tSnap.most}, ledger ${tenantLedgerPeak}), kind ${kindPeak}; quiet starts ${quietStarts[0]}..${quietStarts.at(-1)} ms\n`);

    // Fair share: B's 100 jobs on an idle outbox, then behind A's backlog, with fairShare on and off.
    const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;
    const fairRun = async (fairShare: boolean) => {
      await client.query(`DELETE FROM outbox.job WHERE kind = $1`, [shared.kind]);
      const trickle = async (tag: string) => {
        for (let i = 0; i < 100; i++) {
          await producer.enqueue(client, shared, { payload: { tag, i }, tenantKey: 'b' });
          await sleep(100);
        }
      };
      const waits = async (tag: string) => (await client.query(
        `SELECT (extract(epoch FROM a.started_at - j.created_at) * 1000)::float8 AS w FROM ${ATTEMPTS} a JOIN outbox.job j ON j.id = a.job_id
          WHERE j.kind = $1 AND j.tenant_key = 'b' AND j.payload ->> 'tag' = $2 AND a.seq = 1`, [shared.kind, tag])).rows.map((r) => Number(r.w));
      const left = async () => Number((await client.query(`SELECT count(*) FROM outbox.job WHERE kind = $1 AND status <> 'succeeded'`, [shared.kind])).rows[0].count);
      let phase: 'idle' | 'backlog' | 'done' = 'idle';
      let bFrom = 0;
      let bTo = 0;
      let aLeftAtEnd = 0;
      let driver: Promise<void> = Promise.resolve();
      const drive = async () => {
        await trickle('idle');
        while ((await left()) > 0) await sleep(100);
        // A's backlog is whole when B starts: enqueued delayed, then due at once (drained as it
        // went in, it ran out before B's 10 s ended, and A's rate then measured nothing).
        for (let i = 0; i < FAIR_JOBS; i += 1000) {
          await producer.enqueueMany(client, shared, Array.from({ length: Math.min(1000, FAIR_JOBS - i) }, (_, k) => ({ payload: { i: i + k }, tenantKey: 'a', delayMs: 3_600_000 })));
        }
        await client.query(`UPDATE outbox.job SET due_at = now() WHERE kind = $1 AND tenant_key = 'a'`, [shared.kind]);
        bFrom = Date.now();
        phase = 'backlog';
        await trickle('backlog');
        bTo = Date.now();
        aLeftAtEnd = Number((await client.query(`SELECT count(*) FROM outbox.job WHERE kind = $1 AND tenant_key = 'a' AND status <> 'succeeded'`, [shared.kind])).rows[0].count);
        while ((await waits('backlog')).length < 100) await sleep(200);
        phase = 'done';
      };
      // B's idle run starts once every consumer is up, so that its waits are the outbox's.
      await withConsumers(url, CONSUMERS, async () => phase === 'done', fairShare ? 'on' : 'off', () => (driver = drive()));
      await driver;
      const aStarts = (await client.query(
        `SELECT (extract(epoch FROM a.started_at) * 1000)::float8 AS s FROM ${ATTEMPTS} a JOIN outbox.job j ON j.id = a.job_id
          WHERE j.kind = $1 AND j.tenant_key = 'a' AND a.seq = 1`, [shared.kind])).rows.map((r) => Number(r.s));
      // While A's backlog lasted: a run whose backlog ran out before B's last job counts up to A's last start.
      const aTo = aLeftAtEnd > 0 ? bTo : Math.min(bTo, Math.max(...aStarts) + 1);
      const during = aStarts.filter((t) => t >= bFrom && t < aTo).length / ((aTo - bFrom) / 1000);
      const idle = await waits('idle');
      const busy = await waits('backlog');
      const out = { fairShare, idleP50: quantile(idle, 0.5), idleP99: quantile(idle, 0.99), busyP50: quantile(busy, 0.5), busyP99: quantile(busy, 0.99), during, aLeftAtEnd };
      process.stderr.write(`fair share ${fairShare ? 'on' : 'off'}: ${JSON.stringify(out)}\n`);
      // The rest of A's backlog is not this run's measure: drop it.
      await client.query(`DELETE FROM outbox.job WHERE kind = $1`, [shared.kind]);
      return out;
    };
    // Balanced order (on off, off on, ...), so a slow minute does not fall on one side only.
    const fairRuns: Awaited<ReturnType<typeof fairRun>>[] = [];
    for (let r = 0; r < FAIR_ROUNDS; r++) for (const on of r % 2 === 0 ? [true, false] : [false, true]) fairRuns.push(await fairRun(on));
    const median = (xs: number[]) => { const v = [...xs].sort((a, b) => a - b); return v.length % 2 ? v[(v.length - 1) / 2]! : (v[v.length / 2 - 1]! + v[v.length / 2]!) / 2; };
    const side = (on: boolean) => fairRuns.filter((r) => r.fairShare === on);
    const aRate = (on: boolean) => median(side(on).map((r) => r.during));
    const ratio = (on: boolean) => median(side(on).map((r) => r.busyP99 / r.idleP99));

    lines.push(
      '# Flow limits under several consumer processes',
      '',
      machineLine(),
      `- PostgreSQL ${server.serverVersion} (${server.flavor}); ${CONSUMERS} consumer processes, each \`runDrain\` in a loop with \`concurrency: 8\``,
      '- command: `node --import tsx bench/flow.ts`',
      '',
      '## Concurrency: a kind limited to 5',
      '',
      `${JOBS} jobs of 20 ms, drained in ${cWall.toFixed(1)} s (${(JOBS / cWall).toFixed(0)} jobs/s; 5 at a time allow at most 250/s).`,
      '',
      '| measure | most at once | target |',
      '|---|---|---|',
      `| handlers running (each noted its start and end; every process merged) | ${handlerPeak} | ≤ 5 |`,
      `| jobs running in the database, in ${cSnap.samples.toLocaleString('en')} back-to-back snapshots (\`status = 'running'\`: claimed, not yet settled) | ${cSnap.most} | ≤ 5 |`,
      `| attempts between claim and settlement, by the attempt ledger's times | ${ledgerPeak} | (not the limit's measure) |`,
      '',
      'The snapshots are the database\'s own count: each read sees one committed state, so a claim that took a sixth slot would show. The ledger\'s times are each statement\'s `now`, read by its consumer when it composed the statement; a slot is held from the claim\'s commit to the settlement\'s commit. With four processes on two cores a statement may wait tens of ms between the two, so a claim composed before another consumer\'s settlement (and run after its commit) shows an overlap there that the slots never had.',
      '',
      '## Rate: a kind limited to 20 starts/s, bursting to 5',
      '',
      `${RATE_SECONDS} s with a backlog throughout; starts (claims, from the attempt ledger) per second in each 10 s window after the first:`,
      '',
      `| window | ${windows.map((_, i) => `${(i + 1) * 10}-${(i + 2) * 10} s`).join(' | ')} |`,
      `|---|${windows.map(() => '---').join('|')}|`,
      `| starts/s | ${windows.map((r) => r.toFixed(1)).join(' | ')} |`,
      '',
      `Largest deviation from 20/s: ${(worst * 100).toFixed(1)} % (target ≤ 5 %). Most starts in any 250 ms: ${mostInWindow(claims, 250)} by the ledger's claim times, ${mostInWindow(starts, 250)} by the handlers' own start times (target: the burst, 5). The limit holds on starts as claims: a claimed job's handler may begin later (the consumer's event loop, its buffer), so on a loaded machine two claims' handlers can bunch within 250 ms; the long-run rate is unaffected.`,
      '',
      '## Per tenant: a kind limited to 2 attempts per tenant',
      '',
      `${TENANTS} tenants enqueue ${PER_TENANT} jobs of 20 ms each, one tenant's after another's, then a quiet tenant enqueues 20 (last in due order); no limit on the kind as a whole. Drained in ${tWall.toFixed(1)} s (${(tJobs / tWall).toFixed(0)} jobs/s; ${TENANTS} tenants × 2 at a time allow at most ${TENANTS * 2 * 50}/s).`,
      '',
      '| measure | most at once | target |',
      '|---|---|---|',
      `| one tenant's handlers running (each noted its start, end and tenant; every process merged) | ${tenantPeak} | ≤ 2 |`,
      `| one tenant's jobs running in the database, in ${tSnap.samples.toLocaleString('en')} back-to-back snapshots | ${tSnap.most} | ≤ 2 |`,
      `| one tenant's attempts between claim and settlement, by the attempt ledger | ${tenantLedgerPeak} | (see the concurrency note) |`,
      `| the kind's handlers running, all tenants | ${kindPeak} | ≤ ${TENANTS * 2 + 2} (the quiet tenant's 2 too) |`,
      '',
      `The quiet tenant's 20 jobs, last in due order, started ${quietStarts[0]} to ${quietStarts.at(-1)} ms after the first consumer was up (the last big tenant's last job: ${lastBigStart} ms): a claim takes each tenant's first jobs before anyone's next, so it ran beside the backlogs, two at a time.`,
      '',
      '## Fair share: a quiet tenant beside a large backlog',
      '',
      `Tenant B enqueues 100 jobs of 2 ms, one every 100 ms, on an idle outbox; then tenant A's ${FAIR_JOBS.toLocaleString('en')} fall due at once (enqueued in lists of 1,000 with a delay, then made due together) and B enqueues another 100 the same way. B's wait is enqueue to claim (the attempt ledger's start less the job's creation). A's rate is its claims per second during B's second run, up to A's last claim if its backlog ran out first. The consumers poll (no queue), sleeping 50 ms after a drain that claimed nothing, and register the unlimited kind alone (a lane with a limited kind takes other statements, so both sides must claim alike bar the option). Runs with \`fairShare\` on and off alternate, ${FAIR_ROUNDS} of each in balanced order (on off, off on, …); off is the comparison: how long B waits behind A in due order, and what A's rate is without fair share.`,
      '',
      '| `fairShare` | B idle p50 / p99 | B behind A p50 / p99 | p99 behind A / idle (target ≤ 2) | A jobs/s during B | A left when B ended |',
      '|---|---|---|---|---|---|',
      ...fairRuns.map((r) => `| ${r.fairShare ? 'on' : 'off'} | ${r.idleP50.toFixed(0)} / ${r.idleP99.toFixed(0)} ms | ${r.busyP50.toFixed(0)} / ${r.busyP99.toFixed(0)} ms | ${(r.busyP99 / r.idleP99).toFixed(2)} | ${r.during.toFixed(0)} | ${r.aLeftAtEnd.toLocaleString('en')} |`),
      '',
      `Medians of the ${FAIR_ROUNDS} runs a side: B's p99 behind A ÷ idle ${ratio(true).toFixed(2)} with fair share on (target ≤ 2), ${ratio(false).toFixed(2)} off; A's rate during B ${aRate(true).toFixed(0)} jobs/s on, ${aRate(false).toFixed(0)} off: ${(((aRate(true) - aRate(false)) / aRate(false)) * 100).toFixed(1)} % (target: no worse than −10 %).`,
      '',
    );
    await client.end();
  } finally {
    await server.stop();
  }
  const report = lines.join('\n');
  if (WRITE) await writeResults('flow', 0, report);
  else process.stdout.write(report);
}

if (process.argv.includes('--consumer')) await consumer(process.argv[process.argv.indexOf('--consumer') + 1]!, arg('fair') as FairMode | undefined);
else await main();
