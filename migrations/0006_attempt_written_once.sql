-- Attempt rows written once: an attempt's row is written when the attempt ends (its settle,
-- a recovery's crash, an operator's cancel), instead of being inserted by the claim and updated
-- by the settle. Why: opening and closing it wrote four row versions per job, three of them dead
-- at once; now a succeeded job leaves two dead versions (its job row's pending and running ones)
-- and no attempt row is ever updated. While an attempt runs, its job row alone says so: status
-- 'running', attempt_seq, started_at (below) and lease_expires_at. An attempt row an earlier
-- schema opened is closed by the same writes (they insert ON CONFLICT … DO UPDATE).
ALTER TABLE outbox.job ADD COLUMN started_at timestamptz;
UPDATE outbox.job j SET started_at = a.started_at
  FROM outbox.attempt a
 WHERE j.status = 'running' AND a.job_id = j.id AND a.seq = j.attempt_seq;
-- A running attempt's lease lives on its job; an ended attempt's row does not carry it.
ALTER TABLE outbox.attempt ALTER COLUMN lease_expires_at DROP NOT NULL;
