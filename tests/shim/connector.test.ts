// createPgConnector's bound on opening a connection, in Node: a server that accepts the TCP
// connection but never answers the startup message (a wedged proxy or a stopped backend) must
// fail the connect within `connectionTimeoutMs`, not hang the lane, and leave no socket open.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { createPgConnector } from '../../js-shim/src/pg/index.ts';

let silent: net.Server;
let port: number;
// Server-side sockets still open: the client must have closed its end of each.
const open = new Set<net.Socket>();
let accepted = 0;

before(async () => {
  // Reads and discards whatever the client sends; never writes a byte back.
  silent = net.createServer((socket) => {
    accepted++;
    open.add(socket);
    socket.on('data', () => undefined);
    socket.on('error', () => undefined);
    socket.on('close', () => open.delete(socket));
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  port = (silent.address() as net.AddressInfo).port;
});
after(async () => {
  for (const s of open) s.destroy();
  await new Promise<void>((resolve) => silent.close(() => resolve()));
});

/** The process's open TCP handles (the test's listener and any client or accepted socket). */
const tcpHandles = () => process.getActiveResourcesInfo().filter((r) => r.startsWith('TCP')).length;

test('createPgConnector: a server that never answers fails the connect within connectionTimeoutMs, leaving nothing open', { timeout: 8_000 }, async () => {
  const timeoutMs = 700;
  const handlesBefore = tcpHandles();
  const connect = createPgConnector(`postgres://postbox:secret@127.0.0.1:${port}/outbox`, { connectionTimeoutMs: timeoutMs, queryTimeoutMs: 30_000 });
  const started = performance.now();
  let thrown: unknown;
  await connect().then(
    () => assert.fail('a server that never answers must not give a connection'),
    (error: unknown) => (thrown = error),
  );
  const elapsed = performance.now() - started;
  // The connector passes node-postgres's own error through (a plain Error, not a PostboxError):
  // the outbox maps any connector failure to its `connection_failed`.
  assert.ok(thrown instanceof Error, String(thrown));
  assert.match(thrown.message, /timeout/i);
  assert.equal(accepted, 1, 'the client did reach the server');
  // Bounded by the option, not by the 10 s default or the query timeout. (Timers may fire a
  // millisecond early against performance.now(): allow that much.)
  assert.ok(elapsed >= timeoutMs - 5, `failed after ${elapsed} ms, before the ${timeoutMs} ms bound`);
  assert.ok(elapsed < timeoutMs + 2_000, `failed after ${elapsed} ms`);
  // The client's socket is gone: the server sees its end closed, and no TCP handle is left.
  const deadline = Date.now() + 2_000;
  while ((open.size > 0 || tcpHandles() > handlesBefore) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.equal(open.size, 0, 'the client closed its socket');
  assert.equal(tcpHandles(), handlesBefore, JSON.stringify(process.getActiveResourcesInfo()));
});
