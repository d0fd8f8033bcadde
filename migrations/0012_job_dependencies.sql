-- Job dependencies (wasm/include/postbox/dependencies.h): a job enqueued with parents waits, in
-- status 'waiting', until every parent has finished. `waiting_on` counts its parents that have
-- not; `on_parent_failure` is what a parent ending dead or cancelled does to it, as the core
-- named it ('cancel' or 'release'), NULL for a job without parents. Columns with constant
-- defaults: adding them rewrites no row.
ALTER TABLE outbox.job ADD COLUMN waiting_on integer NOT NULL DEFAULT 0;
ALTER TABLE outbox.job ADD COLUMN on_parent_failure text CHECK (on_parent_failure IN ('cancel', 'release'));

-- The wider status check is added NOT VALID and validated apart, so the long scan of a large
-- table holds only a lock that lets claims and settles go on (every row passes: it only widens).
ALTER TABLE outbox.job DROP CONSTRAINT job_status_check;
ALTER TABLE outbox.job ADD CONSTRAINT job_status_check
  CHECK (status IN ('pending', 'running', 'retrying', 'succeeded', 'dead', 'cancelled', 'waiting')) NOT VALID;
ALTER TABLE outbox.job VALIDATE CONSTRAINT job_status_check;

-- One row per dependency. The settle that finishes a parent finds its children by the key; the
-- job page finds a child's parents by job_edge_child. Edges go with their jobs (the trigger
-- below), not by foreign keys, whose per-row checks the hot statements would pay.
CREATE TABLE outbox.job_edge (
  parent_id uuid NOT NULL,
  child_id  uuid NOT NULL,
  PRIMARY KEY (parent_id, child_id)
);
CREATE INDEX job_edge_child ON outbox.job_edge (child_id);

-- The sweep's check on waiting jobs (a child enqueued while its last parent was settling, which
-- that settle could not see), oldest first.
CREATE INDEX job_waiting ON outbox.job (updated_at) WHERE status = 'waiting';

-- Deleting jobs (retention, eraseTenant) deletes their attempts (0005) and now their edges too.
CREATE OR REPLACE FUNCTION outbox.delete_attempts_of_deleted_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('DELETE FROM %I.attempt a USING deleted_jobs d WHERE a.job_id = d.id', TG_TABLE_SCHEMA);
  EXECUTE format('DELETE FROM %I.job_edge e USING deleted_jobs d WHERE e.parent_id = d.id', TG_TABLE_SCHEMA);
  EXECUTE format('DELETE FROM %I.job_edge e USING deleted_jobs d WHERE e.child_id = d.id', TG_TABLE_SCHEMA);
  RETURN NULL;
END
$$;
