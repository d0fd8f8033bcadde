// defineWebhookJob takes every default, bound and derived time of a webhook job from the core
// (pb_webhook op config): what it defines, and the typed error for a setting out of range.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WEBHOOK_SCHEDULE_MS, defineWebhookJob } from 'postbox/webhooks';

const secrets = () => 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

test('the defaults: a 15 s request in a 20 s job, eleven attempts on the documented schedule', () => {
  const job = defineWebhookJob({ kind: 'hook.default', secrets });
  assert.equal(job.policy.timeoutMs, 20_000);
  assert.equal(job.policy.maxAttempts, 11);
  assert.deepEqual(job.policy.scheduleMs, [...WEBHOOK_SCHEDULE_MS]);
});

test('settings given are used, and what derives from them follows', () => {
  const job = defineWebhookJob({ kind: 'hook.set', secrets, requestTimeoutMs: 2_000, scheduleMs: [1_000, 60_000], breaker: { threshold: 2 } });
  assert.equal(job.policy.timeoutMs, 7_000);
  assert.equal(job.policy.maxAttempts, 3);
  assert.deepEqual(job.policy.scheduleMs, [1_000, 60_000]);
});

test('a setting out of range is an invalid_job error naming it, when the job is defined', () => {
  const refused = (spec: Record<string, unknown>, field: string) =>
    assert.throws(
      () => defineWebhookJob({ kind: 'hook.bad', secrets, ...spec }),
      (e: any) => e.code === 'invalid_job' && e.message.startsWith('defineWebhookJob: ') && e.message.includes(field),
    );
  refused({ requestTimeoutMs: 0 }, "'requestTimeoutMs' must be an integer in [1, 590000]");
  refused({ requestTimeoutMs: 600_000 }, 'requestTimeoutMs');
  refused({ scheduleMs: [] }, "'scheduleMs' must have at least one entry");
  refused({ maxRetryAfterMs: -1 }, 'maxRetryAfterMs');
  refused({ breaker: { threshold: 0 } }, "'breaker.threshold'");
  refused({ breaker: { cooldownMs: 1.5 } }, "'breaker.cooldownMs'");
  refused({ breaker: { disableAfterMs: 'never' } }, "'breaker.disableAfterMs'");
});
