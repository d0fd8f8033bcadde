// What the test and bench TCP proxies share: listening on a free loopback port, pointing a
// connection URL at it, and closing with every socket they relay.
import net from 'node:net';

export interface ListeningProxy {
  port: number;
  /** The same connection URL, aimed at the proxy. */
  url(u: string): string;
  /** Destroys every relayed socket and stops listening. */
  close(): Promise<void>;
}

export async function listenLocal(server: net.Server, sockets: Set<net.Socket>): Promise<ListeningProxy> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    url(u) {
      const parsed = new URL(u);
      parsed.hostname = '127.0.0.1';
      parsed.port = String(port);
      return parsed.toString();
    },
    close() {
      for (const s of sockets) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
