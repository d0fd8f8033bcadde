// operationTimeoutMs bounds an operator action as a whole, in Node: against a server that
// accepts the TCP connection but never answers (a wedged proxy, a stopped backend), the action
// fails within the bound with PostboxError('timeout'), not after the connector's own connect
// timeout, and leaves no socket open.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { useSilentServer } from '../support/silent-server.ts';
import { z } from 'zod';
import { createOutbox, defineJob, ok, PostboxError, type Connector } from '../../js-shim/src/index.ts';
import { getCore } from '../../js-shim/src/core/core.ts';
import { outboxConfig } from '../../js-shim/src/engine/outbox-config.ts';
import { createPgConnector } from '../../js-shim/src/pg/index.ts';

const silent = useSilentServer();
const job = defineJob({ kind: 'op.timeout', payload: z.object({}), timeoutMs: 1_000, handle: async () => ok() });
const url = () => `postgres://postbox:secret@127.0.0.1:${silent.port}/outbox`;

async function expectBounded(connect: Connector, action: (outbox: ReturnType<typeof createOutbox>) => Promise<unknown>, what: string) {
  const timeoutMs = 600;
  const handlesBefore = silent.tcpHandles();
  const acceptedBefore = silent.accepted;
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
  assert.equal(silent.accepted, acceptedBefore + 1, 'the action did reach the server');
  // Bounded by operationTimeoutMs, not by the connector's 30 s connect timeout.
  assert.ok(elapsed >= timeoutMs - 5, `failed after ${elapsed} ms, before the bound`);
  assert.ok(elapsed < timeoutMs + 1_000, `failed after ${elapsed} ms`);
  await silent.settled(handlesBefore);
  assert.equal(silent.open.size, 0, 'the client closed its socket');
  assert.equal(silent.tcpHandles(), handlesBefore, JSON.stringify(process.getActiveResourcesInfo()));
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
