-- Attempts are removed with their job by a statement-level trigger instead of a foreign key.
-- Why: the key's per-row check ran on every attempt a claim opens, and was about a fifth of
-- the database's CPU per job in a drain (bench/probe-drain.ts). Attempts are only inserted by
-- the claim, from the job rows it has just updated and locked, so every attempt names a job;
-- deleting a job (retention, eraseTenant, or by hand) still deletes its attempts in the same
-- transaction. The trigger's query runs after the DELETE with a fresh snapshot, so it also
-- removes an attempt a concurrent claim committed while the DELETE waited on that job's lock.
ALTER TABLE outbox.attempt DROP CONSTRAINT attempt_job_id_fkey;

-- The body names no schema (a named outbox has its own): the trigger's own table says which.
CREATE FUNCTION outbox.delete_attempts_of_deleted_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('DELETE FROM %I.attempt a USING deleted_jobs d WHERE a.job_id = d.id', TG_TABLE_SCHEMA);
  RETURN NULL;
END
$$;

CREATE TRIGGER job_deleted_attempts AFTER DELETE ON outbox.job
  REFERENCING OLD TABLE AS deleted_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION outbox.delete_attempts_of_deleted_jobs();
