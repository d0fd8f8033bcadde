-- How a job's parents ended (wasm/include/postbox/dependencies.h, ParentTally): how many it has,
-- and how many of them ended dead or cancelled, the rest having succeeded once none is
-- unfinished. The enqueue writes the counts at birth and each parent's settle adds its own end,
-- so a job waiting on parents (a batch's completion job above all: `outbox.batch`) learns how
-- they ended even after retention has deleted them. NULL for a job without parents; nullable
-- columns without defaults: adding them rewrites no row.
ALTER TABLE outbox.job ADD COLUMN parents_total integer;
ALTER TABLE outbox.job ADD COLUMN parents_dead integer;
ALTER TABLE outbox.job ADD COLUMN parents_cancelled integer;
