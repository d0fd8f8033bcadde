-- Each index's size as the sweep last saw it while no snapshot held the xmin horizon, and when
-- the sweep last rebuilt it. Why: a held horizon keeps every row version written meanwhile, and
-- each one's index entries; VACUUM later empties and truncates the heap, but a B-tree keeps its
-- pages, so the indexes stay at their pinned size. The sweep's compact step (the core's pb_sweep
-- op "compact") compares each index with its baseline and rebuilds one that a held horizon
-- bloated (REINDEX CONCURRENTLY), so the outbox's size comes back after the horizon moves on.
CREATE TABLE outbox.index_baseline (
  name           text        PRIMARY KEY,
  -- NULL right after a rebuild: the next look records what the rebuilt index holds.
  baseline_bytes bigint,
  rebuilt_at     timestamptz,
  updated_at     timestamptz NOT NULL
);
