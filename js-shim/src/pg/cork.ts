/**
 * One write per statement on sockets that cannot cork.
 *
 * node-postgres sends a parameterised statement as five messages (Parse, Bind, Describe, Execute,
 * Sync), one `stream.write` each, and (since pg 8.14.1) wraps them in `stream.cork()` /
 * `stream.uncork()` when the stream has those: Node's `net.Socket` does, so Node sends one
 * segment. The Workers socket (pg-cloudflare's `CloudflareSocket`) has neither, so each message
 * became its own socket write, and a hop that keeps Nagle's algorithm on (the local Hyperdrive
 * proxy of wrangler dev / Miniflare) then held the rest of the statement until the server's
 * delayed ACK: 20–45 ms per statement. Giving that socket the cork/uncork node-postgres already
 * calls restores one write per statement.
 * @module
 */

type Callback = (error?: Error | null) => void;

/** The part of pg-cloudflare's `CloudflareSocket` (an EventEmitter) this relies on. */
interface WritableSocket {
  write(data: Uint8Array | string, encodingOrCallback?: string | Callback, callback?: Callback): boolean | void;
  emit(event: string, ...args: unknown[]): boolean;
  cork?: () => void;
  uncork?: () => void;
}

/**
 * Adds `cork()` / `uncork()` to a node-postgres client's socket when it lacks them. Writes made
 * while corked are kept and sent as one `write` when the last `uncork()` runs. node-postgres
 * corks only synchronously around one statement's messages (`Query.submit`, uncork in a
 * `finally`), so nothing waits on a timer and a throw cannot leave the socket corked. A no-op on
 * sockets that cork already (Node) and if called again.
 */
export function corkWrites(client: unknown): void {
  const socket = (client as { connection?: { stream?: unknown } }).connection?.stream as WritableSocket | undefined;
  if (!socket || typeof socket.write !== 'function' || typeof socket.emit !== 'function') return;
  if (typeof socket.cork === 'function' && typeof socket.uncork === 'function') return;

  const write = socket.write.bind(socket);
  let depth = 0;
  let held: Uint8Array[] = [];
  let callbacks: Callback[] = [];

  socket.write = (data, encodingOrCallback, callback) => {
    if (depth === 0) return write(data, encodingOrCallback as string, callback as Callback);
    const encoding = typeof encodingOrCallback === 'string' ? (encodingOrCallback as BufferEncoding) : 'utf8';
    const done = typeof encodingOrCallback === 'function' ? encodingOrCallback : callback;
    held.push(typeof data === 'string' ? Buffer.from(data, encoding) : data);
    if (done) callbacks.push(done);
    return true;
  };
  socket.cork = () => {
    depth += 1;
  };
  socket.uncork = () => {
    if (depth === 0) return;
    depth -= 1;
    if (depth > 0 || held.length === 0) return;
    const chunk = held.length === 1 ? held[0]! : Buffer.concat(held);
    const waiting = callbacks;
    held = [];
    callbacks = [];
    write(chunk, (error) => {
      for (const done of waiting) done(error);
      // node-postgres passes no callback for these writes, so a failed write would go unheard
      // until the read side (or the query timeout) noticed. As a socket error it fails the
      // statement now and marks the session broken (the connectors listen for 'error').
      if (error) socket.emit('error', error);
    });
  };
}
