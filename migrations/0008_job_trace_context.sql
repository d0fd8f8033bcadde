-- The trace context of the span that enqueued a job (a W3C traceparent, written by
-- postbox/otel), so that each attempt's span can link to the request that enqueued it. NULL
-- for a job enqueued without telemetry. A nullable column with no default: adding it rewrites
-- no row.
ALTER TABLE outbox.job ADD COLUMN trace_context text;
ALTER TABLE outbox.job ADD CONSTRAINT job_trace_context_length CHECK (length(trace_context) <= 512);
