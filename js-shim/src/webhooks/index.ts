/**
 * `postbox/webhooks`: signed webhook delivery as a job, and verification for receivers.
 *
 * Sending: {@link defineWebhookJob} defines the delivery job, {@link webhookDelivery} builds
 * one delivery's enqueue options. Each attempt signs the stored body (Standard Webhooks:
 * `webhook-id`, `webhook-timestamp`, `webhook-signature`); the core decides what the answer
 * means, when to retry, and each endpoint's circuit breaker. Receiving: {@link verifyWebhook}.
 * Web Crypto only, so it runs in workerd and Node alike.
 *
 * @module
 */
export {
  defineWebhookJob,
  webhookDelivery,
  listWebhookEndpoints,
  enableWebhookEndpoint,
  WEBHOOK_SCHEDULE_MS,
  type WebhookJobSpec,
  type WebhookBreakerOptions,
  type WebhookPayload,
  type WebhookDeliveryInput,
  type WebhookEndpointInfo,
  type WebhookEndpointOptions,
} from './job.js';
export { signWebhook, decodeSecret, type SignWebhookInput } from './sign.js';
export {
  verifyWebhook,
  assertWebhook,
  WebhookVerificationError,
  type WebhookInput,
  type WebhookHeaders,
  type VerifyWebhookOptions,
  type WebhookVerification,
  type WebhookRejection,
} from './verify.js';
