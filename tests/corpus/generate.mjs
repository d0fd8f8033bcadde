#!/usr/bin/env node
// Generates the decision corpus: tests/corpus/<family>.jsonl, one case a line:
//   {"name":…,"family":…,"input":"<exact input text>","expected":"<exact output text>"}
// (`inputBase64` replaces `input` for bytes that are not UTF-8; `inputFill` describes inputs of
// several MiB, see lib.mjs). Inputs come from the readable tables below. `expected` is what the
// NATIVE build says (build/native/postbox-corpus-cli), but many cases also carry a hand-written
// check of key facts from docs/ABI.md, and generation fails when the core disagrees with one.
//
//   node tests/corpus/generate.mjs          check + show what would change (exit 1 if anything would)
//   node tests/corpus/generate.mjs --write  check + rewrite the .jsonl files
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { FAMILIES, corpusFile, inputBytes, runNative } from './lib.mjs';

const write = process.argv.includes('--write');

// ---------------------------------------------------------------------------------------------
// Case collection

const cases = [];
const names = new Set();
function add(family, name, input, check) {
  const full = `${family}/${name}`;
  if (names.has(full)) throw new Error(`duplicate case name ${full}`);
  names.add(full);
  const c = { name, family };
  if (Buffer.isBuffer(input)) {
    const text = input.toString('utf8');
    if (Buffer.from(text, 'utf8').equals(input)) c.input = text;
    else c.inputBase64 = input.toString('base64');
  } else if (typeof input === 'string') {
    c.input = input;
  } else if (input && input.fill !== undefined && input.count !== undefined && input.__fill) {
    const { __fill, ...fill } = input;
    c.inputFill = fill;
  } else {
    c.input = JSON.stringify(input);
  }
  cases.push({ c, check });
}
const fill = (head, filler, count, tail) => ({ __fill: true, head, fill: filler, count, tail });

// ---------------------------------------------------------------------------------------------
// Hand-written checks: each returns a function (output object, output text) that throws on a
// disagreement with docs/ABI.md.

class CheckFailure extends Error {}
function want(cond, what) {
  if (!cond) throw new CheckFailure(what);
}
const isError = (code, messageIncludes) => (o) => {
  want(o.error !== undefined, `an error document with code ${code}`);
  want(o.error.code === code, `error code ${code}, got ${o.error.code}`);
  if (messageIncludes) want(o.error.message.includes(messageIncludes), `error message mentioning ${JSON.stringify(messageIncludes)}`);
};
const fields = (expected) => (o) => {
  for (const [k, v] of Object.entries(expected)) {
    want(JSON.stringify(o[k]) === JSON.stringify(v), `${k} = ${JSON.stringify(v)}, got ${JSON.stringify(o[k])}`);
  }
};
const all = (...checks) => (o, t) => checks.forEach((ch) => ch(o, t));
const exactText = (text) => (_o, t) => want(t === text, `exactly ${text}`);

// ---------------------------------------------------------------------------------------------
// Shared fixtures

const NOW = 1700000000000; // 2023-11-14T22:13:20Z
const MAX_SAFE = 2 ** 53 - 1;
const TWO_53 = '9007199254740992';
const DAY = 86400000;

// Leases per docs/ABI.md (pb_policy, pb_claim): a span S (the timeout, or min(timeout, 3E) with
// heartbeats every E) plus the margin clamp(S, 6 s, 30 s); a third of the margin is the settle reserve.
const marginOf = (span) => Math.min(Math.max(span, 6000), 30000);
const reserveOf = (span) => Math.floor(marginOf(span) / 3);
const spanOf = (timeoutMs, every) => (every !== null && 3 * every < timeoutMs ? 3 * every : timeoutMs);
const leaseOf = (timeoutMs, every) => spanOf(timeoutMs, every) + marginOf(spanOf(timeoutMs, every));
function heartbeatOf(raw) {
  const hb = raw.heartbeat;
  if (hb === true || (hb && typeof hb === 'object' && hb.everyMs === undefined)) return Math.min(Math.max(Math.floor(raw.timeoutMs / 10), 1000), 10000);
  if (hb && typeof hb === 'object') return hb.everyMs;
  return raw.heartbeatMs ?? null;
}

// The normalised policy per docs/ABI.md, computed here independently of the core.
function normPolicy(raw) {
  const retry = raw.retry ?? {};
  const backoff = retry.backoff ?? {};
  const perCode = new Map([
    ['invalid_payload', { streak: 3 }],
    ['timeout', { streak: 5 }],
  ]);
  for (const [code, rule] of Object.entries(retry.perCode ?? {})) perCode.set(code, typeof rule === 'number' ? { streak: rule } : rule);
  const codes = [...perCode.keys()].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  const rules = codes.map((code) => {
    const r = perCode.get(code);
    const rule = {
      streak: r.streak ?? null,
      maxAttempts: r.maxAttempts ?? null,
      maxDelayMs: r.maxDelayMs ?? null,
      onExhaustion: r.onExhaustion ?? 'dead',
    };
    return `${JSON.stringify(code)}:${JSON.stringify(rule)}`;
  });
  const head = {
    kind: raw.kind,
    lane: raw.lane ?? 'default',
    timeoutMs: raw.timeoutMs,
    leaseMs: leaseOf(raw.timeoutMs, heartbeatOf(raw)),
    maxAttempts: retry.maxAttempts ?? 20,
    baseMs: backoff.baseMs ?? 30000,
    maxMs: backoff.maxMs ?? 3600000,
    maxCrashes: retry.maxCrashes ?? 3,
    warnAtStreak: raw.warnAtStreak ?? null,
  };
  const every = heartbeatOf(raw);
  if (every !== null) head.heartbeatMs = every;
  // Flow limits (docs/ABI.md): a rate limit becomes its slots and how long each start holds one.
  if (raw.priority != null) head.priority = raw.priority;
  if (raw.concurrency != null) head.concurrency = raw.concurrency;
  if (raw.tenantConcurrency != null) head.tenantConcurrency = raw.tenantConcurrency;
  if (raw.rateLimit != null) {
    const { starts, perMs, burst = starts } = raw.rateLimit;
    head.rateSlots = burst;
    head.rateHoldMs = Math.ceil((burst * perMs) / starts);
  }
  return `${JSON.stringify(head).slice(0, -1)},"perCode":{${rules.join(',')}}}`;
}
const P = (raw) => JSON.parse(normPolicy(raw));
const basePolicy = P({ kind: 'email.welcome', timeoutMs: 30000 });

// ---------------------------------------------------------------------------------------------
// policy

{
  const ok = (name, raw) => add('policy', name, raw, exactText(normPolicy(raw)));
  ok('defaults', { kind: 'email.welcome', timeoutMs: 30000 });
  ok('lane given', { kind: 'org.export', timeoutMs: 300000, lane: 'bulk' });
  ok('doc example', {
    kind: 'email.welcome', timeoutMs: 30000, lane: 'default',
    retry: { maxAttempts: 20, backoff: { baseMs: 30000, maxMs: 3600000 }, maxCrashes: 3,
      perCode: { timeout: 3, rate_limited: { maxAttempts: 50, maxDelayMs: 600000 }, bounced: { streak: 2, onExhaustion: 'cancel' } } },
    warnAtStreak: null,
  });
  ok('timeoutMs 1', { kind: 'k', timeoutMs: 1 });
  ok('timeoutMs 2000: short margin', { kind: 'k', timeoutMs: 2000 });
  ok('timeoutMs 12000: margin equals timeout', { kind: 'k', timeoutMs: 12000 });
  ok('heartbeat true', { kind: 'k', timeoutMs: 600000, heartbeat: true });
  ok('heartbeat true, short timeout', { kind: 'k', timeoutMs: 5000, heartbeat: true });
  ok('heartbeat everyMs', { kind: 'k', timeoutMs: 60000, heartbeat: { everyMs: 1000 } });
  ok('heartbeat slower than a third of the timeout', { kind: 'k', timeoutMs: 20000, heartbeat: { everyMs: 10000 } });
  ok('heartbeat empty object', { kind: 'k', timeoutMs: 120000, heartbeat: {} });
  ok('heartbeat false', { kind: 'k', timeoutMs: 60000, heartbeat: false });
  ok('heartbeatMs normalised', { kind: 'k', timeoutMs: 60000, heartbeatMs: 2000 });
  add('policy', 'heartbeat everyMs too small', { kind: 'k', timeoutMs: 60000, heartbeat: { everyMs: 999 } }, isError('invalid_policy', 'heartbeat.everyMs'));
  add('policy', 'heartbeat unknown field', { kind: 'k', timeoutMs: 60000, heartbeat: { every: 1000 } }, isError('invalid_policy', 'heartbeat.every'));
  add('policy', 'heartbeat string', { kind: 'k', timeoutMs: 60000, heartbeat: 'yes' }, isError('invalid_policy', 'heartbeat'));
  ok('timeoutMs 600000', { kind: 'k', timeoutMs: 600000 });
  ok('kind 128 bytes', { kind: 'k'.repeat(128), timeoutMs: 1000 });
  ok('kind full charset', { kind: 'AZaz09._:-', timeoutMs: 1000 });
  ok('lane 64 bytes', { kind: 'k', lane: 'l'.repeat(64), timeoutMs: 1000 });
  ok('maxAttempts 1', { kind: 'k', timeoutMs: 1000, retry: { maxAttempts: 1 } });
  ok('maxAttempts 1000', { kind: 'k', timeoutMs: 1000, retry: { maxAttempts: 1000 } });
  ok('maxCrashes 1', { kind: 'k', timeoutMs: 1000, retry: { maxCrashes: 1 } });
  ok('maxCrashes 100', { kind: 'k', timeoutMs: 1000, retry: { maxCrashes: 100 } });
  ok('baseMs equals maxMs', { kind: 'k', timeoutMs: 1000, retry: { backoff: { baseMs: 5000, maxMs: 5000 } } });
  ok('maxMs 7 days', { kind: 'k', timeoutMs: 1000, retry: { backoff: { maxMs: 7 * DAY } } });
  ok('baseMs 0', { kind: 'k', timeoutMs: 1000, retry: { backoff: { baseMs: 0 } } });
  ok('only maxMs lowered above base', { kind: 'k', timeoutMs: 1000, retry: { backoff: { maxMs: 60000 } } });
  ok('perCode number is a streak', { kind: 'k', timeoutMs: 1000, retry: { perCode: { flaky: 4 } } });
  ok('perCode replaces default timeout', { kind: 'k', timeoutMs: 1000, retry: { perCode: { timeout: { maxAttempts: 2 } } } });
  ok('perCode replaces default invalid_payload', { kind: 'k', timeoutMs: 1000, retry: { perCode: { invalid_payload: 1 } } });
  ok('perCode sorted by bytes', { kind: 'k', timeoutMs: 1000, retry: { perCode: { zeta: 1, Alpha: 2, alpha: 3, 'a.b': 4, _x: 5 } } });
  ok('perCode all fields', { kind: 'k', timeoutMs: 1000, retry: { perCode: { bounced: { streak: 2, maxAttempts: 9, maxDelayMs: 0, onExhaustion: 'cancel' } } } });
  ok('perCode onExhaustion dead', { kind: 'k', timeoutMs: 1000, retry: { perCode: { x: { onExhaustion: 'dead' } } } });
  ok('warnAtStreak 2', { kind: 'k', timeoutMs: 1000, warnAtStreak: 2 });
  ok('warnAtStreak 10', { kind: 'k', timeoutMs: 1000, warnAtStreak: 10 });
  ok('empty retry', { kind: 'k', timeoutMs: 1000, retry: {} });
  ok('empty perCode', { kind: 'k', timeoutMs: 1000, retry: { perCode: {} } });

  const bad = (name, raw, code, msg) => add('policy', name, raw, isError(code, msg));
  const E = 'invalid_policy';
  // Validation errors: the code for a definition that is well-formed JSON but breaks a rule.
  const err = (name, raw, msg) => add('policy', name, raw, (o) => {
    want(o.error !== undefined, 'an error document');
    want(o.error.code === E || o.error.code === 'invalid_input', `invalid_policy or invalid_input, got ${o.error.code}`);
    if (msg) want(o.error.message.includes(msg), `message mentioning ${msg}`);
  });
  err('missing kind', { timeoutMs: 1000 }, 'kind');
  err('missing timeoutMs', { kind: 'k' }, 'timeoutMs');
  err('kind empty', { kind: '', timeoutMs: 1000 }, 'kind');
  err('kind 129 bytes', { kind: 'k'.repeat(129), timeoutMs: 1000 }, 'kind');
  err('kind with space', { kind: 'email welcome', timeoutMs: 1000 }, 'kind');
  err('kind with slash', { kind: 'email/welcome', timeoutMs: 1000 }, 'kind');
  err('kind non-ASCII', { kind: 'émail', timeoutMs: 1000 }, 'kind');
  err('kind number', { kind: 5, timeoutMs: 1000 }, 'kind');
  err('kind null', { kind: null, timeoutMs: 1000 }, 'kind');
  err('lane empty', { kind: 'k', lane: '', timeoutMs: 1000 }, 'lane');
  err('lane 65 bytes', { kind: 'k', lane: 'l'.repeat(65), timeoutMs: 1000 }, 'lane');
  err('lane bad charset', { kind: 'k', lane: 'a b', timeoutMs: 1000 }, 'lane');
  err('timeoutMs 0', { kind: 'k', timeoutMs: 0 }, 'timeoutMs');
  err('timeoutMs 600001', { kind: 'k', timeoutMs: 600001 }, 'timeoutMs');
  err('timeoutMs negative', { kind: 'k', timeoutMs: -1 }, 'timeoutMs');
  err('timeoutMs float', '{"kind":"k","timeoutMs":1000.5}', 'timeoutMs');
  err('timeoutMs exponent', '{"kind":"k","timeoutMs":1e3}', 'timeoutMs');
  err('timeoutMs string', { kind: 'k', timeoutMs: '1000' }, 'timeoutMs');
  err('timeoutMs 2^53', `{"kind":"k","timeoutMs":${TWO_53}}`, 'timeoutMs');
  err('maxAttempts 0', { kind: 'k', timeoutMs: 1000, retry: { maxAttempts: 0 } }, 'maxAttempts');
  err('maxAttempts 1001', { kind: 'k', timeoutMs: 1000, retry: { maxAttempts: 1001 } }, 'maxAttempts');
  err('maxCrashes 0', { kind: 'k', timeoutMs: 1000, retry: { maxCrashes: 0 } }, 'maxCrashes');
  err('maxCrashes 101', { kind: 'k', timeoutMs: 1000, retry: { maxCrashes: 101 } }, 'maxCrashes');
  err('baseMs above maxMs', { kind: 'k', timeoutMs: 1000, retry: { backoff: { baseMs: 60000, maxMs: 1000 } } }, 'baseMs');
  err('default baseMs above given maxMs', { kind: 'k', timeoutMs: 1000, retry: { backoff: { maxMs: 1000 } } }, 'baseMs');
  err('maxMs above 7 days', { kind: 'k', timeoutMs: 1000, retry: { backoff: { maxMs: 7 * DAY + 1 } } }, 'maxMs');
  err('backoff unknown field', { kind: 'k', timeoutMs: 1000, retry: { backoff: { factor: 2 } } }, 'factor');
  err('retry unknown field', { kind: 'k', timeoutMs: 1000, retry: { jitter: true } }, 'jitter');
  err('unknown top-level field', { kind: 'k', timeoutMs: 1000, weight: 1 }, 'weight');
  err('retry not an object', { kind: 'k', timeoutMs: 1000, retry: 3 }, 'retry');
  // Flow limits and priority (docs/ABI.md): carried only when set; a rate limit normalised to
  // slots held for ceil(burst x perMs / starts) ms.
  const flow = (o) => ({ kind: 'k', timeoutMs: 1000, ...o });
  add('policy', 'priority 10', flow({ priority: 10 }), fields({ priority: 10 }));
  add('policy', 'priority null reads as none', flow({ priority: null }), (o) => want(o.priority === undefined, 'no priority field'));
  ok('every flow limit', flow({ priority: 2, concurrency: 3, rateLimit: { starts: 10, perMs: 60000, burst: 4 } }));
  err('priority 11', flow({ priority: 11 }), 'priority');
  err('priority negative', flow({ priority: -1 }), 'priority');
  err('priority float', flow({ priority: 1.5 }), 'priority');
  add('policy', 'concurrency 5', flow({ concurrency: 5 }), fields({ concurrency: 5 }));
  add('policy', 'concurrency null reads as none', flow({ concurrency: null }), (o) => want(o.concurrency === undefined, 'no concurrency field'));
  err('concurrency 0', flow({ concurrency: 0 }), 'concurrency');
  err('concurrency 10001', flow({ concurrency: 10001 }), 'concurrency');
  add('policy', 'rateLimit 20 per second', flow({ rateLimit: { starts: 20, perMs: 1000 } }), fields({ rateSlots: 20, rateHoldMs: 1000 }));
  add('policy', 'rateLimit burst 5 of 20 per second', flow({ rateLimit: { starts: 20, perMs: 1000, burst: 5 } }), fields({ rateSlots: 5, rateHoldMs: 250 }));
  add('policy', 'rateLimit hold rounds up', flow({ rateLimit: { starts: 3, perMs: 1000, burst: 1 } }), fields({ rateSlots: 1, rateHoldMs: 334 }));
  add('policy', 'rateLimit null reads as none', flow({ rateLimit: null }), (o) => want(o.rateSlots === undefined, 'no rate fields'));
  err('rateLimit starts 0', flow({ rateLimit: { starts: 0, perMs: 1000 } }), 'starts');
  err('rateLimit perMs 0', flow({ rateLimit: { starts: 1, perMs: 0 } }), 'perMs');
  err('rateLimit perMs above a day', flow({ rateLimit: { starts: 1, perMs: 86400001 } }), 'perMs');
  err('rateLimit burst 10001', flow({ rateLimit: { starts: 1, perMs: 1000, burst: 10001 } }), 'burst');
  err('rateLimit missing perMs', flow({ rateLimit: { starts: 1 } }), 'perMs');
  err('rateLimit unknown field', flow({ rateLimit: { starts: 1, perMs: 1000, window: 1 } }), 'window');
  err('rateLimit not an object', flow({ rateLimit: 20 }), 'rateLimit');
  // A tenant's concurrency: at most the kind's own, when it has one.
  ok('tenantConcurrency with concurrency', flow({ concurrency: 10, tenantConcurrency: 2 }));
  add('policy', 'tenantConcurrency alone', flow({ tenantConcurrency: 3 }), fields({ tenantConcurrency: 3 }));
  add('policy', 'tenantConcurrency equal to concurrency', flow({ concurrency: 4, tenantConcurrency: 4 }), fields({ concurrency: 4, tenantConcurrency: 4 }));
  err('tenantConcurrency above concurrency', flow({ concurrency: 2, tenantConcurrency: 3 }), 'must not exceed concurrency');
  err('tenantConcurrency 0', flow({ tenantConcurrency: 0 }), 'tenantConcurrency');
  err('tenantConcurrency 10001', flow({ tenantConcurrency: 10001 }), 'tenantConcurrency');
  err('perCode not an object', { kind: 'k', timeoutMs: 1000, retry: { perCode: [] } }, 'perCode');
  err('perCode streak 0', { kind: 'k', timeoutMs: 1000, retry: { perCode: { x: 0 } } }, 'perCode.x');
  err('perCode streak object 0', { kind: 'k', timeoutMs: 1000, retry: { perCode: { x: { streak: 0 } } } }, 'streak');
  err('perCode maxAttempts 0', { kind: 'k', timeoutMs: 1000, retry: { perCode: { x: { maxAttempts: 0 } } } }, 'maxAttempts');
  err('perCode maxDelayMs negative', { kind: 'k', timeoutMs: 1000, retry: { perCode: { x: { maxDelayMs: -1 } } } }, 'maxDelayMs');
  err('perCode onExhaustion unknown', { kind: 'k', timeoutMs: 1000, retry: { perCode: { x: { onExhaustion: 'retry' } } } }, 'onExhaustion');
  err('perCode unknown field', { kind: 'k', timeoutMs: 1000, retry: { perCode: { x: { delay: 1 } } } }, 'delay');
  err('perCode rule a string', { kind: 'k', timeoutMs: 1000, retry: { perCode: { x: 'often' } } });
  err('perCode code bad charset', { kind: 'k', timeoutMs: 1000, retry: { perCode: { 'a b': 1 } } });
  err('perCode code empty', { kind: 'k', timeoutMs: 1000, retry: { perCode: { '': 1 } } });
  err('perCode 1000 codes', { kind: 'k', timeoutMs: 1000, retry: { perCode: Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`c${i}`, 1])) } });
  err('warnAtStreak 1', { kind: 'k', timeoutMs: 1000, warnAtStreak: 1 }, 'warnAtStreak');
  err('warnAtStreak 0', { kind: 'k', timeoutMs: 1000, warnAtStreak: 0 }, 'warnAtStreak');
  err('warnAtStreak string', { kind: 'k', timeoutMs: 1000, warnAtStreak: '3' }, 'warnAtStreak');
  bad('top-level array', '[]', 'invalid_input');
}

// ---------------------------------------------------------------------------------------------
// settle

const job = (o = {}) => ({ status: 'running', attempts: 0, crashes: 0, streakCode: null, streak: 0, ...o });
const settle = (outcome, j = {}, policy = basePolicy, extra = {}) => ({ now: NOW, seed: 42, policy, job: job(j), outcome, ...extra });
const backoffRange = (attempts, baseMs = 30000, maxMs = 3600000) => {
  const cap = Math.min(maxMs, baseMs * 2 ** (attempts - 1));
  return [NOW + Math.floor(cap / 2), NOW + cap];
};
const dueIn = ([lo, hi]) => (o) => want(o.dueAt >= lo && o.dueAt <= hi, `dueAt in [${lo}, ${hi}], got ${o.dueAt}`);
{
  const s = (name, input, check) => add('settle', name, input, check);
  // op hooks: the outcomes that settle without hooks, and the status a commit runs on.
  s('hooks rules', { op: 'hooks' }, exactText('{"withoutHooks":["claim_late","released"],"commitStatus":"succeeded"}'));
  s('hooks unknown op', { op: 'purge' }, (r) => want(r.error?.code === 'unknown_op', 'unknown_op'));
  s('ok', settle({ type: 'ok' }, { attempts: 2, crashes: 1, streakCode: 'x', streak: 2 }),
    fields({ status: 'succeeded', dueAt: null, attempts: 3, crashes: 0, streak: 0, errorCode: null, errorMessage: null, finished: true, charged: true, attemptOutcome: 'ok', events: [] }));
  s('ok first attempt', settle({ type: 'ok', message: 'done' }), fields({ status: 'succeeded', attempts: 1, finished: true }));
  s('cancel with reason', settle({ type: 'cancel', reason: 'user_deleted' }, { attempts: 1 }),
    fields({ status: 'cancelled', attempts: 2, errorCode: 'user_deleted', finished: true, charged: true, attemptOutcome: 'cancel' }));
  s('no outcome', settle({ type: 'none' }, { attempts: 1 }),
    fields({ status: 'retrying', attempts: 2, errorCode: 'invalid_outcome', errorMessage: 'handler returned no outcome: return ok(), retry(), fail() or cancel()', charged: true, attemptOutcome: 'retry' }));
  s('attempt number of a charged outcome', settle({ type: 'retry' }, { attempts: 4 }), fields({ attempts: 5, attempt: 5 }));
  s('attempt number of a crash', settle({ type: 'crash' }, { attempts: 4, crashes: 1 }), fields({ attempts: 4, attempt: 5 }));
  s('thrown unclassified', settle({ type: 'thrown', message: 'boom' }), fields({ status: 'retrying', attempts: 1, errorCode: 'unexpected', errorMessage: 'boom', attemptOutcome: 'retry' }));
  s('thrown ignores a code', settle({ type: 'thrown', code: 'x', message: 'boom' }), fields({ errorCode: 'unexpected' }));
  s('commit unsupported', settle({ type: 'commit_unsupported' }), fields({ status: 'dead', attempts: 1, errorCode: 'commit_unsupported', attemptOutcome: 'fail' }));
  s('commit unsupported ignores code and message', settle({ type: 'commit_unsupported', code: 'x', message: 'y' }), fields({ errorCode: 'commit_unsupported' }));
  s('cancel default reason', settle({ type: 'cancel' }), fields({ status: 'cancelled', errorCode: 'cancelled', finished: true }));
  s('cancel with message', settle({ type: 'cancel', reason: 'gdpr', message: 'erased' }), fields({ status: 'cancelled', errorMessage: 'erased' }));
  s('fail', settle({ type: 'fail', code: 'bad_address', message: 'no such mailbox' }, { attempts: 4 }),
    fields({ status: 'dead', attempts: 5, errorCode: 'bad_address', errorMessage: 'no such mailbox', finished: true,
      events: [{ type: 'dead_letter', code: 'bad_address', reason: 'failed' }] }));
  s('fail without code', settle({ type: 'fail' }), fields({ status: 'dead', finished: true }));
  s('retry after', settle({ type: 'retry', code: 'rate_limited', after: 5000, message: '429' }, { attempts: 2, streakCode: 'rate_limited', streak: 1 }),
    fields({ status: 'retrying', dueAt: NOW + 5000, attempts: 3, crashes: 0, streakCode: 'rate_limited', streak: 2, errorCode: 'rate_limited', errorMessage: '429', finished: false, charged: true, attemptOutcome: 'retry', events: [] }));
  s('retry after 0', settle({ type: 'retry', code: 'x', after: 0 }), fields({ status: 'retrying', dueAt: NOW }));
  s('retry without code', settle({ type: 'retry' }), fields({ status: 'retrying', errorCode: 'retry', streakCode: 'retry', streak: 1 }));
  s('retry resets crashes', settle({ type: 'retry', code: 'x', after: 1 }, { crashes: 2 }), fields({ crashes: 0 }));
  s('retry other code resets streak', settle({ type: 'retry', code: 'b', after: 1 }, { attempts: 3, streakCode: 'a', streak: 4 }), fields({ streak: 1, streakCode: 'b' }));
  s('retry same code grows streak', settle({ type: 'retry', code: 'a', after: 1 }, { attempts: 3, streakCode: 'a', streak: 4 }), fields({ streak: 5 }));
  s('timeout default code', settle({ type: 'timeout' }, { attempts: 1 }), all(fields({ status: 'retrying', errorCode: 'timeout', streak: 1, attemptOutcome: 'timeout' }), dueIn(backoffRange(2))));
  s('hook_failed', settle({ type: 'hook_failed' }), fields({ status: 'retrying', errorCode: 'hook_failed', attemptOutcome: 'hook_failed' }));
  s('invalid_payload', settle({ type: 'invalid_payload' }), fields({ status: 'retrying', errorCode: 'invalid_payload', attemptOutcome: 'invalid_payload' }));
  s('timeout with explicit code', settle({ type: 'timeout', code: 'upstream_timeout' }), fields({ errorCode: 'upstream_timeout' }));
  // A failed settle write: what the shim saw decides retry, hook_failed or give up.
  const failure = (f) => ({ failure: f });
  s('failure hook on live session', failure({ part: 'hook', sessionBroken: false, sqlState: null, tries: 1 }), fields({ next: 'hook_failed' }));
  s('failure hook unique violation', failure({ part: 'hook', sessionBroken: false, sqlState: '23505', tries: 1 }), fields({ next: 'hook_failed' }));
  // One row's data refused (class 22 or 23) on a live session: split to the row, then replace its text.
  s('failure data split', failure({ part: 'write', sessionBroken: false, sqlState: '22021', tries: 1, rows: 40 }), fields({ next: 'split' }));
  s('failure check split', failure({ part: 'write', sessionBroken: false, sqlState: '23514', tries: 1, rows: 2 }), fields({ next: 'split' }));
  s('failure data one row sanitize', failure({ part: 'write', sessionBroken: false, sqlState: '22P05', tries: 1, rows: 1 }),
    fields({ next: 'sanitize', errorMessage: "the attempt's error text was refused by the database (SQLSTATE 22P05) and replaced by this note" }));
  s('failure data sanitized give up', failure({ part: 'write', sessionBroken: false, sqlState: '22021', tries: 1, rows: 1, sanitized: true }), fields({ next: 'give_up' }));
  s('failure data broken session retry', failure({ part: 'write', sessionBroken: true, sqlState: '22021', tries: 1, rows: 40 }), fields({ next: 'retry' }));
  s('failure lock timeout retry whole', failure({ part: 'write', sessionBroken: false, sqlState: '55P03', tries: 1, rows: 40 }), fields({ next: 'retry' }));
  s('failure rows zero', failure({ part: 'write', tries: 1, rows: 0 }), isError('invalid_input', 'rows'));
  s('failure hook backend terminated', failure({ part: 'hook', sessionBroken: false, sqlState: '57P01', tries: 1 }), fields({ next: 'retry' }));
  s('failure hook connection exception', failure({ part: 'hook', sqlState: '08006', tries: 1 }), fields({ next: 'retry' }));
  s('failure hook session broken', failure({ part: 'hook', sessionBroken: true, tries: 1 }), fields({ next: 'retry' }));
  s('failure hook query cancelled', failure({ part: 'hook', sqlState: '57014', tries: 1 }), fields({ next: 'hook_failed' }));
  s('failure write first try', failure({ part: 'write', sessionBroken: true, tries: 1 }), fields({ next: 'retry' }));
  s('failure write second try gives up', failure({ part: 'write', sessionBroken: true, tries: 2 }), fields({ next: 'give_up' }));
  s('failure hook lost twice gives up', failure({ part: 'hook', sqlState: '57P01', tries: 2 }), fields({ next: 'give_up' }));
  s('failure schedule backend terminated', failure({ part: 'schedule', sqlState: '57P01', tries: 1 }), fields({ next: 'retry' }));
  s('failure schedule broken second try', failure({ part: 'schedule', sessionBroken: true, tries: 2 }), fields({ next: 'retry' }));
  s('failure schedule lost third try gives up', failure({ part: 'schedule', sqlState: '08006', tries: 3 }), fields({ next: 'give_up' }));
  s('failure schedule user error fails', failure({ part: 'schedule', sessionBroken: false, sqlState: null, tries: 1 }), fields({ next: 'fail' }));
  s('failure schedule unique violation fails', failure({ part: 'schedule', sqlState: '23505', tries: 2 }), fields({ next: 'fail' }));
  s('failure schedule query cancelled fails', failure({ part: 'schedule', sqlState: '57014', tries: 1 }), fields({ next: 'fail' }));
  s('failure unknown part', failure({ part: 'commit', tries: 1 }), isError('invalid_input', 'failure.part'));
  s('failure missing tries', failure({ part: 'hook' }), isError('invalid_input', 'failure.tries'));
  s('failure tries 0', failure({ part: 'hook', tries: 0 }), isError('invalid_input', 'failure.tries'));
  s('failure sqlState too long', failure({ part: 'hook', sqlState: '57P011', tries: 1 }), isError('invalid_input', 'failure.sqlState'));
  s('failure not an object', failure([1]), isError('invalid_input', 'failure'));
  // Budgets.
  s('attempts budget not yet', settle({ type: 'retry', code: 'x', after: 1 }, { attempts: 18 }), fields({ status: 'retrying', attempts: 19 }));
  s('attempts budget exhausted', settle({ type: 'retry', code: 'x' }, { attempts: 19 }),
    fields({ status: 'dead', attempts: 20, finished: true, dueAt: null, events: [{ type: 'dead_letter', code: 'x', reason: 'attempts_exhausted' }] }));
  s('attempts beyond budget', settle({ type: 'retry', code: 'x' }, { attempts: 40 }), fields({ status: 'dead', attempts: 41 }));
  s('maxAttempts 1 dies at once', settle({ type: 'retry', code: 'x' }, {}, P({ kind: 'k', timeoutMs: 1000, retry: { maxAttempts: 1 } })), fields({ status: 'dead', attempts: 1 }));
  const rl = P({ kind: 'k', timeoutMs: 1000, retry: { perCode: { rate_limited: { maxAttempts: 50, maxDelayMs: 600000 }, bounced: { streak: 2, onExhaustion: 'cancel' }, soft: { maxAttempts: 3 } } } });
  s('perCode budget above default', settle({ type: 'retry', code: 'rate_limited', after: 1 }, { attempts: 30 }, rl), fields({ status: 'retrying', attempts: 31 }));
  s('perCode budget exhausted', settle({ type: 'retry', code: 'rate_limited' }, { attempts: 49 }, rl),
    fields({ status: 'dead', events: [{ type: 'dead_letter', code: 'rate_limited', reason: 'attempts_exhausted' }] }));
  s('perCode budget below default', settle({ type: 'retry', code: 'soft' }, { attempts: 2 }, rl), fields({ status: 'dead', attempts: 3 }));
  s('other code uses default budget', settle({ type: 'retry', code: 'other', after: 1 }, { attempts: 2 }, rl), fields({ status: 'retrying' }));
  // A job's own budget (set at enqueue) replaces its kind's, not a code's.
  s('job maxAttempts above kind', settle({ type: 'retry', code: 'x', after: 1 }, { attempts: 25, maxAttempts: 30 }), fields({ status: 'retrying', attempts: 26 }));
  s('job maxAttempts exhausted', settle({ type: 'retry', code: 'x' }, { attempts: 1, maxAttempts: 2 }),
    fields({ status: 'dead', attempts: 2, events: [{ type: 'dead_letter', code: 'x', reason: 'attempts_exhausted' }] }));
  s('job maxAttempts null is the kind', settle({ type: 'retry', code: 'x' }, { attempts: 19, maxAttempts: null }), fields({ status: 'dead', attempts: 20 }));
  s('job maxAttempts under perCode', settle({ type: 'retry', code: 'rate_limited', after: 1 }, { attempts: 30, maxAttempts: 2 }, rl), fields({ status: 'retrying' }));
  s('job maxAttempts 0', settle({ type: 'ok' }, { maxAttempts: 0 }), isError('invalid_input', 'job.maxAttempts'));
  s('job maxAttempts string', settle({ type: 'ok' }, { maxAttempts: '3' }), isError('invalid_input', 'job.maxAttempts'));
  s('onExhaustion cancel by streak', settle({ type: 'retry', code: 'bounced' }, { attempts: 1, streakCode: 'bounced', streak: 1 }, rl),
    fields({ status: 'cancelled', streak: 2, finished: true, events: [{ type: 'cancelled', code: 'bounced', reason: 'streak_exhausted' }] }));
  s('onExhaustion cancel first bounce retries', settle({ type: 'retry', code: 'bounced', after: 10 }, {}, rl), fields({ status: 'retrying', streak: 1 }));
  s('onExhaustion cancel streak broken by other code', settle({ type: 'retry', code: 'bounced', after: 10 }, { attempts: 2, streakCode: 'x', streak: 5 }, rl), fields({ status: 'retrying', streak: 1 }));
  const cancelBudget = P({ kind: 'k', timeoutMs: 1000, retry: { perCode: { gone: { maxAttempts: 2, onExhaustion: 'cancel' } } } });
  s('onExhaustion cancel by attempts', settle({ type: 'retry', code: 'gone' }, { attempts: 1 }, cancelBudget),
    fields({ status: 'cancelled', events: [{ type: 'cancelled', code: 'gone', reason: 'attempts_exhausted' }] }));
  // Default streak caps: timeout 5, invalid_payload 3.
  s('timeout streak 4 retries', settle({ type: 'timeout' }, { attempts: 3, streakCode: 'timeout', streak: 3 }), fields({ status: 'retrying', streak: 4 }));
  s('timeout streak 5 dead', settle({ type: 'timeout' }, { attempts: 4, streakCode: 'timeout', streak: 4 }),
    fields({ status: 'dead', streak: 5, events: [{ type: 'dead_letter', code: 'timeout', reason: 'streak_exhausted' }] }));
  s('invalid_payload streak 3 dead', settle({ type: 'invalid_payload' }, { attempts: 2, streakCode: 'invalid_payload', streak: 2 }),
    fields({ status: 'dead', streak: 3, events: [{ type: 'dead_letter', code: 'invalid_payload', reason: 'streak_exhausted' }] }));
  s('invalid_payload streak 2 retries', settle({ type: 'invalid_payload' }, { attempts: 1, streakCode: 'invalid_payload', streak: 1 }), fields({ status: 'retrying', streak: 2 }));
  s('user timeout rule replaces default cap', settle({ type: 'timeout' }, { attempts: 4, streakCode: 'timeout', streak: 4 }, P({ kind: 'k', timeoutMs: 1000, retry: { perCode: { timeout: 10 } } })), fields({ status: 'retrying', streak: 5 }));
  s('no streak rule for plain retry', settle({ type: 'retry', code: 'x', after: 1 }, { attempts: 10, streakCode: 'x', streak: 10 }), fields({ status: 'retrying', streak: 11 }));
  s('attempts exhausted wins over streak', settle({ type: 'timeout' }, { attempts: 19, streakCode: 'timeout', streak: 4 }),
    fields({ status: 'dead', events: [{ type: 'dead_letter', code: 'timeout', reason: 'attempts_exhausted' }] }));
  // warnAtStreak.
  const warn3 = P({ kind: 'k', timeoutMs: 1000, warnAtStreak: 3 });
  s('warnAtStreak reached', settle({ type: 'retry', code: 'x', after: 1 }, { attempts: 2, streakCode: 'x', streak: 2 }, warn3),
    fields({ status: 'retrying', streak: 3, events: [{ type: 'streak_warning', code: 'x', streak: 3 }] }));
  s('warnAtStreak below', settle({ type: 'retry', code: 'x', after: 1 }, { attempts: 1, streakCode: 'x', streak: 1 }, warn3), fields({ events: [] }));
  s('warnAtStreak passed', settle({ type: 'retry', code: 'x', after: 1 }, { attempts: 3, streakCode: 'x', streak: 3 }, warn3), fields({ streak: 4, events: [] }));
  s('warnAtStreak with streak death', settle({ type: 'invalid_payload' }, { attempts: 2, streakCode: 'invalid_payload', streak: 2 }, warn3), fields({ status: 'dead', streak: 3 }));
  s('warnAtStreak null never warns', settle({ type: 'retry', code: 'x', after: 1 }, { attempts: 2, streakCode: 'x', streak: 2 }), fields({ events: [] }));
  // Crashes.
  s('crash first', settle({ type: 'crash' }, { attempts: 2, streakCode: 'x', streak: 1 }),
    all(fields({ status: 'retrying', attempts: 2, crashes: 1, streakCode: 'x', streak: 1, charged: false, finished: false, attemptOutcome: 'crash', events: [] }), dueIn(backoffRange(1))));
  s('crash second', settle({ type: 'crash' }, { attempts: 2, crashes: 1 }), all(fields({ status: 'retrying', crashes: 2 }), dueIn(backoffRange(2))));
  s('crash_loop at maxCrashes', settle({ type: 'crash' }, { attempts: 2, crashes: 2 }),
    fields({ status: 'dead', dueAt: null, attempts: 2, crashes: 3, errorCode: 'crash_loop', finished: true, charged: false,
      events: [{ type: 'crash_loop', crashes: 3 }, { type: 'dead_letter', code: 'crash_loop', reason: 'crash_loop' }] }));
  s('crash_loop maxCrashes 1', settle({ type: 'crash' }, {}, P({ kind: 'k', timeoutMs: 1000, retry: { maxCrashes: 1 } })), fields({ status: 'dead', crashes: 1, errorCode: 'crash_loop' }));
  s('crash maxCrashes 100', settle({ type: 'crash' }, { crashes: 50 }, P({ kind: 'k', timeoutMs: 1000, retry: { maxCrashes: 100 } })), fields({ status: 'retrying', crashes: 51 }));
  s('crash with message', settle({ type: 'crash', message: 'isolate died' }), fields({ status: 'retrying' }));
  // released: claimed ahead, never started.
  s('released fresh job', settle({ type: 'released' }),
    fields({ status: 'pending', dueAt: NOW, attempts: 0, charged: false, finished: false, attemptOutcome: 'released', events: [] }));
  s('released retried job keeps counters', settle({ type: 'released' }, { attempts: 2, crashes: 1, streakCode: 'x', streak: 2, errorCode: 'x', errorMessage: 'boom' }),
    fields({ status: 'retrying', dueAt: NOW, attempts: 2, crashes: 1, streak: 2, errorCode: 'x', errorMessage: 'boom', charged: false }));
  // claim_late.
  s('claim_late fresh job', settle({ type: 'claim_late' }),
    fields({ status: 'pending', dueAt: NOW + 5000, attempts: 0, crashes: 0, charged: false, finished: false, attemptOutcome: 'claim_late', errorCode: null, events: [] }));
  s('claim_late retried job keeps error', settle({ type: 'claim_late' }, { attempts: 3, crashes: 1, streakCode: 'x', streak: 2, errorCode: 'x', errorMessage: 'boom' }),
    fields({ status: 'retrying', dueAt: NOW + 5000, attempts: 3, crashes: 1, streak: 2, errorCode: 'x', errorMessage: 'boom', charged: false }));
  // Backoff and jitter.
  for (const seed of [0, 1, 7, 42, 4294967295]) {
    for (const attempts of [0, 3, 12]) {
      const j = { attempts };
      s(`backoff seed ${seed} attempt ${attempts + 1}`, { ...settle({ type: 'retry', code: 'x' }, j), seed }, dueIn(backoffRange(attempts + 1)));
    }
  }
  s('backoff capped at maxMs', settle({ type: 'retry', code: 'x' }, { attempts: 15 }), dueIn([NOW + 1800000, NOW + 3600000]));
  s('backoff base 0', settle({ type: 'retry', code: 'x' }, { attempts: 4 }, P({ kind: 'k', timeoutMs: 1000, retry: { backoff: { baseMs: 0, maxMs: 0 } } })), fields({ dueAt: NOW }));
  s('backoff small base', settle({ type: 'retry', code: 'x' }, { attempts: 0 }, P({ kind: 'k', timeoutMs: 1000, retry: { backoff: { baseMs: 1, maxMs: 1000 } } })), dueIn([NOW, NOW + 1]));
  s('backoff huge attempt count', settle({ type: 'retry', code: 'x' }, { attempts: 900 }, P({ kind: 'k', timeoutMs: 1000, retry: { maxAttempts: 1000 } })), dueIn([NOW + 1800000, NOW + 3600000]));
  s('same seed same delay a', { ...settle({ type: 'retry', code: 'x' }, { attempts: 5 }), seed: 123456 });
  s('same seed same delay b', { ...settle({ type: 'retry', code: 'y' }, { attempts: 5 }), seed: 123456 });
  // after + maxDelayMs.
  s('after capped by maxDelayMs', settle({ type: 'retry', code: 'rate_limited', after: 900000 }, { attempts: 1 }, rl), fields({ dueAt: NOW + 600000 }));
  s('after under maxDelayMs', settle({ type: 'retry', code: 'rate_limited', after: 1000 }, { attempts: 1 }, rl), fields({ dueAt: NOW + 1000 }));
  s('backoff capped by maxDelayMs', settle({ type: 'retry', code: 'slow' }, { attempts: 10 }, P({ kind: 'k', timeoutMs: 1000, retry: { perCode: { slow: { maxDelayMs: 1000 } } } })), fields({ dueAt: NOW + 1000 }));
  s('maxDelayMs 0', settle({ type: 'retry', code: 'now', after: 5000 }, {}, P({ kind: 'k', timeoutMs: 1000, retry: { perCode: { now: { maxDelayMs: 0 } } } })), fields({ dueAt: NOW }));
  s('after huge', settle({ type: 'retry', code: 'x', after: 10 * 365 * DAY }), fields({ status: 'retrying', dueAt: NOW + 10 * 365 * DAY }));
  // Messages.
  s('message truncated to 2000 bytes', settle({ type: 'retry', code: 'x', after: 1, message: 'm'.repeat(2500) }), (o) => want(o.errorMessage.length === 2000, 'errorMessage of 2000 bytes'));
  s('message truncated on a UTF-8 boundary', settle({ type: 'fail', code: 'x', message: 'a' + 'é'.repeat(1200) }),
    (o) => want(Buffer.byteLength(o.errorMessage) <= 2000 && !o.errorMessage.includes('\uFFFD'), 'at most 2000 bytes of whole characters'));
  s('message with escapes', settle({ type: 'fail', code: 'x', message: 'line1\nline2\t"q"\\ \u0001 \u2028' }), fields({ errorMessage: 'line1\nline2\t"q"\\ \u0001 \u2028' }));
  s('message null', settle({ type: 'fail', code: 'x', message: null }), fields({ errorMessage: null }));
  // A malformed handler outcome is the handler's fault: retry invalid_outcome, never a refusal
  // that would fail the settlements decided with it.
  const badOutcome = (field) => fields({ status: 'retrying', errorCode: 'invalid_outcome', errorMessage: `handler outcome's ${field} must be ${field === 'after' ? 'a whole number of ms from 0 to 10 years' : 'a string of 1 to 128 bytes without control characters'}` });
  s('empty code', settle({ type: 'retry', code: '' }), badOutcome('code'));
  s('empty reason', settle({ type: 'cancel', reason: '' }), badOutcome('reason'));
  s('code with U+0000', settle({ type: 'fail', code: 'a\u0000b' }), badOutcome('code'));
  s('code with a newline', settle({ type: 'retry', code: 'a\nb' }), badOutcome('code'));
  s('code of 129 bytes', settle({ type: 'fail', code: 'c'.repeat(129) }), badOutcome('code'));
  s('code not a string', settle({ type: 'fail', code: 7 }), badOutcome('code'));
  s('after negative', settle({ type: 'retry', code: 'x', after: -5 }), badOutcome('after'));
  s('after float', settle({ type: 'retry', code: 'x', after: 0.5 }), badOutcome('after'));
  // Error text is made storable: U+0000 and a lone surrogate become U+FFFD.
  s('message with U+0000', settle({ type: 'thrown', message: 'bad\u0000byte' }), fields({ errorCode: 'unexpected', errorMessage: 'bad\uFFFDbyte' }));
  s('message with a lone surrogate', settle({ type: 'thrown', message: 'half \ud800 pair' }), fields({ errorMessage: 'half \uFFFD pair' }));
  s('message of 1.5 MB is cut, not refused', settle({ type: 'thrown', message: 'm'.repeat(1_500_000) }), (o) => want(o.errorMessage.length === 2000, 'errorMessage of 2000 bytes'));
  // Not running and validation.
  for (const st of ['pending', 'retrying', 'succeeded', 'dead', 'cancelled', 'bogus']) {
    s(`job ${st} is not running`, settle({ type: 'ok' }, { status: st }), isError('invalid_input', 'job is not running'));
  }
  const v = (name, input, msg) => s(name, input, isError('invalid_input', msg));
  v('missing now', (({ now, ...r }) => r)(settle({ type: 'ok' })), 'now');
  v('missing policy', (({ policy, ...r }) => r)(settle({ type: 'ok' })), 'policy');
  v('missing job', (({ job: _j, ...r }) => r)(settle({ type: 'ok' })), 'job');
  v('missing outcome', (({ outcome, ...r }) => r)(settle({ type: 'ok' })), 'outcome');
  v('missing job status', { ...settle({ type: 'ok' }), job: { attempts: 0 } }, 'status');
  v('missing job attempts', { ...settle({ type: 'ok' }), job: { status: 'running' } }, 'attempts');
  v('missing outcome type', settle({ code: 'x' }), 'type');
  v('unknown outcome type', settle({ type: 'explode' }), 'type');
  v('now float', { ...settle({ type: 'ok' }), now: 1.5 }, 'now');
  v('now negative', { ...settle({ type: 'ok' }), now: -1 }, 'now');
  v('now 2^53', JSON.stringify(settle({ type: 'ok' })).replace(`"now":${NOW}`, `"now":${TWO_53}`), 'now');
  s('now 2^53-1', { ...settle({ type: 'claim_late' }), now: MAX_SAFE });
  v('now string', { ...settle({ type: 'ok' }), now: String(NOW) }, 'now');
  v('seed negative', { ...settle({ type: 'ok' }), seed: -1 }, 'seed');
  v('seed above uint32', { ...settle({ type: 'ok' }), seed: 4294967296 }, 'seed');
  v('attempts negative', settle({ type: 'ok' }, { attempts: -1 }), 'attempts');
  v('attempts float', settle({ type: 'ok' }, { attempts: 1.5 }), 'attempts');
  v('job not an object', { ...settle({ type: 'ok' }), job: 'running' }, 'job');
  v('outcome not an object', { ...settle({ type: 'ok' }), outcome: ['ok'] }, 'outcome');
  s('raw policy is normalised', settle({ type: 'retry', code: 'x' }, { attempts: 19 }, { kind: 'k', timeoutMs: 1000 }), fields({ status: 'dead' }));
  s('invalid policy', settle({ type: 'ok' }, {}, { kind: 'k', timeoutMs: 0 }), (o) => want(o.error && ['invalid_policy', 'invalid_input'].includes(o.error.code), 'a policy error'));
  // Batch.
  s('batch of three', { batch: [settle({ type: 'ok' }), settle({ type: 'fail', code: 'x' }, { status: 'dead' }), settle({ type: 'retry', code: 'x', after: 10 })] },
    (o) => {
      want(o.results.length === 3, 'three results');
      want(o.results[0].status === 'succeeded', 'first succeeded');
      want(o.results[1].error.code === 'invalid_input', 'second an error');
      want(o.results[2].dueAt === NOW + 10, 'third due in 10 ms');
    });
  s('batch empty', { batch: [] }, exactText('{"results":[]}'));
  // Small items keep the file small: a raw policy, a minimal job.
  const tiny = (i) => ({ now: i, seed: 0, policy: { kind: 'k', timeoutMs: 1 }, job: { status: 'running', attempts: 0 }, outcome: { type: 'claim_late' } });
  s('batch 1000 items', { batch: Array.from({ length: 1000 }, (_, i) => tiny(i)) }, (o) => want(o.results.length === 1000 && o.results[999].dueAt === 999 + 5000, '1000 results in order'));
  v('batch 1001 items', { batch: Array.from({ length: 1001 }, (_, i) => tiny(i)) }, 'batch');
  s('batch not an array', { batch: {} }, (o) => want(o.error?.code === 'invalid_input', 'invalid_input'));
  s('batch item not an object', { batch: [1] }, (o) => want(o.results?.[0]?.error || o.error, 'an error for the item'));
}

// ---------------------------------------------------------------------------------------------
// claim

{
  const pol = [
    P({ kind: 'email.welcome', timeoutMs: 30000 }),
    P({ kind: 'crm.sync', timeoutMs: 60000 }),
    P({ kind: 'webhook.send', timeoutMs: 10000 }),
    P({ kind: 'org.export', timeoutMs: 300000, lane: 'bulk' }),
    P({ kind: 'pdf.render', timeoutMs: 120000, lane: 'bulk' }),
  ];
  const plan = (o) => ({ op: 'plan', now: NOW, deadlineAt: NOW + 840000, lane: 'default', concurrency: 8, maxBatch: 100, policies: pol, version: null, target: null, ...o });
  const c = (name, input, check) => add('claim', name, input, check);
  c('plan default lane', plan({}), fields({ limit: 8, kinds: ['email.welcome', 'crm.sync', 'webhook.send'].sort(), targetOnly: false, versionCutoff: null }));
  c('plan bulk lane', plan({ lane: 'bulk' }), (o) => want(o.kinds.length === 2 && o.limit === 8, 'two bulk kinds'));
  c('plan leaseMs parallel to kinds', plan({}), (o) => o.kinds.forEach((k, i) => want(o.leaseMs[i] === pol.find((p) => p.kind === k).leaseMs, `leaseMs of ${k}`)));
  c('plan maxBatch below concurrency', plan({ maxBatch: 3 }), fields({ limit: 3 }));
  c('plan concurrency below maxBatch', plan({ concurrency: 2, maxBatch: 50 }), fields({ limit: 2 }));
  c('plan deadline fits some kinds', plan({ deadlineAt: NOW + 30000 }), fields({ kinds: ['email.welcome', 'webhook.send'] }));
  c('plan deadline exactly timeout', plan({ deadlineAt: NOW + 10000 }), fields({ kinds: ['webhook.send'] }));
  c('plan deadline fits nothing', plan({ deadlineAt: NOW + 9999 }), fields({ limit: 0, kinds: [] }));
  c('plan deadline in the past', plan({ deadlineAt: NOW - 1 }), fields({ limit: 0 }));
  c('plan version cutoff', plan({ version: { timestamp: 1699999999000 } }), fields({ versionCutoff: 1699999999000 }));
  c('plan version extra fields ignored', plan({ version: { id: 'v1', timestamp: 5 } }), fields({ versionCutoff: 5 }));
  c('plan target in lane', plan({ target: { id: '0b6f5c3e-2a4d-4c1f-9e8b-7d6a5f4e3c2b', kind: 'crm.sync' } }), fields({ limit: 1, targetOnly: true }));
  c('plan target other lane', plan({ target: { id: '0b6f5c3e-2a4d-4c1f-9e8b-7d6a5f4e3c2b', kind: 'org.export' } }), fields({ limit: 0 }));
  c('plan target unregistered', plan({ target: { id: '0b6f5c3e-2a4d-4c1f-9e8b-7d6a5f4e3c2b', kind: 'nope' } }), fields({ limit: 0 }));
  c('plan target too slow for deadline', plan({ deadlineAt: NOW + 20000, target: { id: '0b6f5c3e-2a4d-4c1f-9e8b-7d6a5f4e3c2b', kind: 'crm.sync' } }), fields({ limit: 0 }));
  c('plan unknown lane', plan({ lane: 'ghost' }), fields({ limit: 0, kinds: [] }));
  c('plan no policies', plan({ policies: [] }), fields({ limit: 0 }));
  c('plan lane defaults', (({ lane, ...r }) => r)(plan({})), fields({ limit: 8 }));
  c('plan concurrency 0', plan({ concurrency: 0 }));
  c('plan raw policies', plan({ policies: [{ kind: 'a', timeoutMs: 1000 }] }));
  c('plan duplicate kind', plan({ policies: [pol[0], pol[0]] }), (o) => want(o.error, 'an error'));
  c('plan missing now', (({ now, ...r }) => r)(plan({})), isError('invalid_input', 'now'));
  c('plan missing policies', (({ policies, ...r }) => r)(plan({})), isError('invalid_input', 'policies'));
  c('plan missing concurrency', (({ concurrency, ...r }) => r)(plan({})), isError('invalid_input', 'concurrency'));
  c('plan bad target id', plan({ target: { id: 'nope', kind: 'crm.sync' } }));
  c('plan target missing kind', plan({ target: { id: '0b6f5c3e-2a4d-4c1f-9e8b-7d6a5f4e3c2b' } }), isError('invalid_input', 'kind'));
  c('plan version missing timestamp', plan({ version: {} }), isError('invalid_input', 'timestamp'));
  c('plan bad lane', plan({ lane: 'a b' }));
  const admit = (o) => ({ op: 'admit', now: NOW, deadlineAt: NOW + 840000, leaseExpiresAt: NOW + 60000, timeoutMs: 30000, ...o });
  // start iff now + S <= leaseExpiresAt - R(S) (S the span: the timeout, or min(timeout, 3E) with
  // heartbeats every E) and now + timeoutMs <= deadlineAt (docs/ABI.md, pb_claim admit).
  const admitCase = (name, o) => {
    const a = admit(o);
    const every = a.heartbeatMs ?? null;
    const span = spanOf(a.timeoutMs, every);
    const stopAt = a.leaseExpiresAt - reserveOf(span);
    const leaseOk = a.now + span <= stopAt;
    // Refused for its lease: claim_late; refused only for the invocation's deadline: released.
    let text = `{"start":false,"reason":"${leaseOk ? 'released' : 'claim_late'}"}`;
    if (leaseOk && a.now + a.timeoutMs <= a.deadlineAt) {
      const covered = a.leaseExpiresAt >= a.now + a.timeoutMs + reserveOf(span);
      // timerMs: the handler's timer; attempt (with attempts): charged attempts + 1.
      const head = `{"start":true,"deadline":${a.now + a.timeoutMs},"timerMs":${a.timeoutMs}${a.attempts === undefined ? '' : `,"attempt":${a.attempts + 1}`}`;
      text = every === null ? `${head}}` : `${head},"stopAt":${stopAt},"heartbeatAt":${covered ? null : a.now + every}}`;
    }
    c(name, a, exactText(text));
  };
  admitCase('admit fresh lease', {});
  admitCase('admit lease at edge', { leaseExpiresAt: NOW + 60000 });
  admitCase('admit lease 1ms short', { leaseExpiresAt: NOW + 59999 });
  admitCase('admit claim 20 s late', { now: NOW + 20000 });
  admitCase('admit claim 20 s + 1 ms late', { now: NOW + 20001 });
  admitCase('admit lease at reserve edge', { leaseExpiresAt: NOW + 40000 });
  admitCase('admit lease inside reserve', { leaseExpiresAt: NOW + 39999 });
  admitCase('admit lease shorter than timeout', { leaseExpiresAt: NOW + 30000 });
  admitCase('admit lease expired', { leaseExpiresAt: NOW - 1000 });
  admitCase('admit long lease', { leaseExpiresAt: NOW + 3600000 });
  admitCase('admit invocation deadline at edge', { deadlineAt: NOW + 30000 });
  admitCase('admit invocation deadline short', { deadlineAt: NOW + 29999 });
  admitCase('admit leaseExpiresAt 0', { leaseExpiresAt: 0 });
  admitCase('admit timeout 1', { timeoutMs: 1, leaseExpiresAt: NOW + 30001 });
  admitCase('admit at epoch', { now: 0, deadlineAt: 0, leaseExpiresAt: 0, timeoutMs: 1 });
  admitCase('admit 1 s job, 4 s claim slack', { now: NOW + 4000, leaseExpiresAt: NOW + 7000, timeoutMs: 1000 });
  admitCase('admit 1 s job, past its claim slack', { now: NOW + 4001, leaseExpiresAt: NOW + 7000, timeoutMs: 1000 });
  admitCase('admit heartbeat window', { leaseExpiresAt: NOW + 60000, timeoutMs: 600000, heartbeatMs: 10000 });
  admitCase('admit heartbeat window at its slack edge', { now: NOW + 20000, leaseExpiresAt: NOW + 60000, timeoutMs: 600000, heartbeatMs: 10000 });
  admitCase('admit heartbeat window past its slack', { now: NOW + 20001, leaseExpiresAt: NOW + 60000, timeoutMs: 600000, heartbeatMs: 10000 });
  admitCase('admit heartbeat lease covers the attempt', { leaseExpiresAt: NOW + 40000, timeoutMs: 20000, heartbeatMs: 10000 });
  admitCase('admit heartbeat null', { heartbeatMs: null });
  c('admit heartbeat too frequent', admit({ heartbeatMs: 999 }), isError('invalid_input', 'heartbeatMs'));
  admitCase('admit first attempt number', { attempts: 0 });
  admitCase('admit attempt number after charges', { attempts: 6 });
  admitCase('admit attempt number with heartbeats', { attempts: 2, leaseExpiresAt: NOW + 60000, timeoutMs: 600000, heartbeatMs: 10000 });
  c('admit negative attempts', admit({ attempts: -1 }), isError('invalid_input', 'attempts'));
  // backlog: after a full claim, a plan with fewer kinds than the drain's first leaves due work behind.
  const two = [P({ kind: 'a', timeoutMs: 1000 }), P({ kind: 'b', timeoutMs: 60000 })];
  c('plan backlog after a full claim', plan({ policies: two, deadlineAt: NOW + 30000, firstKinds: 2, lastClaimFull: true }), fields({ kinds: ['a'], backlog: true }));
  c('plan no backlog after a short claim', plan({ policies: two, deadlineAt: NOW + 30000, firstKinds: 2, lastClaimFull: false }), fields({ backlog: false }));
  c('plan no backlog while every kind fits', plan({ policies: two, firstKinds: 2, lastClaimFull: true }), fields({ backlog: false }));
  c('plan backlog when nothing fits', plan({ policies: two, deadlineAt: NOW + 500, firstKinds: 2, lastClaimFull: true }), fields({ kinds: [], backlog: true }));
  c('plan no backlog verdict without firstKinds', plan({ policies: two, lastClaimFull: true }), (o) => want(o.backlog === undefined, 'no backlog field'));
  c('plan backlog never for a target', plan({ policies: two, deadlineAt: NOW + 30000, firstKinds: 2, lastClaimFull: true, target: { id: '0b6f5c3e-2a4d-4c1f-9e8b-7d6a5f4e3c2b', kind: 'a' } }), fields({ backlog: false }));
  c('plan lastClaimFull not a bool', plan({ lastClaimFull: 1 }), isError('invalid_input', 'lastClaimFull'));
  // flow limits: a plan lists the limits of its kinds only when one has any.
  const limited = [P({ kind: 'a', timeoutMs: 1000, concurrency: 5 }), P({ kind: 'b', timeoutMs: 1000, rateLimit: { starts: 20, perMs: 1000, burst: 5 } }), P({ kind: 'c', timeoutMs: 1000 })];
  c('plan limits parallel to kinds', plan({ policies: limited }), fields({ limits: { kinds: ['a', 'b'], concurrency: [5, 0], rateSlots: [0, 5], rateHoldMs: [0, 250], tenantConcurrency: [0, 0] } }));
  const perTenant = [P({ kind: 't', timeoutMs: 1000, tenantConcurrency: 2 }), P({ kind: 'c', timeoutMs: 1000 })];
  c('plan tenant limit visits tenants', plan({ policies: perTenant }),
    fields({ limits: { kinds: ['t'], concurrency: [0], rateSlots: [0], rateHoldMs: [0], tenantConcurrency: [2], tenantVisits: 64 } }));
  c('plan no limits without a limited kind', plan({ policies: two }), (o) => want(o.limits === undefined, 'no limits field'));
  // fair share: the plan says how many tenants a claim visits, only for due claims.
  c('plan fair share', plan({ policies: two, fairShare: true }), fields({ fairTenants: 64 }));
  c('plan fair share off', plan({ policies: two, fairShare: false }), (o) => want(o.fairTenants === undefined, 'no fairTenants'));
  c('plan fair share not for a target', plan({ policies: two, fairShare: true, target: { id: '0b6f5c3e-2a4d-4c1f-9e8b-7d6a5f4e3c2b', kind: 'a' } }), (o) => want(o.fairTenants === undefined, 'no fairTenants'));
  c('plan fair share with nothing to claim', plan({ policies: two, fairShare: true, lane: 'bulk' }), (o) => want(o.fairTenants === undefined && o.limit === 0, 'no fairTenants'));
  c('plan fairShare not a bool', plan({ fairShare: 'yes' }), isError('invalid_input', 'fairShare'));
  // throttle: when a drain whose claims left limited kinds behind claims again.
  const thr = (o) => ({ op: 'throttle', now: NOW, deadlineAt: NOW + 60000, throttledSince: NOW, throttled: [], ...o });
  c('throttle rate slot frees', thr({ throttled: [{ kind: 'b', retryAt: NOW + 250, timeoutMs: 1000 }] }),
    exactText(`{"retryAt":${NOW + 250},"resumeAfterSeconds":null,"kinds":[{"kind":"b","reason":"rate_limit"}]}`));
  c('throttle concurrency polls in 100 ms', thr({ throttled: [{ kind: 'a', retryAt: null, timeoutMs: 1000 }] }),
    exactText(`{"retryAt":${NOW + 100},"resumeAfterSeconds":null,"kinds":[{"kind":"a","reason":"concurrency_limit"}]}`));
  // A rate slot freeing past the drain's wait: it stops, and its lane's drain message comes back then.
  c('throttle a minute off resumes by message', thr({ throttled: [{ kind: 'b', retryAt: NOW + 60000, timeoutMs: 1000 }] }), fields({ retryAt: null, resumeAfterSeconds: 60 }));
  c('throttle resume rounds up to whole seconds', thr({ throttled: [{ kind: 'b', retryAt: NOW + 5001, timeoutMs: 1000 }] }), fields({ retryAt: null, resumeAfterSeconds: 6 }));
  c('throttle resume soonest rate slot', thr({ throttled: [{ kind: 'b', retryAt: NOW + 90000, timeoutMs: 1000 }, { kind: 'c', retryAt: NOW + 30000, timeoutMs: 1000 }] }), fields({ retryAt: null, resumeAfterSeconds: 30 }));
  c('throttle resume at most a day', thr({ throttled: [{ kind: 'b', retryAt: NOW + 200000000, timeoutMs: 1000 }] }), fields({ retryAt: null, resumeAfterSeconds: 86400 }));
  c('throttle resume past the deadline', thr({ deadlineAt: NOW + 1050, throttled: [{ kind: 'b', retryAt: NOW + 250, timeoutMs: 1000 }] }), fields({ retryAt: null, resumeAfterSeconds: 1 }));
  c('throttle no resume for concurrency', thr({ throttledSince: NOW - 4950, throttled: [{ kind: 'a', retryAt: null, timeoutMs: 1000 }] }), fields({ retryAt: null, resumeAfterSeconds: null }));
  c('throttle soonest of two', thr({ throttled: [{ kind: 'a', retryAt: null, timeoutMs: 1000 }, { kind: 'b', retryAt: NOW + 40, timeoutMs: 1000 }] }), fields({ retryAt: NOW + 40 }));
  c('throttle release in the past is now', thr({ throttled: [{ kind: 'b', retryAt: NOW - 5, timeoutMs: 1000 }] }), fields({ retryAt: NOW }));
  c('throttle gives up 5 s after the first hold', thr({ throttledSince: NOW - 4950, throttled: [{ kind: 'a', retryAt: null, timeoutMs: 1000 }] }), fields({ retryAt: null }));
  c('throttle gives up past the deadline', thr({ deadlineAt: NOW + 1050, throttled: [{ kind: 'b', retryAt: NOW + 250, timeoutMs: 1000 }] }), fields({ retryAt: null }));
  c('throttle nothing held', thr({}), fields({ retryAt: null, kinds: [] }));
  c('throttle missing kind', thr({ throttled: [{ retryAt: null, timeoutMs: 1000 }] }), isError('invalid_input', 'kind'));
  c('throttle by tenants polls', thr({ throttled: [{ kind: 't', retryAt: null, timeoutMs: 1000, tenant: true }] }),
    exactText(`{"retryAt":${NOW + 100},"resumeAfterSeconds":null,"kinds":[{"kind":"t","reason":"tenant_concurrency_limit"}]}`));
  c('throttle by tenants with new slots asks now', thr({ throttled: [{ kind: 't', retryAt: NOW, timeoutMs: 1000, tenant: true }] }),
    exactText(`{"retryAt":${NOW},"resumeAfterSeconds":null,"kinds":[{"kind":"t","reason":"tenant_concurrency_limit"}]}`));
  c('throttle tenant not a bool', thr({ throttled: [{ kind: 't', retryAt: null, timeoutMs: 1000, tenant: 'yes' }] }), isError('invalid_input', 'tenant'));
  c('throttle timeoutMs 0', thr({ throttled: [{ kind: 'a', retryAt: null, timeoutMs: 0 }] }), isError('invalid_input', 'timeoutMs'));
  // outbox: option bounds and defaults (docs/ABI.md, pb_claim outbox).
  c('outbox defaults', { op: 'outbox' }, exactText('{"concurrency":1,"lanes":1,"operationTimeoutMs":60000,"maxPayloadBytes":262144,"handlerSessions":1,"maxQueueDelayMs":86400000,"maxKeyChars":1024}'));
  c('outbox maxima', { op: 'outbox', concurrency: 100, lanes: 5, operationTimeoutMs: 2147483647, maxPayloadBytes: 1048576 },
    exactText('{"concurrency":100,"lanes":5,"operationTimeoutMs":2147483647,"maxPayloadBytes":1048576,"handlerSessions":0,"maxQueueDelayMs":86400000,"maxKeyChars":1024}'));
  c('outbox nulls take defaults', { op: 'outbox', concurrency: null, lanes: null, operationTimeoutMs: null, maxPayloadBytes: null }, fields({ concurrency: 1, lanes: 1, operationTimeoutMs: 60000, maxPayloadBytes: 262144 }));
  c('outbox concurrency 101', { op: 'outbox', concurrency: 101 }, isError('invalid_input', 'concurrency'));
  c('outbox fair weights', { op: 'outbox', fairWeights: { acme: 1, globex: 100 } }, fields({ concurrency: 1, lanes: 1 }));
  c('outbox fair weights null', { op: 'outbox', fairWeights: null }, fields({ concurrency: 1 }));
  c('outbox fair weight 0', { op: 'outbox', fairWeights: { acme: 0 } }, isError('invalid_input', 'fairWeights.acme'));
  c('outbox fair weight 101', { op: 'outbox', fairWeights: { acme: 101 } }, isError('invalid_input', 'fairWeights.acme'));
  c('outbox fair weight not an integer', { op: 'outbox', fairWeights: { acme: 2.5 } }, isError('invalid_input', 'fairWeights.acme'));
  c('outbox fair weights not an object', { op: 'outbox', fairWeights: [1] }, isError('invalid_input', 'fairWeights'));
  c('outbox fair weights 1001 tenants', { op: 'outbox', fairWeights: Object.fromEntries(Array.from({ length: 1001 }, (_, i) => [`t${i}`, 1])) }, isError('invalid_input', 'fairWeights'));
  c('outbox concurrency 0', { op: 'outbox', concurrency: 0 }, isError('invalid_input', 'concurrency'));
  c('outbox lanes 6', { op: 'outbox', lanes: 6 }, isError('invalid_input', 'lanes'));
  c('outbox operationTimeoutMs over int4', { op: 'outbox', operationTimeoutMs: 2147483648 }, isError('invalid_input', 'operationTimeoutMs'));
  c('outbox maxPayloadBytes over 1 MiB', { op: 'outbox', maxPayloadBytes: 1048577 }, isError('invalid_input', 'maxPayloadBytes'));
  c('outbox concurrency float', { op: 'outbox', concurrency: 2.5 }, isError('invalid_input', 'concurrency'));
  // handlerSessions: default min(5 - lanes, lanes * concurrency); lanes + handlerSessions <= 5.
  c('outbox handlerSessions default by concurrency', { op: 'outbox', concurrency: 2 }, fields({ handlerSessions: 2 }));
  c('outbox handlerSessions default by the budget', { op: 'outbox', concurrency: 8, lanes: 2 }, fields({ handlerSessions: 3 }));
  c('outbox handlerSessions default none at 5 lanes', { op: 'outbox', concurrency: 8, lanes: 5 }, fields({ handlerSessions: 0 }));
  c('outbox handlerSessions set', { op: 'outbox', lanes: 4, handlerSessions: 1 }, fields({ lanes: 4, handlerSessions: 1 }));
  c('outbox handlerSessions 0', { op: 'outbox', concurrency: 8, handlerSessions: 0 }, fields({ handlerSessions: 0 }));
  c('outbox handlerSessions over the budget', { op: 'outbox', lanes: 4, handlerSessions: 2 }, isError('invalid_input', 'handlerSessions'));
  c('outbox handlerSessions over the budget, field first', { op: 'outbox', handlerSessions: 1, lanes: 5 }, isError('invalid_input', 'handlerSessions'));
  c('outbox handlerSessions 5', { op: 'outbox', handlerSessions: 5 }, isError('invalid_input', 'handlerSessions'));
  c('outbox handlerSessions negative', { op: 'outbox', handlerSessions: -1 }, isError('invalid_input', 'handlerSessions'));
  // heartbeat: refused at or past the lease; else max(lease, min(now + S, deadline) + R(S)).
  const beat = (o) => ({ op: 'heartbeat', now: NOW, deadline: NOW + 600000, leaseExpiresAt: NOW + 60000, timeoutMs: 600000, heartbeatMs: 10000, ...o });
  const beatCase = (name, o) => {
    const b = beat(o);
    const every = b.heartbeatMs ?? null;
    const span = spanOf(b.timeoutMs, every);
    const r = reserveOf(span);
    if (b.now >= b.leaseExpiresAt) return c(name, b, exactText('{"extend":false,"reason":"lease_expired"}'));
    const lease = Math.max(b.leaseExpiresAt, Math.min(b.now + span, b.deadline) + r);
    const next = every !== null && b.leaseExpiresAt < b.deadline + r ? b.now + every : null;
    c(name, b, exactText(`{"extend":true,"leaseExpiresAt":${lease},"stopAt":${lease - r},"nextAt":${next}}`));
  };
  beatCase('heartbeat early keeps the claim lease', { now: NOW + 10000 });
  beatCase('heartbeat extends past the claim lease', { now: NOW + 25000 });
  beatCase('heartbeat near the deadline', { now: NOW + 580000, leaseExpiresAt: NOW + 600000 });
  beatCase('heartbeat lease covers the deadline', { now: NOW + 595000, leaseExpiresAt: NOW + 610000 });
  beatCase('heartbeat at expiry', { now: NOW + 60000 });
  beatCase('heartbeat past expiry', { now: NOW + 70000 });
  beatCase('heartbeat 1 ms before expiry', { now: NOW + 59999 });
  beatCase('heartbeat without interval', { heartbeatMs: null, timeoutMs: 30000, deadline: NOW + 30000, leaseExpiresAt: NOW + 60000, now: NOW + 5000 });
  beatCase('heartbeat short job', { heartbeatMs: 1000, timeoutMs: 60000, deadline: NOW + 60000, leaseExpiresAt: NOW + 9000, now: NOW + 5000 });
  c('heartbeat missing deadline', (({ deadline, ...r }) => r)(beat({})), isError('invalid_input', 'deadline'));
  c('heartbeat bad timeoutMs', beat({ timeoutMs: 0 }), isError('invalid_input', 'timeoutMs'));
  c('plan slackMs is the smallest', plan({ policies: [P({ kind: 'a', timeoutMs: 1000 }), P({ kind: 'b', timeoutMs: 60000 })] }), fields({ slackMs: 4000 }));
  // pump: the continuous drain's next statement (docs/ABI.md, pb_claim pump).
  const pump = (o) => ({ op: 'pump', concurrency: 8, running: 0, buffered: 0, settles: 0, mayClaim: true, remaining: null, ...o });
  c('pump empty lane claims a window', pump({}), exactText('{"action":"claim","claim":16,"waitMs":null}'));
  c('pump c=1 claims ahead while one runs', pump({ concurrency: 1, running: 1 }), exactText('{"action":"claim","claim":1,"waitMs":null}'));
  c('pump full window waits', pump({ running: 8, buffered: 8 }), exactText('{"action":"wait","claim":0,"waitMs":null}'));
  c('pump room below a batch waits', pump({ running: 8, buffered: 3, settles: 5 }), exactText('{"action":"wait","claim":0,"waitMs":20}'));
  c('pump batch of room claims', pump({ running: 8, settles: 8 }), exactText('{"action":"claim","claim":8,"waitMs":null}'));
  c('pump idle slot claims the room', pump({ running: 7, settles: 1 }), exactText('{"action":"claim","claim":9,"waitMs":null}'));
  c('pump capped by maxBatch', pump({ concurrency: 100, maxBatch: 30 }), exactText('{"action":"claim","claim":30,"waitMs":null}'));
  c('pump capped by remaining', pump({ remaining: 3 }), exactText('{"action":"claim","claim":3,"waitMs":null}'));
  c('pump nothing remaining is done', pump({ remaining: 0 }), exactText('{"action":"done","claim":0,"waitMs":null}'));
  c('pump no claims, settles wait for a batch', pump({ mayClaim: false, running: 5, settles: 3 }), exactText('{"action":"wait","claim":0,"waitMs":20}'));
  c('pump no claims, a batch of settles goes', pump({ mayClaim: false, running: 5, settles: 8 }), exactText('{"action":"settle","claim":0,"waitMs":null}'));
  c('pump idle lane settles the rest', pump({ mayClaim: false, settles: 3 }), exactText('{"action":"settle","claim":0,"waitMs":null}'));
  c('pump idle lane is done', pump({ mayClaim: false }), exactText('{"action":"done","claim":0,"waitMs":null}'));
  c('pump fast handlers: four batches ahead', pump({ slowestRecentMs: 2 }), exactText('{"action":"claim","claim":40,"waitMs":null}'));
  c('pump 10 s handlers: two batches ahead', pump({ slowestRecentMs: 10000 }), exactText('{"action":"claim","claim":24,"waitMs":null}'));
  c('pump slow handlers: one batch ahead', pump({ slowestRecentMs: 60000 }), exactText('{"action":"claim","claim":16,"waitMs":null}'));
  c('pump c=1 fast handlers: sixteen jobs ahead', pump({ concurrency: 1, slowestRecentMs: 2 }), exactText('{"action":"claim","claim":17,"waitMs":null}'));
  c('pump c=1 fast handlers: the next claim waits for eight of room', pump({ concurrency: 1, slowestRecentMs: 2, running: 1, buffered: 9 }), exactText('{"action":"wait","claim":0,"waitMs":null}'));
  c('pump four ahead waits for two batches of room', pump({ slowestRecentMs: 2, running: 8, buffered: 20 }), exactText('{"action":"wait","claim":0,"waitMs":null}'));
  c('pump slow statements widen the lookahead', pump({ slowestRecentMs: 2, statementMs: 5 }), exactText('{"action":"claim","claim":56,"waitMs":null}'));
  c('pump lookahead capped at sixteen batches and maxBatch', pump({ slowestRecentMs: 2, statementMs: 100000 }), exactText('{"action":"claim","claim":100,"waitMs":null}'));
  c('pump statementMs must be a whole number', pump({ statementMs: 1.5 }), isError('invalid_input', 'statementMs'));
  c('pump four ahead claims with two batches still buffered', pump({ slowestRecentMs: 2, running: 8, buffered: 16 }), exactText('{"action":"claim","claim":16,"waitMs":null}'));
  c('pump claims go on, settles wait to ride along', pump({ running: 8, buffered: 10, settles: 8, oldestSettleAgeMs: 5 }), exactText('{"action":"wait","claim":0,"waitMs":15}'));
  c('pump settle waits out its 20 ms', pump({ mayClaim: false, running: 5, settles: 2, oldestSettleAgeMs: 5 }), exactText('{"action":"wait","claim":0,"waitMs":15}'));
  c('pump settle after 20 ms', pump({ mayClaim: false, running: 5, settles: 2, oldestSettleAgeMs: 20 }), exactText('{"action":"settle","claim":0,"waitMs":null}'));
  c('pump idle lane paused by a flow limit waits', pump({ mayClaim: false, throttleWaitMs: 250 }), exactText('{"action":"wait","claim":0,"waitMs":250}'));
  c('pump throttleWaitMs above 5 s', pump({ mayClaim: false, throttleWaitMs: 5001 }), isError('invalid_input', 'throttleWaitMs'));
  c('pump with a short claim slack', pump({ concurrency: 2, slowestRecentMs: 1500, slackMs: 4000 }), exactText('{"action":"claim","claim":6,"waitMs":null}'));
  c('pump bad slowestRecentMs', pump({ slowestRecentMs: -1 }), isError('invalid_input', 'slowestRecentMs'));
  c('pump budget left after other lanes', pump({ maxJobs: 10, claimed: 7 }), exactText('{"action":"claim","claim":3,"waitMs":null}'));
  c('pump budget spent', pump({ maxJobs: 10, claimed: 10 }), exactText('{"action":"done","claim":0,"waitMs":null}'));
  c('pump budget overspent', pump({ maxJobs: 10, claimed: 11 }), exactText('{"action":"done","claim":0,"waitMs":null}'));
  c('pump remaining below budget', pump({ remaining: 2, maxJobs: 10 }), exactText('{"action":"claim","claim":2,"waitMs":null}'));
  c('pump negative maxJobs', pump({ maxJobs: -1 }), isError('invalid_input', 'maxJobs'));
  c('pump missing mayClaim', (({ mayClaim, ...r }) => r)(pump({})), isError('invalid_input', 'mayClaim'));
  c('pump concurrency 0', pump({ concurrency: 0 }), isError('invalid_input', 'concurrency'));
  c('pump negative running', pump({ running: -1 }), isError('invalid_input', 'running'));
  // deadline: startedAt + budget (default 840000, 1..900000): hand-checked.
  const deadline = (o) => ({ op: 'deadline', startedAt: NOW, ...o });
  c('deadline default budget', deadline({}), exactText(`{"deadlineAt":${NOW + 840000}}`));
  c('deadline null budget', deadline({ invocationBudgetMs: null }), exactText(`{"deadlineAt":${NOW + 840000}}`));
  c('deadline one minute', deadline({ invocationBudgetMs: 60000 }), exactText(`{"deadlineAt":${NOW + 60000}}`));
  c('deadline platform maximum', deadline({ invocationBudgetMs: 900000 }), exactText(`{"deadlineAt":${NOW + 900000}}`));
  c('deadline over the platform maximum', deadline({ invocationBudgetMs: 900001 }), isError('invalid_input', 'invocationBudgetMs'));
  c('deadline zero budget', deadline({ invocationBudgetMs: 0 }), isError('invalid_input', 'invocationBudgetMs'));
  c('deadline missing startedAt', { op: 'deadline' }, isError('invalid_input', 'startedAt'));
  // fleet: several outboxes, one invocation's 5 connections (lanes + handlerSessions each in a
  // queue invocation, 1 + handlerSessions in a sweep), and the default outbox. Hand-checked.
  const m = (key, lanes, handlerSessions) => ({ key, lanes, handlerSessions });
  const fleetOf = (outboxes, o = {}) => ({ op: 'fleet', outboxes, ...o });
  c('fleet two at concurrency 1', fleetOf([m('eu', 1, 1), m('us', 1, 1)], { default: 'eu' }), exactText('{"default":"eu","queueParallel":2,"sweepParallel":2}'));
  c('fleet three at concurrency 1', fleetOf([m('eu', 1, 1), m('us', 1, 1), m('ap', 1, 1)]), exactText('{"default":null,"queueParallel":2,"sweepParallel":2}'));
  c('fleet whole budget each', fleetOf([m('eu', 1, 4), m('us', 1, 4)]), exactText('{"default":null,"queueParallel":1,"sweepParallel":1}'));
  c('fleet sweep holds one lane', fleetOf([m('eu', 2, 1), m('us', 2, 1)]), exactText('{"default":null,"queueParallel":1,"sweepParallel":2}'));
  c('fleet no handler sessions', fleetOf(['a', 'b', 'c', 'd', 'e', 'f'].map((k) => m(k, 1, 0))), fields({ queueParallel: 5, sweepParallel: 5 }));
  c('fleet hungriest bounds', fleetOf([m('a', 1, 0), m('b', 1, 4), m('c', 1, 0)]), fields({ queueParallel: 1, sweepParallel: 1 }));
  c('fleet one is the default', fleetOf([m('eu', 1, 1)]), fields({ default: 'eu' }));
  c('fleet parallel fits', fleetOf([m('eu', 1, 1), m('us', 1, 1), m('ap', 1, 1)], { parallel: 2 }), fields({ queueParallel: 2, sweepParallel: 2 }));
  c('fleet parallel 1', fleetOf([m('eu', 1, 0), m('us', 1, 0)], { parallel: 1 }), fields({ queueParallel: 1, sweepParallel: 1 }));
  c('fleet parallel over the budget', fleetOf([m('eu', 1, 1), m('us', 1, 1), m('ap', 1, 1)], { parallel: 3 }), isError('invalid_input', 'must be at most 2'));
  c('fleet parallel over the count', fleetOf([m('eu', 1, 0)], { parallel: 64 }), fields({ queueParallel: 1 }));
  c('fleet parallel 0', fleetOf([m('eu', 1, 0)], { parallel: 0 }), isError('invalid_input', 'parallel'));
  c('fleet parallel 65', fleetOf([m('eu', 1, 0)], { parallel: 65 }), isError('invalid_input', 'parallel'));
  c('fleet default unknown', fleetOf([m('eu', 1, 1)], { default: 'us' }), isError('invalid_input', 'default'));
  c('fleet default not a string', fleetOf([m('eu', 1, 1)], { default: 7 }), isError('invalid_input', 'default'));
  c('fleet key twice', fleetOf([m('eu', 1, 1), m('eu', 1, 0)]), isError('invalid_input', 'twice'));
  c('fleet key uppercase', fleetOf([m('EU', 1, 1)]), isError('invalid_input', 'outboxes[0].key'));
  c('fleet key with a dash', fleetOf([m('e-u', 1, 1)]), isError('invalid_input', 'outboxes[0].key'));
  c('fleet key 33 bytes', fleetOf([m('e'.repeat(33), 1, 1)]), isError('invalid_input', 'outboxes[0].key'));
  c('fleet member over the budget', fleetOf([m('eu', 2, 4)]), isError('invalid_input', 'handlerSessions'));
  c('fleet member lanes 0', fleetOf([m('eu', 0, 1)]), isError('invalid_input', 'lanes'));
  c('fleet member missing lanes', fleetOf([{ key: 'eu', handlerSessions: 1 }]), isError('invalid_input', 'lanes'));
  c('fleet member not an object', fleetOf(['eu']), isError('invalid_input', 'outboxes[]'));
  c('fleet empty', fleetOf([]), isError('invalid_input', 'outboxes'));
  c('fleet missing outboxes', { op: 'fleet' }, isError('invalid_input', 'outboxes'));
  c('fleet 65 outboxes', fleetOf(Array.from({ length: 65 }, (_, i) => m(`o${i}`, 1, 0))), isError('invalid_input', '64'));
  c('fleet 64 outboxes', fleetOf(Array.from({ length: 64 }, (_, i) => m(`o${i}`, 1, 0))), fields({ queueParallel: 5 }));
  // share: an outbox's turn, (deadline - now) / ceil(left / parallel), recovery in proportion.
  const share = (o) => ({ op: 'share', now: NOW, startedAt: NOW, left: 1, parallel: 1, ...o });
  c('share defaults, one outbox', share({}), exactText(`{"deadlineAt":${NOW + 840000},"budgetMs":840000,"recoveryBudgetMs":120000}`));
  c('share first of three', share({ left: 3 }), exactText(`{"deadlineAt":${NOW + 840000},"budgetMs":280000,"recoveryBudgetMs":40000}`));
  c('share three on two slots', share({ left: 3, parallel: 2 }), fields({ budgetMs: 420000, recoveryBudgetMs: 60000 }));
  c('share two on two slots', share({ left: 2, parallel: 2 }), fields({ budgetMs: 840000 }));
  c('share later in the tick', share({ now: NOW + 100000, invocationBudgetMs: 600000, recoveryBudgetMs: 60000, left: 2 }),
    exactText(`{"deadlineAt":${NOW + 600000},"budgetMs":250000,"recoveryBudgetMs":25000}`));
  c('share rounds down', share({ invocationBudgetMs: 10, left: 3 }), fields({ budgetMs: 3, recoveryBudgetMs: 3 }));
  c('share recovery over the invocation', share({ invocationBudgetMs: 60000, recoveryBudgetMs: 900000, left: 2 }), fields({ budgetMs: 30000, recoveryBudgetMs: 30000 }));
  c('share recovery zero', share({ recoveryBudgetMs: 0, left: 2 }), fields({ budgetMs: 420000, recoveryBudgetMs: 0 }));
  c('share nulls take defaults', share({ invocationBudgetMs: null, recoveryBudgetMs: null }), fields({ budgetMs: 840000, recoveryBudgetMs: 120000 }));
  c('share at the deadline', share({ now: NOW + 840000 }), fields({ budgetMs: 0, recoveryBudgetMs: 0 }));
  c('share past the deadline', share({ now: NOW + 900000 }), exactText(`{"deadlineAt":${NOW + 840000},"budgetMs":0,"recoveryBudgetMs":0}`));
  c('share now before startedAt', share({ now: NOW - 60000 }), fields({ budgetMs: 840000, recoveryBudgetMs: 120000 }));
  c('share startedAt far after now', { op: 'share', now: 1700000840000, startedAt: 271700000000000, left: 1, parallel: 1 }, fields({ budgetMs: 840000, recoveryBudgetMs: 120000 }));
  const idle = (o) => ({ op: 'idle', claimed: 0, failures: 0, ...o });
  c('idle after a claim', idle({ claimed: 5 }), exactText('{"waitMs":0}'));
  c('idle after an empty drain', idle({}), exactText('{"waitMs":1000}'));
  c('idle set', idle({ idleMs: 50 }), exactText('{"waitMs":50}'));
  c('idle after 1 failure', idle({ idleMs: 50, failures: 1 }), exactText('{"waitMs":1000}'));
  c('idle after 4 failures', idle({ failures: 4 }), exactText('{"waitMs":8000}'));
  c('idle after many failures', idle({ failures: 40 }), exactText('{"waitMs":30000}'));
  c('idle long idle caps failures', idle({ idleMs: 45000, failures: 3 }), exactText('{"waitMs":45000}'));
  c('idle missing failures', { op: 'idle', claimed: 0 }, isError('invalid_input', 'failures'));
  c('idle negative idleMs', idle({ idleMs: -5 }), isError('invalid_input', 'idleMs'));
  c('share invocation over 15 min', share({ invocationBudgetMs: 900001 }), isError('invalid_input', 'invocationBudgetMs'));
  c('share invocation 0', share({ invocationBudgetMs: 0 }), isError('invalid_input', 'invocationBudgetMs'));
  c('share left 0', share({ left: 0 }), isError('invalid_input', 'left'));
  c('share parallel 65', share({ parallel: 65 }), isError('invalid_input', 'parallel'));
  c('share missing left', (({ left, ...r }) => r)(share({})), isError('invalid_input', 'left'));
  c('share missing startedAt', (({ startedAt, ...r }) => r)(share({})), isError('invalid_input', 'startedAt'));
  c('fleet outboxes repeated', `{"op":"fleet","outboxes":[${Array.from({ length: 64 }, (_, i) => `{"key":"o${i}","lanes":1,"handlerSessions":0}`).join()}],"outboxes":[{"key":"eu","lanes":1,"handlerSessions":1}]}`,
    exactText('{"default":"eu","queueParallel":1,"sweepParallel":1}'));
  c('admit missing timeoutMs', (({ timeoutMs, ...r }) => r)(admit({})), isError('invalid_input', 'timeoutMs'));
  c('admit float now', admit({ now: 0.5 }), isError('invalid_input', 'now'));
  c('op missing', { now: NOW }, isError('invalid_input', 'op'));
  c('op unknown', { op: 'steal' }, isError('unknown_op'));
  c('op not a string', { op: 1 }, (o) => want(o.error, 'an error'));
  c('op after the fields', `{"now":${NOW},"deadlineAt":${NOW + 60000},"leaseExpiresAt":${NOW + 60000},"timeoutMs":1000,"op":"admit"}`, fields({ start: true }));
}

// ---------------------------------------------------------------------------------------------
// sweep

{
  const pol = [
    P({ kind: 'email.welcome', timeoutMs: 30000 }),
    P({ kind: 'crm.sync', timeoutMs: 60000 }),
    P({ kind: 'org.export', timeoutMs: 300000, lane: 'bulk' }),
    P({ kind: 'video.encode', timeoutMs: 600000, lane: 'media' }),
  ];
  const plan = (o) => ({
    op: 'plan', now: NOW, startedAt: NOW, invocationBudgetMs: 840000, recoveryBudgetMs: 120000, sweepLeaseBudgetMs: 180000,
    reserved: [{ name: 'mail', kinds: ['email.welcome'], maxJobs: 50, deadlineMs: 45000 }],
    retention: { succeededMs: 604800000, deadMs: 7776000000 }, policies: pol, ...o,
  });
  const step = (o, type) => o.steps.find((s) => s.type === type);
  const w = (name, input, check) => add('sweep', name, input, check);
  w('plan full', plan({}), (o) => {
    want(o.deadlineAt === NOW + 840000, 'deadlineAt = startedAt + invocationBudgetMs');
    want(JSON.stringify(o.steps.map((s) => s.type)) === '["recover","reserved","drain","handoff","unregistered","retention","compact"]', 'steps in order');
    want(step(o, 'recover').deadlineAt === NOW + 120000, 'recovery ends at now + recoveryBudgetMs');
    want(o.schedulesUntil === NOW + 840000 - 120000, 'schedules stop at the deadline less the recovery budget');
    want(step(o, 'handoff').limit === 100, 'hand-off limit 100');
    want(step(o, 'unregistered').dueBefore === NOW - 300000, 'unregistered kinds reported after 5 min due');
    want(step(o, 'reserved').deadlineAt === NOW + 45000, 'reserved ends at now + deadlineMs');
    want(!step(o, 'drain').kinds.includes('org.export'), 'drain has no handed-off kind');
    const lanes = step(o, 'handoff').lanes;
    want(lanes.some((l) => l.lane === 'bulk' && l.kinds.includes('org.export')), 'org.export handed to bulk');
    want(lanes.some((l) => l.lane === 'media' && l.kinds.includes('video.encode')), 'video.encode handed to media');
    want(step(o, 'retention').succeededBefore === NOW - 604800000 && step(o, 'retention').deadBefore === NOW - 7776000000, 'retention cutoffs');
  });
  w('plan started earlier', plan({ startedAt: NOW - 100000 }), (o) => {
    want(o.deadlineAt === NOW - 100000 + 840000, 'deadline from startedAt');
    want(step(o, 'recover').deadlineAt === NOW + 120000, 'recovery from now, its whole budget');
    want(o.schedulesUntil === NOW - 100000 + 840000 - 120000, 'schedules held back by the recovery budget');
  });
  w('plan recovery capped by invocation', plan({ invocationBudgetMs: 60000 }), (o) => want(step(o, 'recover').deadlineAt === NOW + 60000, 'recovery capped'));
  w('plan invocation budget over 15 min', plan({ invocationBudgetMs: 900001 }), isError('invalid_input', 'invocationBudgetMs'));
  w('plan invocation budget zero', plan({ invocationBudgetMs: 0 }), isError('invalid_input', 'invocationBudgetMs'));
  w('plan reserved capped by invocation', plan({ invocationBudgetMs: 30000 }), (o) => want(step(o, 'reserved').deadlineAt === NOW + 30000, 'reserved capped'));
  w('plan reserved computed from now', plan({ startedAt: NOW - 50000 }), (o) => want(step(o, 'reserved').deadlineAt === NOW + 45000, 'reserved from now'));
  w('plan big sweep lease budget runs all', plan({ sweepLeaseBudgetMs: 700000 }), (o) => {
    const h = step(o, 'handoff');
    want(!h || h.lanes.length === 0, 'nothing handed off');
  });
  w('plan handoff cooldown default', plan({}), (o) => want(step(o, 'handoff').nudgedBefore === NOW - 900000, 'cooldown defaults to 15 min'));
  w('plan handoff cooldown set', plan({ handoffCooldownMs: 60000 }), (o) => want(step(o, 'handoff').nudgedBefore === NOW - 60000, 'nudgedBefore = now - cooldown'));
  w('plan handoff cooldown zero', plan({ handoffCooldownMs: 0 }), (o) => want(step(o, 'handoff').nudgedBefore === NOW, 'no cooldown: anything nudged before now'));
  w('plan handoff cooldown past epoch', plan({ now: 1000, startedAt: 1000, handoffCooldownMs: 60000 }), (o) => want(step(o, 'handoff').nudgedBefore === 0, 'cutoff not below 0'));
  w('plan handoff cooldown negative', plan({ handoffCooldownMs: -1 }), isError('invalid_input', 'handoffCooldownMs'));
  w('plan handoff cooldown float', plan({ handoffCooldownMs: 1.5 }), isError('invalid_input', 'handoffCooldownMs'));
  w('plan lease at budget edge', plan({ sweepLeaseBudgetMs: 90000 }), (o) => {
    const kinds = step(o, 'drain').kinds;
    want(kinds.includes('crm.sync') && kinds.includes('email.welcome'), 'leaseMs = budget still runs');
  });
  w('plan lease 1ms over budget', plan({ sweepLeaseBudgetMs: 89999 }), (o) => want(!step(o, 'drain').kinds.includes('crm.sync'), 'crm.sync handed off'));
  w('plan reserved with handed-off kind', plan({ reserved: [{ name: 'exp', kinds: ['org.export', 'email.welcome'], maxJobs: 5, deadlineMs: 1000 }] }),
    (o) => want(!step(o, 'reserved').kinds.includes('org.export'), 'reserved lists only sweep-runnable kinds'));
  w('plan no reserved', plan({ reserved: [] }));
  w('plan reserved omitted', (({ reserved, ...r }) => r)(plan({})));
  w('plan two reserved', plan({ reserved: [{ name: 'a', kinds: ['email.welcome'], maxJobs: 1, deadlineMs: 1000 }, { name: 'b', kinds: ['crm.sync'], maxJobs: 2, deadlineMs: 2000 }] }));
  w('plan retention omitted', (({ retention, ...r }) => r)(plan({})));
  w('plan no policies', plan({ policies: [], reserved: [] }));
  w('plan retention at epoch', plan({ now: 1000, startedAt: 1000 }));
  w('plan now after invocation end', plan({ now: NOW + 900000 }));
  w('plan missing now', (({ now, ...r }) => r)(plan({})), isError('invalid_input', 'now'));
  w('plan missing policies', (({ policies, ...r }) => r)(plan({})), isError('invalid_input', 'policies'));
  w('plan missing startedAt', (({ startedAt, ...r }) => r)(plan({})));
  w('plan reserved missing name', plan({ reserved: [{ kinds: [], maxJobs: 1, deadlineMs: 1 }] }), isError('invalid_input', 'name'));
  w('plan reserved missing kinds', plan({ reserved: [{ name: 'x', maxJobs: 1, deadlineMs: 1 }] }), isError('invalid_input', 'kinds'));
  w('plan reserved maxJobs negative', plan({ reserved: [{ name: 'x', kinds: [], maxJobs: -1, deadlineMs: 1 }] }), (o) => want(o.error, 'an error'));
  w('plan budget float', plan({ recoveryBudgetMs: 1.5 }), isError('invalid_input', 'recoveryBudgetMs'));
  w('plan retention negative', plan({ retention: { succeededMs: -1, deadMs: 1 } }), (o) => want(o.error, 'an error'));
  w('op unknown', { op: 'dust' }, isError('unknown_op'));
  w('plan recovery budget over the invocation', plan({ recoveryBudgetMs: 900000 }), (o) => want(o.schedulesUntil === NOW, 'no time for schedules past their start'));
  w('plan recovery late in the invocation', plan({ startedAt: NOW - 800000 }), (o) => want(step(o, 'recover').deadlineAt === NOW + 40000, 'recovery capped by the deadline'));
  w('plan unregistered at epoch', plan({ now: 1000, startedAt: 1000 }), (o) => want(step(o, 'unregistered').dueBefore === 0, 'cutoff not below 0'));
  w('op missing', {}, isError('invalid_input', 'op'));
  w('plan retention batch and budget defaults', plan({}), (o) => {
    const r = step(o, 'retention');
    want(r.limit === 1000 && r.budgetMs === 60000 && r.deadlineAt === NOW + 840000, 'batches of 1000 for 60 s, within the invocation');
  });
  w('plan retention batch and budget set', plan({ retention: { batchSize: 250, budgetMs: 5000 } }), (o) => want(step(o, 'retention').limit === 250 && step(o, 'retention').budgetMs === 5000, 'set'));
  w('plan retention batch zero', plan({ retention: { batchSize: 0 } }), isError('invalid_input', 'batchSize'));
  w('plan retention batch over 10000', plan({ retention: { batchSize: 10001 } }), isError('invalid_input', 'batchSize'));
  w('plan retention budget over 15 min', plan({ retention: { budgetMs: 900001 } }), isError('invalid_input', 'budgetMs'));
  w('plan unregistered default policy', plan({}), (o) => {
    const u = step(o, 'unregistered');
    want(u.recoverLimit === 500 && u.policy.maxCrashes === 3 && u.policy.maxAttempts === 20 && u.policy.timeoutMs === 600000, 'default policy, longest timeout');
  });
  w('plan compaction off', plan({ compaction: false }), (o) => want(!step(o, 'compact'), 'no compact step'));
  w('plan dependencies: the check on waiting jobs follows recovery', plan({ dependencies: true }), (o) => {
    want(o.steps[1].type === 'dependencies' && o.steps[1].limit === 1000, 'after recover, 1000 jobs');
  });
  w('plan dependencies off', plan({ dependencies: false }), (o) => want(!step(o, 'dependencies'), 'no dependencies step'));
  w('plan dependencies not a bool', plan({ dependencies: 'yes' }), isError('invalid_input', 'dependencies'));
  w('plan compaction default', plan({}), (o) => want(step(o, 'compact').deadlineAt === NOW + 840000 && Object.keys(step(o, 'compact')).join() === 'type,deadlineAt', 'compact last, with the invocation\'s deadline'));
  w('plan compaction not a boolean', plan({ compaction: 1 }), isError('invalid_input', 'compaction'));
  const MiB = 1024 * 1024;
  const ix = (name, bytes, baselineBytes, o = {}) => ({ name, valid: true, bytes, baselineBytes, rebuiltAt: null, ...o });
  const cp = (indexes, o = {}) => ({ op: 'compact', now: NOW, deadlineAt: NOW + 600000, rebuilt: 0, horizon: [], indexes, ...o });
  w('compact records a first baseline', cp([ix('job_pkey', 16384, null)]), (o) => want(o.record.length === 1 && o.record[0].bytes === 16384 && o.rebuild === null, 'recorded'));
  w('compact records growth', cp([ix('job_pkey', 20 * MiB, 11 * MiB)]), (o) => want(o.record[0]?.bytes === 20 * MiB, 'under 2x is growth'));
  w('compact rebuilds the most bloated', cp([ix('job_pkey', 40 * MiB, 4 * MiB), ix('job_created', 90 * MiB, 5 * MiB)]), (o) => want(o.rebuild?.name === 'job_created' && o.rebuild.rebuiltAt === NOW, 'job_created first'));
  w('compact held by a session', cp([ix('job_pkey', 40 * MiB, 4 * MiB)], { horizon: [{ kind: 'session', ageMs: 600000, xidAge: 50000 }] }), (o) => want(o.held && o.rebuild === null && o.record.length === 0, 'held'));
  w('compact held by a slot', cp([ix('job_pkey', 40 * MiB, 4 * MiB)], { horizon: [{ kind: 'slot', ageMs: null, xidAge: 100000 }] }), (o) => want(o.held, 'held'));
  w('compact cooldown', cp([ix('job_pkey', 40 * MiB, 4 * MiB, { rebuiltAt: NOW - 3600000 })]), (o) => want(o.rebuild === null, 'rebuilt an hour ago'));
  w('compact per-sweep count', cp([ix('job_pkey', 40 * MiB, 4 * MiB)], { rebuilt: 4 }), (o) => want(o.rebuild === null, 'four already'));
  w('compact no room left', cp([ix('job_pkey', 40 * MiB, 4 * MiB)], { deadlineAt: NOW + 59999 }), (o) => want(o.rebuild === null, 'under a minute left'));
  w('compact drops leftovers', cp([ix('job_lease_ccnew1', 1, null, { valid: false }), ix('other_ccnew', 1, null, { valid: false })]), (o) => want(JSON.stringify(o.drop) === '["job_lease_ccnew1"]', 'ours only'));
  w('compact leaves foreign indexes', cp([ix('my_index', 90 * MiB, 1)]), (o) => want(o.record.length === 0 && o.rebuild === null, 'not ours'));
  w('compact missing indexes', (({ indexes, ...r }) => r)(cp([])), isError('invalid_input', 'indexes'));
  w('compact bytes negative', cp([ix('job_pkey', -1, null)]), isError('invalid_input', 'bytes'));
  const tb = (name, pages, rows, statsRows, hasStatistics) => ({ name, pages, rows, statsRows, hasStatistics });
  const analyze = (v) => (o) => want(JSON.stringify(o.analyze) === JSON.stringify(v), `analyze ${JSON.stringify(v)}`);
  w('compact analyzes a never-analyzed job table', cp([], { tables: [tb('job', 128, 5000, 0, false), tb('attempt', 127, 5000, 0, false)] }), analyze(['job']));
  w('compact analyzes a table holding 4x its statistics rows', cp([], { tables: [tb('attempt', 400, 4000, 1000, true), tb('job', 400, 3999, 1000, true)] }), analyze(['attempt']));
  w('compact leaves a table grown in pages only', cp([], { tables: [tb('job', 64000, 130000, 128000, true)] }), analyze([]));
  w('compact leaves a table under 1000 rows', cp([], { tables: [tb('job', 4096, 999, 0, true)] }), analyze([]));
  w('compact analyzes under a held horizon', cp([], { tables: [tb('job', 4096, 5000, 0, false)], horizon: [{ kind: 'session', ageMs: 600000, xidAge: 5 }] }), (o) => want(o.held && o.analyze[0] === 'job', 'held, analyzed'));
  w('compact does not repeat a tried analyze', cp([], { tables: [tb('job', 4096, 5000, 0, false)], analyzedTables: ['job'] }), analyze([]));
  w('compact leaves foreign tables', cp([], { tables: [tb('orders', 4096, 5000, 0, false)] }), analyze([]));
  w('compact without table facts', cp([]), analyze([]));
  w('compact table missing statsRows', cp([], { tables: [{ name: 'job', pages: 1, rows: 1, hasStatistics: true }] }), isError('invalid_input', 'statsRows'));
  w('compact table missing rows', cp([], { tables: [{ name: 'job', pages: 1, statsRows: 1, hasStatistics: true }] }), isError('invalid_input', 'rows'));
  w('compact table pages negative', cp([], { tables: [tb('job', -1, 0, 0, true)] }), isError('invalid_input', 'pages'));
  w('compact table statsRows fractional', cp([], { tables: [tb('job', 1, 1, 1.5, true)] }), isError('invalid_input', 'statsRows'));
  w('compact analyzedTables not strings', cp([], { analyzedTables: [1] }), isError('invalid_input', 'analyzedTables'));
  const ret = (o) => ({ op: 'retention', now: NOW, startedAt: NOW, deadlineAt: NOW + 840000, budgetMs: 60000, limit: 1000, deleted: 1000, ...o });
  const again = (v) => (o) => want(o.again === v, `again ${v}`);
  w('retention full batch within budget', ret({}), again(true));
  w('retention short batch', ret({ deleted: 999 }), again(false));
  w('retention nothing deleted', ret({ deleted: 0 }), again(false));
  w('retention budget spent', ret({ now: NOW + 60000 }), again(false));
  w('retention budget 1ms left', ret({ now: NOW + 59999 }), again(true));
  w('retention deadline caps budget', ret({ now: NOW + 10000, deadlineAt: NOW + 10000 }), again(false));
  w('retention zero budget', ret({ budgetMs: 0 }), again(false));
  w('retention missing deleted', (({ deleted, ...r }) => r)(ret({})), isError('invalid_input', 'deleted'));
  w('retention limit zero', ret({ limit: 0 }), isError('invalid_input', 'limit'));
  w('retention negative deleted', ret({ deleted: -1 }), isError('invalid_input', 'deleted'));
  const rec = (o) => ({ op: 'recover', now: NOW, deadlineAt: NOW + 120000, limit: 500, found: 500, ...o });
  w('recover full batch before the deadline', rec({}), again(true));
  w('recover short batch', rec({ found: 499 }), again(false));
  w('recover nothing found', rec({ found: 0 }), again(false));
  w('recover at the deadline', rec({ now: NOW + 120000 }), again(false));
  w('recover 1ms before the deadline', rec({ now: NOW + 119999 }), again(true));
  w('recover missing found', (({ found, ...r }) => r)(rec({})), isError('invalid_input', 'found'));
  w('recover limit over 10000', rec({ limit: 10001 }), isError('invalid_input', 'limit'));
  const start = (v) => (o) => want(o.start === v, `start ${v}`);
  w('schedule before until', { op: 'schedule', now: NOW - 1, until: NOW }, start(true));
  w('schedule at until', { op: 'schedule', now: NOW, until: NOW }, start(false));
  w('schedule missing until', { op: 'schedule', now: NOW }, isError('invalid_input', 'until'));
}

// ---------------------------------------------------------------------------------------------
// enqueue

{
  const enq = (o) => ({ now: NOW, delayMs: 0, maxPayloadBytes: 262144, maxQueueDelayMs: 86400000, hasQueue: true, payload: { userId: 42 }, ...o });
  const e = (name, input, check) => add('enqueue', name, input, check);
  e('immediate', enq({}), exactText(`{"ok":true,"payloadBytes":13,"dueAt":${NOW},"nudge":true,"delaySeconds":0}`));
  e('delay 1500 rounds up to 2 s', enq({ delayMs: 1500 }), fields({ dueAt: NOW + 1500, nudge: true, delaySeconds: 2 }));
  e('delay 1 ms is 1 s', enq({ delayMs: 1 }), fields({ delaySeconds: 1 }));
  e('delay 1000 is 1 s', enq({ delayMs: 1000 }), fields({ delaySeconds: 1 }));
  e('delay 1001 is 2 s', enq({ delayMs: 1001 }), fields({ delaySeconds: 2 }));
  e('delay equals maxQueueDelayMs', enq({ delayMs: 86400000 }), fields({ nudge: true, delaySeconds: 86400 }));
  e('delay beyond queue delay', enq({ delayMs: 86400001 }), fields({ ok: true, dueAt: NOW + 86400001, nudge: false }));
  e('delay 10 years', enq({ delayMs: 315360000000 }), fields({ ok: true }));
  e('delay 10 years and a day', enq({ delayMs: 315360000000 + DAY }), isError('invalid_input', 'delayMs'));
  e('no queue', enq({ hasQueue: false }), fields({ ok: true, nudge: false }));
  e('delayMs omitted', (({ delayMs, ...r }) => r)(enq({})), fields({ dueAt: NOW }));
  e('hasQueue omitted', (({ hasQueue, ...r }) => r)(enq({})));
  e('payload at limit', enq({ maxPayloadBytes: 13 }), fields({ ok: true, payloadBytes: 13 }));
  e('payload 1 byte over', enq({ maxPayloadBytes: 12 }),
    exactText('{"ok":false,"issues":[{"code":"payload_too_large","message":"payload is 13 bytes; the limit is 12"}]}'));
  e('payload 300000 bytes', fill(`{"now":${NOW},"delayMs":0,"maxPayloadBytes":262144,"maxQueueDelayMs":86400000,"hasQueue":true,"payload":"`, 'x', 299998, '"}'),
    fields({ ok: false, issues: [{ code: 'payload_too_large', message: 'payload is 300000 bytes; the limit is 262144' }] }));
  e('payload size is raw text with spaces', `{"now":${NOW},"payload": { "a" : [ 1, 2 ] } }`, fields({ payloadBytes: 18 }));
  e('payload null', enq({ payload: null }), fields({ ok: true, payloadBytes: 4 }));
  e('payload string', enq({ payload: 'hé' }), fields({ payloadBytes: 5 }));
  e('payload number', enq({ payload: 12.5 }), fields({ payloadBytes: 4 }));
  e('payload escaped unicode', `{"now":${NOW},"payload":"\\u00e9"}`, fields({ payloadBytes: 8 }));
  e('payload deep array', enq({ payload: [[[[[[[[1]]]]]]]] }));
  e('payload missing', (({ payload, ...r }) => r)(enq({})), isError('invalid_input', 'payload'));
  e('payload malformed', `{"now":${NOW},"payload":{"a":}}`, isError('invalid_json'));
  e('now missing', (({ now, ...r }) => r)(enq({})), isError('invalid_input', 'now'));
  e('delay negative', enq({ delayMs: -1 }), isError('invalid_input', 'delayMs'));
  e('delay float', enq({ delayMs: 1.5 }), isError('invalid_input', 'delayMs'));
  e('hasQueue string', enq({ hasQueue: 'yes' }), isError('invalid_input', 'hasQueue'));
  e('maxPayloadBytes above cap', enq({ maxPayloadBytes: 1e9 }), isError('invalid_input', 'maxPayloadBytes'));
  e('maxPayloadBytes 0', enq({ maxPayloadBytes: 0 }));
  e('unknown field', enq({ weight: 1 }));
  e('priority 3 boosts 3 minutes', enq({ priority: 3 }), exactText(`{"ok":true,"payloadBytes":13,"dueAt":${NOW},"boostMs":180000,"nudge":true,"delaySeconds":0}`));
  e('priority 0 carries no boost', enq({ priority: 0 }), (o) => want(o.boostMs === undefined, 'no boostMs'));
  e('priority 11', enq({ priority: 11 }), isError('invalid_input', 'priority'));
  e('priority string', enq({ priority: 'high' }), isError('invalid_input', 'priority'));
  e('op one is the single form', { op: 'one', ...enq({}) }, exactText(`{"ok":true,"payloadBytes":13,"dueAt":${NOW},"nudge":true,"delaySeconds":0}`));
  e('payloadBytes instead of payload', (({ payload, ...r }) => ({ ...r, payloadBytes: 300000 }))(enq({})),
    exactText('{"ok":false,"issues":[{"code":"payload_too_large","message":"payload is 300000 bytes; the limit is 262144"}]}'));
  e('op unknown', { op: 'many', now: NOW, items: [] }, isError('unknown_op'));

  // The batch form (enqueueMany): one decision per item, in order, by the single form's rules.
  const batch = (items, o = {}) => ({ op: 'batch', now: NOW, maxPayloadBytes: 262144, maxQueueDelayMs: 86400000, hasQueue: true, items, ...o });
  // Each item's decision per docs/ABI.md, computed here.
  const decision = ({ delayMs = 0, payloadBytes }, { maxPayloadBytes = 262144, hasQueue = true, maxQueueDelayMs = 86400000 } = {}) =>
    payloadBytes > maxPayloadBytes
      ? { ok: false, issues: [{ code: 'payload_too_large', message: `payload is ${payloadBytes} bytes; the limit is ${maxPayloadBytes}` }] }
      : { ok: true, payloadBytes, dueAt: NOW + delayMs, nudge: hasQueue && delayMs <= maxQueueDelayMs,
          delaySeconds: hasQueue && delayMs <= maxQueueDelayMs ? Math.ceil(delayMs / 1000) : null };
  const decides = (items, o = {}) => exactText(JSON.stringify({ results: items.map((i) => decision(i, o)) }));
  const mixed = [{ payloadBytes: 17 }, { delayMs: 1500, payloadBytes: 2 }, { payloadBytes: 300000 }, { delayMs: 86400001, payloadBytes: 0 }, { delayMs: 1, payloadBytes: 262144 }];
  e('batch mixed items', batch(mixed), decides(mixed));
  e('batch without a queue', batch(mixed, { hasQueue: false }), decides(mixed, { hasQueue: false }));
  e('batch empty', batch([]), exactText('{"results":[]}'));
  e('batch settings after items', `{"items":[{"payloadBytes":5}],"op":"batch","maxPayloadBytes":4,"now":${NOW}}`,
    decides([{ payloadBytes: 5 }], { maxPayloadBytes: 4, hasQueue: false }));
  e('batch item with its payload', `{"op":"batch","now":${NOW},"items":[{"payload":{"a":[1, 2]}}]}`, decides([{ payloadBytes: 12 }], { hasQueue: false }));
  e('batch item missing payloadBytes', batch([{ payloadBytes: 1 }, { delayMs: 5 }]), isError('invalid_input', 'items[1].payloadBytes'));
  e('batch item delay negative', batch([{ payloadBytes: 1, delayMs: -1 }]), isError('invalid_input', 'items[0].delayMs'));
  e('batch item not an object', batch([7]), isError('invalid_input', 'items[0]'));
  e('batch items not an array', batch({}), isError('invalid_input', 'items'));
  e('batch items missing', (({ items, ...r }) => r)(batch([])), isError('invalid_input', 'items'));
  e('batch now missing', (({ now, ...r }) => r)(batch([])), isError('invalid_input', 'now'));
  // Dedupe: what an item whose key was already held becomes.
  const dd = (items) => ({ op: 'dedupe', items });
  // Every flag true but those named: the reason is the first false in kind, payload, maxAttempts, metadata, correlationId order.
  const same = (...differing) =>
    Object.fromEntries(['sameKind', 'samePayload', 'sameMaxAttempts', 'sameMetadata', 'sameCorrelationId', 'samePriority', 'sameParents', 'sameOnParentFailure'].map((f) => [f, !differing.includes(f)]));
  const conflicts = (...reasons) => exactText(`{"results":[${reasons.map((r) => (r === 'exists' ? '{"status":"exists"}' : `{"status":"dedupe_conflict","reason":"${r}"}`)).join(',')}]}`);
  e('dedupe same request exists', dd([same()]), conflicts('exists'));
  e('dedupe other payload conflicts', dd([same('samePayload')]), conflicts('payload'));
  e('dedupe other kind conflicts', dd([same('sameKind'), same('sameKind', 'samePayload')]), conflicts('kind', 'kind'));
  e('dedupe other maxAttempts conflicts', dd([same('sameMaxAttempts'), same('sameMaxAttempts', 'sameCorrelationId')]), conflicts('maxAttempts', 'maxAttempts'));
  e('dedupe other metadata conflicts', dd([same('sameMetadata'), same('sameMetadata', 'sameCorrelationId')]), conflicts('metadata', 'metadata'));
  e('dedupe other correlationId conflicts', dd([same('sameCorrelationId')]), conflicts('correlationId'));
  e('dedupe other priority conflicts', dd([same('samePriority'), same('samePriority', 'sameParents')]), conflicts('priority', 'priority'));
  e('dedupe other parents conflict', dd([same('sameParents'), same('sameParents', 'sameOnParentFailure')]), conflicts('dependsOn', 'dependsOn'));
  e('dedupe other parent-failure effect conflicts', dd([same('sameOnParentFailure')]), conflicts('onParentFailure'));
  e('dedupe parents flag missing', dd([(({ sameParents, ...r }) => r)(same())]), isError('invalid_input', 'items[0].sameParents'));
  e('dedupe first differing field named', dd([same('sameCorrelationId', 'samePayload'), same('sameCorrelationId', 'sameMetadata', 'sameMaxAttempts'), same('sameKind', 'samePayload', 'sameMaxAttempts', 'sameMetadata', 'sameCorrelationId')]),
    conflicts('payload', 'maxAttempts', 'kind'));
  e('dedupe empty', dd([]), exactText('{"results":[]}'));
  e('dedupe flag missing', dd([{ sameKind: true }]), isError('invalid_input', 'items[0].samePayload'));
  e('dedupe two flags are not enough', dd([{ sameKind: true, samePayload: true }]), isError('invalid_input', 'items[0].sameMaxAttempts'));
  e('dedupe correlationId flag missing', dd([{ sameKind: true, samePayload: true, sameMaxAttempts: true, sameMetadata: true }]), isError('invalid_input', 'items[0].sameCorrelationId'));
  e('dedupe flag not boolean', dd([{ sameKind: 'yes', samePayload: true }]), isError('invalid_input', 'items[0].sameKind'));
  e('dedupe metadata flag not boolean', dd([{ ...same(), sameMetadata: 1 }]), isError('invalid_input', 'items[0].sameMetadata'));
  e('dedupe items missing', { op: 'dedupe' }, isError('invalid_input', 'items'));
  e('batch item maxAttempts in range', batch([{ payloadBytes: 1, maxAttempts: 1 }, { payloadBytes: 1, maxAttempts: 1000 }]), decides([{ payloadBytes: 1 }, { payloadBytes: 1 }]));
  e('batch item maxAttempts 0', batch([{ payloadBytes: 1, maxAttempts: 0 }]), isError('invalid_input', 'items[0].maxAttempts'));
  e('maxAttempts 1001', enq({ maxAttempts: 1001 }), isError('invalid_input', 'maxAttempts'));
  e('batch 5001 items', fill(`{"op":"batch","now":${NOW},"items":[`, '{"payloadBytes":1},', 5000, '{"payloadBytes":1}]}'), isError('too_large', '5000'));
  const full = Array.from({ length: 64 }, () => ({ payloadBytes: 262144 }));
  e('batch 16 MiB of payloads', batch([...full, { payloadBytes: 300000 }]), decides([...full, { payloadBytes: 300000 }]));
  e('batch over 16 MiB of payloads', batch([...full, { payloadBytes: 1 }]), isError('too_large', '16777216'));

  // Dependencies (dependencies.h): parents are earlier indexes, or stored jobs by status as the shim found them (false: not found).
  const born = (status, waitingOn, effect, [total, dead, cancelled], counted) => ({ ok: true, payloadBytes: 1, dueAt: NOW, nudge: status === 'pending', delaySeconds: status === 'pending' ? 0 : null,
    parents: { status, waitingOn, onParentFailure: effect, total, dead, cancelled, ...(counted ? { counted } : {}), ...(status === 'cancelled' ? { code: 'parent_failed' } : {}) } });
  const refused = (code) => (o) => want(o.ok === false && o.issues[0].code === code, code);
  const each = (...checks) => (o) => checks.forEach((check, i) => check(o.results[i]));
  const plain = (o) => want(o.ok === true && o.parents === undefined && o.nudge === true, 'due now, nudged');
  // `tally`: [all parents, dead, cancelled] at birth; `counted`: the places of the parents that had ended (counted at birth).
  const is = (status, waitingOn, effect, tally, counted) => (o) => want(JSON.stringify(o) === JSON.stringify(born(status, waitingOn, effect, tally, counted)), `${status} on ${waitingOn} of ${tally}, ${effect} on a failed parent, counted ${counted}`);
  e('batch parents: an earlier item and an open job: waits on 2, cancel by default', batch([{ payloadBytes: 1 }, { payloadBytes: 1, parents: [0, 'running', 'succeeded'] }]), each(plain, is('waiting', 2, 'cancel', [3, 0, 0], [2])));
  e('batch parents: run keeps release', batch([{ payloadBytes: 1 }, { payloadBytes: 1, parents: [0], onParentFailure: 'run' }]), each(plain, is('waiting', 1, 'release', [1, 0, 0])));
  e('batch parents: explicit cancel', batch([{ payloadBytes: 1, parents: ['pending'], onParentFailure: 'cancel' }]), each(is('waiting', 1, 'cancel', [1, 0, 0])));
  e('batch parents: every unfinished status is open', batch([{ payloadBytes: 1, parents: ['pending', 'running', 'retrying', 'waiting'] }]), each(is('waiting', 4, 'cancel', [4, 0, 0])));
  e('batch parents: all succeeded is due now', batch([{ payloadBytes: 1, parents: ['succeeded', 'succeeded'] }]), each(is('pending', 0, 'cancel', [2, 0, 0], [0, 1])));
  e('batch parents: a dead one cancels at birth', batch([{ payloadBytes: 1, parents: ['dead', 'pending'] }]), each(is('cancelled', 0, 'cancel', [2, 1, 0], [0])));
  e('batch parents: a cancelled one cancels at birth', batch([{ payloadBytes: 1, parents: ['cancelled'] }]), each(is('cancelled', 0, 'cancel', [1, 0, 1], [0])));
  e('batch parents: a failed one under run counts as done', batch([{ payloadBytes: 1, parents: ['dead', 'pending'], onParentFailure: 'run' }]), each(is('waiting', 1, 'release', [2, 1, 0], [0])));
  e('batch parents: born cancelled cancels its children', batch([{ payloadBytes: 1, parents: ['dead'] }, { payloadBytes: 1, parents: [0] }, { payloadBytes: 1, parents: [1], onParentFailure: 'run' }]),
    each(is('cancelled', 0, 'cancel', [1, 1, 0], [0]), is('cancelled', 0, 'cancel', [1, 0, 1], [0]), is('pending', 0, 'release', [1, 0, 1], [0])));
  e('batch parents: empty list is none', batch([{ payloadBytes: 1, parents: [] }]), each(plain));
  // A completion is marked as one ("batch":true), so cancelBatch tells a batch from any child.
  const isBatch = (status, waitingOn, tally, counted) => (o) => {
    const plainBorn = born(status, waitingOn, 'release', tally, counted);
    want(JSON.stringify(o) === JSON.stringify({ ...plainBorn, parents: { ...plainBorn.parents, batch: true } }), `a batch completion ${status} on ${waitingOn} of ${tally}`);
  };
  e('batch completion: waits on its members and releases on failure', batch([{ payloadBytes: 1, completesBatch: true, parents: ['running', 'dead', 'succeeded'] }]), each(isBatch('waiting', 1, [3, 1, 0], [1, 2])));
  e('batch completion: no member is due now', batch([{ payloadBytes: 1, completesBatch: true, parents: [] }]), each(isBatch('pending', 0, [0, 0, 0])));
  e('batch completion: run whatever onParentFailure says', batch([{ payloadBytes: 1, completesBatch: true, onParentFailure: 'cancel', parents: ['cancelled'] }]), each(isBatch('pending', 0, [1, 0, 1], [0])));
  e('batch completion: 100000 members', batch([{ payloadBytes: 1, completesBatch: true, parents: Array(100000).fill('pending') }]), each(isBatch('waiting', 100000, [100000, 0, 0])));
  e('batch completion: 100001 members', batch([{ payloadBytes: 1, completesBatch: true, parents: Array(100001).fill('pending') }]), isError('too_large', 'parents'));
  e('batch completion: not a bool', batch([{ payloadBytes: 1, completesBatch: 1 }]), isError('invalid_input', 'items[0].completesBatch'));
  e('batch parents: itself is a cycle', batch([{ payloadBytes: 1, parents: [0] }]), each(refused('dependency_cycle')));
  e('batch parents: a later item is a cycle', batch([{ payloadBytes: 1, parents: [1] }, { payloadBytes: 1 }]), each(refused('dependency_cycle'), plain));
  e('batch parents: not found is unknown', batch([{ payloadBytes: 1, parents: ['pending', false] }]), each(refused('unknown_parent')));
  e('batch parents: cycle named before unknown', batch([{ payloadBytes: 1, parents: [false, 0] }]), each(refused('dependency_cycle')));
  e('batch parents: a shim-refused parent refuses', batch([{ payloadBytes: 1, refused: true }, { payloadBytes: 1, parents: [0] }, { payloadBytes: 1, parents: [1] }]),
    each(plain, refused('parent_refused'), refused('parent_refused')));
  e('batch parents: an oversized parent refuses', batch([{ payloadBytes: 300000 }, { payloadBytes: 1, parents: [0] }]), each(refused('payload_too_large'), refused('parent_refused')));
  e('batch parents: 100 is the most', batch([{ payloadBytes: 1, parents: Array(100).fill('pending') }]), each(is('waiting', 100, 'cancel', [100, 0, 0])));
  e('batch parents: 101 are too many', batch([{ payloadBytes: 1, parents: Array(101).fill('pending') }]), each(refused('too_many_parents')));
  e('batch parents: an unknown state', batch([{ payloadBytes: 1, parents: ['x'] }]), isError('invalid_input', 'items[0].parents'));
  e('batch parents: a verdict is no status', batch([{ payloadBytes: 1, parents: ['failed'] }]), isError('invalid_input', 'items[0].parents'));
  e('batch parents: true', batch([{ payloadBytes: 1, parents: [true] }]), isError('invalid_input', 'items[0].parents'));
  e('batch parents: negative index', batch([{ payloadBytes: 1, parents: [-1] }]), isError('invalid_input', 'items[0].parents'));
  e('batch parents: not an array', batch([{ payloadBytes: 1, parents: {} }]), isError('invalid_input', 'items[0].parents'));
  e('batch onParentFailure unknown', batch([{ payloadBytes: 1, onParentFailure: 'ignore' }]), isError('invalid_input', 'items[0].onParentFailure'));
  e('batch refused not a bool', batch([{ payloadBytes: 1, refused: 1 }]), isError('invalid_input', 'items[0].refused'));
  e('single form ignores parents', enq({ parents: [0] }), exactText(`{"ok":true,"payloadBytes":13,"dueAt":${NOW},"nudge":true,"delaySeconds":0}`));
}

// ---------------------------------------------------------------------------------------------
// nudge

{
  const ID = '0b6f5c3e-2a4d-4c1f-9e8b-7d6a5f4e3c2b';
  const n = (name, input, check) => add('nudge', name, input, check);
  n('encode one', { op: 'encode', jobs: [{ id: ID, kind: 'email.welcome', lane: 'default' }] },
    exactText(`{"messages":[{"v":1,"t":"job","id":"${ID}","kind":"email.welcome","lane":"default"}]}`));
  n('encode several', { op: 'encode', jobs: [{ id: ID, kind: 'a', lane: 'x' }, { id: ID.toUpperCase(), kind: 'b', lane: 'y' }] }, (o) => want(o.messages.length === 2, 'two messages'));
  n('encode none', { op: 'encode', jobs: [] }, exactText('{"messages":[]}'));
  n('redeliver doubling', { op: 'redeliver', attempts: [1, 2, 3, 6, 7, 50] }, exactText('{"delaySeconds":[5,10,20,160,300,300]}'));
  n('redeliver none', { op: 'redeliver', attempts: [] }, exactText('{"delaySeconds":[]}'));
  n('redeliver zero attempts', { op: 'redeliver', attempts: [0] }, isError('invalid_input', 'attempts'));
  n('redeliver over a million', { op: 'redeliver', attempts: [1000001] }, isError('invalid_input', 'attempts'));
  n('redeliver not a list', { op: 'redeliver', attempts: 3 }, isError('invalid_input', 'attempts'));
  n('redeliver missing', { op: 'redeliver' }, isError('invalid_input', 'attempts'));
  n('redeliver 101', { op: 'redeliver', attempts: Array(101).fill(1) }, isError('invalid_input', 'attempts'));
  n('encode drains', { op: 'encode', drains: ['bulk', 'default'] },
    exactText('{"messages":[{"v":1,"t":"drain","lane":"bulk"},{"v":1,"t":"drain","lane":"default"}]}'));
  n('encode jobs then drains', { op: 'encode', jobs: [{ id: ID, kind: 'a', lane: 'x' }], drains: ['x'] },
    (o) => want(o.messages.length === 2 && o.messages[1].t === 'drain' && o.messages[1].lane === 'x', 'a job, then a drain'));
  n('encode drain bad lane', { op: 'encode', drains: ['a b'] }, isError('invalid_input', 'lane'));
  n('encode drain not a string', { op: 'encode', drains: [7] }, isError('invalid_input', 'lane'));
  n('encode drains not an array', { op: 'encode', drains: 'bulk' }, isError('invalid_input', 'drains'));
  n('encode bad id', { op: 'encode', jobs: [{ id: 'x', kind: 'a', lane: 'b' }] }, (o) => want(o.error, 'an error'));
  n('encode bad kind', { op: 'encode', jobs: [{ id: ID, kind: 'a b', lane: 'b' }] }, (o) => want(o.error, 'an error'));
  n('encode missing lane', { op: 'encode', jobs: [{ id: ID, kind: 'a' }] }, (o) => want(o.error, 'an error'));
  n('encode missing jobs', { op: 'encode' }, isError('invalid_input', 'jobs'));
  const dec = (name, messages, check, lane = 'default') => n(name, { op: 'decode', lane, messages }, check);
  const one = (check) => (o) => {
    want(o.messages.length === 1, 'one result');
    check(o.messages[0]);
  };
  const okMsg = (extra) => one((m) => want(m.ok === true && Object.entries(extra).every(([k, v]) => m[k] === v), `ok with ${JSON.stringify(extra)}: ${JSON.stringify(m)}`));
  const badMsg = (code = 'invalid_message') => one((m) => want(m.ok === false && m.code === code && typeof m.message === 'string', `ok:false code ${code}: ${JSON.stringify(m)}`));
  dec('decode job', [{ v: 1, t: 'job', id: ID, kind: 'email.welcome', lane: 'default' }], okMsg({ t: 'job', id: ID, kind: 'email.welcome', lane: 'default' }));
  dec('decode drain', [{ v: 1, t: 'drain', lane: 'default' }], okMsg({ t: 'drain', lane: 'default' }));
  dec('decode uppercase uuid', [{ v: 1, t: 'job', id: ID.toUpperCase(), kind: 'a', lane: 'default' }], okMsg({ id: ID.toUpperCase() }));
  dec('decode mixed-case uuid', [{ v: 1, t: 'job', id: '0B6f5c3e-2a4d-4c1f-9e8b-7d6a5f4e3c2b', kind: 'a', lane: 'default' }], badMsg());
  dec('decode uuid without dashes', [{ v: 1, t: 'job', id: ID.replaceAll('-', ''), kind: 'a', lane: 'default' }], badMsg());
  dec('decode uuid braces', [{ v: 1, t: 'job', id: `{${ID}}`, kind: 'a', lane: 'default' }], badMsg());
  dec('decode uuid non-hex', [{ v: 1, t: 'job', id: ID.replace('0b', 'zz'), kind: 'a', lane: 'default' }], badMsg());
  dec('decode uuid too long', [{ v: 1, t: 'job', id: ID + '0', kind: 'a', lane: 'default' }], badMsg());
  dec('decode wrong lane', [{ v: 1, t: 'job', id: ID, kind: 'a', lane: 'bulk' }], badMsg('wrong_lane'));
  n('decode any lane', { op: 'decode', messages: [{ v: 1, t: 'job', id: ID, kind: 'a', lane: 'bulk' }, { v: 1, t: 'drain', lane: 'default' }] },
    (o) => want(o.messages.length === 2 && o.messages.every((m) => m.ok) && o.messages[0].lane === 'bulk', 'without a lane every lane is taken'));
  n('decode empty lane', { op: 'decode', lane: '', messages: [] }, isError('invalid_input', 'lane'));
  dec('decode drain wrong lane', [{ v: 1, t: 'drain', lane: 'bulk' }], badMsg('wrong_lane'));
  dec('decode on bulk lane', [{ v: 1, t: 'drain', lane: 'bulk' }], okMsg({ lane: 'bulk' }), 'bulk');
  dec('decode v 2', [{ v: 2, t: 'job', id: ID, kind: 'a', lane: 'default' }], badMsg());
  dec('decode v string', [{ v: '1', t: 'drain', lane: 'default' }], badMsg());
  dec('decode v missing', [{ t: 'drain', lane: 'default' }], badMsg());
  dec('decode t unknown', [{ v: 1, t: 'purge', lane: 'default' }], badMsg());
  dec('decode t missing', [{ v: 1, lane: 'default' }], badMsg());
  dec('decode job missing id', [{ v: 1, t: 'job', kind: 'a', lane: 'default' }], badMsg());
  dec('decode job missing kind', [{ v: 1, t: 'job', id: ID, lane: 'default' }], badMsg());
  dec('decode message missing lane', [{ v: 1, t: 'drain' }], badMsg());
  dec('decode kind bad charset', [{ v: 1, t: 'job', id: ID, kind: '<script>', lane: 'default' }], badMsg());
  dec('decode kind 129 bytes', [{ v: 1, t: 'job', id: ID, kind: 'k'.repeat(129), lane: 'default' }], badMsg());
  dec('decode lane 65 bytes', [{ v: 1, t: 'drain', lane: 'l'.repeat(65) }], badMsg());
  dec('decode string body', ['{"v":1,"t":"drain","lane":"default"}'], badMsg());
  dec('decode null body', [null], badMsg());
  dec('decode number body', [1], badMsg());
  dec('decode array body', [[1, 2]], badMsg());
  dec('decode huge string body', ['x'.repeat(100000)], badMsg());
  dec('decode extra fields', [{ v: 1, t: 'drain', lane: 'default', extra: { deep: [1] } }]);
  dec('decode id as number', [{ v: 1, t: 'job', id: 5, kind: 'a', lane: 'default' }], badMsg());
  dec('decode hostile control chars', [{ v: 1, t: 'job', id: ID, kind: 'a\u0000b', lane: 'default' }], badMsg());
  dec('decode __proto__ key', ['__proto__'].map(() => JSON.parse(`{"__proto__":{"t":"job"},"v":1,"t":"drain","lane":"default"}`)));
  dec('decode mixed batch', [{ v: 1, t: 'drain', lane: 'default' }, 'junk', { v: 1, t: 'job', id: ID, kind: 'a', lane: 'other' }],
    (o) => want(o.messages.map((m) => m.ok ? 'ok' : m.code).join() === 'ok,invalid_message,wrong_lane', 'ok, invalid_message, wrong_lane'));
  dec('decode 100 messages', Array.from({ length: 100 }, () => ({ v: 1, t: 'drain', lane: 'default' })), (o) => want(o.messages.length === 100, '100 results'));
  dec('decode 101 messages', Array.from({ length: 101 }, () => ({ v: 1, t: 'drain', lane: 'default' })), (o) => want(o.error?.code === 'invalid_input', 'invalid_input'));
  dec('decode empty', [], exactText('{"messages":[]}'));
  n('decode bad lane', { op: 'decode', lane: 'a b', messages: [] }, isError('invalid_input', 'lane'));
  n('decode without lane field', { op: 'decode', messages: [] }, exactText('{"messages":[]}'));
  n('decode missing messages', { op: 'decode', lane: 'default' }, isError('invalid_input', 'messages'));
  n('decode messages not array', { op: 'decode', lane: 'default', messages: {} }, (o) => want(o.error, 'an error'));
  n('op unknown', { op: 'send' }, isError('unknown_op'));
  n('op missing', { jobs: [] }, isError('invalid_input', 'op'));

  // Multi-job messages: {"v":1,"t":"jobs","kind","lane","ids":[1..100 UUIDs]}.
  const ids = (n) => Array.from({ length: n }, (_, i) => `0190a5b2-0000-7000-8000-${String(i).padStart(12, '0')}`);
  const jobsMsg = (o = {}) => ({ v: 1, t: 'jobs', kind: 'email.welcome', lane: 'default', ids: ids(3), ...o });
  dec('decode jobs', [jobsMsg()], exactText(JSON.stringify({ messages: [{ ok: true, t: 'jobs', kind: 'email.welcome', lane: 'default', ids: ids(3) }] })));
  dec('decode jobs 100 ids', [jobsMsg({ ids: ids(100) })], okMsg({ t: 'jobs' }));
  dec('decode jobs 101 ids', [jobsMsg({ ids: ids(101) })], badMsg('too_large'));
  dec('decode jobs 3000 ids', [jobsMsg({ ids: ids(3000) })], badMsg('too_large'));
  dec('decode jobs empty ids', [jobsMsg({ ids: [] })], badMsg());
  dec('decode jobs missing ids', [(({ ids: _i, ...r }) => r)(jobsMsg())], badMsg());
  dec('decode jobs ids not an array', [jobsMsg({ ids: ID })], badMsg());
  dec('decode jobs bad id', [jobsMsg({ ids: [ID, "x'; DROP TABLE outbox.job; --"] })], badMsg());
  dec('decode jobs missing kind', [(({ kind: _k, ...r }) => r)(jobsMsg())], badMsg());
  dec('decode jobs wrong lane', [jobsMsg({ lane: 'bulk' })], badMsg('wrong_lane'));
  dec('decode jobs v 2', [jobsMsg({ v: 2 })], badMsg());
  dec('decode jobs beside old messages', [{ v: 1, t: 'job', id: ID, kind: 'a', lane: 'default' }, jobsMsg(), { v: 1, t: 'drain', lane: 'default' }],
    (o) => want(o.messages.map((m) => m.t).join() === 'job,jobs,drain', 'job, jobs, drain'));

  // Several outboxes: the sender names its outbox; a consumer of several routes by it.
  n('encode names the outbox', { op: 'encode', outbox: 'eu', jobs: [{ id: ID, kind: 'a', lane: 'default' }], drains: ['bulk'] },
    exactText(`{"messages":[{"v":1,"t":"job","id":"${ID}","kind":"a","lane":"default","outbox":"eu"},{"v":1,"t":"drain","lane":"bulk","outbox":"eu"}]}`));
  n('encode outbox after the lists', { drains: ['bulk'], op: 'encode', outbox: 'us_2' }, exactText('{"messages":[{"v":1,"t":"drain","lane":"bulk","outbox":"us_2"}]}'));
  n('encode outbox absent', { op: 'encode', drains: ['bulk'] }, exactText('{"messages":[{"v":1,"t":"drain","lane":"bulk"}]}'));
  n('encode outbox null', { op: 'encode', outbox: null, drains: ['bulk'] }, isError('invalid_input', 'outbox'));
  n('encode outbox dash', { op: 'encode', outbox: '-', drains: ['bulk'] }, isError('invalid_input', 'outbox'));
  n('encode outbox uppercase', { op: 'encode', outbox: 'EU', drains: ['bulk'] }, isError('invalid_input', 'outbox'));
  n('encode outbox empty', { op: 'encode', outbox: '', drains: ['bulk'] }, isError('invalid_input', 'outbox'));
  n('encode outbox digit first', { op: 'encode', outbox: '1eu', drains: ['bulk'] }, isError('invalid_input', 'outbox'));
  n('encode outbox 33 bytes', { op: 'encode', outbox: 'o'.repeat(33), drains: ['bulk'] }, isError('invalid_input', 'outbox'));
  n('encode outbox number', { op: 'encode', outbox: 7, drains: ['bulk'] }, isError('invalid_input', 'outbox'));
  const fleetDec = (name, consumer, messages, check) => n(name, { op: 'decode', ...consumer, messages }, check);
  const EU_US = { outboxes: ['eu', 'us'], defaultOutbox: 'eu' };
  fleetDec('decode routes by outbox', EU_US, [{ v: 1, t: 'job', id: ID, kind: 'a', lane: 'default', outbox: 'us' }],
    exactText(`{"messages":[{"ok":true,"t":"job","id":"${ID}","kind":"a","lane":"default","outbox":"us"}]}`));
  fleetDec('decode unnamed goes to the default', EU_US, [{ v: 1, t: 'job', id: ID, kind: 'a', lane: 'default' }], okMsg({ outbox: 'eu' }));
  fleetDec('decode unnamed jobs message', EU_US, [jobsMsg()], okMsg({ t: 'jobs', outbox: 'eu' }));
  fleetDec('decode drain names its outbox', EU_US, [{ v: 1, t: 'drain', lane: 'bulk', outbox: 'us' }], okMsg({ t: 'drain', lane: 'bulk', outbox: 'us' }));
  const unknownOutbox = one((m) => want(m.ok === false && m.code === 'unknown_outbox' && m.retry === true && m.delaySeconds === 60, `unknown_outbox, retried in 60 s: ${JSON.stringify(m)}`));
  fleetDec('decode unknown outbox', EU_US, [{ v: 1, t: 'job', id: ID, kind: 'a', lane: 'default', outbox: 'ap' }], unknownOutbox);
  fleetDec('decode unnamed without a default', { outboxes: ['eu', 'us'] }, [{ v: 1, t: 'drain', lane: 'default' }], unknownOutbox);
  fleetDec('decode unnamed, default null', { outboxes: ['eu', 'us'], defaultOutbox: null }, [{ v: 1, t: 'drain', lane: 'default' }], unknownOutbox);
  fleetDec('decode outbox uppercase', EU_US, [{ v: 1, t: 'drain', lane: 'default', outbox: 'EU' }], badMsg());
  fleetDec('decode outbox null', EU_US, [{ v: 1, t: 'drain', lane: 'default', outbox: null }], badMsg());
  fleetDec('decode outbox object', EU_US, [{ v: 1, t: 'drain', lane: 'default', outbox: { eu: 1 } }], badMsg());
  fleetDec('decode outbox huge', EU_US, [{ v: 1, t: 'drain', lane: 'default', outbox: 'a'.repeat(100000) }], badMsg());
  fleetDec('decode outbox injection', EU_US, [{ v: 1, t: 'drain', lane: 'default', outbox: 'eu"; DROP SCHEMA outbox; --' }], badMsg());
  fleetDec('decode wrong lane before outbox', { lane: 'default', ...EU_US }, [{ v: 1, t: 'drain', lane: 'bulk', outbox: 'ap' }], badMsg('wrong_lane'));
  fleetDec('decode mixed fleet batch', EU_US,
    [{ v: 1, t: 'drain', lane: 'default', outbox: 'us' }, 'junk', { v: 1, t: 'drain', lane: 'default', outbox: 'ap' }, { v: 1, t: 'drain', lane: 'default' }],
    (o) => want(o.messages.map((m) => (m.ok ? m.outbox : m.code)).join() === 'us,invalid_message,unknown_outbox,eu', 'us, invalid, unknown, eu'));
  n('decode consumer after the messages', { messages: [{ v: 1, t: 'drain', lane: 'bulk', outbox: 'us' }], op: 'decode', outboxes: ['eu', 'us'] }, okMsg({ outbox: 'us' }));
  dec('decode one outbox takes any name', [{ v: 1, t: 'drain', lane: 'default', outbox: 'ap' }], okMsg({ outbox: 'ap' }));
  n('decode outboxes repeated', `{"op":"decode","outboxes":[${Array.from({ length: 64 }, (_, i) => `"o${i}"`).join()}],"outboxes":["eu"],"messages":[{"v":1,"t":"drain","lane":"default","outbox":"o1"},{"v":1,"t":"drain","lane":"default","outbox":"eu"}]}`,
    (o) => want(o.messages.map((m) => (m.ok ? m.outbox : m.code)).join() === 'unknown_outbox,eu', 'the last list counts'));
  n('decode outboxes empty', { op: 'decode', outboxes: [], messages: [] }, isError('invalid_input', 'outboxes'));
  n('decode outboxes not an array', { op: 'decode', outboxes: 'eu', messages: [] }, isError('invalid_input', 'outboxes'));
  n('decode outboxes bad key', { op: 'decode', outboxes: ['eu', 'E U'], messages: [] }, isError('invalid_input', 'outboxes[1]'));
  n('decode outboxes 65', { op: 'decode', outboxes: Array.from({ length: 65 }, (_, i) => `o${i}`), messages: [] }, isError('invalid_input', '64'));
  n('decode default not served', { op: 'decode', outboxes: ['eu'], defaultOutbox: 'us', messages: [] }, isError('invalid_input', 'defaultOutbox'));
  n('decode default without outboxes', { op: 'decode', defaultOutbox: 'eu', messages: [] }, isError('invalid_input', 'defaultOutbox'));

  // pack: coalesced job nudges in sendBatch-sized batches.
  const packJob = (i, kind = 'k', lane = 'default', delaySeconds) => ({ id: ids(i + 1)[i], kind, lane, ...(delaySeconds === undefined ? {} : { delaySeconds }) });
  const bodies = (o) => o.batches.flatMap((b) => b.messages.map((m) => m.body));
  n('pack one job is the single-job message', { op: 'pack', jobs: [packJob(0)] },
    exactText(JSON.stringify({ batches: [{ lane: 'default', messages: [{ body: { v: 1, t: 'job', id: ids(1)[0], kind: 'k', lane: 'default' }, delaySeconds: 0 }] }] })));
  n('pack three jobs of one kind', { op: 'pack', jobs: [0, 1, 2].map((i) => packJob(i)) },
    exactText(JSON.stringify({ batches: [{ lane: 'default', messages: [{ body: { v: 1, t: 'jobs', kind: 'k', lane: 'default', ids: ids(3) }, delaySeconds: 0 }] }] })));
  n('pack groups by lane, kind and delay', { op: 'pack', jobs: [packJob(0, 'a'), packJob(1, 'b', 'bulk'), packJob(2, 'a', 'default', 60), packJob(3, 'c'), packJob(4, 'a')] },
    (o) => {
      want(o.batches.map((b) => b.lane).join() === 'default,bulk', 'a default batch, then a bulk one');
      want(o.batches[0].messages.map((m) => `${m.body.kind}+${m.delaySeconds}`).join() === 'a+0,a+60,c+0', 'a, a delayed, c');
      want(JSON.stringify(o.batches[0].messages[0].body.ids) === JSON.stringify([ids(5)[0], ids(5)[4]]), 'a keeps input order');
    });
  n('pack 250 jobs', { op: 'pack', jobs: Array.from({ length: 250 }, (_, i) => packJob(i)) }, (o) => {
    want(o.batches.length === 1 && o.batches[0].messages.length === 3, 'one batch of three messages');
    want(bodies(o).map((b) => b.ids.length).join() === '100,100,50', '100, 100 and 50 ids');
    want(JSON.stringify(bodies(o).flatMap((b) => b.ids)) === JSON.stringify(ids(250)), 'every id once, in order');
  });
  n('pack 200 delays', { op: 'pack', jobs: Array.from({ length: 200 }, (_, i) => packJob(i, 'k', 'default', i)) }, (o) => {
    want(o.batches.map((b) => b.messages.length).join() === '58,58,58,26', 'batches of at most 58 messages');
    want(bodies(o).every((b) => b.t === 'job'), 'single-job messages');
  });
  n('pack names the outbox', { op: 'pack', outbox: 'eu', jobs: [0, 1].map((i) => packJob(i)) },
    exactText(JSON.stringify({ batches: [{ lane: 'default', messages: [{ body: { v: 1, t: 'jobs', kind: 'k', lane: 'default', outbox: 'eu', ids: ids(2) }, delaySeconds: 0 }] }] })));
  n('pack names the outbox on single-job messages', { jobs: [packJob(0)], outbox: 'eu', op: 'pack' }, (o) => want(bodies(o)[0].t === 'job' && bodies(o)[0].outbox === 'eu', 'a single-job message naming eu'));
  n('pack outbox absent', { op: 'pack', jobs: [packJob(0)] }, (o) => want(!('outbox' in bodies(o)[0]), 'no outbox field'));
  n('pack outbox null', { op: 'pack', outbox: null, jobs: [packJob(0)] }, isError('invalid_input', 'outbox'));
  n('pack outbox bad', { op: 'pack', outbox: 'E', jobs: [packJob(0)] }, isError('invalid_input', 'outbox'));
  n('pack 200 delays named', { op: 'pack', outbox: 'o'.repeat(32), jobs: Array.from({ length: 200 }, (_, i) => packJob(i, 'k', 'default', i)) },
    (o) => want(o.batches.map((b) => b.messages.length).join() === '58,58,58,26', 'still at most 58 messages a batch'));
  n('pack empty', { op: 'pack', jobs: [] }, exactText('{"batches":[]}'));
  n('pack bad id', { op: 'pack', jobs: [packJob(0), { id: 'x', kind: 'k', lane: 'default' }] }, isError('invalid_input', 'jobs[1].id'));
  n('pack delay negative', { op: 'pack', jobs: [packJob(0, 'k', 'default', -1)] }, isError('invalid_input', 'delaySeconds'));
  n('pack missing lane', { op: 'pack', jobs: [{ id: ID, kind: 'k' }] }, isError('invalid_input', 'lane'));
  n('pack missing jobs', { op: 'pack' }, isError('invalid_input', 'jobs'));
  n('pack 5001 jobs', fill('{"op":"pack","jobs":[', `{"id":"${ID}","kind":"k","lane":"default"},`, 5000, `{"id":"${ID}","kind":"k","lane":"default"}]}`),
    isError('invalid_input', '5000'));
}

// ---------------------------------------------------------------------------------------------
// cron: a small brute-force matcher (plain fields only) checks match/next/prev independently.

const MONTHS = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
const DAYS = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];
function plainField(text, lo, hi, names) {
  const set = new Set();
  const val = (s) => (names && names.includes(s.toUpperCase()) ? names.indexOf(s.toUpperCase()) + lo : Number(s));
  for (const part of text.split(',')) {
    const [range, step = '1'] = part.split('/');
    let a, b;
    if (range === '*' || range === '?') [a, b] = [lo, hi];
    else if (range.includes('-')) [a, b] = range.split('-').map(val);
    else [a, b] = [val(range), part.includes('/') ? hi : val(range)];
    for (let x = a; x <= b; x += Number(step)) set.add(x);
  }
  return set;
}
function plainCron(expr) {
  const [mi, h, dom, mo, dow] = expr.trim().split(/\s+/);
  const f = { mi: plainField(mi, 0, 59), h: plainField(h, 0, 23), dom: plainField(dom, 1, 31), mo: plainField(mo, 1, 12, MONTHS), dow: plainField(dow, 1, 7, DAYS) };
  const domStar = dom === '*' || dom === '?';
  const dowStar = dow === '*' || dow === '?';
  return (ms) => {
    const d = new Date(ms);
    if (!f.mi.has(d.getUTCMinutes()) || !f.h.has(d.getUTCHours()) || !f.mo.has(d.getUTCMonth() + 1)) return false;
    const domOk = f.dom.has(d.getUTCDate());
    const dowOk = f.dow.has(d.getUTCDay() + 1);
    if (domStar && dowStar) return true;
    if (domStar) return dowOk;
    if (dowStar) return domOk;
    return domOk || dowOk;
  };
}
function bruteNext(expr, after) {
  const m = plainCron(expr);
  for (let t = Math.floor(after / 60000) * 60000 + 60000, n = 0; n < 3 * 366 * 1440; t += 60000, n++) if (m(t)) return t;
  return null;
}
function brutePrev(expr, before) {
  const m = plainCron(expr);
  for (let t = Math.ceil(before / 60000) * 60000 - 60000, n = 0; n < 3 * 366 * 1440; t -= 60000, n++) if (m(t)) return t;
  return null;
}
const T = (iso) => Date.parse(iso);
{
  const c = (name, input, check) => add('cron', name, input, check);
  const parseOk = (expr) => c(`parse ${JSON.stringify(expr)}`, { op: 'parse', expr }, exactText('{"ok":true}'));
  const parseErr = (expr, field) => c(`parse error ${JSON.stringify(expr)}`, { op: 'parse', expr }, isError('invalid_cron', field));
  for (const expr of ['* * * * *', '0 9 * * MON', '*/15 * * * *', '0 0 1 * *', '0 0 L * *', '0 0 15W * *', '0 0 LW * *', '0 0 L-3 * *',
    '0 12 ? * 6#3', '0 12 ? * 5L', '0 12 ? * FRIL', '0 0 1,L * *', '0 0 ? * 2#1,6#3', '0-59/10 0-23/2 1-31/5 1-12/3 1-7/2',
    '0 9 * jan-mar mon-fri', '0 9 * Jan Sun', ' \t0 9 * * 1\t ', '59 23 31 12 7', '0 0 * * 1-7', '5/15 * * * *', '0 0 L-0 * *', '0 0 L-30 * *', '0 0 ? * 1#5']) parseOk(expr);
  // Errors per field.
  parseErr('60 * * * *', 'minute');
  parseErr('-1 * * * *', 'minute');
  parseErr('a * * * *', 'minute');
  parseErr('*/0 * * * *', 'minute');
  parseErr('*/61 * * * *', 'minute');
  parseErr('5-2 * * * *', 'minute');
  parseErr('L * * * *', 'minute');
  parseErr('? * * * *', 'minute');
  parseErr('0 24 * * *', 'hour');
  parseErr('0 */25 * * *', 'hour');
  parseErr('0 1-2-3 * * *', 'hour');
  parseErr('0 0 0 * *', 'day-of-month');
  parseErr('0 0 32 * *', 'day-of-month');
  parseErr('0 0 32W * *', 'day-of-month');
  parseErr('0 0 L-31 * *', 'day-of-month');
  parseErr('0 0 1-5W * *', 'day-of-month');
  parseErr('0 0 ?1 * *', 'day-of-month');
  parseErr('0 0 * 0 *', 'month');
  parseErr('0 0 * 13 *', 'month');
  parseErr('0 0 * JANUARY *', 'month');
  parseErr('0 0 * FOO *', 'month');
  parseErr('0 0 * */13 *', 'month');
  parseErr('0 0 * * 0', 'day-of-week');
  parseErr('0 0 * * 8', 'day-of-week');
  parseErr('0 0 * * FRI-MON', 'day-of-week');
  parseErr('0 0 * * 6#6', 'day-of-week');
  parseErr('0 0 * * 6#0', 'day-of-week');
  parseErr('0 0 * * MONDAY', 'day-of-week');
  parseErr('0 0 * * */8', 'day-of-week');
  parseErr('0 0 * * 1#1-2#1', 'day-of-week');
  parseErr('', 'expression');
  parseErr('   ', 'expression');
  parseErr('* * * *', 'expected 5 fields, got 4');
  parseErr('* * * * * *', 'expected 5 fields, got 6');
  // Over 256 bytes: docs/ABI.md says invalid_cron naming `expression`; the ABI glue rejects the
  // string first (invalid_input, field 'expr'). Either names the problem; see the report.
  c('parse error over 256 bytes', { op: 'parse', expr: '0 0 1' + ' '.repeat(260) + ' * *' },
    (o) => want(['invalid_cron', 'invalid_input'].includes(o.error?.code) && o.error.message.includes('256'), 'an error naming the 256-byte limit'));
  parseErr('0 0 \u00e9 * *', '\\xc3');
  parseErr('0 0 1 * *\u0000', '');
  parseErr('0,,5 * * * *', 'minute');
  parseErr('0 0 , * *', 'day-of-month');
  // match / next / prev checked against the brute-force matcher.
  const matchCase = (expr, iso) => c(`match ${expr} at ${iso}`, { op: 'match', expr, at: T(iso) }, fields({ match: plainCron(expr)(Math.floor(T(iso) / 60000) * 60000) }));
  matchCase('0 9 * * MON', '2026-11-30T09:00:00.000Z');
  matchCase('0 9 * * MON', '2026-11-30T09:00:59.999Z');
  matchCase('0 9 * * MON', '2026-11-30T09:01:00.000Z');
  matchCase('0 9 * * 2', '2026-11-30T09:00:00.000Z');
  matchCase('0 0 * * 1', '2026-11-29T00:00:00.000Z');
  matchCase('0 0 * * SUN', '2026-11-29T00:00:00.000Z');
  matchCase('0 0 13 * 6', '2026-02-13T00:00:00.000Z');
  matchCase('0 0 13 * 6', '2026-02-20T00:00:00.000Z');
  matchCase('0 0 13 * 6', '2026-02-21T00:00:00.000Z');
  matchCase('0 0 */2 * *', '2026-02-03T00:00:00.000Z');
  matchCase('0 0 */2 * MON', '2026-02-02T00:00:00.000Z');
  matchCase('*/15 * * * *', '2026-02-02T10:45:00.000Z');
  const nextCase = (expr, iso) => c(`next ${expr} after ${iso}`, { op: 'next', expr, after: T(iso) }, fields({ at: bruteNext(expr, T(iso)) }));
  const prevCase = (expr, iso) => c(`prev ${expr} before ${iso}`, { op: 'prev', expr, before: T(iso) }, fields({ at: brutePrev(expr, T(iso)) }));
  nextCase('0 9 * * MON', '2026-11-30T09:00:00.000Z');
  nextCase('0 9 * * MON', '2026-11-30T08:59:59.999Z');
  nextCase('* * * * *', '2026-01-01T00:00:00.000Z');
  nextCase('* * * * *', '2026-01-01T00:00:30.000Z');
  nextCase('0 0 1 1 *', '2026-06-01T00:00:00.000Z');
  nextCase('0 0 29 2 *', '2026-03-01T00:00:00.000Z');
  nextCase('30 2 * * 1', '2026-03-07T00:00:00.000Z');
  nextCase('0 0 13 * 6', '2026-02-01T00:00:00.000Z');
  nextCase('0 12 * jan-mar mon-fri', '2026-03-31T12:00:00.000Z');
  nextCase('59 23 31 12 *', '2026-12-31T23:59:00.000Z');
  prevCase('0 9 * * MON', '2026-11-30T09:00:30.000Z');
  prevCase('0 9 * * MON', '2026-11-30T09:00:00.000Z');
  prevCase('0 0 1 * *', '2026-01-01T00:00:00.000Z');
  prevCase('*/7 * * * *', '2026-05-05T05:05:05.000Z');
  prevCase('0 0 29 2 *', '2026-01-01T00:00:00.000Z');
  // Quartz forms and Cloudflare specifics (snapshot only, plus a few facts).
  const at = (expr, op, iso, want_) => c(`${op} ${expr} from ${iso}`, { op, expr, [op === 'next' ? 'after' : 'before']: T(iso) }, want_ === undefined ? undefined : fields({ at: want_ === null ? null : T(want_) }));
  at('0 0 L * *', 'next', '2026-02-01T00:00:00.000Z', '2026-02-28T00:00:00.000Z');
  at('0 0 L * *', 'next', '2028-02-01T00:00:00.000Z', '2028-02-29T00:00:00.000Z');
  at('0 0 L-3 * *', 'next', '2026-04-01T00:00:00.000Z', '2026-04-27T00:00:00.000Z');
  at('0 0 1W * *', 'next', '2026-07-31T00:00:00.000Z', '2026-08-03T00:00:00.000Z'); // Sat 1 Aug 2026 -> Mon 3rd
  at('0 0 15W * *', 'next', '2026-08-01T00:00:00.000Z', '2026-08-14T00:00:00.000Z'); // Sat 15 -> Fri 14
  at('0 0 16W * *', 'next', '2026-08-01T00:00:00.000Z', '2026-08-17T00:00:00.000Z'); // Sun 16 -> Mon 17
  at('0 0 LW * *', 'next', '2026-05-01T00:00:00.000Z', '2026-05-29T00:00:00.000Z'); // Sun 31 May -> Fri 29
  at('0 0 31W * *', 'next', '2026-04-01T00:00:00.000Z', '2026-05-29T00:00:00.000Z'); // none in April; 31 May is Sunday -> Fri 29
  at('0 0 L-30 * *', 'next', '2026-02-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z');
  at('0 12 ? * 6#3', 'next', '2026-01-01T00:00:00.000Z', '2026-01-16T12:00:00.000Z'); // third Friday of Jan 2026
  at('0 12 ? * 5L', 'next', '2026-01-01T00:00:00.000Z', '2026-01-29T12:00:00.000Z'); // last Thursday
  at('0 12 ? * FRIL', 'next', '2026-01-01T00:00:00.000Z', '2026-01-30T12:00:00.000Z');
  at('0 12 ? * 2#5', 'next', '2026-01-01T00:00:00.000Z', '2026-03-30T12:00:00.000Z'); // first month with a 5th Monday after Jan 1 2026
  at('0 0 1,L * *', 'next', '2026-01-02T00:00:00.000Z', '2026-01-31T00:00:00.000Z');
  at('0 0 L * *', 'prev', '2026-03-01T00:00:00.000Z', '2026-02-28T00:00:00.000Z');
  at('0 0 30 2 *', 'next', '2026-01-01T00:00:00.000Z', null);
  at('0 0 31 4 *', 'prev', '2026-01-01T00:00:00.000Z', null);
  at('0 0 29 2 *', 'next', '2029-03-01T00:00:00.000Z', '2032-02-29T00:00:00.000Z');
  at('0 0 29 2 2', 'next', '2026-01-01T00:00:00.000Z');
  at('* * * * *', 'next', '1970-01-01T00:00:00.000Z', '1970-01-01T00:01:00.000Z');
  at('* * * * *', 'prev', '1970-01-01T00:00:00.000Z', null);
  at('* * * * *', 'prev', '1970-01-01T00:01:00.000Z', '1970-01-01T00:00:00.000Z');
  c('next near 2^53', { op: 'next', expr: '* * * * *', after: MAX_SAFE });
  c('match far future', { op: 'match', expr: '* * * * *', at: MAX_SAFE });
  c('key', { op: 'key', name: 'newsletter.weekly', scheduledAt: T('2026-11-30T09:00:00.000Z') }, exactText('{"key":"schedule:newsletter.weekly:2026-11-30T09:00:00.000Z"}'));
  c('key epoch', { op: 'key', name: 'a', scheduledAt: 0 }, fields({ key: 'schedule:a:1970-01-01T00:00:00.000Z' }));
  c('key milliseconds kept', { op: 'key', name: 'a', scheduledAt: T('2026-01-02T03:04:05.678Z') }, fields({ key: 'schedule:a:2026-01-02T03:04:05.678Z' }));
  c('key year 9999', { op: 'key', name: 'a', scheduledAt: T('9999-12-31T23:59:59.999Z') }, fields({ key: 'schedule:a:9999-12-31T23:59:59.999Z' }));
  c('key beyond year 9999', { op: 'key', name: 'a', scheduledAt: T('9999-12-31T23:59:59.999Z') + 1 });
  c('key max safe', { op: 'key', name: 'a', scheduledAt: MAX_SAFE });
  c('key bad name', { op: 'key', name: 'a b', scheduledAt: 0 }, isError('invalid_input', 'name'));
  c('key missing name', { op: 'key', scheduledAt: 0 }, isError('invalid_input', 'name'));
  c('key missing scheduledAt', { op: 'key', name: 'a' }, (o) => want(o.error?.code === 'invalid_input', 'invalid_input'));
  c('match missing at', { op: 'match', expr: '* * * * *' }, (o) => want(o.error?.code === 'invalid_input', 'invalid_input'));
  c('next negative after', { op: 'next', expr: '* * * * *', after: -1 }, isError('invalid_input', 'after'));
  c('prev float before', { op: 'prev', expr: '* * * * *', before: 1.5 }, isError('invalid_input', 'before'));
  c('match bad expr', { op: 'match', expr: '61 * * * *', at: 0 }, isError('invalid_cron', 'minute'));
  c('parse missing expr', { op: 'parse' }, (o) => want(o.error?.code === 'invalid_input' || o.error?.code === 'invalid_cron', 'an input error'));
  c('parse expr number', { op: 'parse', expr: 5 }, isError('invalid_input', 'expr'));
  c('op unknown', { op: 'every' }, isError('unknown_op'));
}

// cron due: the occurrences a tick enqueues, computed here by brute force (docs/ABI.md).
function bruteDue(expr, at, lastAt) {
  const m = plainCron(expr);
  const handled = lastAt ?? Math.floor(at / 60000) * 60000 - 1;
  const from = lastAt === null ? handled : Math.max(lastAt, at - DAY);
  const found = [];
  let t = Math.floor(at / 60000) * 60000;
  for (; t > from && found.length < 24; t -= 60000) if (m(t)) found.push(t);
  // Anything unhandled left behind: an older match after `handled`.
  let skipped = false;
  for (; t > handled && !skipped; t -= 60000) skipped = m(t);
  return { baseline: lastAt === null ? handled : null, occurrences: found.reverse(), skipped };
}
{
  const c = (name, input, check) => add('cron', name, input, check);
  const due = (name, expr, at, lastAt) => {
    const input = { op: 'due', at, schedules: [{ name: 's', expr, lastAt }] };
    c(`due ${name}`, input, (o) => {
      const want_ = bruteDue(expr, at, lastAt);
      const got = o.schedules?.[0];
      want(got?.name === 's', 'the schedule named');
      want(got.baseline === want_.baseline, `baseline ${want_.baseline}, got ${got.baseline}`);
      want(JSON.stringify(got.occurrences.map((x) => x.at)) === JSON.stringify(want_.occurrences), `occurrences ${want_.occurrences}`);
      want(got.occurrences.every((x) => x.key === `schedule:s:${new Date(x.at).toISOString()}`), 'each keyed by its own time');
      want(got.skipped === want_.skipped, `skipped ${want_.skipped}`);
    });
  };
  const mon9 = T('2026-11-30T09:00:00.000Z');
  due('first run on the minute', '0 9 * * MON', mon9, null);
  due('first run inside the minute', '0 9 * * MON', mon9 + 59_999, null);
  due('first run off the minute', '0 9 * * MON', mon9 + 60_000, null);
  due('first run every minute', '* * * * *', mon9 + 1234, null);
  due('hourly four missed', '0 * * * *', mon9, mon9 - 4 * 3600_000);
  due('hourly handled', '0 * * * *', mon9, mon9);
  due('late tick behind a newer one', '0 * * * *', mon9 - 3600_000, mon9);
  due('every 5 min count bound', '*/5 * * * *', mon9, mon9 - 3 * 3600_000);
  due('every minute exactly 24', '* * * * *', mon9, mon9 - 24 * 60_000);
  due('every minute 25', '* * * * *', mon9, mon9 - 25 * 60_000);
  due('hourly window bound', '0 * * * *', mon9, mon9 - 30 * 3600_000);
  due('daily week-old window bound', '0 9 * * *', mon9 + 3600_000, mon9 - 7 * DAY);
  due('weekly long gap nothing skipped', '0 9 * * MON', mon9 + 3600_000, mon9 - 7 * DAY);
  due('at 0 first run', '0 0 * * *', 0, null);
  due('never matches', '0 0 30 2 *', mon9, mon9 - 40 * DAY);
  c('due two schedules in order', { op: 'due', at: mon9, schedules: [{ name: 'b', expr: '0 9 * * *', lastAt: mon9 - 60_000 }, { name: 'a', expr: '0 3 * * *', lastAt: null }] },
    (o) => want(o.schedules.map((x) => x.name).join() === 'b,a' && o.schedules[0].occurrences.length === 1 && o.schedules[1].occurrences.length === 0, 'b with one, then a with none'));
  c('due no schedules', { op: 'due', at: mon9, schedules: [] }, exactText('{"schedules":[]}'));
  c('due missing at', { op: 'due', schedules: [] }, isError('invalid_input', "'at'"));
  c('due missing schedules', { op: 'due', at: 0 }, isError('invalid_input', 'schedules'));
  c('due schedules not a list', { op: 'due', at: 0, schedules: {} }, isError('invalid_input', 'schedules'));
  c('due item not an object', { op: 'due', at: 0, schedules: [1] }, isError('invalid_input', 'schedules[0]'));
  c('due bad name', { op: 'due', at: 0, schedules: [{ name: 'a b', expr: '* * * * *' }] }, isError('invalid_input', 'schedules[0].name'));
  c('due missing name', { op: 'due', at: 0, schedules: [{ expr: '* * * * *' }] }, isError('invalid_input', 'schedules[0].name'));
  c('due bad expr', { op: 'due', at: 0, schedules: [{ name: 'a', expr: '0 9 * * 0' }] }, isError('invalid_cron', 'schedules[0]'));
  c('due lastAt float', { op: 'due', at: 0, schedules: [{ name: 'a', expr: '* * * * *', lastAt: 1.5 }] }, isError('invalid_input', 'lastAt'));
  c('due at negative', { op: 'due', at: -1, schedules: [] }, isError('invalid_input', "'at'"));
  c('due at max safe', { op: 'due', at: MAX_SAFE, schedules: [{ name: 'a', expr: '* * * * *', lastAt: MAX_SAFE - 120_000 }] });
  c('due 1001 schedules', { op: 'due', at: 0, schedules: Array.from({ length: 1001 }, (_, i) => ({ name: `s${i}`, expr: '* * * * *' })) }, isError('invalid_input', 'schedules'));
}

// ---------------------------------------------------------------------------------------------
// backlog

{
  const th = { due: { warn: 100, error: 1000 }, aged: { warn: 1, error: 50 }, stuck: { warn: 1, error: 10 } };
  const b = (name, input, check) => add('backlog', name, input, check);
  b('read default timeout', { op: 'read' }, (o) => want(o.statementTimeoutMs === 30000, '30 s by default'));
  b('read timeout set', { op: 'read', statementTimeoutMs: 1500 }, (o) => want(o.statementTimeoutMs === 1500, 'as given'));
  b('read timeout zero', { op: 'read', statementTimeoutMs: 0 }, isError('invalid_input', 'statementTimeoutMs'));
  b('read timeout over the server limit', { op: 'read', statementTimeoutMs: 2147483648 }, isError('invalid_input', 'statementTimeoutMs'));
  // throttled: due - min(due, concurrency - running, rateSlots - rateHeld), 0 a missing limit.
  const row = (o) => ({ due: 10, running: 0, concurrency: 0, rateSlots: 0, rateHeld: 0, ...o });
  b('throttled by concurrency', { op: 'throttled', rows: [row({ running: 3, concurrency: 5 })] }, exactText('{"throttled":[8]}'));
  b('throttled by the tighter limit', { op: 'throttled', rows: [row({ running: 1, concurrency: 5, rateSlots: 4, rateHeld: 2 })] }, exactText('{"throttled":[8]}'));
  b('throttled none without limits', { op: 'throttled', rows: [row({})] }, exactText('{"throttled":[0]}'));
  b('throttled all when over the limit', { op: 'throttled', rows: [row({ running: 7, concurrency: 5 })] }, exactText('{"throttled":[10]}'));
  // With a tenant limit: no more than fit in their tenants' room, min(due, limit - running) each.
  b('throttled by tenants', { op: 'throttled', rows: [row({ tenantConcurrency: 2, tenants: [[6, 1], [3, 0], [1, 2]] })] }, exactText('{"throttled":[7]}'));
  b('throttled by the kind before tenants', { op: 'throttled', rows: [row({ concurrency: 2, tenantConcurrency: 2, tenants: [[5, 0], [5, 0]] })] }, exactText('{"throttled":[8]}'));
  b('throttled tenants not pairs', { op: 'throttled', rows: [row({ tenantConcurrency: 2, tenants: [[6]] })] }, isError('invalid_input', 'tenants'));
  b('throttled none when room exceeds due', { op: 'throttled', rows: [row({ due: 2, concurrency: 50 }), row({ due: 0, concurrency: 1 })] }, exactText('{"throttled":[0,0]}'));
  // window: due <= now, aged <= now - agedMs (default 5 min), stuck < now, dead letters over 1 h.
  const win = (now, agedMs) => ({ dueBefore: now, agedBefore: now - (agedMs ?? 300000), stuckBefore: now, deadLettersSince: now - 3600000, deadLetterWindowMs: 3600000 });
  b('window default aged', { op: 'window', now: NOW }, exactText(JSON.stringify(win(NOW))));
  b('window aged 1 h', { op: 'window', now: NOW, agedMs: 3600000 }, exactText(JSON.stringify(win(NOW, 3600000))));
  b('window aged 0', { op: 'window', now: NOW, agedMs: 0 }, exactText(JSON.stringify(win(NOW, 0))));
  b('window missing now', { op: 'window' }, isError('invalid_input', 'now'));
  // health: the grading rules of docs/ABI.md (pb_backlog health), per table and per holder.
  const G = ['ok', 'warn', 'error'];
  const gradeTable = (t) => {
    const base = Math.max(t.liveTuples ?? 1, 1);
    const dead = t.deadTuples != null && t.liveTuples != null && t.deadTuples >= 1000 && t.deadTuples * 5 >= base ? (t.deadTuples >= base ? 2 : 1) : 0;
    const stale = 'lastAutovacuumAgeMs' in t && (t.lastAutovacuumAgeMs === null || t.lastAutovacuumAgeMs > 3600000);
    return { deadTuples: dead, autovacuum: dead > 0 && stale ? 1 : 0 };
  };
  const gradeHolder = (h) => Math.max(
    h.ageMs == null ? 0 : h.ageMs >= 3600000 ? 2 : h.ageMs >= 300000 ? 1 : 0,
    h.xidAge == null ? 0 : h.xidAge >= 100000000 ? 2 : h.xidAge >= 1000000 ? 1 : 0,
  );
  const grade = (f) => {
    const tables = (f.tables ?? []).map(gradeTable);
    const horizon = (f.horizon ?? []).map(gradeHolder);
    const worst = (xs) => xs.reduce((a, b) => Math.max(a, b), 0);
    const dead = worst(tables.map((t) => t.deadTuples));
    const autovacuum = worst(tables.map((t) => t.autovacuum));
    const xmin = worst(horizon);
    const letters = !f.deadLetters ? 0 : f.deadLetters >= 100 ? 2 : 1;
    return JSON.stringify({
      tables: tables.map((t) => ({ deadTuples: G[t.deadTuples], autovacuum: G[t.autovacuum] })),
      horizon: horizon.map((g) => G[g]),
      deadTuples: G[dead], autovacuum: G[autovacuum], xminHold: G[xmin], deadLetters: G[letters],
      severity: G[Math.max(dead, autovacuum, xmin, letters)],
    });
  };
  const h = (name, f) => b(`health ${name}`, { op: 'health', ...f }, exactText(grade(f)));
  const t1 = (t) => ({ tables: [t] });
  h('nothing known', {});
  h('healthy table', { tables: [{ deadTuples: 10, liveTuples: 100000, lastAutovacuumAgeMs: 60000 }], horizon: [{ ageMs: 1000, xidAge: 3 }], deadLetters: 0 });
  h('dead tuples at warn', t1({ deadTuples: 1000, liveTuples: 5000, lastAutovacuumAgeMs: 60000 }));
  h('dead tuples under the ratio', t1({ deadTuples: 1000, liveTuples: 5001, lastAutovacuumAgeMs: 60000 }));
  h('dead tuples under the floor', t1({ deadTuples: 999, liveTuples: 1, lastAutovacuumAgeMs: 60000 }));
  h('dead tuples at error', t1({ deadTuples: 5000, liveTuples: 5000, lastAutovacuumAgeMs: 60000 }));
  h('empty table of dead tuples', t1({ deadTuples: 5000, liveTuples: 0, lastAutovacuumAgeMs: 60000 }));
  h('live tuples unknown', t1({ deadTuples: 5000, liveTuples: null }));
  h('autovacuum lagging', t1({ deadTuples: 3000, liveTuples: 3000, lastAutovacuumAgeMs: 3600001 }));
  h('autovacuum at the hour', t1({ deadTuples: 3000, liveTuples: 3000, lastAutovacuumAgeMs: 3600000 }));
  h('autovacuum never', t1({ deadTuples: 3000, liveTuples: 3000, lastAutovacuumAgeMs: null }));
  h('autovacuum not reported', t1({ deadTuples: 3000, liveTuples: 3000 }));
  h('autovacuum never, no dead tuples', t1({ deadTuples: 0, liveTuples: 3000, lastAutovacuumAgeMs: null }));
  h('four tables, the attempt table bloated', {
    tables: [
      { deadTuples: 0, liveTuples: 50000, lastAutovacuumAgeMs: 1000 },
      { deadTuples: 400000, liveTuples: 10000, lastAutovacuumAgeMs: null },
      { deadTuples: 0, liveTuples: 12, lastAutovacuumAgeMs: null },
      { deadTuples: 1200, liveTuples: 5000, lastAutovacuumAgeMs: 7200000 },
    ],
  });
  h('session at warn', { horizon: [{ ageMs: 300000, xidAge: 10 }] });
  h('session under warn', { horizon: [{ ageMs: 299999, xidAge: 999999 }] });
  h('session at error', { horizon: [{ ageMs: 3600000, xidAge: 10 }] });
  h('slot by transactions at warn', { horizon: [{ ageMs: null, xidAge: 1000000 }] });
  h('slot by transactions at error', { horizon: [{ ageMs: null, xidAge: 100000000 }] });
  h('young session, far behind', { horizon: [{ ageMs: 1, xidAge: 100000000 }] });
  h('holder ages unknown', { horizon: [{ ageMs: null, xidAge: null }] });
  h('three holders', { horizon: [{ ageMs: null, xidAge: 2000000 }, { ageMs: 4000000, xidAge: 900 }, { ageMs: 10, xidAge: 5 }] });
  h('one dead letter', { deadLetters: 1 });
  h('dead letters at error', { deadLetters: 100 });
  h('everything at once', { tables: [{ deadTuples: 1000, liveTuples: 5000, lastAutovacuumAgeMs: null }], horizon: [{ ageMs: 600000, xidAge: 50 }], deadLetters: 100 });
  b('health negative count', { op: 'health', tables: [{ deadTuples: -1 }] }, isError('invalid_input', 'tables[0].deadTuples'));
  b('health negative dead letters', { op: 'health', deadLetters: -1 }, isError('invalid_input', 'deadLetters'));
  b('health holder float', { op: 'health', horizon: [{ xidAge: 1.5 }] }, isError('invalid_input', 'horizon[0].xidAge'));
  b('health table not an object', { op: 'health', tables: ['job'] }, isError('invalid_input', 'tables[0]'));
  b('health tables not a list', { op: 'health', tables: {} }, isError('invalid_input', 'tables'));
  b('health too many tables', { op: 'health', tables: Array.from({ length: 17 }, () => ({})) }, isError('too_large'));
  b('health too many holders', { op: 'health', horizon: Array.from({ length: 17 }, () => ({})) }, isError('too_large'));
  b('doc example', { counts: { due: 12, aged: 3, stuck: 0 }, thresholds: th }, exactText('{"severity":"warn","reasons":[{"metric":"aged","severity":"warn","value":3}]}'));
  b('all ok', { counts: { due: 0, aged: 0, stuck: 0 }, thresholds: th }, exactText('{"severity":"ok","reasons":[]}'));
  b('due at warn', { counts: { due: 100, aged: 0, stuck: 0 }, thresholds: th }, fields({ severity: 'warn' }));
  b('due below warn', { counts: { due: 99, aged: 0, stuck: 0 }, thresholds: th }, fields({ severity: 'ok' }));
  b('due at error', { counts: { due: 1000, aged: 0, stuck: 0 }, thresholds: th }, fields({ severity: 'error', reasons: [{ metric: 'due', severity: 'error', value: 1000 }] }));
  b('stuck error aged warn', { counts: { due: 0, aged: 2, stuck: 10 }, thresholds: th }, (o) => {
    want(o.severity === 'error', 'worst is error');
    want(o.reasons.length === 2, 'two reasons');
  });
  b('all error', { counts: { due: 5000, aged: 500, stuck: 50 }, thresholds: th }, fields({ severity: 'error' }));
  b('default thresholds', { counts: { due: 12, aged: 3, stuck: 0 } }, fields({ severity: 'warn' }));
  b('partial thresholds', { counts: { due: 12, aged: 3, stuck: 0 }, thresholds: { aged: { warn: 5 } } });
  b('counts missing', { thresholds: th }, isError('invalid_input', 'counts'));
  b('count negative', { counts: { due: -1, aged: 0, stuck: 0 } }, isError('invalid_input', 'due'));
  b('count float', { counts: { due: 1.5, aged: 0, stuck: 0 } }, isError('invalid_input', 'due'));
  b('count 2^53', `{"counts":{"due":${TWO_53},"aged":0,"stuck":0}}`, isError('invalid_input', 'due'));
  b('count max safe', { counts: { due: MAX_SAFE, aged: 0, stuck: 0 } }, fields({ severity: 'error' }));
  b('counts partial', { counts: { due: 1 } });
  b('warn above error', { counts: { due: 1, aged: 0, stuck: 0 }, thresholds: { due: { warn: 10, error: 5 } } }, (o) => want(o.error?.code === 'invalid_input', 'invalid_input'));
  b('unknown metric ignored', { counts: { due: 1, aged: 0, stuck: 0, lost: 5 } });
  b('threshold string', { counts: { due: 1, aged: 0, stuck: 0 }, thresholds: { due: { warn: 'x' } } }, (o) => want(o.error, 'an error'));
}

// ---------------------------------------------------------------------------------------------
// operate: every action against every status, checked against the docs table.

{
  const STATUSES = ['pending', 'running', 'retrying', 'succeeded', 'dead', 'cancelled', 'waiting'];
  // A replay's fresh retry budget: what the stores write back (and stamp replayed_at).
  const FRESH = { attempts: 0, crashes: 0, streak: 0 };
  const table = {
    // A waiting job (dependencies) can be cancelled; only its parents make it due.
    cancel: { from: ['pending', 'retrying', 'running', 'waiting'], to: () => 'cancelled', dueAt: null, budget: null, nudge: false },
    replay: { from: ['dead', 'cancelled'], to: () => 'pending', dueAt: NOW, budget: FRESH, nudge: true },
    retryNow: { from: ['pending', 'retrying'], to: (s) => s, dueAt: NOW, budget: null, nudge: true },
  };
  for (const [action, row] of Object.entries(table)) {
    for (const status of STATUSES) {
      const expected = row.from.includes(status)
        ? JSON.stringify({ ok: true, status: row.to(status), dueAt: row.dueAt, budget: row.budget, nudge: row.nudge,
            closeAttempt: action === 'cancel' && status === 'running' ? 'cancel' : null,
            // finished_at is set (and the reason recorded) only when the job ends here.
            finished: row.to(status) === 'cancelled', recordReason: row.to(status) === 'cancelled' })
        : '{"ok":false,"reason":"invalid_state"}';
      add('operate', `${action} ${status}`, { action, now: NOW, job: { status } }, exactText(expected));
    }
  }
  const o = (name, input, check) => add('operate', name, input, check);
  o('unknown action', { action: 'delete', now: NOW, job: { status: 'dead' } }, (r) => want(r.error, 'an error'));
  o('unknown status', { action: 'cancel', now: NOW, job: { status: 'sleeping' } }, (r) => want(r.error?.code === 'invalid_input', 'invalid_input'));
  o('missing action', { now: NOW, job: { status: 'dead' } }, isError('invalid_input', 'action'));
  o('missing now', { action: 'replay', job: { status: 'dead' } }, isError('invalid_input', 'now'));
  o('missing job', { action: 'replay', now: NOW }, (r) => want(r.error?.code === 'invalid_input', 'invalid_input'));
  o('missing status', { action: 'replay', now: NOW, job: {} }, isError('invalid_input', 'status'));
  o('job extra fields ignored', { action: 'replay', now: NOW, job: { status: 'dead', attempts: 20, crashes: 3 } }, fields({ ok: true, budget: FRESH }));
  o('now negative', { action: 'replay', now: -1, job: { status: 'dead' } }, isError('invalid_input', 'now'));
  o('action not a string', { action: 1, now: NOW, job: { status: 'dead' } }, (r) => want(r.error, 'an error'));
  // op "actions": what each status allows, the same table as the decisions above.
  for (const status of STATUSES) {
    const allowed = Object.entries(table).filter(([, row]) => row.from.includes(status)).map(([action]) => action);
    o(`actions ${status}`, { op: 'actions', job: { status } }, exactText(JSON.stringify({ actions: allowed })));
  }
  o('actions unknown status', { op: 'actions', job: { status: 'sleeping' } }, isError('invalid_input', 'status'));
  o('actions missing status', { op: 'actions', job: {} }, isError('invalid_input', 'status'));
  o('actions missing job', { op: 'actions' }, isError('invalid_input', 'status'));
  o('decide explicit op', { op: 'decide', action: 'replay', now: NOW, job: { status: 'dead' } }, fields({ ok: true, budget: FRESH }));
  o('unknown op', { op: 'purge', job: { status: 'dead' } }, (r) => want(r.error?.code === 'unknown_op', 'unknown_op'));
  // A replay of a job its parent's failure cancelled answers to its parents (docs/ABI.md).
  const orphan = (parents, code = 'parent_failed') => ({ action: 'replay', now: NOW, job: { status: 'cancelled', code, parents } });
  o('replay parent_failed with a parent still failed', orphan({ failed: 1, open: 0 }), exactText('{"ok":false,"reason":"invalid_state"}'));
  o('replay parent_failed with parents open waits', orphan({ failed: 0, open: 3 }), fields({ ok: true, status: 'waiting', nudge: false, waitingOn: 3, budget: FRESH }));
  o('replay parent_failed with parents all succeeded', orphan({ failed: 0, open: 0 }), fields({ ok: true, status: 'pending', nudge: true, budget: FRESH }));
  o('replay another cancel ignores parents', orphan({ failed: 2, open: 0 }, 'moot'), fields({ ok: true, status: 'pending', nudge: true }));
  o('replay parent_failed without parents', { action: 'replay', now: NOW, job: { status: 'cancelled', code: 'parent_failed', parents: null } }, fields({ ok: true, status: 'pending' }));
  o('replay parents missing open', orphan({ failed: 0 }), isError('invalid_input', 'parents.open'));
  o('replay parents negative', orphan({ failed: -1, open: 0 }), isError('invalid_input', 'parents.failed'));
  // op "reason": an operator's cancel reason, held to a handler code's rule.
  o('reason accepted', { op: 'reason', reason: 'moot: customer left' }, exactText('{"reason":"moot: customer left"}'));
  o('reason 128 bytes', { op: 'reason', reason: 'r'.repeat(128) }, exactText(JSON.stringify({ reason: 'r'.repeat(128) })));
  for (const [name, reason] of [['U+0000', 'a\u0000b'], ['a tab', 'a\tb'], ['empty', ''], ['129 bytes', 'r'.repeat(129)], ['null', null], ['a number', 7]]) {
    o(`reason ${name} refused`, { op: 'reason', reason }, isError('invalid_input', 'reason'));
  }
  o('reason missing', { op: 'reason' }, isError('invalid_input', 'reason'));
}

// ---------------------------------------------------------------------------------------------
// webhook: the outcome table, Retry-After, the breaker and the receiver's timestamp check, each
// against docs/ABI.md; explicit schedules and the uncharged defer in pb_policy / pb_settle.

{
  const w = (name, input, check) => add('webhook', name, input, check);
  const cfg = (o) => ({ op: 'config', ...o });
  w('config defaults', cfg({}), (o) => {
    want(o.requestTimeoutMs === 15000 && o.timeoutMs === 20000 && o.probeMs === 50000, 'timeout + 5 s; probe + 30 s');
    want(o.scheduleMs.length === 10 && o.maxAttempts === 11 && o.scheduleMs.reduce((a, b) => a + b, 0) === 257705000, 'eleven attempts over 71.6 h');
    want(o.breaker.threshold === 10 && o.breaker.cooldownMs === 300000 && o.breaker.disableAfterMs === 432000000, 'breaker defaults');
    want(o.maxRetryAfterMs === 21600000 && o.endpointReads === 3 && o.recordTries === 5 && o.probeTakenMs === 1000, 'caps and loops');
  });
  w('config request timeout set', cfg({ requestTimeoutMs: 2000 }), (o) => want(o.timeoutMs === 7000 && o.probeMs === 37000, 'derived'));
  w('config schedule set', cfg({ scheduleMs: [1000, 2000, 3000] }), (o) => want(o.maxAttempts === 4, 'entries + 1'));
  w('config breaker in part', cfg({ breaker: { cooldownMs: 1000 } }), (o) => want(o.breaker.threshold === 10 && o.breaker.cooldownMs === 1000, 'the rest default'));
  w('config never disable', cfg({ breaker: { disableAfterMs: null } }), (o) => want(o.breaker.disableAfterMs === null, 'null kept'));
  w('config request timeout zero', cfg({ requestTimeoutMs: 0 }), isError('invalid_input', 'requestTimeoutMs'));
  w('config request timeout over', cfg({ requestTimeoutMs: 590001 }), isError('invalid_input', 'requestTimeoutMs'));
  w('config schedule empty', cfg({ scheduleMs: [] }), isError('invalid_input', 'scheduleMs'));
  w('config schedule too long', cfg({ scheduleMs: Array.from({ length: 33 }, () => 1) }), isError('invalid_input', 'scheduleMs'));
  w('config threshold zero', cfg({ breaker: { threshold: 0 } }), isError('invalid_input', 'threshold'));
  w('config retry-after cap over', cfg({ maxRetryAfterMs: 604800001 }), isError('invalid_input', 'maxRetryAfterMs'));
  const outcome = (extra) => ({ op: 'outcome', now: NOW, ...extra });
  const table = (status) => {
    if (status >= 200 && status <= 299) return { type: 'ok', code: null, signal: 'success' };
    if (status === 408 || status >= 500) return { type: 'retry', code: `http_${status}`, signal: 'failure' };
    if (status === 429) return { type: 'retry', code: 'http_429', signal: 'neutral' };
    if (status === 410) return { type: 'fail', code: 'http_410', signal: 'gone' };
    return { type: 'fail', code: `http_${status}`, signal: 'neutral' };
  };
  for (const status of [100, 200, 201, 204, 299, 301, 304, 400, 401, 404, 408, 409, 410, 422, 429, 499, 500, 502, 503, 504, 599]) {
    w(`outcome ${status}`, outcome({ status }), fields({ ...table(status), after: null }));
  }
  w('outcome network error', outcome({ error: 'network' }), fields({ type: 'retry', code: 'network_error', after: null, signal: 'failure' }));
  w('outcome request timeout', outcome({ error: 'timeout' }), fields({ type: 'retry', code: 'request_timeout', after: null, signal: 'failure' }));
  const after = (name, retryAfter, expected, extra = {}) => w(`retry-after ${name}`, outcome({ status: 503, retryAfter, ...extra }), fields({ after: expected }));
  after('seconds', '120', 120000);
  after('zero', '0', 0);
  after('spaces', ' 30\t', 30000);
  after('date in an hour', new Date(NOW + 3600000).toUTCString(), 3600000);
  after('date in the past', 'Sun, 06 Nov 1994 08:49:37 GMT', 0);
  after('capped by default', '86400', 21600000);
  after('capped by the caller', '600', 60000, { maxRetryAfterMs: 60000 });
  after('null', null, null);
  for (const bad of ['soon', '-1', '1.5', '', '12345678901', 'Tue, 31 Nov 2023 23:13:20 GMT', 'Tuesday, 14-Nov-23 23:13:20 GMT', 'Tue Nov 14 23:13:20 2023']) {
    after(`unusable ${JSON.stringify(bad)}`, bad, null);
  }
  w('retry-after ignored on 429 date', outcome({ status: 429, retryAfter: new Date(NOW + 5000).toUTCString() }), fields({ after: 5000, signal: 'neutral' }));
  w('retry-after ignored on success', outcome({ status: 200, retryAfter: '5' }), fields({ after: null }));
  w('status and error', outcome({ status: 200, error: 'network' }), isError('invalid_input'));
  w('neither status nor error', outcome({}), isError('invalid_input'));
  w('status 99', outcome({ status: 99 }), isError('invalid_input', 'status'));
  w('status 600', outcome({ status: 600 }), isError('invalid_input', 'status'));
  w('unknown error', outcome({ error: 'dns' }), isError('invalid_input', 'error'));
  w('unknown op', { op: 'deliver', now: NOW }, isError('unknown_op'));
  w('missing op', { now: NOW }, isError('invalid_input', 'op'));

  const ep = (state, o = {}) => ({ state, failures: 0, openedAt: null, failingSince: null, ...o });
  const gate = (endpoint, now = NOW) => ({ op: 'gate', now, cooldownMs: 60000, probeMs: 45000, endpoint });
  w('gate closed', gate(ep('closed')), exactText('{"deliver":true,"probe":false,"disabled":false,"retryAt":null,"endpoint":null}'));
  w('gate disabled', gate(ep('disabled')), exactText('{"deliver":false,"probe":false,"disabled":true,"retryAt":null,"endpoint":null}'));
  w('gate open in cooldown', gate(ep('open', { failures: 5, openedAt: NOW - 1 }), NOW + 59998), fields({ deliver: false, retryAt: NOW + 59999 }));
  w('gate open after cooldown', gate(ep('open', { failures: 5, openedAt: NOW - 60000 })),
    fields({ deliver: true, probe: true, endpoint: { state: 'half_open', failures: 5, openedAt: NOW, failingSince: null } }));
  w('gate half_open probing', gate(ep('half_open', { failures: 5, openedAt: NOW - 1000 })), fields({ deliver: false, probe: false, retryAt: NOW + 1000 }));
  w('gate half_open probing near its end', gate(ep('half_open', { failures: 5, openedAt: NOW - 44500 })), fields({ deliver: false, probe: false, retryAt: NOW + 500 }));
  w('gate half_open probe lost', gate(ep('half_open', { failures: 5, openedAt: NOW - 45000 })), fields({ deliver: true, probe: true }));
  w('gate open without openedAt', gate(ep('open')), fields({ deliver: false, retryAt: NOW + 60000 }));
  w('gate unknown state', gate(ep('ajar')), isError('invalid_input', 'state'));
  w('gate missing endpoint', { op: 'gate', now: NOW, cooldownMs: 1, probeMs: 1 }, isError('invalid_input', 'endpoint'));
  w('gate missing cooldown', { op: 'gate', now: NOW, probeMs: 1, endpoint: ep('closed') }, isError('invalid_input', 'cooldownMs'));

  const record = (endpoint, signal, extra = {}) => ({ op: 'record', now: NOW, threshold: 3, endpoint, signal, ...extra });
  w('record failure below threshold', record(ep('closed', { failures: 1, failingSince: NOW - 5 }), 'failure'),
    exactText(`{"endpoint":{"state":"closed","failures":2,"openedAt":null,"failingSince":${NOW - 5}},"changed":true,"event":null}`));
  w('record failure opens', record(ep('closed', { failures: 2, failingSince: NOW - 5 }), 'failure'),
    fields({ endpoint: { state: 'open', failures: 3, openedAt: NOW, failingSince: NOW - 5 }, event: { type: 'webhook_endpoint_paused' } }));
  w('record failure while open', record(ep('open', { failures: 3, openedAt: NOW - 10, failingSince: NOW - 20 }), 'failure'),
    fields({ endpoint: { state: 'open', failures: 4, openedAt: NOW - 10, failingSince: NOW - 20 }, event: null }));
  w('record probe fails', record(ep('half_open', { failures: 3, openedAt: NOW - 10, failingSince: NOW - 20 }), 'failure'),
    fields({ endpoint: { state: 'open', failures: 4, openedAt: NOW, failingSince: NOW - 20 }, event: { type: 'webhook_endpoint_paused' } }));
  w('record probe succeeds', record(ep('half_open', { failures: 3, openedAt: NOW - 10, failingSince: NOW - 20 }), 'success'),
    exactText('{"endpoint":{"state":"closed","failures":0,"openedAt":null,"failingSince":null},"changed":true,"event":{"type":"webhook_endpoint_resumed"}}'));
  w('record probe answered 4xx', record(ep('half_open', { failures: 3, openedAt: NOW - 10 }), 'neutral'), fields({ endpoint: ep('closed'), event: { type: 'webhook_endpoint_resumed' } }));
  w('record success while closed', record(ep('closed', { failures: 2, failingSince: NOW - 5 }), 'success'), fields({ endpoint: ep('closed'), changed: true, event: null }));
  w('record success unchanged', record(ep('closed'), 'success'), fields({ changed: false, event: null }));
  w('record neutral', record(ep('closed', { failures: 2 }), 'neutral'), fields({ changed: false, endpoint: ep('closed', { failures: 2 }) }));
  w('record gone', record(ep('open', { failures: 3, openedAt: NOW - 10 }), 'gone'),
    fields({ endpoint: { state: 'disabled', failures: 3, openedAt: NOW - 10, failingSince: null }, event: { type: 'webhook_endpoint_disabled', reason: 'gone' } }));
  w('record disabled stays', record(ep('disabled'), 'success'), fields({ changed: false, endpoint: ep('disabled') }));
  w('record failing too long', record(ep('open', { failures: 50, openedAt: NOW - 10, failingSince: NOW - DAY }), 'failure', { disableAfterMs: DAY }),
    fields({ endpoint: { state: 'disabled', failures: 51, openedAt: NOW - 10, failingSince: NOW - DAY }, event: { type: 'webhook_endpoint_disabled', reason: 'failing' } }));
  w('record failing not yet too long', record(ep('open', { failures: 50, openedAt: NOW - 10, failingSince: NOW - DAY + 1 }), 'failure', { disableAfterMs: DAY }),
    fields({ event: null }));
  w('record threshold 0', record(ep('closed'), 'failure', { threshold: 0 }), isError('invalid_input', 'threshold'));
  w('record unknown signal', record(ep('closed'), 'meh'), isError('invalid_input', 'signal'));
  w('record missing signal', { op: 'record', now: NOW, threshold: 3, endpoint: ep('closed') }, isError('invalid_input', 'signal'));

  const ts = (timestamp, toleranceSec = 300) => ({ op: 'timestamp', now: NOW, timestamp, toleranceSec });
  const T = NOW / 1000;
  w('timestamp now', ts(String(T)), exactText(`{"ok":true,"timestamp":${T}}`));
  w('timestamp at the old edge', ts(String(T - 300)), fields({ ok: true }));
  w('timestamp at the new edge', ts(String(T + 300)), fields({ ok: true }));
  w('timestamp too old', ts(String(T - 301)), exactText('{"ok":false,"reason":"too_old"}'));
  w('timestamp too new', ts(String(T + 301)), exactText('{"ok":false,"reason":"too_new"}'));
  w('timestamp zero tolerance', ts(String(T), 0), fields({ ok: true }));
  for (const bad of ['', '-1', '1e9', ' 1', '1700000000.0', '1234567890123', 'abc']) w(`timestamp invalid ${JSON.stringify(bad)}`, ts(bad), exactText('{"ok":false,"reason":"invalid_timestamp"}'));
  w('timestamp null', ts(null), exactText('{"ok":false,"reason":"invalid_timestamp"}'));
  w('timestamp missing tolerance', { op: 'timestamp', now: NOW, timestamp: '1' }, isError('invalid_input', 'toleranceSec'));

  // pb_policy: an explicit schedule is kept, after warnAtStreak; normalising twice changes nothing.
  const schedule = [5000, 300000, 1800000];
  const withSchedule = normPolicy({ kind: 'k', timeoutMs: 1000 }).replace('"warnAtStreak":null,', `"warnAtStreak":null,"scheduleMs":${JSON.stringify(schedule)},`);
  add('policy', 'schedule', { kind: 'k', timeoutMs: 1000, retry: { backoff: { scheduleMs: schedule } } }, exactText(withSchedule));
  add('policy', 'schedule normalised again', withSchedule, exactText(withSchedule));
  add('policy', 'schedule null when normalised', { kind: 'k', timeoutMs: 1000, scheduleMs: null }, exactText(normPolicy({ kind: 'k', timeoutMs: 1000 })));
  add('policy', 'schedule empty', { kind: 'k', timeoutMs: 1000, retry: { backoff: { scheduleMs: [] } } }, isError('invalid_policy', 'scheduleMs'));
  add('policy', 'schedule negative', { kind: 'k', timeoutMs: 1000, retry: { backoff: { scheduleMs: [-1] } } }, isError('invalid_policy', 'scheduleMs'));
  add('policy', 'schedule over 7 days', { kind: 'k', timeoutMs: 1000, retry: { backoff: { scheduleMs: [604800001] } } }, isError('invalid_policy', 'scheduleMs'));
  add('policy', 'schedule 33 entries', { kind: 'k', timeoutMs: 1000, retry: { backoff: { scheduleMs: Array(33).fill(1) } } }, isError('invalid_policy', 'scheduleMs'));
  add('policy', 'schedule not an array', { kind: 'k', timeoutMs: 1000, retry: { backoff: { scheduleMs: 5000 } } }, isError('invalid_policy', 'scheduleMs'));

  // pb_settle: the schedule's entry n (last repeating), within its top tenth; defer charges nothing.
  const sp = JSON.parse(withSchedule);
  schedule.concat([1800000, 1800000]).forEach((entry, i) => {
    add('settle', `schedule retry ${i + 1}`, settle({ type: 'retry', code: 'http_500' }, { attempts: i }, sp),
      all(fields({ status: 'retrying', attempts: i + 1 }), dueIn([NOW + entry - Math.floor(entry / 10), NOW + entry])));
  });
  add('settle', 'schedule crash', settle({ type: 'crash' }, { attempts: 2, crashes: 1 }, sp), all(fields({ status: 'retrying', crashes: 2 }), dueIn([NOW + 270000, NOW + 300000])));
  add('settle', 'schedule with after', settle({ type: 'retry', code: 'http_429', after: 120000 }, { attempts: 1 }, sp), fields({ dueAt: NOW + 120000 }));
  add('settle', 'defer first', settle({ type: 'defer', code: 'endpoint_paused', after: 60000 }),
    fields({ status: 'pending', dueAt: NOW + 60000, attempts: 0, errorCode: 'endpoint_paused', charged: false, finished: false, attemptOutcome: 'defer', events: [] }));
  add('settle', 'defer keeps counters', settle({ type: 'defer', code: 'endpoint_paused', after: 1000 }, { attempts: 3, crashes: 1, streakCode: 'http_500', streak: 3 }),
    fields({ status: 'retrying', dueAt: NOW + 1000, attempts: 3, crashes: 1, streakCode: 'http_500', streak: 3, charged: false }));
  add('settle', 'defer defaults', settle({ type: 'defer' }), fields({ status: 'pending', dueAt: NOW, errorCode: 'deferred' }));
}

// ---------------------------------------------------------------------------------------------
// Bad input for every family.

const GOOD = {
  policy: { kind: 'k', timeoutMs: 1000 },
  settle: settle({ type: 'ok' }),
  claim: { op: 'admit', now: NOW, deadlineAt: NOW + 60000, leaseExpiresAt: NOW + 60000, timeoutMs: 1000 },
  sweep: { op: 'plan', now: NOW, startedAt: NOW, invocationBudgetMs: 840000, recoveryBudgetMs: 120000, sweepLeaseBudgetMs: 180000, policies: [] },
  enqueue: { now: NOW, payload: { a: 1 } },
  cron: { op: 'next', expr: '0 9 * * MON', after: NOW },
  nudge: { op: 'decode', lane: 'default', messages: [{ v: 1, t: 'drain', lane: 'default' }] },
  backlog: { counts: { due: 1, aged: 0, stuck: 0 } },
  operate: { action: 'replay', now: NOW, job: { status: 'dead' } },
  webhook: { op: 'outcome', now: NOW, status: 503, retryAfter: '120' },
};
// Documents with several faults, on which the SIMD kernels that native builds used to pick at run
// time named another fault first than the portable kernel of the wasm builds (UTF8_ERROR against
// TAPE_ERROR and so on; found by differential.mjs). Each is one stable document now.
const latin1 = (text) => Buffer.from(text, 'latin1');
const KERNEL_SPLITS = [
  ['lone continuation byte', latin1('\x80')],
  ['bang then quote', '!"'],
  ['number then bad UTF-8', latin1('4\xef')],
  ['brace then bad UTF-8', latin1('{\xb9')],
  ['unquoted key then open string', '{op":"'],
  ['NUL in a key then open string', Buffer.from('{"kind\0:"k"', 'latin1')],
  ['bad UTF-8 around strings', latin1('\xc2"\xc2 " ')],
  ['atom then open string', ' f+"'],
  ['atom then bad UTF-8', latin1('t2\x80')],
  ['word then open string', 'p":"'],
  ['null atom then bad UTF-8', latin1('n\xb0')],
  ['control char then bad UTF-8', latin1('"\x90b\x17\xb1"')],
  ['newline in a string', '{ow"\nN"N}'],
  ['string then open string', '"x"op":"'],
  ['form feed in a number', '4\f2'],
  ['truncated atom then open string', '{"a":tru"}'],
  ['minus then open string', '{"a":-"x}'],
  ['deep nesting then bad UTF-8', latin1('{"x":' + '['.repeat(300) + '\xff]}')],
];
const NOW_FIELD = { policy: 'timeoutMs', settle: 'now', claim: 'now', sweep: 'now', enqueue: 'now', cron: 'after', nudge: null, backlog: null, operate: 'now', webhook: 'now' };
for (const family of FAMILIES) {
  const good = JSON.stringify(GOOD[family]);
  const b = (name, input, check) => add(family, `bad input: ${name}`, input, check);
  // Every parse failure is this one document (docs/ABI.md): no parser detail leaks into it.
  const json = exactText(`{"error":{"code":"invalid_json","message":"${family}: invalid JSON"}}`);
  // pb_policy reports every problem with a definition as invalid_policy.
  const inputCode = family === 'policy' ? 'invalid_policy' : 'invalid_input';
  b('good baseline', good, (o) => want(o.error === undefined, 'no error'));
  b('empty', '', json);
  b('whitespace only', ' \n\t ', json);
  b('truncated', good.slice(0, Math.floor(good.length / 2)), json);
  b('truncated by one byte', good.slice(0, -1), json);
  b('unclosed string', '{"op":"pl', json);
  b('trailing garbage', good + ' x', json);
  b('two documents', good + good, json);
  b('trailing comma', good.slice(0, -1) + ',}', json);
  b('single quotes', "{'now':1}", json);
  b('bare word', 'hello', json);
  b('NaN', '{"now":NaN}', json);
  b('comment', '/* */' + good, json);
  b('null', 'null', isError('invalid_input'));
  b('number', '42', isError('invalid_input'));
  b('string', '"x"', isError('invalid_input'));
  b('array', '[' + good + ']', isError('invalid_input'));
  b('empty object', '{}', isError(inputCode));
  b('NUL byte inside', Buffer.concat([Buffer.from(good.slice(0, 5)), Buffer.from([0]), Buffer.from(good.slice(5))]), json);
  b('NUL byte after', Buffer.concat([Buffer.from(good), Buffer.from([0])]), json);
  b('non-UTF-8 byte in a string', Buffer.from(good.replace('}', ',"x":"\u0001"}').replace('\u0001', '\u0000'), 'utf8').map((x) => (x === 0 ? 0xff : x)), json);
  b('overlong UTF-8 in a string', Buffer.concat([Buffer.from(good.slice(0, -1) + ',"x":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')]), json);
  b('lone surrogate escape', good.slice(0, -1) + ',"x":"\\ud800"}');
  b('bad escape', good.slice(0, -1) + ',"x":"\\q"}', json);
  b('raw control char in string', good.slice(0, -1) + ',"x":"a\u0001b"}', json);
  b('UTF-8 BOM', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(good)]));
  b('deep nesting', good.slice(0, -1) + ',"x":' + '['.repeat(2000) + ']'.repeat(2000) + '}', (o) => want(o.error, 'an error'));
  b('moderate nesting', good.slice(0, -1) + ',"x":' + '['.repeat(50) + ']'.repeat(50) + '}');
  b('huge string field', good.slice(0, -1) + ',"x":"' + 'a'.repeat(200000) + '"}');
  b('huge number', good.slice(0, -1) + ',"x":1' + '0'.repeat(400) + '}');
  b('big integer', good.slice(0, -1) + ',"x":123456789012345678901234567890}');
  b('duplicate key', good.slice(0, -1) + ',' + good.slice(1));
  b('too large', fill(good.slice(0, -1) + ',"x":"', 'a', 2 * 1024 * 1024, '"}'), isError('too_large'));
  b('at the size limit', fill('{"x":"', ' ', 2 * 1024 * 1024 - 9, '"}' + ' '), (o) => want(o.error?.code !== 'too_large', 'not too_large at exactly 2 MiB'));
  for (const [name, input] of KERNEL_SPLITS) b(`several faults: ${name}`, input, json);
  if (NOW_FIELD[family]) {
    const f = NOW_FIELD[family];
    const set = (v) => good.replace(new RegExp(`"${f}":[0-9]+`), `"${f}":${v}`);
    b(`${f} float`, set('1.5'), isError(inputCode, f));
    b(`${f} negative`, set('-1'), isError(inputCode, f));
    b(`${f} 2^53`, set(TWO_53), isError(inputCode, f));
    b(`${f} 2^64`, set('18446744073709551616'), isError(inputCode, f));
    b(`${f} exponent`, set('1e3'), isError(inputCode, f));
    b(`${f} negative zero`, set('-0'));
    b(`${f} string`, set('"1"'), isError(inputCode, f));
    b(`${f} null`, set('null'), isError(inputCode, f));
    b(`${f} bool`, set('true'), isError(inputCode, f));
    b(`${f} object`, set('{}'), isError(inputCode, f));
  }
}

// ---------------------------------------------------------------------------------------------
// Run the native build, apply the checks, compare with the files on disk.

const results = runNative(cases.map(({ c }) => [c.family, inputBytes(c)]));
let failures = 0;
let checked = 0;
const byFamily = new Map(FAMILIES.map((f) => [f, []]));
cases.forEach(({ c, check }, i) => {
  const { rc, out } = results[i];
  const text = out.toString('utf8');
  if (rc !== 0 && rc !== 1) {
    console.error(`FAIL ${c.family}/${c.name}: the entry returned ${rc}`);
    failures++;
  }
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch {
    console.error(`FAIL ${c.family}/${c.name}: output is not JSON: ${text.slice(0, 300)}`);
    failures++;
  }
  if ((rc === 1) !== (parsed?.error !== undefined)) {
    console.error(`FAIL ${c.family}/${c.name}: return code ${rc} does not match the document`);
    failures++;
  }
  if (check && parsed !== undefined) {
    checked++;
    try {
      check(parsed, text);
    } catch (e) {
      if (!(e instanceof CheckFailure)) throw e;
      console.error(`FAIL ${c.family}/${c.name}: expected ${e.message}\n  input:  ${(c.input ?? c.inputBase64 ?? JSON.stringify(c.inputFill)).slice(0, 400)}\n  output: ${text.slice(0, 600)}`);
      failures++;
    }
  }
  byFamily.get(c.family).push(JSON.stringify({ ...c, expected: text }));
});
if (checked < 60) throw new Error(`only ${checked} hand-checked cases`);
if (failures > 0) {
  console.error(`generate: ${failures} case(s) disagree with docs/ABI.md; nothing written`);
  process.exit(1);
}

let changed = 0;
for (const [family, lines] of byFamily) {
  const file = corpusFile(family);
  const text = lines.join('\n') + '\n';
  const old = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const oldByName = new Map(old.split('\n').filter(Boolean).map((l) => JSON.parse(l)).map((c) => [c.name, c]));
  const newNames = new Set();
  let added = 0, updated = 0;
  for (const line of lines) {
    const c = JSON.parse(line);
    newNames.add(c.name);
    const prev = oldByName.get(c.name);
    if (!prev) added++;
    else if (prev.expected !== c.expected || (prev.input ?? prev.inputBase64) !== (c.input ?? c.inputBase64)) {
      updated++;
      if (updated <= 5) console.log(`  ${family}/${c.name}:\n    was: ${String(prev.expected).slice(0, 300)}\n    now: ${c.expected.slice(0, 300)}`);
    }
  }
  const removed = [...oldByName.keys()].filter((n) => !newNames.has(n)).length;
  const summary = `${family}: ${lines.length} cases (${added} new, ${updated} changed, ${removed} removed)`;
  if (text !== old) {
    changed++;
    if (write) writeFileSync(file, text);
  }
  console.log(summary);
}
console.log(`generate: ${cases.length} cases, ${checked} with hand-written checks, all agree with the native core`);
if (changed > 0 && !write) {
  console.log(`generate: ${changed} file(s) would change; run with --write to update them`);
  process.exit(1);
}
console.log(write ? `generate: ${changed} file(s) written` : 'generate: corpus is up to date');
