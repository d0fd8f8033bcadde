// A receiver's check of a signed webhook. The timestamp's tolerance is the core's decision
// (pb_webhook timestamp); signatures are compared by crypto.subtle.verify, in constant time.
import { getCore } from '../core/core.js';
import { PostboxError, type WebhookRejection } from '../errors.js';
import { fromBase64, hmacKey, secretList, signedContent, type Bytes } from './sign.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Headers as a `Headers` object or a plain record (Node's `IncomingHttpHeaders` works). */
export type WebhookHeaders = Headers | Record<string, string | readonly string[] | undefined>;

/** What {@link verifyWebhook} checks: a `Request`, or its headers and raw body. */
export type WebhookInput = Request | { headers: WebhookHeaders; body: string | Uint8Array | ArrayBuffer };

/** Options of {@link verifyWebhook}. */
export interface VerifyWebhookOptions {
  /** How far `webhook-timestamp` may be from now, either way, in seconds. Default 300. */
  toleranceSec?: number;
  /** The receiver's clock: epoch ms or a Date. Default `Date.now()`. */
  now?: number | Date;
}

export type { WebhookRejection };

/** The result of {@link verifyWebhook}. */
export type WebhookVerification =
  | { ok: true; id: string; timestamp: number; body: string }
  | { ok: false; code: WebhookRejection; message: string; missing?: string[] };

/** Thrown by {@link assertWebhook}; `code` is the {@link WebhookRejection}. */
export class WebhookVerificationError extends PostboxError {
  declare readonly code: WebhookRejection;
  constructor(code: WebhookRejection, message: string) {
    super(code, message);
    this.name = 'WebhookVerificationError';
  }
}

function header(headers: WebhookHeaders, name: string): string | null {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name);
  for (const [key, value] of Object.entries(headers as Record<string, string | readonly string[] | undefined>)) {
    if (key.toLowerCase() !== name || value === undefined) continue;
    return typeof value === 'string' ? value : value.join(', ');
  }
  return null;
}

async function bodyBytes(input: WebhookInput): Promise<Uint8Array> {
  // The signature covers the bytes as received; a clone leaves the caller's Request readable.
  if (typeof Request !== 'undefined' && input instanceof Request) return new Uint8Array(await input.clone().arrayBuffer());
  const body = (input as { body: unknown }).body;
  if (typeof body === 'string') return encoder.encode(body);
  if (body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  throw new PostboxError('invalid_input', 'verifyWebhook: body must be a string, a Uint8Array or an ArrayBuffer');
}

/**
 * Verifies a webhook the way Standard Webhooks defines it: the three headers are present, the
 * timestamp is within `toleranceSec` of now, and one `v1` signature of
 * `${webhook-id}.${webhook-timestamp}.${body}` matches one of `secrets` (several while you
 * rotate). Returns a typed result rather than throwing; a malformed secret throws
 * `PostboxError('invalid_secret')`, since that is the receiver's bug, not the sender's.
 *
 * @example
 * ```ts
 * const result = await verifyWebhook(request, env.WEBHOOK_SECRET);
 * if (!result.ok) return new Response(result.code, { status: 400 });
 * const event = JSON.parse(result.body);
 * ```
 */
export async function verifyWebhook(
  input: WebhookInput,
  secrets: string | readonly string[],
  options: VerifyWebhookOptions = {},
): Promise<WebhookVerification> {
  const keys = secretList(secrets);
  const id = header(input.headers as WebhookHeaders, 'webhook-id');
  const timestamp = header(input.headers as WebhookHeaders, 'webhook-timestamp');
  const signature = header(input.headers as WebhookHeaders, 'webhook-signature');
  const missing = [id === null && 'webhook-id', timestamp === null && 'webhook-timestamp', signature === null && 'webhook-signature'].filter(
    (m): m is string => m !== false,
  );
  if (missing.length > 0) return { ok: false, code: 'missing_headers', message: `missing ${missing.join(', ')}`, missing };

  const now = Math.floor(options.now instanceof Date ? options.now.getTime() : options.now ?? Date.now());
  const checked = getCore().call<{ ok: true; timestamp: number } | { ok: false; reason: 'invalid_timestamp' | 'too_old' | 'too_new' }>('webhook', {
    op: 'timestamp',
    now,
    timestamp: timestamp!.trim(),
    toleranceSec: options.toleranceSec ?? 300,
  });
  if (!checked.ok) {
    const code = checked.reason === 'invalid_timestamp' ? 'invalid_timestamp' : checked.reason === 'too_old' ? 'timestamp_too_old' : 'timestamp_too_new';
    return { ok: false, code, message: `webhook-timestamp ${code.replace(/_/g, ' ')}` };
  }

  const body = await bodyBytes(input);
  const content = signedContent(id!, timestamp!.trim(), body);
  const candidates = signature!
    .split(' ')
    .filter((s) => s.startsWith('v1,'))
    .map((s) => fromBase64(s.slice(3)))
    .filter((s): s is Bytes => s !== null);
  for (const raw of keys) {
    const key = await hmacKey(raw, 'verify');
    for (const candidate of candidates) {
      if (await crypto.subtle.verify('HMAC', key, candidate, content)) {
        return { ok: true, id: id!, timestamp: checked.timestamp, body: decoder.decode(body) };
      }
    }
  }
  return { ok: false, code: 'no_matching_signature', message: 'no webhook-signature matches the secrets' };
}

/** {@link verifyWebhook}, throwing {@link WebhookVerificationError} instead of returning a refusal. */
export async function assertWebhook(
  input: WebhookInput,
  secrets: string | readonly string[],
  options?: VerifyWebhookOptions,
): Promise<{ id: string; timestamp: number; body: string }> {
  const result = await verifyWebhook(input, secrets, options);
  if (!result.ok) throw new WebhookVerificationError(result.code, result.message);
  return { id: result.id, timestamp: result.timestamp, body: result.body };
}
