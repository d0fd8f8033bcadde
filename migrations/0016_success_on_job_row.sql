-- A success that finishes its job writes no attempt row: the job row records that attempt
-- (attempt_seq, kind, started_at, finished_at, status 'succeeded'), and that row is final: no
-- action takes a job out of 'succeeded'. Readers see both as one ledger
-- (js-shim/src/stores/pg/sql/attempts.ts). Why: the row and its two index entries were a third
-- of a succeeded job's writes after its enqueue. Every other ended attempt still has its row.
--
-- An attempt an earlier schema opened at claim time (before 0006) and that still runs would
-- stay open forever if it now succeeds, since its success writes nothing to close it. Such a
-- row says no more than its running job does (listAttempts reads a running attempt from the
-- job when it has no row), so it goes; a retry, failure or crash writes the attempt afresh.
DELETE FROM outbox.attempt a
 USING outbox.job j
 WHERE a.finished_at IS NULL AND j.id = a.job_id AND j.attempt_seq = a.seq AND j.status = 'running';
