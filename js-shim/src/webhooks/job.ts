// Webhook delivery as a job: sign, POST, and let the core say what the answer means for the
// job (pb_webhook outcome) and for the endpoint's breaker (gate before, record after).
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { getCore } from '../core/core.js';
import { PostboxError, errorMessage } from '../errors.js';
import { HANDLER_RUNTIME, type HandlerRuntime } from '../engine/handler.js';
import { uuidv7 } from '../ids.js';
import { defer, defineJobFor, fail, ok, retry } from '../jobs.js';
import { outboxSql } from '../stores/pg/sql/index.js';
import type { StoredWebhookEndpoint as StoredEndpoint, WebhookEndpointStore } from '../stores/contract.js';
import type { EnqueueOptions, HandlerOutcome, JobContext, JobDefinition, Queryable } from '../types.js';
import { signWebhook } from './sign.js';

const encoder = new TextEncoder();

/**
 * The default retry schedule of a webhook delivery, in ms: the wait after failed attempt
 * 1, 2, … (each jittered down by at most a tenth). 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h,
 * 14 h, 14 h, 16 h: eleven attempts over about three days (71.6 h).
 */
export const WEBHOOK_SCHEDULE_MS: readonly number[] = Object.freeze([
  5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000, 50_400_000, 50_400_000, 57_600_000,
]);

/** What a webhook job stores: everything needed to send it again, byte for byte. */
export interface WebhookPayload {
  /** The endpoint's id: its breaker and its secrets are looked up by it. */
  endpoint: string;
  /** Where to POST. */
  url: string;
  /** The event's type, e.g. `invoice.paid` (sent as `webhook-event-type`, kept for inspection). */
  eventType: string;
  /** The `webhook-id`: the same on every attempt and after a replay. */
  webhookId: string;
  /** The body exactly as given; sent as its UTF-8 bytes, never re-serialised. */
  body: string;
}

/** The circuit breaker of each endpoint. */
export interface WebhookBreakerOptions {
  /** Consecutive failures (5xx, 408, network errors, timeouts) that pause an endpoint. Default 10. */
  threshold?: number;
  /** How long a paused endpoint waits before one delivery probes it. Default 5 minutes. */
  cooldownMs?: number;
  /** Disable an endpoint whose failures have lasted this long (`null`: never). Default 5 days. */
  disableAfterMs?: number | null;
}

/** What `defineWebhookJob` takes. */
export interface WebhookJobSpec<Deps> {
  /** The job kind, e.g. `webhook.deliver`. */
  kind: string;
  /**
   * The `whsec_…` secret(s) of an endpoint. Return several while rotating: each signs, so a
   * receiver that knows either accepts. Looked up on every attempt, never stored in the job.
   * No secret dead-letters the delivery (code `no_secret`).
   */
  secrets(endpoint: string, deps: Deps): string | readonly string[] | null | undefined | Promise<string | readonly string[] | null | undefined>;
  /** How long one request may take. Default 15 s; the job's timeout is this plus 5 s. */
  requestTimeoutMs?: number;
  lane?: string;
  /** The wait after each failed attempt; attempts = its length + 1. Default {@link WEBHOOK_SCHEDULE_MS}. */
  scheduleMs?: readonly number[];
  /** A longer `Retry-After` is cut to this. Default 6 hours. */
  maxRetryAfterMs?: number;
  breaker?: WebhookBreakerOptions;
  /** Extra request headers (a user-agent, say). The `webhook-*` headers cannot be overridden. */
  headers?: Record<string, string>;
  /** Default `application/json`. */
  contentType?: string;
  /** The fetch to send with. Default the global `fetch`. */
  fetch?: typeof fetch;
}

/** A webhook job's settings as the core decides them from its spec (docs/ABI.md, pb_webhook `config`). */
interface WebhookConfig {
  requestTimeoutMs: number;
  timeoutMs: number;
  probeMs: number;
  scheduleMs: number[];
  maxAttempts: number;
  maxRetryAfterMs: number;
  breaker: { threshold: number; cooldownMs: number; disableAfterMs: number | null };
  endpointReads: number;
  recordTries: number;
  probeTakenMs: number;
}

/** An endpoint's breaker state, as the core reads and writes it (and the store keeps it). */
type EndpointState = StoredEndpoint['state'];

type Gate = { deliver: boolean; probe: boolean; disabled: boolean; retryAt: number | null; endpoint: EndpointState | null };
type RecordDecision = { endpoint: EndpointState; changed: boolean; event: { type: string; reason?: 'gone' | 'failing' } | null };
type DeliveryOutcome = { type: 'ok' | 'retry' | 'fail'; code: string | null; after: number | null; signal: 'success' | 'failure' | 'neutral' | 'gone' };

const isText = (v: unknown, max: number): v is string => typeof v === 'string' && v.length > 0 && v.length <= max;

/**
 * A header value that arrives as signed: printable ASCII, no space at either end. `Headers`
 * trims surrounding whitespace (the receiver would verify another id than the one signed) and
 * refuses line breaks, control characters and code points above U+00FF; above U+007E the
 * receiver's decoding is a guess. Such a delivery could never succeed, so enqueue refuses it.
 */
const isHeaderText = (v: string): boolean => /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(v);

const HEADER_TEXT = (field: string) =>
  `${field} must be printable ASCII with no space at either end (it is sent as a header): no line break, control character or non-ASCII`;

/** The payload's Standard Schema: checked at enqueue and before each attempt. */
const payloadSchema: StandardSchemaV1<WebhookPayload, WebhookPayload> = {
  '~standard': {
    version: 1,
    vendor: 'postbox',
    validate(value) {
      const issues: StandardSchemaV1.Issue[] = [];
      const p = value as Partial<WebhookPayload> | null;
      if (typeof p !== 'object' || p === null) return { issues: [{ message: 'a webhook payload must be an object' }] };
      if (!isText(p.endpoint, 256)) issues.push({ message: 'endpoint must be 1-256 characters', path: ['endpoint'] });
      if (!isText(p.eventType, 256)) issues.push({ message: 'eventType must be 1-256 characters', path: ['eventType'] });
      else if (!isHeaderText(p.eventType)) issues.push({ message: HEADER_TEXT('eventType'), path: ['eventType'] });
      if (!isText(p.webhookId, 256)) issues.push({ message: 'webhookId must be 1-256 characters', path: ['webhookId'] });
      else if (!isHeaderText(p.webhookId)) issues.push({ message: HEADER_TEXT('webhookId'), path: ['webhookId'] });
      if (typeof p.body !== 'string') issues.push({ message: 'body must be a string (the exact bytes to send)', path: ['body'] });
      let url: URL | null = null;
      try {
        url = typeof p.url === 'string' ? new URL(p.url) : null;
      } catch {
        url = null;
      }
      if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) issues.push({ message: 'url must be an http(s) URL', path: ['url'] });
      // fetch refuses a URL holding credentials: every attempt would fail.
      else if (url.username !== '' || url.password !== '') issues.push({ message: 'url must not hold a user name or password', path: ['url'] });
      return issues.length > 0 ? { issues } : { value: p as WebhookPayload };
    },
  },
};

/** Options of {@link webhookDelivery}: the event, and the usual enqueue options. */
export interface WebhookDeliveryInput extends Omit<EnqueueOptions<WebhookPayload>, 'payload' | 'dedupeKey'> {
  url: string;
  /** Default: the URL. Deliveries sharing an endpoint share its breaker and secrets. */
  endpoint?: string;
  eventType: string;
  /** The exact body to send, e.g. `JSON.stringify(event)`: stored and sent as this string. */
  body: string;
  /** Default: a new `msg_…` id. Give your event's id to make enqueueing it twice harmless. */
  webhookId?: string;
  /** Default `webhook:<endpoint>:<webhookId>`; `null` for none. */
  dedupeKey?: string | null;
}

/**
 * Enqueue options for one delivery. The body must already be the string to send.
 *
 * @example
 * ```ts
 * await enqueue(deliverWebhook, webhookDelivery({ url: sub.url, endpoint: sub.id, eventType: 'invoice.paid', body: JSON.stringify(event) }));
 * ```
 */
export function webhookDelivery(input: WebhookDeliveryInput): EnqueueOptions<WebhookPayload> {
  if (typeof input?.body !== 'string') throw new PostboxError('invalid_input', 'webhookDelivery: body must be a string (serialise it yourself; it is sent byte for byte)');
  const { url, endpoint, eventType, body, webhookId, dedupeKey, ...rest } = input;
  const id = webhookId ?? `msg_${uuidv7().replace(/-/g, '')}`;
  const ep = endpoint ?? url;
  return {
    ...rest,
    payload: { endpoint: ep, url, eventType, webhookId: id, body },
    ...(dedupeKey === null ? {} : { dedupeKey: dedupeKey ?? `webhook:${ep}:${id}` }),
  };
}

async function loadEndpoint(endpoints: WebhookEndpointStore<Queryable>, db: Queryable, id: string, now: number, reads: number): Promise<StoredEndpoint> {
  // An empty answer means a concurrent first delivery is creating the row: ask again.
  for (let tries = 0; tries < reads; tries++) {
    const stored = await endpoints.readEndpoint(db, id, now);
    if (stored) return stored;
  }
  throw new PostboxError('webhook_endpoint', `webhook endpoint ${id} could not be read`);
}

/**
 * Defines a job that delivers signed webhooks. Each attempt POSTs the stored body with
 * `webhook-id`, `webhook-timestamp` and `webhook-signature` (Standard Webhooks); the core maps
 * the answer to the job's outcome and the endpoint's breaker (README, "Signed webhooks").
 *
 * @example
 * ```ts
 * export const deliverWebhook = defineWebhookJob({
 *   kind: 'webhook.deliver',
 *   secrets: (endpoint, deps) => deps.secretsFor(endpoint),
 * });
 * ```
 */
export function defineWebhookJob<Deps = unknown>(spec: WebhookJobSpec<Deps>): JobDefinition<WebhookPayload, Deps> {
  if (!spec || typeof spec.secrets !== 'function') throw new PostboxError('invalid_job', 'defineWebhookJob: `secrets` must be a function');
  const core = getCore();
  // Every default, bound and derived time is the core's (docs/ABI.md, pb_webhook `config`).
  let config: WebhookConfig;
  try {
    config = core.call<WebhookConfig>('webhook', {
      op: 'config',
      ...(spec.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: spec.requestTimeoutMs }),
      ...(spec.scheduleMs === undefined ? {} : { scheduleMs: spec.scheduleMs }),
      ...(spec.maxRetryAfterMs === undefined ? {} : { maxRetryAfterMs: spec.maxRetryAfterMs }),
      ...(spec.breaker === undefined ? {} : { breaker: spec.breaker }),
    });
  } catch (error) {
    throw new PostboxError('invalid_job', `defineWebhookJob: ${errorMessage(error).replace(/^core webhook: (webhook: )?/, '')}`);
  }
  const { requestTimeoutMs, breaker } = config;
  const extraHeaders = Object.entries(spec.headers ?? {}).filter(([k]) => !k.toLowerCase().startsWith('webhook-'));

  const handle = async (p: WebhookPayload, ctx: JobContext<Deps>): Promise<HandlerOutcome> => {
    const hrt = (ctx as unknown as { [HANDLER_RUNTIME]: HandlerRuntime })[HANDLER_RUNTIME];
    const emit = (event: { type: string; reason?: 'gone' | 'failing' }, failures: number) => {
      if (event.type === 'webhook_endpoint_disabled') hrt.emit({ type: 'webhook_endpoint_disabled', endpoint: p.endpoint, reason: event.reason ?? 'gone', jobId: ctx.jobId });
      else if (event.type === 'webhook_endpoint_paused') hrt.emit({ type: 'webhook_endpoint_paused', endpoint: p.endpoint, failures, jobId: ctx.jobId });
      else if (event.type === 'webhook_endpoint_resumed') hrt.emit({ type: 'webhook_endpoint_resumed', endpoint: p.endpoint, jobId: ctx.jobId });
    };

    const endpoints = hrt.webhookEndpoints;
    if (!endpoints) throw new PostboxError('invalid_config', `${spec.kind}: this outbox's store keeps no webhook endpoints (postbox/webhooks needs PostgreSQL)`);
    let now = hrt.now();
    const stored = await loadEndpoint(endpoints, ctx.db, p.endpoint, now, config.endpointReads);
    const gate = core.call<Gate>('webhook', { op: 'gate', now, cooldownMs: breaker.cooldownMs, probeMs: config.probeMs, endpoint: stored.state });
    if (gate.disabled) return fail({ code: 'endpoint_disabled' });
    if (!gate.deliver) return defer({ code: 'endpoint_paused', after: Math.max(0, (gate.retryAt ?? now) - now) });
    // Taking the probe: only one delivery's write lands; the others look again shortly.
    if (gate.endpoint && !(await endpoints.writeEndpoint(ctx.db, { id: p.endpoint, state: gate.endpoint, reason: null, now, version: stored.version }))) {
      return defer({ code: 'endpoint_paused', after: config.probeTakenMs });
    }

    const secrets = await spec.secrets(p.endpoint, ctx.deps);
    if (secrets === null || secrets === undefined || secrets.length === 0) return fail({ code: 'no_secret' });
    const body = encoder.encode(p.body);
    const timestamp = Math.floor(hrt.now() / 1000);
    const headers = new Headers(extraHeaders);
    headers.set('content-type', spec.contentType ?? 'application/json');
    headers.set('webhook-id', p.webhookId);
    headers.set('webhook-timestamp', String(timestamp));
    headers.set('webhook-signature', await signWebhook({ id: p.webhookId, timestamp, body, secrets }));
    headers.set('webhook-event-type', p.eventType);

    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new PostboxError('timeout', `webhook request timed out after ${requestTimeoutMs} ms`));
    }, requestTimeoutMs);
    const onAbort = () => controller.abort(ctx.signal.reason);
    ctx.signal.addEventListener('abort', onAbort);
    let input: { status: number; retryAfter: string | null } | { error: 'network' | 'timeout' };
    try {
      // Redirects are not followed: a 3xx is the endpoint's answer (and a dead end).
      const res = await (spec.fetch ?? fetch)(p.url, { method: 'POST', body, headers, redirect: 'manual', signal: controller.signal });
      input = { status: res.status, retryAfter: res.headers.get('retry-after') };
      // The answer's body is not needed; dropping it frees the connection.
      await res.body?.cancel().catch(() => undefined);
    } catch {
      input = { error: timedOut ? 'timeout' : 'network' };
    } finally {
      clearTimeout(timer);
      ctx.signal.removeEventListener('abort', onAbort);
    }

    now = hrt.now();
    const outcome = core.call<DeliveryOutcome>('webhook', { op: 'outcome', now, maxRetryAfterMs: config.maxRetryAfterMs, ...input });
    // The breaker learns of it; a concurrent write (another delivery) means: read and decide again.
    let current = gate.endpoint ? await loadEndpoint(endpoints, ctx.db, p.endpoint, now, config.endpointReads) : stored;
    for (let tries = 0; tries < config.recordTries; tries++) {
      const decision = core.call<RecordDecision>('webhook', {
        op: 'record', now, threshold: breaker.threshold, disableAfterMs: breaker.disableAfterMs, endpoint: current.state, signal: outcome.signal,
      });
      if (!decision.changed) break;
      if (await endpoints.writeEndpoint(ctx.db, { id: p.endpoint, state: decision.endpoint, reason: decision.event?.reason ?? null, now, version: current.version })) {
        if (decision.event) emit(decision.event, decision.endpoint.failures);
        break;
      }
      current = await loadEndpoint(endpoints, ctx.db, p.endpoint, now, config.endpointReads);
    }

    if (outcome.type === 'ok') return ok();
    if (outcome.type === 'fail') return fail({ code: outcome.code ?? 'webhook_failed' });
    return retry(outcome.after === null ? { code: outcome.code ?? 'webhook_retry' } : { code: outcome.code ?? 'webhook_retry', after: outcome.after });
  };

  return defineJobFor<Deps>()({
    kind: spec.kind,
    payload: payloadSchema,
    timeoutMs: config.timeoutMs,
    ...(spec.lane === undefined ? {} : { lane: spec.lane }),
    retry: { maxAttempts: config.maxAttempts, backoff: { scheduleMs: config.scheduleMs } },
    handle,
  });
}

/** An endpoint's state as stored, for operators. */
export interface WebhookEndpointInfo {
  id: string;
  state: 'closed' | 'open' | 'half_open' | 'disabled';
  failures: number;
  openedAt: number | null;
  failingSince: number | null;
  disabledReason: 'gone' | 'failing' | null;
  updatedAt: number;
}

/** Which outbox an endpoint helper reads or writes: a named one's own endpoint table (default: the default outbox's). */
export interface WebhookEndpointOptions {
  /** The outbox's name, as given to `createOutbox({ name })`. */
  outbox?: string;
}

/** Every webhook endpoint's breaker state. `db` is any node-postgres `Client`, `PoolClient` or `Pool`. */
export async function listWebhookEndpoints(db: Queryable, opts: WebhookEndpointOptions = {}): Promise<WebhookEndpointInfo[]> {
  const { rows } = await db.query(outboxSql(opts.outbox).webhookEndpointList);
  const num = (v: unknown) => (v === null ? null : Number(v));
  return rows.map((r: any) => ({
    id: r.id, state: r.state, failures: r.failures, openedAt: num(r.opened_ms), failingSince: num(r.failing_ms),
    disabledReason: r.disabled_reason, updatedAt: Number(r.updated_ms),
  }));
}

/**
 * Turns a disabled (or paused) endpoint back on: closed, no failures. Replay its dead
 * deliveries afterwards with `outbox.replayMany`; they keep their `webhook-id`s. The third
 * argument is `now` (epoch ms) or `{ now?, outbox? }` for a named outbox's endpoint.
 */
export async function enableWebhookEndpoint(
  db: Queryable,
  id: string,
  nowOrOptions: number | (WebhookEndpointOptions & { now?: number }) = Date.now(),
): Promise<boolean> {
  const opts = typeof nowOrOptions === 'number' ? { now: nowOrOptions } : nowOrOptions;
  const { rows } = await db.query(outboxSql(opts.outbox).webhookEndpointEnable, [id, opts.now ?? Date.now()]);
  return rows.length > 0;
}
