-- Postbox schema, version 1. PostgreSQL 14 or newer.
-- One row per job; one row per attempt to run it. Every time in these tables was decided by
-- the caller's clock (the core's `now`), never by the server's, so a test clock governs all.

CREATE SCHEMA IF NOT EXISTS outbox;

CREATE TABLE outbox.job (
  id               uuid        PRIMARY KEY,
  kind             text        NOT NULL,
  lane             text        NOT NULL DEFAULT 'default',
  status           text        NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'running', 'retrying', 'succeeded', 'dead', 'cancelled')),
  payload          jsonb       NOT NULL,
  tenant_key       text,
  -- A NULL tenant is a scope of its own: 'n' for none, 't:<key>' otherwise.
  tenant_scope     text        GENERATED ALWAYS AS (COALESCE('t:' || tenant_key, 'n')) STORED,
  dedupe_key       text,
  correlation_id   text,
  metadata         jsonb,
  due_at           timestamptz NOT NULL,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  finished_at      timestamptz,
  -- Attempts charged since the last replay (the retry budget reads this).
  attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  -- Every claim ever made, numbering attempts: a settle must name the current one.
  attempt_seq      integer     NOT NULL DEFAULT 0 CHECK (attempt_seq >= 0),
  crashes          integer     NOT NULL DEFAULT 0 CHECK (crashes >= 0),
  streak_code      text,
  streak           integer     NOT NULL DEFAULT 0 CHECK (streak >= 0),
  lease_expires_at timestamptz,
  last_error_code  text,
  last_error_message text,
  -- The deploy (version metadata timestamp, ms) that enqueued it; older deploys skip it.
  version_ts       bigint,
  replayed_at      timestamptz,
  nudge_sent_at    timestamptz,
  CONSTRAINT job_finished_has_time CHECK ((status IN ('succeeded', 'dead', 'cancelled')) = (finished_at IS NOT NULL)),
  CONSTRAINT job_running_has_lease CHECK ((status = 'running') = (lease_expires_at IS NOT NULL))
);

-- Dedupe is per tenant scope.
CREATE UNIQUE INDEX job_dedupe_key ON outbox.job (tenant_scope, dedupe_key) WHERE dedupe_key IS NOT NULL;
-- Claims: due jobs of a lane, oldest due first (id breaks ties, so a batch enqueued at one
-- instant is still read in index order, not sorted whole on every claim).
CREATE INDEX job_claimable ON outbox.job (lane, due_at, id) WHERE status IN ('pending', 'retrying');
-- Recovery: running jobs whose lease has expired.
CREATE INDEX job_lease ON outbox.job (lease_expires_at) WHERE status = 'running';
-- Retention and finished listings.
CREATE INDEX job_finished ON outbox.job (status, finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX job_correlation ON outbox.job (correlation_id) WHERE correlation_id IS NOT NULL;
CREATE INDEX job_tenant ON outbox.job (tenant_key, created_at) WHERE tenant_key IS NOT NULL;
CREATE INDEX job_created ON outbox.job (created_at, id);

CREATE TABLE outbox.attempt (
  job_id           uuid        NOT NULL REFERENCES outbox.job (id) ON DELETE CASCADE,
  seq              integer     NOT NULL,
  kind             text        NOT NULL,
  started_at       timestamptz NOT NULL,
  lease_expires_at timestamptz NOT NULL,
  finished_at      timestamptz,
  -- NULL while the attempt runs; then ok, retry, fail, cancel, timeout, crash, claim_late, hook_failed, invalid_payload.
  outcome          text,
  error_code       text,
  error_message    text,
  PRIMARY KEY (job_id, seq)
);

CREATE INDEX attempt_finished ON outbox.attempt (finished_at) WHERE finished_at IS NOT NULL;
