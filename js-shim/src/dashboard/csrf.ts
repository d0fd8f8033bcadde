/**
 * CSRF tokens: a signed double-submit cookie. The cookie holds a random per-browser nonce; a
 * form carries HMAC-SHA256(secret, nonce). A POST passes only when the token verifies for the
 * cookie's nonce (Web Crypto's `verify`, which compares in constant time). Without a secret the
 * key is a fixed constant: that is a plain double-submit cookie, which a site able to set
 * cookies on a sibling subdomain could forge; give `csrfSecret` where that matters.
 * @module
 */

export const CSRF_COOKIE = 'postbox_dashboard_csrf';
const CONTEXT = 'postbox-dashboard-csrf:';
// Keyless fallback: the same key everywhere, so it binds nothing; see the module comment.
const FALLBACK_SECRET = 'postbox-dashboard-no-secret';

const encoder = new TextEncoder();
const keys = new Map<string, Promise<CryptoKey>>();

function keyFor(secret: string | undefined): Promise<CryptoKey> {
  const material = secret && secret.length > 0 ? secret : FALLBACK_SECRET;
  let key = keys.get(material);
  if (!key) {
    key = crypto.subtle.importKey('raw', encoder.encode(material), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']);
    // A handful of secrets at most (one per deployment); never grows with traffic.
    if (keys.size > 16) keys.clear();
    keys.set(material, key);
  }
  return key;
}

function toBase64Url(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function fromBase64Url(text: string): Uint8Array<ArrayBuffer> | null {
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(text)) return null;
  try {
    const s = atob(text.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (text.length % 4)) % 4));
    return Uint8Array.from(s, (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}

/** A fresh nonce for the cookie: 32 random bytes. */
export function newNonce(): string {
  return toBase64Url(crypto.getRandomValues(new Uint8Array(32)));
}

/** Whether a cookie value looks like a nonce this module issued. */
export function isNonce(value: string | undefined): value is string {
  return value !== undefined && /^[A-Za-z0-9_-]{43}$/.test(value);
}

/** The token forms carry for `nonce`. */
export async function tokenFor(secret: string | undefined, nonce: string): Promise<string> {
  const mac = await crypto.subtle.sign('HMAC', await keyFor(secret), encoder.encode(CONTEXT + nonce));
  return toBase64Url(new Uint8Array(mac));
}

/** True when `token` is the token for `nonce` (constant-time comparison by Web Crypto). */
export async function verifyToken(secret: string | undefined, nonce: string | undefined, token: string | null): Promise<boolean> {
  if (!isNonce(nonce) || typeof token !== 'string') return false;
  const mac = fromBase64Url(token);
  if (!mac || mac.length !== 32) return false;
  return crypto.subtle.verify('HMAC', await keyFor(secret), mac, encoder.encode(CONTEXT + nonce));
}

/** Reads one cookie from a `Cookie` header. */
export function readCookie(header: string | null, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}
