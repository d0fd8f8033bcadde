-- Fair share across tenants (wasm/include/postbox/fair_share.h): a claim with `fairShare` on
-- finds the tenant scopes with due jobs by skipping through this index (one probe per scope,
-- however many jobs each has) and takes each scope's first jobs in claim order from it. Like
-- the claim index it holds only claimable jobs, so a claimed or finished job leaves it.
CREATE INDEX job_fair ON outbox.job (lane, tenant_scope, ((due_at AT TIME ZONE 'UTC') - boost_ms * interval '1 millisecond'), id)
  WHERE status IN ('pending', 'retrying');
