/**
 * The "seed" design: the one-job-at-a-time outbox worker that Postbox's design brief contrasts
 * with. Written here from its description, not copied from any project.
 *
 * Per job, one connection pays five round trips:
 *   1. claim   `UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING …`
 *   (handler runs)
 *   2. BEGIN
 *   3. UPDATE the job (succeeded / retrying / dead)
 *   4. INSERT the attempt row
 *   5. COMMIT
 * and runs one handler at a time. More throughput means more workers, one connection each.
 */
import pg from 'pg';

export const SEED_SCHEMA = `
CREATE SCHEMA IF NOT EXISTS seed;
CREATE TABLE IF NOT EXISTS seed.job (
  id               bigserial   PRIMARY KEY,
  kind             text        NOT NULL,
  payload          jsonb       NOT NULL,
  status           text        NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'running', 'retrying', 'succeeded', 'dead')),
  run_at           timestamptz NOT NULL DEFAULT now(),
  attempts         integer     NOT NULL DEFAULT 0,
  max_attempts     integer     NOT NULL DEFAULT 5,
  locked_until     timestamptz,
  last_error       text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  finished_at      timestamptz
);
CREATE INDEX IF NOT EXISTS job_due ON seed.job (run_at, id) WHERE status IN ('pending', 'retrying');
CREATE TABLE IF NOT EXISTS seed.attempt (
  job_id      bigint      NOT NULL REFERENCES seed.job (id) ON DELETE CASCADE,
  n           integer     NOT NULL,
  outcome     text        NOT NULL,
  error       text,
  started_at  timestamptz NOT NULL,
  finished_at timestamptz NOT NULL,
  PRIMARY KEY (job_id, n)
);`;

const CLAIM = `
UPDATE seed.job
   SET status = 'running', attempts = attempts + 1, locked_until = now() + interval '5 minutes', updated_at = now()
 WHERE id = (
   SELECT id FROM seed.job
    WHERE status IN ('pending', 'retrying') AND run_at <= now()
    ORDER BY run_at, id
    FOR UPDATE SKIP LOCKED
    LIMIT 1)
RETURNING id, kind, payload, attempts, max_attempts`;

const SETTLE_JOB = `
UPDATE seed.job
   SET status = $2, run_at = COALESCE($3::timestamptz, run_at), last_error = $4, locked_until = NULL,
       finished_at = CASE WHEN $2 IN ('succeeded', 'dead') THEN now() END, updated_at = now()
 WHERE id = $1 AND status = 'running'`;

const INSERT_ATTEMPT = `
INSERT INTO seed.attempt (job_id, n, outcome, error, started_at, finished_at)
VALUES ($1, $2, $3, $4, $5, now())`;

export type SeedHandler = (payload: unknown) => Promise<void>;

/** Creates the seed tables. */
export async function createSeedSchema(client: pg.ClientBase): Promise<void> {
  await client.query(SEED_SCHEMA);
}

/** Enqueues `n` jobs of `kind` in one statement (setup, not measured). */
export async function enqueueSeed(client: pg.ClientBase, kind: string, n: number): Promise<void> {
  await client.query(
    `INSERT INTO seed.job (kind, payload, run_at) SELECT $1, jsonb_build_object('i', g), now() - interval '1 second' FROM generate_series(1, $2::int) g`,
    [kind, n],
  );
}

/** One worker on one connection: claim one, run it, settle it; until nothing is due. Returns jobs run. */
export async function runSeedWorker(client: pg.ClientBase, handler: SeedHandler): Promise<number> {
  let ran = 0;
  for (;;) {
    const { rows } = await client.query(CLAIM);
    const job = rows[0] as { id: string; payload: unknown; attempts: number; max_attempts: number } | undefined;
    if (!job) return ran;
    const startedAt = new Date();
    let status = 'succeeded';
    let outcome = 'ok';
    let error: string | null = null;
    let runAt: Date | null = null;
    try {
      await handler(job.payload);
    } catch (e) {
      error = e instanceof Error ? e.message : String(e);
      outcome = 'error';
      if (job.attempts >= job.max_attempts) status = 'dead';
      else {
        status = 'retrying';
        runAt = new Date(Date.now() + 1000 * 2 ** job.attempts);
      }
    }
    await client.query('BEGIN');
    try {
      await client.query(SETTLE_JOB, [job.id, status, runAt, error]);
      await client.query(INSERT_ATTEMPT, [job.id, job.attempts, outcome, error, startedAt]);
      await client.query('COMMIT');
    } catch (e) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw e;
    }
    ran++;
  }
}

/** `workers` workers, each on its own connection, until the queue is empty. Returns jobs run. */
export async function drainSeed(connectionString: string, workers: number, handler: SeedHandler): Promise<number> {
  const clients = await Promise.all(
    Array.from({ length: workers }, async () => {
      const c = new pg.Client({ connectionString });
      await c.connect();
      return c;
    }),
  );
  try {
    const counts = await Promise.all(clients.map((c) => runSeedWorker(c, handler)));
    return counts.reduce((a, b) => a + b, 0);
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
  }
}
