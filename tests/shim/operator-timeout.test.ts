// operationTimeoutMs bounds an operator action as a whole, in Node: against a server that
// accepts the TCP connection but never answers (a wedged proxy, a stopped backend), the action
// fails within the bound with PostboxError('timeout'), not after the connector's own connect
// timeout, and leaves no socket open.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { z } from 'zod';
import { createOutbox, defineJob, ok, PostboxError, type Connector } from '../../js-shim/src/index.ts';
import { getCore } from '../../js-shim/src/core/core.ts';
import { outboxConfig } from '../../js-shim/src/outbox-config.ts';
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

const tcpHandles = () => process.getActiveResourcesInfo().filter((r) => r.startsWith('TCP')).length;
const job = defineJob({ kind: 'op.timeout', payload: z.object({}), timeoutMs: 1_000, handle: async () => ok() });
const url = () => `postgres://postbox:secret@127.0.0.1:${port}/outbox`;

async function expectBounded(connect: Connector, action: (outbox: ReturnType<typeof createOutbox>) => Promise<unknown>, what: string) {
  const timeoutMs = 600;
  const handlesBefore = tcpHandles();
  const acceptedBefore = accepted;
  const outbox = createOutbox({ jobs: [job], connect, operationTimeoutMs: timeoutMs });
  const started = performance.now();
  let thrown: unknown;
  await action(outbox).then(
    () => assert.fail('an action against a server that never answers must not succeed'),
    (error: unknown) => (thrown = error),
  );
  const elapsed = performance.now() - started;
  assert.ok(thrown instanceof PostboxError, String(thrown));
  assert.equal(thrown.code, 'timeout');
  assert.match(thrown.message, new RegExp(`^${what}: not done within operationTimeoutMs \\(600 ms\\)`));
  assert.equal(accepted, acceptedBefore + 1, 'the action did reach the server');
  // Bounded by operationTimeoutMs, not by the connector's 30 s connect timeout.
  assert.ok(elapsed >= timeoutMs - 5, `failed after ${elapsed} ms, before the bound`);
  assert.ok(elapsed < timeoutMs + 1_000, `failed after ${elapsed} ms`);
  const deadline = Date.now() + 2_000;
  while ((open.size > 0 || tcpHandles() > handlesBefore) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.equal(open.size, 0, 'the client closed its socket');
  assert.equal(tcpHandles(), handlesBefore, JSON.stringify(process.getActiveResourcesInfo()));
}

test('an operator action against a server that never answers fails in about operationTimeoutMs, its connect aborted', { timeout: 10_000 }, async () => {
  const connect = createPgConnector(url(), { connectionTimeoutMs: 30_000, queryTimeoutMs: 30_000 });
  await expectBounded(connect, (outbox) => outbox.cancel({ id: '0190b0a0-0000-7000-8000-000000000001' }), 'cancel');
  await expectBounded(connect, (outbox) => outbox.eraseTenant('acme'), 'eraseTenant');
});

test('a connector that ignores the signal: the late connection is destroyed when it lands', { timeout: 10_000 }, async () => {
  const inner = createPgConnector(url(), { connectionTimeoutMs: 1_200, queryTimeoutMs: 30_000 });
  // Hides the signal, so only the connector's own 1.2 s timeout ends the connect: the action
  // still fails at 600 ms, and the socket goes when the connect fails.
  const deaf: Connector = () => inner();
  await expectBounded(deaf, (outbox) => outbox.retryNow('0190b0a0-0000-7000-8000-000000000002'), 'retryNow');
});

test('the default operationTimeoutMs is the core\'s 60 s', () => {
  assert.equal(outboxConfig(getCore(), {}).operationTimeoutMs, 60_000);
});
