-- Flow limits (a kind's `concurrency` and `rateLimit`): slot rows a claim takes, one per job it
-- claims of a limited kind, so a limit holds across every consumer, isolate and process with
-- no session state (Hyperdrive pools by transaction). A kind's slots are created when a claim
-- first needs them; a limit lowered by a deploy leaves its higher slots unused, so no change of
-- limit needs a migration.
--   pool 'c' (concurrency): held by the attempt (job_id, attempt_seq) until that attempt ends
--     or its lease runs out, as the claim reads the job row; held_until backs it up for a job
--     that is gone.
--   pool 'r' (rate): held until held_until, the start plus the kind's hold (flow_limits.h).
-- No index but the key, and room left on each page: a slot's update is HOT.
CREATE TABLE outbox.kind_slot (
  kind        text        NOT NULL,
  pool        text        NOT NULL CHECK (pool IN ('c', 'r')),
  slot        integer     NOT NULL CHECK (slot >= 1),
  job_id      uuid,
  attempt_seq integer,
  held_until  timestamptz,
  PRIMARY KEY (kind, pool, slot)
) WITH (fillfactor = 50);
