// Standard Webhooks signatures with Web Crypto (workerd and Node alike): HMAC-SHA256 over
// `${id}.${timestamp}.${body}`, base64, prefixed `v1,`; several space-separated during a rotation.
import { PostboxError } from '../errors.js';

const encoder = new TextEncoder();

/** Bytes backed by a plain ArrayBuffer, as Web Crypto takes them. */
export type Bytes = Uint8Array<ArrayBuffer>;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Decodes standard base64; `null` when the text is not base64. */
export function fromBase64(text: string): Bytes | null {
  if (!BASE64.test(text)) return null;
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

export function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

/**
 * The key bytes of a signing secret: `whsec_` followed by base64 (the prefix may be left off).
 * Throws `PostboxError('invalid_secret')` for anything else, naming no part of the secret.
 */
export function decodeSecret(secret: string): Bytes {
  if (typeof secret !== 'string') throw new PostboxError('invalid_secret', 'a webhook secret must be a string: whsec_ followed by base64');
  const key = fromBase64(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret);
  if (!key || key.length === 0) throw new PostboxError('invalid_secret', 'a webhook secret must be whsec_ followed by non-empty base64');
  return key;
}

/** Normalises one secret or a list to a non-empty list, checking each. */
export function secretList(secrets: string | readonly string[]): Bytes[] {
  const list = typeof secrets === 'string' ? [secrets] : [...(secrets ?? [])];
  if (list.length === 0) throw new PostboxError('invalid_secret', 'at least one webhook secret is needed');
  return list.map(decodeSecret);
}

export function hmacKey(raw: Bytes, usage: 'sign' | 'verify'): Promise<CryptoKey> {
  return crypto.subtle.importKey('raw', raw, { name: 'HMAC', hash: 'SHA-256' }, false, [usage]);
}

/** The bytes a signature covers: `${id}.${timestamp}.` then the body's bytes as sent. */
export function signedContent(id: string, timestamp: number | string, body: Uint8Array): Bytes {
  const head = encoder.encode(`${id}.${timestamp}.`);
  const out = new Uint8Array(head.length + body.length);
  out.set(head);
  out.set(body, head.length);
  return out;
}

/** Options of {@link signWebhook}. */
export interface SignWebhookInput {
  /** The `webhook-id`: the same for every attempt of one message. */
  id: string;
  /** The `webhook-timestamp`: whole seconds since the epoch, per attempt. */
  timestamp: number;
  /** The body exactly as sent: a string (signed as its UTF-8 bytes) or the bytes. */
  body: string | Uint8Array;
  /** One `whsec_…` secret, or several while rotating (each signs; receivers accept any). */
  secrets: string | readonly string[];
}

/**
 * The `webhook-signature` header value: `v1,<base64>` per secret, space-separated.
 *
 * @example
 * ```ts
 * const signature = await signWebhook({ id: 'msg_1', timestamp: Math.floor(Date.now() / 1000), body, secrets: 'whsec_…' });
 * ```
 */
export async function signWebhook(input: SignWebhookInput): Promise<string> {
  const keys = secretList(input.secrets);
  const body = typeof input.body === 'string' ? encoder.encode(input.body) : input.body;
  const content = signedContent(input.id, input.timestamp, body);
  const signatures = await Promise.all(
    keys.map(async (raw) => `v1,${toBase64(new Uint8Array(await crypto.subtle.sign('HMAC', await hmacKey(raw, 'sign'), content)))}`),
  );
  return signatures.join(' ');
}
