// How Postbox's connectors put a statement on the wire. node-postgres sends a parameterised
// statement as five messages (Parse, Bind, Describe, Execute, Sync); in Node it corks the socket
// around them, but the Workers socket (pg-cloudflare) cannot cork, so each went out as its own
// write, and a proxy that keeps Nagle's algorithm on (wrangler dev's / Miniflare's Hyperdrive
// binding) then held the rest of the statement back until the server's delayed ACK: 20–40 ms a
// statement. Here a counting proxy sits between workerd and PostgreSQL and checks that every
// statement arrives as one chunk.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, beforeEach, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createPgConnector } from '../../js-shim/src/pg/index.ts';
import { startPostgres, type PgServer } from '../support/postgres.ts';
import { startWireProxy, type WireProxy, type WireStatement } from '../support/wire-proxy.ts';
import { startWorker, type TestWorker } from '../support/worker.ts';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
const N = 20;

let server: PgServer;
let proxy: WireProxy;
let dbUrl: string;
let worker: TestWorker;

before(async () => {
  server = await startPostgres();
  dbUrl = await server.createDatabase('wire');
  proxy = await startWireProxy({ targetPort: server.port });
  // Both paths end at the counting proxy: the Hyperdrive binding (through Miniflare's local
  // proxy) and a plain connection string workerd dials itself.
  worker = await startWorker({ entry: path.join(fixtures, 'wire-worker.ts'), databaseUrl: proxy.url(dbUrl), vars: { DIRECT_URL: proxy.url(dbUrl) } });
});
after(async () => {
  await worker?.dispose();
  await proxy?.close();
  await server?.stop();
});
beforeEach(() => proxy.reset());

async function run(body: { via: string; connector: string; n: number; circular?: boolean }): Promise<{ values: number[]; circularError: string | null; statements: WireStatement[] }> {
  const res = await worker.fetch('/', { method: 'POST', body: JSON.stringify(body) });
  const out = (await res.json()) as { values: number[]; circularError: string | null };
  assert.equal(res.status, 200, JSON.stringify(out));
  assert.deepEqual(out.values, Array.from({ length: body.n }, (_, i) => i));
  // The session is closed when the response is sent; the proxy has seen everything by then.
  return { ...out, statements: proxy.statements() };
}

/** The parameterised statements (Parse … Sync) and their chunk counts. */
const extended = (statements: WireStatement[]) => statements.filter((s) => s.types === 'PBDES');

for (const via of ['binding', 'direct'] as const) {
  for (const connector of ['client', 'pool'] as const) {
    test(`${connector === 'client' ? 'createPgConnector' : 'createPgPoolConnector'} (${via}): each statement is one write`, async () => {
      const { statements } = await run({ via, connector, n: N });
      const stmts = extended(statements);
      assert.equal(stmts.length, N, JSON.stringify(statements));
      assert.deepEqual(stmts.map((s) => s.chunks), stmts.map(() => 1), JSON.stringify(stmts));
    });
  }

  test(`the measurement sees a bare pg.Client's split writes (${via})`, async () => {
    // Guards the test itself: without the connector's fix the same statements arrive in pieces.
    const { statements } = await run({ via, connector: 'bare', n: N });
    const stmts = extended(statements);
    assert.equal(stmts.length, N);
    assert.ok(stmts.some((s) => s.chunks > 1), JSON.stringify(stmts));
  });
}

test('a statement whose parameter cannot be serialised fails alone; the session goes on in single writes', async () => {
  const { circularError, statements } = await run({ via: 'binding', connector: 'client', n: 3, circular: true });
  assert.match(circularError ?? '', /circular/i);
  // Parse went out before Bind failed; pg then closes the statement and syncs, in the same write.
  const failed = statements.find((s) => s.types.startsWith('P') && s.types !== 'PBDES');
  assert.deepEqual(failed && { types: failed.types, chunks: failed.chunks }, { types: 'PCS', chunks: 1 });
  assert.deepEqual(extended(statements).map((s) => s.chunks), [1, 1, 1]);
});

test('in Node, createPgConnector already sends each statement as one write (pg corks net.Socket)', async () => {
  const lane = await createPgConnector(proxy.url(dbUrl))();
  try {
    for (let i = 0; i < N; i++) assert.equal((await lane.db.query('SELECT $1::int AS v', [i])).rows[0].v, i);
  } finally {
    await lane.close();
  }
  assert.deepEqual(extended(proxy.statements()).map((s) => s.chunks), Array.from({ length: N }, () => 1));
});

for (const via of ['binding', 'direct'] as const) {
  test(`a connection lost mid-statement fails that statement and the next, and marks the session broken (${via})`, async () => {
    const started = Date.now();
    const res = worker.fetch('/cut', { method: 'POST', body: JSON.stringify({ via }) });
    // Cut once the sleep (a simple Query) is on the wire.
    for (let i = 0; !proxy.statements().some((s) => s.types === 'Q'); i++) {
      assert.ok(i < 200, 'the sleep never reached the proxy');
      await new Promise((r) => setTimeout(r, 25));
    }
    proxy.cut();
    const out = (await (await res).json()) as Record<string, unknown>;
    assert.equal(out.first, 'ok');
    assert.match(String(out.during), /^error: /);
    assert.match(String(out.after), /^error: /);
    assert.equal(out.broken, true);
    // Well before the sleep would have ended, let alone the 60 s query timeout.
    assert.ok(Date.now() - started < 4_000, `took ${Date.now() - started} ms`);
  });
}
