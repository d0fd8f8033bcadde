// The core's numeric admit, pump and ok-settlement entries, as the drain calls them through
// Core#admit, Core#pump and Core#settleOk, answer exactly what the JSON ops answer, on both wasm
// builds, for random inputs (valid and not): the drain's hot path cannot drift from the
// documented decisions.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Core, type AdmitInput, type PumpInput, type SettleOkInput } from '../../js-shim/dist/core/core.js';

const builds = {
  wasi: new URL('../../js-shim/core/postbox-core.wasm', import.meta.url),
  emscripten: new URL('../../js-shim/core/postbox-core.emscripten.wasm', import.meta.url),
};

// A small deterministic generator (xorshift), so a failure reproduces.
function random(seed: number) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

/** The outcome of one call: the answer, or the error code it threw. */
function outcome(fn: () => unknown): unknown {
  try {
    return { ok: fn() };
  } catch (error) {
    return { error: (error as { code?: string }).code };
  }
}

for (const [build, url] of Object.entries(builds)) {
  const core = new Core(new WebAssembly.Module(readFileSync(url)));

  test(`${build}: admit's numeric entry equals the JSON op on 20,000 random inputs`, () => {
    const r = random(7);
    const pick = <T>(xs: T[]): T => xs[Math.floor(r() * xs.length)]!;
    let refused = 0;
    for (let i = 0; i < 20_000; i++) {
      const now = pick([0, 1_000, 1_700_000_000_000, Math.floor(r() * 1e6), 0.5, -1]);
      const input: AdmitInput = {
        now,
        deadlineAt: pick([now, Number(now) + 30_000, Number(now) + 900_000, Math.floor(r() * 2e6)]),
        leaseExpiresAt: pick([Number(now) + 5_000, Number(now) + 40_000, Number(now) + 200_000, Math.floor(r() * 2e6)]),
        timeoutMs: pick([1, 2_000, 60_000, 600_000, 0, 600_001, Math.floor(r() * 100_000)]),
        heartbeatMs: pick([null, 1_000, 5_000, 500, 30_000]),
        attempts: pick<number | undefined | null>([undefined, null, 0, 3, 999, -2]) as number | undefined,
      };
      const fast = outcome(() => core.admit(input));
      const json = outcome(() => core.call('claim', { op: 'admit', ...input }));
      assert.deepEqual(fast, json, JSON.stringify(input));
      if ('error' in (json as object)) refused++;
    }
    assert.ok(refused > 100, `the inputs include refusals (${refused})`);
  });

  test(`${build}: pump's numeric entry equals the JSON op on 20,000 random inputs`, () => {
    const r = random(11);
    const pick = <T>(xs: T[]): T => xs[Math.floor(r() * xs.length)]!;
    const maybe = (xs: number[]) => pick<number | null>([null, ...xs]);
    let refused = 0;
    for (let i = 0; i < 20_000; i++) {
      const input: PumpInput = {
        concurrency: pick([1, 2, 8, 32, 100, 0, 1.5]),
        running: pick([0, 1, 7, 8, 32]),
        buffered: pick([0, 1, 8, 16, 40, 200]),
        settles: pick([0, 1, 8, 64]),
        mayClaim: pick([true, false]),
        remaining: maybe([0, 3, 50]),
        slowestRecentMs: maybe([0, 2, 200, 15_000, 600_000]),
        oldestSettleAgeMs: maybe([0, 5, 19, 20, 100]),
        slackMs: maybe([4_000, 20_000]),
        statementMs: maybe([1, 5, 12, 1_000, -4]),
        maxBatch: maybe([0, 10, 100]) as number | undefined,
        maxJobs: maybe([0, 5, 100]),
        claimed: maybe([0, 4, 200]),
      };
      const fast = outcome(() => core.pump(input));
      const json = outcome(() => core.call('claim', { op: 'pump', ...input }));
      assert.deepEqual(fast, json, JSON.stringify(input));
      if ('error' in (json as object)) refused++;
    }
    assert.ok(refused > 100, `the inputs include refusals (${refused})`);
  });

  test(`${build}: an ok settlement's numeric entry equals the JSON op on 20,000 random inputs`, () => {
    const r = random(13);
    const pick = <T>(xs: T[]): T => xs[Math.floor(r() * xs.length)]!;
    let refused = 0;
    for (let i = 0; i < 20_000; i++) {
      const input: SettleOkInput = {
        now: pick([0, 1_700_000_000_000, Math.floor(r() * 1e12), 0.5, -1]),
        attempts: pick([0, 1, 9, 1_000_000, 1_000_001, -1, 2.5]),
        crashes: pick([0, 2, Math.floor(r() * 100), -3]),
        streak: pick([0, 4, Math.floor(r() * 100), Number.NaN]),
        maxAttempts: pick([null, 1, 25, 1000, 0, 1001]),
      };
      // The text on the row (last error, streak code) goes to the JSON op only: ok clears it.
      const streakCode = pick([null, 'rate_limited']);
      const job = { status: 'running', attempts: input.attempts, crashes: input.crashes, streak: input.streak, streakCode, errorCode: streakCode, errorMessage: streakCode && 'HTTP 429', maxAttempts: input.maxAttempts };
      const fast = core.settleOk(input);
      const json = outcome(() => core.call<{ results: unknown[] }>('settle', { policies: [{ kind: 'k', timeoutMs: 1000 }], batch: [{ now: input.now, seed: 3, policy: 0, job, outcome: { type: 'ok' } }] }).results[0]);
      const refusedByJson = 'error' in (json as object) || 'error' in ((json as { ok: object }).ok ?? {});
      if (fast === null) {
        assert.ok(refusedByJson, `the numeric entry refused what the JSON op accepts: ${JSON.stringify(input)}`);
        refused++;
        continue;
      }
      assert.deepEqual({ ok: { ...fast, streakCode: null, errorCode: null, errorMessage: null, attemptOutcome: 'ok', events: [] } }, json, JSON.stringify(input));
    }
    assert.ok(refused > 100, `the inputs include refusals (${refused})`);
  });
}
