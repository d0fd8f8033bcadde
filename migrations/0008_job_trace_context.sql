-- The trace context of the span that enqueued a job (a W3C traceparent, written by
-- postbox/otel), so that each attempt's span can link to the request that enqueued it. NULL
-- for a job enqueued without telemetry. A nullable column with no default: adding it rewrites
-- no row. No CHECK on its length (the engine keeps at most 512 characters): a CHECK is evaluated
-- on every update of the row, and a job's row is updated at each claim and settlement.
ALTER TABLE outbox.job ADD COLUMN trace_context text;
