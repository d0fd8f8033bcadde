// The sweep's compact step: indexes a held horizon bloated are rebuilt once nothing holds it,
// never while something does, and an interrupted rebuild's leftover is dropped. Inside workerd
// (tests/shim/fixtures/outbox-worker.ts) against a real PostgreSQL.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { sleep, useOutboxEnv } from './outbox-env.ts';

const env = useOutboxEnv();

/** Size of each of the outbox's job and attempt indexes, by name. */
async function indexSizes(): Promise<Record<string, number>> {
  const rows = await env.sql(
    `SELECT c.relname AS name, pg_relation_size(c.oid)::bigint AS bytes
       FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
      WHERE t.relnamespace = 'outbox'::regnamespace AND t.relname IN ('job', 'attempt')`,
  );
  return Object.fromEntries(rows.map((r) => [r.name, Number(r.bytes)]));
}

const baselines = async () =>
  Object.fromEntries((await env.sql('SELECT name, baseline_bytes, rebuilt_at FROM outbox.index_baseline')).map((r) => [r.name, r]));

test('indexes bloated under a held snapshot are rebuilt after it ends, not while it lasts; jobs are untouched', { timeout: 180_000 }, async () => {
  // Live work that must come through every rebuild as it was.
  const kept = (await env.post('/enqueue', { jobs: ['k1', 'k2', 'k3'].map((key) => ({ payload: { key, do: 'ok' }, delayMs: 3_600_000 })) })).body.map((r: { id: string }) => r.id);

  // The first sweep takes every index's baseline (an empty outbox's: a few pages).
  let report = (await env.post('/sweep', {})).body;
  assert.deepEqual(report.failedSteps, []);
  assert.deepEqual(report.rebuiltIndexes, []);
  const first = await baselines();
  for (const name of ['job_pkey', 'job_claimable', 'job_lease', 'job_finished', 'job_created', 'attempt_pkey', 'attempt_finished']) {
    assert.ok(first[name]?.baseline_bytes > 0, `${name} has a baseline`);
  }

  // Another session pins the horizon; 300,000 jobs finish and are deleted meanwhile.
  let bloated: Record<string, number> = {};
  const holder = new pg.Client({ connectionString: env.dbUrl });
  await holder.connect();
  try {
    await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await holder.query('SELECT count(*) FROM outbox.job');
    const pinnedAt = Date.now();
    await env.sql(
      `INSERT INTO outbox.job (id, kind, status, payload, due_at, created_at, updated_at, finished_at, attempts, attempt_seq)
       SELECT gen_random_uuid(), 'test.echo', 'succeeded', '{}'::jsonb, t, t, t, t, 1, 1
         FROM (SELECT now() - interval '8 days' AS t) at, generate_series(1, 300000)`,
    );
    await env.sql(`DELETE FROM outbox.job WHERE status = 'succeeded'`);
    await env.sql('VACUUM outbox.job');
    bloated = await indexSizes();
    assert.ok(bloated.job_pkey > 2 * first.job_pkey.baseline_bytes + 8 * 1024 * 1024, JSON.stringify(bloated));

    // Held for 30 s: the sweep neither rebuilds nor takes the bloat as a baseline.
    await sleep(Math.max(0, 31_000 - (Date.now() - pinnedAt)));
    report = (await env.post('/sweep', {})).body;
    assert.deepEqual(report.rebuiltIndexes, []);
    assert.deepEqual(await baselines(), first);
  } finally {
    await holder.query('COMMIT').catch(() => {});
    await holder.end();
  }

  // Released: the next sweep rebuilds every index past both thresholds (2x and 8 MiB over its
  // baseline), the most bloated first; the others keep theirs.
  await env.worker.fetch('/events');
  const past = (name: string) => bloated[name] >= 2 * first[name].baseline_bytes && bloated[name] - first[name].baseline_bytes >= 8 * 1024 * 1024;
  const expected = Object.keys(bloated).filter(past).sort((a, b) => (bloated[b] - first[b].baseline_bytes) - (bloated[a] - first[a].baseline_bytes));
  assert.ok(expected.includes('job_pkey') && expected.includes('job_created'), JSON.stringify(bloated));
  report = (await env.post('/sweep', {})).body;
  assert.deepEqual(report.failedSteps, []);
  assert.deepEqual(report.rebuiltIndexes, expected);
  const after = await indexSizes();
  for (const name of report.rebuiltIndexes) assert.ok(after[name] < 1024 * 1024, `${name}: ${after[name]} bytes after its rebuild`);
  const rebuiltEvents = (await env.events()).filter((e) => e.type === 'index_rebuilt');
  assert.deepEqual(rebuiltEvents.map((e) => e.index), report.rebuiltIndexes);
  assert.ok(rebuiltEvents.every((e) => e.bytes >= 2 * e.baselineBytes));
  // Each rebuilt index's baseline is what it holds now, with the rebuild's time.
  const rebuiltRows = await baselines();
  for (const name of report.rebuiltIndexes) {
    assert.equal(Number(rebuiltRows[name].baseline_bytes), after[name]);
    assert.ok(rebuiltRows[name].rebuilt_at instanceof Date);
  }

  // Nothing is left to rebuild next time. An index that grew under a threshold (job_finished:
  // about 1 MiB) had that growth recorded as its new baseline, as growth with the data is.
  report = (await env.post('/sweep', {})).body;
  assert.deepEqual(report.rebuiltIndexes, []);
  const now = await indexSizes();
  const last = await baselines();
  for (const name of Object.keys(first).filter((n) => !expected.includes(n))) assert.equal(Number(last[name].baseline_bytes), now[name], name);
  assert.ok(Number(last.job_finished.baseline_bytes) > Number(first.job_finished.baseline_bytes));

  // The kept jobs are as they were, and run.
  const rows = await env.sql(`SELECT id, status FROM outbox.job ORDER BY id`);
  assert.deepEqual(rows.map((r) => r.id).sort(), [...kept].sort());
  assert.ok(rows.every((r) => r.status === 'pending'));
  await env.sql(`UPDATE outbox.job SET due_at = now() - interval '1 minute'`);
  report = (await env.post('/sweep', {})).body;
  assert.equal(report.succeeded, 3);
});

test('a leftover of an interrupted rebuild is dropped; an index the user added is left alone', async () => {
  await env.reset();
  await env.post('/enqueue', { jobs: ['a', 'b'].map((key) => ({ payload: { key, do: 'ok' }, delayMs: 3_600_000 })) });
  // A unique build over two equal kinds fails and leaves an invalid index of that name, as an
  // interrupted REINDEX CONCURRENTLY leaves job_pkey_ccnew.
  await assert.rejects(env.sql('CREATE UNIQUE INDEX CONCURRENTLY job_pkey_ccnew ON outbox.job (kind)'));
  await env.sql('CREATE INDEX job_mine ON outbox.job (kind)');
  const invalid = await env.sql(`SELECT relname FROM pg_class c JOIN pg_index x ON x.indexrelid = c.oid WHERE NOT x.indisvalid AND c.relname = 'job_pkey_ccnew'`);
  assert.equal(invalid.length, 1);
  const report = (await env.post('/sweep', {})).body;
  assert.deepEqual(report.failedSteps, []);
  assert.deepEqual(await env.sql(`SELECT 1 FROM pg_class WHERE relname = 'job_pkey_ccnew'`), []);
  assert.equal((await env.sql(`SELECT 1 FROM pg_class WHERE relname = 'job_mine'`)).length, 1);
  assert.equal((await env.sql(`SELECT 1 FROM outbox.index_baseline WHERE name = 'job_mine'`)).length, 0);
  await env.sql('DROP INDEX outbox.job_mine');
});

test('a table grown far past its planner statistics is analyzed, and sessions planned on it small plan afresh', async () => {
  await env.sql('TRUNCATE outbox.job, outbox.attempt, outbox.job_edge');
  // A session plans a lookup by id while the table is new and empty, as a drain's connection
  // does on a fresh install: the cheapest plan for a few pages reads them all, and it is kept.
  const session = new pg.Client({ connectionString: env.dbUrl });
  await session.connect();
  try {
    await session.query(`SET plan_cache_mode = force_generic_plan`);
    await session.query(`PREPARE touch(uuid[]) AS UPDATE outbox.job SET updated_at = updated_at WHERE id = ANY($1)`);
    const plan = async () => (await session.query(`EXPLAIN EXECUTE touch(ARRAY[gen_random_uuid()])`)).rows.map((r) => r['QUERY PLAN']).join('\n');
    assert.match(await plan(), /Seq Scan on job/);

    // Small: left to autovacuum.
    let report = (await env.post('/sweep', {})).body;
    assert.deepEqual(report.analyzedTables, []);

    // 60,000 jobs later (about 2,000 pages, never analyzed) the kept plan still reads them all.
    await env.sql(
      `INSERT INTO outbox.job (id, kind, status, payload, due_at, created_at, updated_at, finished_at, attempts, attempt_seq)
       SELECT gen_random_uuid(), 'test.echo', 'succeeded', '{}'::jsonb, now(), now(), now(), now(), 1, 1 FROM generate_series(1, 60000)`,
    );
    assert.match(await plan(), /Seq Scan on job/);
    await env.worker.fetch('/events');
    report = (await env.post('/sweep', {})).body;
    assert.deepEqual(report.failedSteps, []);
    assert.deepEqual(report.analyzedTables, ['job']);
    assert.deepEqual((await env.events()).filter((e) => e.type === 'table_analyzed'), [{ type: 'table_analyzed', table: 'job' }]);
    const [stats] = await env.sql(`SELECT reltuples::bigint AS tuples FROM pg_class WHERE oid = 'outbox.job'::regclass`);
    assert.ok(Number(stats.tuples) > 50_000, JSON.stringify(stats));
    // The ANALYZE invalidated the session's plan: planned again, it goes by the primary key.
    assert.match(await plan(), /job_pkey/);
    assert.doesNotMatch(await plan(), /Seq Scan on job/);

    // The statistics now describe the table: the next sweep leaves it be.
    report = (await env.post('/sweep', {})).body;
    assert.deepEqual(report.analyzedTables, []);

    // Grown in pages but not in jobs (the row versions a held horizon keeps): still left be.
    // Autovacuum off meanwhile, so its own analyze does not move the statistics under the check.
    await env.sql('ALTER TABLE outbox.job SET (autovacuum_enabled = false)');
    for (let i = 0; i < 4; i++) await env.sql(`UPDATE outbox.job SET updated_at = updated_at + interval '1 ms'`);
    const [size] = await env.sql(
      `SELECT pg_relation_size(oid) / current_setting('block_size')::int AS pages, relpages FROM pg_class WHERE oid = 'outbox.job'::regclass`,
    );
    assert.ok(Number(size.pages) >= 4 * Number(size.relpages), JSON.stringify(size));
    report = (await env.post('/sweep', {})).body;
    assert.deepEqual(report.analyzedTables, []);
  } finally {
    await session.end();
    await env.sql('ALTER TABLE outbox.job RESET (autovacuum_enabled)');
    await env.sql('TRUNCATE outbox.job, outbox.attempt, outbox.job_edge');
  }
});
