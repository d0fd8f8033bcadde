/**
 * A latency-injecting TCP proxy for the benchmarks: listens on 127.0.0.1 (a free port) and
 * forwards every connection to `127.0.0.1:targetPort`, holding each chunk back for `rttMs / 2`
 * in each direction. A query/response round trip therefore costs at least `rttMs` more than it
 * would directly.
 *
 * It is a fixed one-way delay, not a bandwidth limiter: every chunk is stamped with
 * `arrival + rttMs / 2` and queued per socket and direction; one timer per queue delivers every
 * chunk that is due, in arrival order, then re-arms for the next. Chunks that arrive while
 * others wait are not delayed further by them. It does not model Hyperdrive (no pooling, no
 * jitter, no TLS); Node timers have millisecond resolution, so the real delay per direction is
 * `rttMs / 2` rounded up to the timer tick (measure it: see `measureRoundTrip` in throughput.ts).
 */
import net from 'node:net';
import { listenLocal, type ListeningProxy } from '../tests/support/local-proxy.ts';

/** The proxy: its port on 127.0.0.1, URLs aimed at it, and close. */
export type LatencyProxy = ListeningProxy;

export interface LatencyProxyOptions {
  targetPort: number;
  targetHost?: string;
  /** Round-trip time to add; each direction is delayed by half of it. */
  rttMs: number;
}

type Item = { due: number; chunk: Buffer } | { due: number; end: true };

/** Moves data from `from` to `to`, each chunk `delayMs` after it arrived, order preserved. */
function delayedPipe(from: net.Socket, to: net.Socket, delayMs: number): void {
  const queue: Item[] = [];
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    timer = undefined;
    const now = performance.now();
    while (queue.length > 0 && queue[0].due <= now) {
      const item = queue.shift()!;
      if (to.destroyed) return;
      if ('end' in item) to.end();
      else to.write(item.chunk);
    }
    arm();
  };
  const arm = () => {
    if (timer !== undefined || queue.length === 0) return;
    timer = setTimeout(flush, Math.max(0, queue[0].due - performance.now()));
  };
  from.on('data', (chunk: Buffer) => {
    queue.push({ due: performance.now() + delayMs, chunk });
    arm();
  });
  from.on('end', () => {
    queue.push({ due: performance.now() + delayMs, end: true });
    arm();
  });
  from.on('close', () => {
    // Undelivered data of a socket that closed abruptly is dropped with it.
    if (from.errored || !from.readableEnded) {
      if (timer !== undefined) clearTimeout(timer);
      queue.length = 0;
      to.destroy();
    }
  });
}

export async function startLatencyProxy(opts: LatencyProxyOptions): Promise<LatencyProxy> {
  const { targetPort, rttMs } = opts;
  const targetHost = opts.targetHost ?? '127.0.0.1';
  if (!(rttMs >= 0)) throw new Error(`rttMs must be ≥ 0, got ${rttMs}`);
  const oneWay = rttMs / 2;
  const sockets = new Set<net.Socket>();

  const server = net.createServer({ allowHalfOpen: true }, (client) => {
    const upstream = net.connect({ host: targetHost, port: targetPort, allowHalfOpen: true });
    for (const s of [client, upstream]) {
      s.setNoDelay(true);
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined); // surfaced to the peer as a close
    }
    delayedPipe(client, upstream, oneWay);
    delayedPipe(upstream, client, oneWay);
  });

  return listenLocal(server, sockets);
}
