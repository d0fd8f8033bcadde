// createPgConnector's bound on opening a connection, in Node: a server that accepts the TCP
// connection but never answers the startup message (a wedged proxy or a stopped backend) must
// fail the connect within `connectionTimeoutMs`, not hang the lane, and leave no socket open.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { useSilentServer } from '../support/silent-server.ts';
import { createPgConnector } from '../../js-shim/src/pg/index.ts';

const silent = useSilentServer();

test('createPgConnector: a server that never answers fails the connect within connectionTimeoutMs, leaving nothing open', { timeout: 8_000 }, async () => {
  const timeoutMs = 700;
  const handlesBefore = silent.tcpHandles();
  const connect = createPgConnector(`postgres://postbox:secret@127.0.0.1:${silent.port}/outbox`, { connectionTimeoutMs: timeoutMs, queryTimeoutMs: 30_000 });
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
  assert.equal(silent.accepted, 1, 'the client did reach the server');
  // Bounded by the option, not by the 10 s default or the query timeout. (Timers may fire a
  // millisecond early against performance.now(): allow that much.)
  assert.ok(elapsed >= timeoutMs - 5, `failed after ${elapsed} ms, before the ${timeoutMs} ms bound`);
  assert.ok(elapsed < timeoutMs + 2_000, `failed after ${elapsed} ms`);
  // The client's socket is gone: the server sees its end closed, and no TCP handle is left.
  await silent.settled(handlesBefore);
  assert.equal(silent.open.size, 0, 'the client closed its socket');
  assert.equal(silent.tcpHandles(), handlesBefore, JSON.stringify(process.getActiveResourcesInfo()));
});
