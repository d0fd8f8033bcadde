// A "database" that accepts TCP connections and never answers (a wedged proxy, a stopped
// backend), for tests that a client gives up in time and leaves no socket open.
import net from 'node:net';
import { after, before } from 'node:test';

export interface SilentServer {
  /** Its port; set once the file's `before` hook has run. */
  port: number;
  /** Connections accepted so far. */
  accepted: number;
  /** Server-side sockets still open: the client must have closed its end of each. */
  open: Set<net.Socket>;
  /** The process's open TCP handles (the listener and any client or accepted socket). */
  tcpHandles(): number;
  /** Resolves once no server socket is open and the TCP handles are back to `handlesBefore` (or 2 s passed). */
  settled(handlesBefore: number): Promise<void>;
}

/** Starts the server before this file's tests, closes it after them. */
export function useSilentServer(): SilentServer {
  let listener: net.Server;
  const server: SilentServer = {
    port: 0,
    accepted: 0,
    open: new Set(),
    tcpHandles: () => process.getActiveResourcesInfo().filter((r) => r.startsWith('TCP')).length,
    async settled(handlesBefore) {
      const deadline = performance.now() + 2_000;
      while ((server.open.size > 0 || server.tcpHandles() > handlesBefore) && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    },
  };
  before(async () => {
    // Reads and discards whatever the client sends; never writes a byte back.
    listener = net.createServer((socket) => {
      server.accepted++;
      server.open.add(socket);
      socket.on('data', () => undefined);
      socket.on('error', () => undefined);
      socket.on('close', () => server.open.delete(socket));
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    server.port = (listener.address() as net.AddressInfo).port;
  });
  after(async () => {
    for (const s of server.open) s.destroy();
    await new Promise<void>((resolve) => listener.close(() => resolve()));
  });
  return server;
}
