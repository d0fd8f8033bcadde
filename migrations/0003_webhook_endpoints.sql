-- Postbox schema, version 2: the state of each webhook endpoint (postbox/webhooks).
-- One row per endpoint id, created by its first delivery. The core decides every change
-- (pb_webhook gate/record); `version` lets a writer store a decision only over the state it
-- was made from, so two deliveries finishing at once never lose a failure or a probe.

CREATE TABLE outbox.webhook_endpoint (
  id             text        PRIMARY KEY,
  state          text        NOT NULL DEFAULT 'closed'
                 CHECK (state IN ('closed', 'open', 'half_open', 'disabled')),
  -- Consecutive failed deliveries (5xx, 408, network errors, timeouts).
  failures       integer     NOT NULL DEFAULT 0 CHECK (failures >= 0),
  -- open: when the breaker opened; half_open: when the probe began.
  opened_at      timestamptz,
  -- The first of the current run of failures.
  failing_since  timestamptz,
  -- Why it was disabled: 'gone' (HTTP 410) or 'failing' (failures outlasted disableAfterMs).
  disabled_reason text,
  version        bigint      NOT NULL DEFAULT 0,
  created_at     timestamptz NOT NULL,
  updated_at     timestamptz NOT NULL,
  CONSTRAINT webhook_endpoint_disabled_has_reason CHECK ((state = 'disabled') = (disabled_reason IS NOT NULL))
);
