/**
 * A TCP proxy that records how a PostgreSQL client's statements arrive on the wire: listens on
 * 127.0.0.1 (a free port), forwards every connection to `127.0.0.1:targetPort` untouched and at
 * once (TCP_NODELAY both ways), and parses the client→server bytes into frontend messages.
 *
 * A statement is the client's messages up to and including a Sync (`S`, extended protocol) or a
 * simple Query (`Q`); authentication (`p`) and Terminate (`X`) belong to none. For each statement
 * it records the message types (e.g. `PBDES`) and `chunks`: how many `data` events from the
 * client carried bytes of it. Statements on one connection are sequential (the client waits for
 * ReadyForQuery), so a chunk that carries a whole statement means the client wrote it in one go;
 * a statement in several chunks was written in pieces (or held back by Nagle somewhere before
 * this proxy). The receiving kernel may merge small writes that arrive back to back, so
 * `chunks` never over-counts writes, but may under-count them.
 */
import net from 'node:net';
import { listenLocal } from './local-proxy.ts';

export interface WireStatement {
  /** Connection number, from 1, in accept order. */
  conn: number;
  /** Frontend message types in order, e.g. `PBDES` (Parse, Bind, Describe, Execute, Sync). */
  types: string;
  /** How many chunks from the client carried bytes of this statement. */
  chunks: number;
}

export interface WireProxy {
  port: number;
  /** The same connection URL with its host and port pointed at the proxy. */
  url(u: string): string;
  /** Every complete statement seen so far, in arrival order. */
  statements(): WireStatement[];
  /** Forgets the statements seen so far. */
  reset(): void;
  /** Drops every open connection (both sides), as a network failure would. */
  cut(): void;
  /** Stops listening and destroys every open connection. */
  close(): Promise<void>;
}

/** Protocol codes of the untyped requests that precede (or replace) a StartupMessage. */
const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;
const CANCEL_REQUEST = 80877102;

/** Parses one connection's client→server stream; reports statements as they complete. */
function clientParser(conn: number, done: (s: WireStatement) => void): (chunk: Buffer) => void {
  let startup = true; // untyped messages until the StartupMessage
  let pending: Buffer = Buffer.alloc(0);
  let current: WireStatement = { conn, types: '', chunks: 0 };
  return (chunk) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    let touched = false;
    let off = 0;
    for (;;) {
      if (startup) {
        if (pending.length - off < 8) break;
        const len = pending.readInt32BE(off);
        if (pending.length - off < len) break;
        const code = pending.readInt32BE(off + 4);
        off += len;
        if (code !== SSL_REQUEST && code !== GSSENC_REQUEST && code !== CANCEL_REQUEST) startup = false;
        continue;
      }
      if (pending.length - off < 1) break;
      const type = String.fromCharCode(pending[off]!);
      const inStatement = type !== 'p' && type !== 'X';
      // Any byte of a statement's message in this chunk counts the chunk for that statement.
      if (inStatement) touched = true;
      if (pending.length - off < 5) break;
      const len = pending.readInt32BE(off + 1);
      if (pending.length - off < 1 + len) break;
      off += 1 + len;
      if (!inStatement) continue;
      current.types += type;
      if (type === 'S' || type === 'Q') {
        current.chunks += 1;
        touched = false;
        done(current);
        current = { conn, types: '', chunks: 0 };
      }
    }
    if (touched) current.chunks += 1;
    pending = pending.subarray(off);
  };
}

export async function startWireProxy(opts: { targetPort: number; targetHost?: string }): Promise<WireProxy> {
  const targetHost = opts.targetHost ?? '127.0.0.1';
  const sockets = new Set<net.Socket>();
  let seen: WireStatement[] = [];
  let conns = 0;

  const server = net.createServer({ noDelay: true }, (client) => {
    const upstream = net.connect({ host: targetHost, port: opts.targetPort, noDelay: true });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined); // surfaced to the peer as a close
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    const parse = clientParser(++conns, (s) => seen.push(s));
    client.on('data', (chunk: Buffer) => {
      parse(chunk);
      upstream.write(chunk);
    });
    client.on('end', () => upstream.end());
    upstream.pipe(client);
  });

  const listening = await listenLocal(server, sockets);
  return {
    ...listening,
    statements: () => [...seen],
    reset() {
      seen = [];
    },
    cut() {
      for (const s of sockets) s.destroy();
    },
  };
}
