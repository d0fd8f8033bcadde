// The README check (scripts/check-readme.mjs) on made-up READMEs: it finds the ts blocks,
// passes a README whose calls are right and fails one with a wrong call, at the right line.
// Needs the built package (stage c runs it after the build).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { checkReadme, extractBlocks } from '../../scripts/check-readme.mjs';

const dir = mkdtempSync(path.join(os.tmpdir(), 'postbox-readme-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function readme(name, text) {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
}

const JOBS = ['```ts', '// jobs.ts', "import { defineJob, ok } from 'postbox';", "import { z } from 'zod';",
  "export const note = defineJob({ kind: 'note', payload: z.object({ body: z.string() }), timeoutMs: 1000, handle: async () => ok() });", '```'];

test('blocks: ts and typescript fences only, named by a leading // name.ts comment, with their README line', () => {
  const blocks = extractBlocks(['# T', '', ...JOBS, '', '```sh', 'npm test', '```', '```typescript', 'const a = 1;', '```', '  ```ts', '  const b = 2;', '  ```'].join('\n'));
  assert.deepEqual(blocks.map((b) => [b.name, b.line]), [['jobs.ts', 4], ['block-2.ts', 14], ['block-3.ts', 17]]);
  assert.equal(blocks[2].code, 'const b = 2;');
});

test('a README whose blocks use the API as it is passes', () => {
  const file = readme('good.md', ['# Good', ...JOBS, '', '```ts', "import { createOutbox, runConsumer } from 'postbox';", "import { note } from './jobs';",
    "declare const connect: import('postbox').Connector;",
    'const outbox = createOutbox({ jobs: [note], connect });',
    'await runConsumer(outbox, { signal: new AbortController().signal });', '```'].join('\n'));
  const result = checkReadme(file);
  assert.deepEqual(result.errors, []);
  assert.equal(result.ok, true);
  assert.equal(result.blocks, 2);
});

test('a README with a wrong call fails, and the error names its README line', () => {
  const file = readme('bad.md', ['# Bad', ...JOBS, '', '```ts', "import { runUntilIdle } from 'postbox/testing';", "import { createOutbox } from 'postbox';", "import { note } from './jobs';",
    "declare const connect: import('postbox').Connector;",
    'const outbox = createOutbox({ jobs: [note], connect });',
    'await runUntilIdle(outbox, { maxRound: 5 });', '```'].join('\n'));
  const result = checkReadme(file);
  assert.equal(result.ok, false);
  assert.equal(result.errors.length, 1, result.errors.join('\n'));
  assert.match(result.errors[0], /bad\.md:15:\d+ \(block-2\.ts\): error TS2561: .*maxRound/);
});
