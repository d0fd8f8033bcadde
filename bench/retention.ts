// How long one retention batch (the sweep's DELETE of 1,000 finished jobs and their attempts)
// takes against a local PostgreSQL: run with `node --import tsx bench/retention.ts`.
import pg from 'pg';
import { migrate } from '../js-shim/src/sql/index.ts';
import { outboxSql } from '../js-shim/src/queries/index.ts';
import { startPostgres } from '../tests/support/postgres.ts';

const server = await startPostgres();
const url = await server.createDatabase('retention_time');
const client = new pg.Client({ connectionString: url });
await client.connect();
await migrate(client);
const ROWS = 20_000;
await client.query(
  `WITH j AS (
     INSERT INTO outbox.job (id, kind, status, payload, due_at, created_at, updated_at, finished_at, attempts, attempt_seq)
     SELECT gen_random_uuid(), 'k', 'succeeded', '{"a":1}'::jsonb, t, t, t, t, 1, 1
       FROM (SELECT now() - interval '8 days' AS t) at, generate_series(1, $1::int)
     RETURNING id, finished_at)
   INSERT INTO outbox.attempt (job_id, seq, kind, started_at, lease_expires_at, finished_at, outcome)
   SELECT id, 1, 'k', finished_at, finished_at, finished_at, 'ok' FROM j`,
  [ROWS],
);
await client.query('VACUUM ANALYZE outbox.job');
await client.query('VACUUM ANALYZE outbox.attempt');
const cutoff = Date.now() - 7 * 86_400_000;
const times: number[] = [];
for (let i = 0; i < ROWS / 1000; i++) {
  const started = performance.now();
  const { rowCount } = await client.query(outboxSql().deleteFinished, [cutoff, cutoff, 1000]);
  times.push(performance.now() - started);
  if (rowCount !== 1000) throw new Error(`deleted ${rowCount}`);
}
times.sort((a, b) => a - b);
console.log(`${server.flavor} ${server.serverVersion}: ${times.length} batches of 1,000 jobs (+1,000 attempts): median ${times[times.length >> 1]!.toFixed(1)} ms, min ${times[0]!.toFixed(1)}, max ${times.at(-1)!.toFixed(1)}`);
await client.end();
await server.stop();
