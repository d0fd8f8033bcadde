-- Concurrency per tenant (a kind's `tenantConcurrency`): a pool of slots per kind and tenant
-- scope ('t:<key>', or 'n' for jobs without a tenant), pool 't', taken and freed like the
-- kind's concurrency slots. A scope's slots are made by the first claim that visits it; the
-- kind-wide pools keep scope ''. eraseTenant deletes a tenant's slots with its jobs.
ALTER TABLE outbox.kind_slot ADD COLUMN scope text NOT NULL DEFAULT '';
ALTER TABLE outbox.kind_slot DROP CONSTRAINT kind_slot_pool_check;
ALTER TABLE outbox.kind_slot ADD CONSTRAINT kind_slot_pool_check CHECK (pool IN ('c', 'r', 't'));
ALTER TABLE outbox.kind_slot DROP CONSTRAINT kind_slot_pkey;
ALTER TABLE outbox.kind_slot ADD CONSTRAINT kind_slot_pkey PRIMARY KEY (kind, pool, scope, slot);
