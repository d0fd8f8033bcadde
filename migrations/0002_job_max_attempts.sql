-- A job may carry its own retry budget, set at enqueue; NULL means its kind's maxAttempts.
-- The range is the core's (docs/ABI.md, pb_enqueue), checked here too so a row written by
-- other means cannot hold a budget the core would refuse.
ALTER TABLE outbox.job ADD COLUMN max_attempts integer;
ALTER TABLE outbox.job ADD CONSTRAINT job_max_attempts_range CHECK (max_attempts BETWEEN 1 AND 1000);
