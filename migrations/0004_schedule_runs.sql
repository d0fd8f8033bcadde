-- The latest occurrence of each schedule that a tick has dealt with (enqueued, refused or
-- failed for good), so the next tick enqueues the occurrences missed since then. Written in
-- the occurrence's own transaction, with the clock of the Worker (the core's `at`).
CREATE TABLE outbox.schedule_run (
  name       text        PRIMARY KEY,
  last_at    timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
