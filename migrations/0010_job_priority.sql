-- Priorities with aging (wasm/include/postbox/priority.h): a job's priority (0-10, higher
-- first) and the boost the core gave it for that priority, ms. Claims take due jobs in order of
-- due time less the boost, through the claim index rebuilt on that expression; a boost of 0
-- (every job without a priority) orders as before, by due time. Columns with constant defaults:
-- adding them rewrites no row. The expression uses immutable functions only (the UTC wall time
-- of due_at, less an interval), so it can be indexed without a function of our own.
ALTER TABLE outbox.job ADD COLUMN priority smallint NOT NULL DEFAULT 0;
ALTER TABLE outbox.job ADD COLUMN boost_ms integer NOT NULL DEFAULT 0;
DROP INDEX outbox.job_claimable;
CREATE INDEX job_claimable ON outbox.job (lane, ((due_at AT TIME ZONE 'UTC') - boost_ms * interval '1 millisecond'), id)
  WHERE status IN ('pending', 'retrying');
