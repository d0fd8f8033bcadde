// What Postbox relies on from workerd, checked through Postbox's own code: the core, imported
// the way a Worker bundle imports it, decides exactly as it does in Node (the whole decision
// corpus, byte for byte); definitions are normalised by the core inside workerd; and Postbox's
// connector reaches PostgreSQL through the Hyperdrive binding.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { defineJob, ok } from 'postbox';
import { evaluateBacklog } from 'postbox/inspect';
import { getCore } from '../../js-shim/src/core/core.ts';
import { startPostgres, type PgServer } from '../support/postgres.ts';
import { startWorker, type TestWorker } from '../support/worker.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
let server: PgServer;
let worker: TestWorker;

before(async () => {
  server = await startPostgres();
  worker = await startWorker({ entry: path.join(here, 'fixtures', 'platform-worker.ts'), databaseUrl: await server.createDatabase('platform') });
});
after(async () => {
  await worker?.dispose();
  await server?.stop();
});

test('every corpus decision made inside workerd equals the same call in Node', async () => {
  const corpus = path.join(here, '../corpus');
  const calls = readdirSync(corpus)
    .filter((f) => f.endsWith('.jsonl'))
    .flatMap((f) => readFileSync(path.join(corpus, f), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as { family: string; input?: string }))
    // Text inputs (raw-byte and multi-MiB cases stay with tests/corpus/run.mjs).
    .filter((c): c is { family: string; input: string } => typeof c.input === 'string');
  assert.ok(calls.length > 1000, `the corpus has ${calls.length} cases`);
  const node = calls.map((c) => JSON.stringify(getCore().callText(c.family as never, c.input)));
  const families = new Set<string>();
  for (let i = 0; i < calls.length; i += 200) {
    const chunk = calls.slice(i, i + 200);
    const res = await worker.fetch('/decide', { method: 'POST', body: JSON.stringify(chunk.map(({ family, input }) => ({ family, input }))) });
    assert.equal(res.status, 200);
    const inWorkerd = (await res.json()) as string[];
    chunk.forEach((c, j) => {
      families.add(c.family);
      assert.equal(inWorkerd[j], node[i + j], `${c.family}: ${c.input.slice(0, 120)}`);
    });
  }
  assert.deepEqual([...families].sort(), ['backlog', 'claim', 'cron', 'enqueue', 'nudge', 'operate', 'policy', 'settle', 'sweep', 'webhook']);
});

test('a job definition is normalised by the core inside workerd exactly as in Node', async () => {
  const res = await worker.fetch('/define');
  const inWorkerd = (await res.json()) as { policy: unknown; backlog: unknown };
  const job = defineJob({ kind: 'platform.probe', payload: { '~standard': { version: 1, vendor: 'p', validate: (value: unknown) => ({ value }) } }, timeoutMs: 1_500, handle: async () => ok() });
  assert.deepEqual(inWorkerd.policy, job.policy);
  assert.equal((inWorkerd.policy as { leaseMs: number }).leaseMs, 7_500, "1.5 s + the 6 s smallest margin");
  assert.deepEqual(inWorkerd.backlog, evaluateBacklog({ due: 5000, aged: 0, stuck: 0 }));
});

test("Postbox's connector reaches PostgreSQL through the Hyperdrive binding", async () => {
  const res = await worker.fetch('/connect');
  assert.equal(res.status, 200);
  assert.equal(((await res.json()) as { version: string }).version, server.serverVersion);
});
