#!/usr/bin/env node
// Checks the built `postbox` package the way a user meets it: every entry of its exports map
// resolves and exports what the README promises, and the shipped core fits its size budget.
import { statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const pkg = createRequire(import.meta.url)(path.join(root, 'js-shim/package.json'));

const promised = {
  '.': ['defineJob', 'defineJobFor', 'createOutbox', 'ok', 'retry', 'fail', 'cancel', 'defer', 'defaultClassify', 'PostboxError', 'EnqueueRefusedError', 'runDrain', 'runConsumer', 'runSweep', 'runRecovery'],
  './cloudflare': ['createQueueHandler', 'createScheduledHandler', 'createDlqHandler', 'defineSchedule'],
  './pg': ['createPgConnector', 'createPgPoolConnector'],
  './sql': ['OUTBOX_MIGRATIONS', 'migrate'],
  './inspect': ['getJob', 'listJobs', 'countJobs', 'findJobsByCorrelationId', 'countBacklog', 'evaluateBacklog', 'listAttempts', 'aggregateAttemptOutcomes'],
  './testing': ['createTestClock', 'runUntilIdle', 'createOutboxTestDatabase'],
  './drizzle': ['outboxSchema', 'outboxJob', 'outboxAttempt', 'outboxScheduleRun', 'outboxWebhookEndpoint', 'OUTBOX_DRIZZLE_EXTRAS', 'outboxDrizzleExtras', 'verifyOutboxSchema'],
  './dashboard': ['createDashboard'],
  './d1': ['createD1OutboxStore', 'D1OutboxStore', 'D1Transaction', 'migrateD1', 'sqliteMigrations', 'd1Driver', 'createSqliteOutbox'],
  './durable-object': ['createDurableObjectOutboxStore', 'DurableObjectOutboxStore', 'migrateDurableObject', 'sqliteMigrations', 'durableObjectDriver', 'createSqliteOutbox'],
  './otel': ['openTelemetry', 'METRIC_NAMES'],
  './webhooks': ['defineWebhookJob', 'webhookDelivery', 'verifyWebhook', 'assertWebhook', 'signWebhook', 'WebhookVerificationError', 'WEBHOOK_SCHEDULE_MS'],
};
const MAX_WASM_BYTES = 200 * 1024; // as scripts/build-core.sh caps each build

const problems = [];
const entries = Object.keys(pkg.exports).filter((k) => !k.endsWith('.wasm'));
for (const entry of entries) if (!(entry in promised)) problems.push(`exports map has ${entry}, which this check does not know`);
for (const [entry, names] of Object.entries(promised)) {
  if (!pkg.exports[entry]) {
    problems.push(`exports map lacks ${entry}`);
    continue;
  }
  const specifier = entry === '.' ? 'postbox' : `postbox/${entry.slice(2)}`;
  let mod;
  try {
    mod = await import(specifier);
  } catch (error) {
    problems.push(`${specifier} does not load: ${error.message}`);
    continue;
  }
  for (const name of names) if (!(name in mod)) problems.push(`${specifier} does not export ${name}`);
  for (const condition of ['types', 'default']) {
    const file = path.join(root, 'js-shim', pkg.exports[entry][condition]);
    try {
      statSync(file);
    } catch {
      problems.push(`${specifier}: ${condition} file ${path.relative(root, file)} is missing`);
    }
  }
}
// The `postbox` command: its launcher and the built entry it loads.
for (const file of [pkg.bin?.postbox, 'dist/cli/main.js']) {
  if (!file) problems.push('package.json has no bin "postbox"');
  else {
    try {
      statSync(path.join(root, 'js-shim', file));
    } catch {
      problems.push(`the postbox command's ${file} is missing`);
    }
  }
}
const wasm = path.join(root, 'js-shim', pkg.exports['./core.wasm']);
const size = statSync(wasm).size;
if (size > MAX_WASM_BYTES) problems.push(`core.wasm is ${size} bytes, over ${MAX_WASM_BYTES}`);

if (problems.length > 0) {
  for (const p of problems) console.error(`check-package: ${p}`);
  process.exit(1);
}
console.log(`check-package: ${Object.keys(promised).length} entry points load and export what they promise; core.wasm ${size} bytes`);
