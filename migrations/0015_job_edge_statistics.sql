-- Statistics for an empty job_edge. A settlement joins job_edge (a finished job's effect on its
-- waiting children), and an outbox without dependencies leaves the table empty. Never analyzed,
-- it is planned as if it held ten pages of rows, which made the settle-and-claim's generic plan
-- cost about twelve times more over a large outbox.job than over an empty one; the server
-- compares that cost with the average of the custom plans it made while the table was small,
-- and planned the statement afresh on every call for thousands of calls (bench/soak.ts).
-- Analyzed while empty, it is planned as empty; autovacuum keeps its statistics once it fills.
ANALYZE outbox.job_edge;
