-- A batch's completion job (`outbox.batch`) is marked as one, so that cancelBatch acts only on a
-- batch: given any other job's id it cancelled that job's open parents and, through them, their
-- other children. NULL for every other job; a nullable column without a default rewrites no row.
ALTER TABLE outbox.job ADD COLUMN completes_batch boolean;
