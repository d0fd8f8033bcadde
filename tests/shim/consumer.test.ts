// The public drain for long-lived processes, in Node against a real PostgreSQL: a consumer
// keeps draining jobs enqueued after it started, stops cleanly when its signal aborts (nothing
// left running, the promise resolves with the counts), and the sweep and recovery run without
// a Cron Trigger.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { z } from 'zod';
import { createOutbox, defineJob, ok, PostboxError, runConsumer, runDrain, runRecovery, runSweep, type RunReport } from 'postbox';
import { createPgConnector, createPgPoolConnector } from 'postbox/pg';
import { migrate } from 'postbox/sql';
import { createTestClock } from 'postbox/testing';
import { jobSettleThenClaimDue } from '../../js-shim/src/stores/pg/sql/drain.ts';
import { outboxSql } from '../../js-shim/src/stores/pg/sql/index.ts';
import { CUSTOM_PLAN_WEIGHT_ROWS, GENERIC_PLAN_ONLY } from '../../js-shim/src/stores/pg/sql/statement.ts';
import { startPostgres, withClient, type PgServer } from '../support/postgres.ts';

let server: PgServer;
let url: string;
let pool: pg.Pool;

before(async () => {
  server = await startPostgres();
  url = await server.createDatabase('consumer');
  await withClient(url, (c) => migrate(c));
  pool = new pg.Pool({ connectionString: url, max: 2 });
});
after(async () => {
  await pool?.end();
  await server?.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const statuses = async (kind: string) =>
  Object.fromEntries((await pool.query('SELECT status, count(*)::int AS n FROM outbox.job WHERE kind = $1 GROUP BY status', [kind])).rows.map((r) => [r.status, r.n]));

async function until(what: string, check: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

test('a consumer drains jobs enqueued after it started, and stops cleanly on abort', async () => {
  const ran: number[] = [];
  const job = defineJob({
    kind: 'consumer.note',
    payload: z.object({ n: z.number() }),
    timeoutMs: 10_000,
    async handle({ n }, ctx) {
      await ctx.db.query('SELECT pg_sleep(0.02)');
      ran.push(n);
      return ok();
    },
  });
  const outbox = createOutbox({ jobs: [job], connect: createPgConnector(url), concurrency: 2 });
  const stop = new AbortController();
  const reports: RunReport[] = [];
  const consumer = runConsumer(outbox, { signal: stop.signal, idleMs: 50, onReport: (r) => reports.push(r) });

  // Enqueued while the consumer runs (and idles between drains): it picks each batch up.
  for (let batch = 0; batch < 3; batch++) {
    for (let i = 0; i < 4; i++) await outbox.transaction(pool, (_tx, enqueue) => enqueue(job, { payload: { n: batch * 4 + i } }));
    await until(`batch ${batch}`, async () => ran.length === (batch + 1) * 4);
    await sleep(120); // at least two idle waits
  }
  // A burst still running when the signal aborts: what started finishes, what waits is released.
  for (let i = 12; i < 40; i++) await outbox.transaction(pool, (_tx, enqueue) => enqueue(job, { payload: { n: i } }));
  await until('the burst to start', async () => ran.length > 12);
  stop.abort();
  const total = await consumer;

  const after = await statuses('consumer.note');
  assert.equal(after.running, undefined, 'no job is left running');
  assert.equal(total.succeeded, ran.length);
  assert.equal(after.succeeded, ran.length);
  assert.equal((after.pending ?? 0) + ran.length, 40, 'every job not run is pending again');
  assert.equal(total.claimed, total.succeeded + total.released);
  assert.ok(reports.length >= 3, `onReport after each drain that claimed (${reports.length})`);
  // Nothing runs after the promise resolved.
  const ranAtStop = ran.length;
  await sleep(200);
  assert.equal(ran.length, ranAtStop);
  assert.equal((await statuses('consumer.note')).running, undefined);
  // The rest drains once asked.
  const rest = await runDrain(outbox);
  assert.equal(rest.succeeded, 40 - ranAtStop);
  assert.deepEqual(await statuses('consumer.note'), { succeeded: 40 });
});

test('a consumer survives a database that is down and catches up once it is back', async () => {
  const job = defineJob({ kind: 'consumer.later', payload: z.object({}), timeoutMs: 5_000, handle: async () => ok() });
  let up = false;
  const real = createPgConnector(url);
  const events: string[] = [];
  const outbox = createOutbox({
    jobs: [job],
    connect: async () => {
      if (!up) throw new Error('connection refused');
      return real();
    },
    events: (e) => events.push(e.type),
  });
  const stop = new AbortController();
  const consumer = runConsumer(outbox, { signal: stop.signal, idleMs: 20 });
  await outbox.transaction(pool, (_tx, enqueue) => enqueue(job, { payload: {} }));
  await until('a failed drain', async () => events.includes('infra_error'));
  up = true;
  await until('the job', async () => (await statuses('consumer.later')).succeeded === 1);
  stop.abort();
  assert.equal((await consumer).succeeded, 1);
});

test('a consumer whose database stays down asks it less and less often: 1 s, 2 s, 4 s … after failures in a row', async () => {
  const job = defineJob({ kind: 'consumer.down', payload: z.object({}), timeoutMs: 5_000, handle: async () => ok() });
  const tries: number[] = [];
  const outbox = createOutbox({
    jobs: [job],
    connect: async () => {
      tries.push(Date.now());
      throw new Error('connection refused');
    },
    events: () => undefined,
  });
  const stop = new AbortController();
  // idleMs 20 is the wait after an empty drain; failures back off from 1 s regardless.
  const consumer = runConsumer(outbox, { signal: stop.signal, idleMs: 20 });
  await sleep(3_500);
  stop.abort();
  await consumer;
  // Tries at about 0, 1 and 3 s (the next would be at 7 s); at a 20 ms wait there would be ~170.
  assert.ok(tries.length >= 2 && tries.length <= 4, `tries at ${tries.map((t) => t - tries[0]!).join(', ')} ms`);
  assert.ok(tries[1]! - tries[0]! >= 900, `the first wait was ${tries[1]! - tries[0]!} ms`);
  if (tries.length >= 3) assert.ok(tries[2]! - tries[1]! >= 1_900, `the second wait was ${tries[2]! - tries[1]!} ms`);
});

test('runConsumer refuses what it cannot run', async () => {
  const job = defineJob({ kind: 'consumer.bad', payload: z.object({}), timeoutMs: 1_000, handle: async () => ok() });
  const outbox = createOutbox({ jobs: [job], connect: createPgConnector(url) });
  const code = (c: string) => (e: unknown) => e instanceof PostboxError && e.code === c;
  await assert.rejects(runConsumer(outbox, {} as never), code('invalid_input'));
  await assert.rejects(runConsumer(outbox, { signal: new AbortController().signal, lanes: ['nope'] }), code('invalid_input'));
  await assert.rejects(runConsumer(outbox, { signal: new AbortController().signal, idleMs: -1 }), code('invalid_input'));
  await assert.rejects(runConsumer(outbox, { signal: new AbortController().signal, idleMs: 2.5 }), code('invalid_input'));
  await assert.rejects(runConsumer(outbox, { signal: new AbortController().signal, idleMs: 3_600_001 }), code('invalid_input'));
  // Already aborted: resolves at once, having claimed nothing.
  assert.equal((await runConsumer(outbox, { signal: AbortSignal.abort() })).claimed, 0);
});

test('runRecovery and runSweep recover a crashed attempt without a Cron Trigger', async () => {
  const start = Date.parse('2026-11-30T12:00:00.000Z');
  const clock = createTestClock(start);
  let wake!: () => void;
  const hang = new Promise<void>((r) => (wake = r));
  let runs = 0;
  const job = defineJob({
    kind: 'consumer.crashy',
    payload: z.object({}),
    timeoutMs: 10_000,
    async handle() {
      if (++runs === 1) await hang;
      return ok();
    },
  });
  const dying = createOutbox({ jobs: [job], connect: createPgConnector(url), clock });
  const { id } = (await dying.transaction(pool, (_tx, enqueue) => enqueue(job, { payload: {} }))) as { id: string };
  const abandoned = runDrain(dying);
  await until('the first run', async () => runs === 1);

  const outbox = createOutbox({ jobs: [job], connect: createPgConnector(url), clock });
  assert.equal((await runRecovery(outbox)).recovered, 0, 'the lease has not run out');
  clock.advance(job.policy.leaseMs + 1);
  const recovered = await runRecovery(outbox);
  assert.equal(recovered.recovered, 1);
  assert.equal(recovered.retrying, 1);
  const row = (await pool.query(`SELECT status, round(extract(epoch from due_at) * 1000)::bigint AS due FROM outbox.job WHERE id = $1`, [id])).rows[0];
  assert.equal(row.status, 'retrying');
  // The sweep drains it once its backoff has passed.
  clock.set(Number(row.due));
  const swept = await runSweep(outbox, { retention: { succeededRetentionMs: 86_400_000 } });
  assert.equal(swept.succeeded, 1);
  assert.deepEqual(swept.failedSteps, []);
  wake();
  assert.equal((await abandoned).stale, 1);
  assert.deepEqual(await statuses('consumer.crashy'), { succeeded: 1 });
});

test('recovery goes on in batches while they come back full: 1,200 expired leases in one runRecovery', async () => {
  const start = Date.parse('2026-11-30T13:00:00.000Z');
  const clock = createTestClock(start);
  const job = defineJob({ kind: 'consumer.many-crashed', payload: z.object({ i: z.number() }), timeoutMs: 1_000, handle: async () => ok() });
  const outbox = createOutbox({ jobs: [job], connect: createPgConnector(url), clock });
  await outbox.transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(job, Array.from({ length: 1200 }, (_, i) => ({ payload: { i } }))));
  // As 1,200 claims whose isolates died would leave them: running, the lease run out a second ago.
  await pool.query(
    `UPDATE outbox.job SET status = 'running', attempt_seq = attempt_seq + 1, started_at = to_timestamp($2 / 1000.0),
            lease_expires_at = to_timestamp($2 / 1000.0) WHERE kind = $1`,
    [job.kind, start - 1000],
  );
  const report = await runRecovery(outbox);
  // The core's recovery batch is 500: two full batches, then a short one ends the step.
  assert.equal(report.recovered, 1200);
  assert.deepEqual(await statuses(job.kind), { retrying: 1200 });
  assert.equal((await pool.query(`SELECT count(*)::int AS n FROM outbox.attempt a JOIN outbox.job j ON j.id = a.job_id WHERE j.kind = $1 AND a.outcome = 'crash'`, [job.kind])).rows[0].n, 1200);
});

test('the drain statement keeps one generic plan over a table of finished jobs, instead of planning every call', async () => {
  const kind = 'consumer.planned';
  const job = defineJob({ kind, payload: z.object({ i: z.number() }), timeoutMs: 1_000, handle: async () => ok() });
  // A backlog of 30,000 jobs due tomorrow, analysed: a table where a plan that knows the claim's
  // small limit and its instant looks far cheaper than the generic one.
  await pool.query(
    `INSERT INTO outbox.job (id, kind, lane, payload, status, due_at, created_at, updated_at)
     SELECT gen_random_uuid(), $1, 'default', '{}', 'pending', now() + interval '1 day', now(), now() FROM generate_series(1, 30000)`,
    [kind],
  );
  await pool.query('ANALYZE outbox.job');
  const one = new pg.Pool({ connectionString: url, max: 1 });
  try {
    const outbox = createOutbox({ jobs: [job], connect: createPgPoolConnector(one), concurrency: 1, handlerSessions: 0 });
    await outbox.transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(job, Array.from({ length: 300 }, (_, i) => ({ payload: { i } }))));
    assert.equal((await runDrain(outbox)).succeeded, 300);
    // The pool's one client was the drain's session: its prepared statements and their plans.
    const { rows } = await one.query(`SELECT name, generic_plans::int AS generic, custom_plans::int AS custom FROM pg_prepared_statements WHERE name LIKE 'postbox_settle_then_claim%'`);
    const due = rows.find((r) => r.name.startsWith('postbox_settle_then_claim_due'));
    assert.ok(due, JSON.stringify(rows));
    // The server tries five custom plans before it compares them with the generic one; after
    // that, every call is generic. How many calls the drain makes depends on how its pump
    // batches (the machine's speed), so the check asks only that some came after the five.
    assert.ok(due.custom <= 5 && due.generic >= 3, `plans of the drain statement: ${JSON.stringify(due)}`);
  } finally {
    await one.end();
  }
});

/**
 * The cost the server gives the drain's settle-and-claim under `mode` (force_generic_plan or
 * force_custom_plan), prepared on `c` and explained with a settlement of three jobs.
 */
async function settleAndClaimCost(c: pg.Client, mode: string, opts: { keel: boolean } = { keel: true }): Promise<number> {
  const whole = jobSettleThenClaimDue('outbox');
  // Without its GENERIC_PLAN_ONLY condition the statement's costs are its own.
  const statement = opts.keel ? whole : { name: `${whole.name}_unkeeled`, text: whole.text.replace(GENERIC_PLAN_ONLY, 'true') };
  const ids = Array.from({ length: 3 }, (_, i) => `00000000-0000-7000-8000-00000000000${i}`);
  const n = (v: string) => `{${ids.map(() => v).join(',')}}`;
  const values = [Date.now(), ids, n('1'), n('succeeded'), n('NULL'), n('1'), n('0'), n('NULL'), n('0'), n('NULL'), n('NULL'), n('t'), n('ok'), 'default', ['consumer.none'], [60000], 4, null];
  const literal = (v: unknown) => (v === null ? 'NULL' : typeof v === 'number' ? String(v) : Array.isArray(v) ? `'{${v.join(',')}}'` : `'${String(v)}'`);
  await c.query({ name: statement.name, text: statement.text, values });
  await c.query(`SET plan_cache_mode = ${mode}`);
  try {
    const plan = (await c.query(`EXPLAIN EXECUTE ${statement.name}(${values.map(literal).join(', ')})`)).rows[0]['QUERY PLAN'] as string;
    return Number(/cost=[\d.]+\.\.([\d.]+)/.exec(plan)![1]);
  } finally {
    await c.query('RESET plan_cache_mode');
  }
}

// The server plans a named statement afresh on every call while the average cost of the custom
// plans it has made, with its own price for planning them (2.5 cost units per table at the
// default cpu_operator_cost), is below the generic plan's. In a soak (bench/soak.ts) the
// settle-and-claim was planned on two calls of three, at about twice its time: its custom plans
// saw the settlement's arrays (1 to 9 jobs, against the generic plan's assumed 10), and its
// generic plan's cost grew twelvefold as outbox.job grew, above the custom plans made while it
// was small. The two tests below hold each cause away.
test('no custom plan of the settle-and-claim costs less than its generic plan: every value is hidden from the planner', async () => {
  await withClient(url, async (c) => {
    const generic = await settleAndClaimCost(c, 'force_generic_plan', { keel: false });
    const custom = await settleAndClaimCost(c, 'force_custom_plan', { keel: false });
    // What may differ is the folding of a constant inside a hidden value (hundredths of a unit).
    assert.ok(generic - custom < 1, `generic plan ${generic}, custom plan ${custom}`);
    // With GENERIC_PLAN_ONLY every custom plan weighs some 50,000 units more than the generic one.
    const keeled = await settleAndClaimCost(c, 'force_custom_plan');
    const keeledGeneric = await settleAndClaimCost(c, 'force_generic_plan');
    assert.ok(keeled - keeledGeneric > 45_000, `custom plan with the condition ${keeled}, generic ${keeledGeneric}`);
  });
});

// A custom plan that costs more than jit_above_cost is compiled by LLVM on a server built with
// JIT (Debian's PostgreSQL, most managed ones): about 200 ms for each of a session's first five
// calls of each statement, which made every short-lived session's claims slow.
test('no drain statement\'s custom plan costs enough to be compiled (jit_above_cost) on an empty outbox', async () => {
  await withClient(url, async (c) => {
    const jitAbove = Number((await c.query('SHOW jit_above_cost')).rows[0].jit_above_cost);
    const sql = outboxSql();
    const keeled = [sql.claimDue, sql.settleThenClaimDue, sql.limited.claimDue, sql.limited.settleThenClaimDue, sql.fair.claimDue, sql.fair.settleThenClaimDue, ...Object.values(sql.limitedFair), sql.settleBatch, ...Object.values(sql.traced)]
      .filter((st) => st.text.includes(GENERIC_PLAN_ONLY));
    assert.ok(keeled.length >= 11, `statements with the condition: ${keeled.map((st) => st.name)}`);
    await c.query('SET plan_cache_mode = force_custom_plan');
    try {
      for (const st of keeled) {
        const params = Math.max(...[...st.text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
        await c.query(`PREPARE jit_probe AS ${st.text}`);
        const args = [String(Date.now()), ...Array.from({ length: params - 1 }, () => 'NULL')];
        const plan = (await c.query(`EXPLAIN (FORMAT JSON) EXECUTE jit_probe(${args.join(', ')})`)).rows[0]['QUERY PLAN'][0].Plan;
        await c.query('DEALLOCATE jit_probe');
        assert.ok(plan['Total Cost'] > CUSTOM_PLAN_WEIGHT_ROWS / 100, `${st.name}: the weight is in its custom plan (${plan['Total Cost']})`);
        assert.ok(plan['Total Cost'] < jitAbove, `${st.name}: custom plan ${plan['Total Cost']} against jit_above_cost ${jitAbove}`);
      }
    } finally {
      await c.query('RESET plan_cache_mode');
    }
  });
});

test('the settle-and-claim\'s generic plan costs about the same over 100,000 finished jobs as over an empty outbox', async () => {
  const fresh = await server.createDatabase('consumer_plan_growth');
  await withClient(fresh, async (c) => {
    await migrate(c);
    const empty = await settleAndClaimCost(c, 'force_generic_plan');
    await c.query(
      `INSERT INTO outbox.job (id, kind, lane, payload, status, attempts, attempt_seq, due_at, created_at, updated_at, started_at, finished_at)
       SELECT gen_random_uuid(), 'consumer.old', 'default', '{}', 'succeeded', 1, 1, now(), now(), now(), now(), now() FROM generate_series(1, 100000)`,
    );
    await c.query('ANALYZE outbox.job');
    const full = await settleAndClaimCost(c, 'force_generic_plan');
    // Growth of the primary key's depth and size is expected (about 2.3x here); the empty
    // job_edge planned as ten pages of rows made it 12x, since every probe of job was multiplied.
    assert.ok(full <= 4 * empty, `generic plan over an empty outbox ${empty}, over 100,000 jobs ${full}`);
  });
});

// The server keeps the generic cost it computed last; while it makes custom plans it does not
// recompute it. Once new statistics (a backlog here; a held snapshot's bloat in a soak) had
// raised that cost during a stretch of custom plans, the custom plans made after the tables
// shrank all cost less, and every later call of the session was planned afresh (a soak's
// sessions at twice the claim's time after the pin). GENERIC_PLAN_ONLY ends that.
test('statistics that rise and fall leave the settle-and-claim on its generic plan', async () => {
  const fresh = await server.createDatabase('consumer_plan_backlog');
  await withClient(fresh, async (admin) => {
    await migrate(admin);
    const whole = jobSettleThenClaimDue('outbox');
    const unkeeled = { name: `${whole.name}_unkeeled`, text: whole.text.replace(GENERIC_PLAN_ONLY, 'true') };
    const ids = Array.from({ length: 3 }, (_, i) => `00000000-0000-7000-8000-00000000000${i}`);
    const n = (v: string) => `{${ids.map(() => v).join(',')}}`;
    // A settlement of three unknown jobs and a claim of a kind nothing has: the statement runs
    // whole and changes nothing.
    const values = () => [Date.now(), ids, n('1'), n('succeeded'), n('NULL'), n('1'), n('0'), n('NULL'), n('0'), n('NULL'), n('NULL'), n('t'), n('ok'), 'default', ['consumer.none'], [60000], 4, null];
    const jobs = (count: number, status: string) =>
      admin.query(
        `INSERT INTO outbox.job (id, kind, lane, payload, status, attempts, attempt_seq, due_at, created_at, updated_at, finished_at)
         SELECT gen_random_uuid(), 'consumer.other', 'default', '{}', $2, 0, 0, now(), now(), now(), CASE WHEN $2 = 'succeeded' THEN now() END
           FROM generate_series(1, $1::int)`,
        [count, status],
      );
    await withClient(fresh, async (c) => {
      const run = async (calls: number) => {
        for (let i = 0; i < calls; i++) {
          for (const statement of [whole, unkeeled]) await c.query({ name: statement.name, text: statement.text, values: values() });
        }
      };
      const custom = async () =>
        Object.fromEntries((await c.query(`SELECT name, custom_plans::int AS n FROM pg_prepared_statements`)).rows.map((r) => [r.name, r.n]));
      await jobs(60_000, 'succeeded');
      await admin.query('ANALYZE outbox.job');
      await run(20);
      // A backlog falls due and is analyzed; the session's next calls see it.
      await jobs(60_000, 'pending');
      await admin.query('ANALYZE outbox.job');
      await run(2);
      // It drains and is analyzed again.
      await admin.query(`DELETE FROM outbox.job WHERE status = 'pending'`);
      await admin.query('VACUUM ANALYZE outbox.job');
      const before = await custom();
      await run(100);
      const after = await custom();
      assert.equal(after[whole.name], 5, 'the first five calls only');
      // The same statement without the condition, the same calls: planned afresh on every one.
      assert.equal(after[unkeeled.name] - before[unkeeled.name], 100);
    });
  });
});

test('ctx.signal read for the first time after the timeout is already aborted, with the timeout as its reason', async () => {
  let seen: { aborted: boolean; code: unknown } | undefined;
  const job = defineJob({
    kind: 'consumer.late_signal',
    payload: z.object({}),
    timeoutMs: 1_000,
    async handle(_payload, ctx) {
      await sleep(1_300);
      seen = { aborted: ctx.signal.aborted, code: (ctx.signal.reason as { code?: unknown } | undefined)?.code };
      return ok();
    },
  });
  const outbox = createOutbox({ jobs: [job], connect: createPgConnector(url) });
  await withClient(url, (c) => outbox.enqueue(c, job, { payload: {} }));
  const report = await runDrain(outbox);
  assert.equal(report.claimed, 1);
  assert.deepEqual(await statuses('consumer.late_signal'), { retrying: 1 });
  await until('the handler to look at its signal', async () => seen !== undefined);
  assert.deepEqual(seen, { aborted: true, code: 'timeout' });
});

test('onTransition runs for attempts that ran, never for jobs released unstarted (the core\'s hook rules)', async () => {
  const transitions: string[] = [];
  let started!: () => void;
  const firstStarted = new Promise<void>((resolve) => (started = resolve));
  const job = defineJob({
    kind: 'consumer.hooked',
    payload: z.object({ n: z.number() }),
    timeoutMs: 10_000,
    async handle() {
      started();
      await sleep(300);
      return ok();
    },
  });
  const outbox = createOutbox({
    jobs: [job],
    connect: createPgConnector(url),
    concurrency: 1,
    onTransition: async (_tx, info) => {
      transitions.push(`${info.transition.outcome}:${info.transition.to}`);
    },
  });
  await outbox.transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(job, Array.from({ length: 10 }, (_, n) => ({ payload: { n } }))));
  const stop = new AbortController();
  const drained = runDrain(outbox, { signal: stop.signal });
  await firstStarted;
  stop.abort();
  const report = await drained;
  assert.ok(report.released > 0, `some claimed jobs waited for the slot and were released (${JSON.stringify(report)})`);
  assert.deepEqual(transitions, Array.from({ length: report.succeeded }, () => 'ok:succeeded'));
  assert.equal((await statuses('consumer.hooked')).pending, 10 - report.succeeded);
});
