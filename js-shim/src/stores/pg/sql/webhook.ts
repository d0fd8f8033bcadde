import { ms, ts } from './time.js';

const COLUMNS = `state, failures, ${ms('opened_at')} AS opened_ms, ${ms('failing_since')} AS failing_ms, version`;

/**
 * WebhookEndpointGet: an endpoint's breaker state, created closed by its first delivery.
 * $1 id, $2 now (ms). A row another transaction is inserting at the same moment is not yet
 * visible to this statement: it then returns nothing and the caller asks again.
 */
export const webhookEndpointGet = (s: string) => `
WITH created AS (
  INSERT INTO ${s}.webhook_endpoint (id, created_at, updated_at) VALUES ($1, ${ts('$2')}, ${ts('$2')})
  ON CONFLICT (id) DO NOTHING
  RETURNING ${COLUMNS}
)
SELECT * FROM created
UNION ALL
SELECT ${COLUMNS} FROM ${s}.webhook_endpoint WHERE id = $1
LIMIT 1`;

/**
 * WebhookEndpointSet: stores the core's decision, only over the version it was made from.
 * $1 id, $2 state, $3 failures, $4 opened (ms|null), $5 failing since (ms|null),
 * $6 disabled reason, $7 now (ms), $8 the version read. Returns the new version, or no row.
 */
export const webhookEndpointSet = (s: string) => `
UPDATE ${s}.webhook_endpoint
   SET state = $2, failures = $3,
       opened_at = to_timestamp($4::bigint / 1000.0), failing_since = to_timestamp($5::bigint / 1000.0),
       disabled_reason = CASE WHEN $2 = 'disabled' THEN COALESCE($6, disabled_reason) END,
       version = version + 1, updated_at = ${ts('$7')}
 WHERE id = $1 AND version = $8
RETURNING version`;

/** WebhookEndpointEnable: an operator turns a disabled or paused endpoint back on. $1 id, $2 now. */
export const webhookEndpointEnable = (s: string) => `
UPDATE ${s}.webhook_endpoint
   SET state = 'closed', failures = 0, opened_at = NULL, failing_since = NULL, disabled_reason = NULL,
       version = version + 1, updated_at = ${ts('$2')}
 WHERE id = $1
RETURNING id`;

/** WebhookEndpointList: every endpoint's state, for operators. */
export const webhookEndpointList = (s: string) => `
SELECT id, ${COLUMNS}, disabled_reason, ${ms('updated_at')} AS updated_ms FROM ${s}.webhook_endpoint ORDER BY id`;

