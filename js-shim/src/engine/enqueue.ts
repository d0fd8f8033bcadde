import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { Core } from '../core/core.js';
import { isCoreError } from '../core/core.js';
import { type DedupeVerdict, dedupeItem, heldResult } from './dedupe.js';
import { EnqueueRefusedError, PostboxError } from '../errors.js';
import { sendNudges, type PendingNudge } from './nudge.js';
import type { EngineRuntime } from './runtime.js';
import type { TxBatch, TxEnqueue, TxEnqueueMany } from './driven.js';
import { runBatch } from './batch.js';
import type { AppendInput, AppendParents, AppendRow, DependencyEdge, DependencyStore, OutboxStore } from '../stores/contract.js';
import type { DependencyRefusalReason, EnqueueOptions, JobStatus, EnqueueRefusal, EnqueueResult, EnqueueTrace, JobDefinition, Queryable, Telemetry } from '../types.js';

/** What the core said about one job: refused, or when it is due and how to nudge it. */
export type EnqueueDecision =
  | { ok: true; payloadBytes: number; dueAt: number; boostMs?: number; nudge: boolean; delaySeconds: number | null; parents?: DecidedParents }
  | { ok: false; issues: { code: string; message: string }[] };

/** The core's codes for parents that refuse an item (dependencies.h). */
const DEPENDENCY_REFUSALS: ReadonlySet<string> = new Set(['too_many_parents', 'dependency_cycle', 'unknown_parent', 'parent_refused']);

/** How the core decided a job with parents is written (docs/ABI.md, pb_enqueue dependencies). */
interface DecidedParents {
  status: 'waiting' | 'pending' | 'cancelled';
  waitingOn: number;
  onParentFailure: 'cancel' | 'release';
  total: number;
  dead: number;
  cancelled: number;
  batch?: boolean;
  /** The places (in the item's parent list) of the parents that had ended, which the child counted at birth; absent: none. */
  counted?: number[];
  code?: string;
}

/**
 * @internal Marks the options of a batch's completion job (`outbox.batch`): its `dependsOn` are
 * the batch's members, as many as the core allows a batch, and it runs however they end.
 */
export const COMPLETES_BATCH: unique symbol = Symbol('postbox.completesBatch');

/** Each named parent's status in the naming item's tenant scope, `null` when not found there (the store's `dependencies.parentStates` on the enqueue's handle). */
export type ParentLookup = (refs: readonly { id: string; tenantKey: string | null }[]) => Promise<(JobStatus | null)[]>;

/** The results of a list, in its order, plus the nudges the core asked for. */
export interface EnqueueOutcome {
  results: EnqueueResult[];
  nudges: PendingNudge[];
}

export interface EnqueueEnv<Tx = Queryable> {
  core: Core;
  now: number;
  maxPayloadBytes: number;
  /** The longest delay a nudge may carry (the core's, pb_claim outbox). */
  maxQueueDelayMs: number;
  /** The longest dedupeKey, tenantKey or correlationId (the core's, pb_claim outbox). */
  maxKeyChars: number;
  hasQueue: boolean;
  versionTs: number | null;
  generateId: () => string;
  strict: boolean;
  /** The outbox's store: a transaction's handle (`Tx`) is what its append writes with. */
  store: OutboxStore<unknown, Tx>;
  /** A span per enqueue call, when the outbox has `telemetry`. */
  telemetry?: Telemetry;
}

/** The longest trace context a job keeps (migrations/0008 leaves the bound to the engine). */
const MAX_TRACE_CONTEXT_CHARS = 512;

/** Which call is enqueueing, for messages: `enqueue`, or `enqueueMany` and the item's index. */
export type Api = 'enqueue' | 'enqueueMany' | 'enqueueStatements';
const where = (api: Api, index: number) => (api === 'enqueue' ? api : `${api}: items[${index}]`);

/** A job's options, checked and serialised; `refused` when its payload failed before the core. */
interface Prepared {
  refused: EnqueueRefusal | undefined;
  payloadJson: string;
  payloadBytes: number;
  delayMs: number;
  tenantKey: string | null;
  dedupeKey: string | null;
  correlationId: string | null;
  metadataJson: string | null;
  maxAttempts: number | null;
  /** The item's priority, else its kind's default; 0: none. */
  priority: number;
  /** Its parents: job ids (lower case) and list indexes, each once; `null`: none. */
  parents: (string | number)[] | null;
  onParentFailure: 'cancel' | 'run';
  /** A batch's completion job (its parents are the members). */
  completesBatch: boolean;
  /** For each id among `parents`, its status in the item's tenant scope, null when not found (filled before the core is asked). */
  found?: Map<string, JobStatus | null>;
}

/**
 * An enqueue decided and not yet written: the append to make (`input`, absent when nothing is
 * to be written) and what `finishEnqueue` needs to read its rows.
 */
export interface PlannedEnqueue {
  input: AppendInput | null;
  results: (EnqueueResult | undefined)[];
  /** The list index of each appended item, in append order. */
  writes: number[];
  decisions: EnqueueDecision[];
  /** Each item's parents as given (ids and list indexes), for linking after the append; `null`: none. */
  parents: ((string | number)[] | null)[];
}

/**
 * An application transaction with enqueues, as both outboxes give it (`outbox.transaction`):
 * `begin` runs its callback in one transaction of the store, handing it the append's handle (`q`)
 * and the caller's (`tx`); every enqueue made in it writes with `q`, and what they asked to be
 * nudged is sent once the transaction has committed (never for one that rolled back).
 */
export async function enqueueInTransaction<Q, T>(
  rt: EngineRuntime<unknown>,
  env: () => EnqueueEnv<Q>,
  begin: <X>(body: (q: Q, tx: unknown) => Promise<X>) => Promise<X>,
  fn: (tx: any, enqueue: TxEnqueue, enqueueMany: TxEnqueueMany, batch: TxBatch) => Promise<T>,
  /** Where `recordNudges` writes after the commit: the caller's own handle when it can run a statement. */
  recordOn?: unknown,
): Promise<T> {
  const nudges: PendingNudge[] = [];
  const result = await begin((q, tx) => {
    const many = async <P>(job: JobDefinition<P>, items: readonly EnqueueOptions<P>[], api: 'enqueue' | 'enqueueMany') => {
      const outcome = await enqueueJobs(env(), q, job, items, api);
      nudges.push(...outcome.nudges);
      return outcome.results;
    };
    return fn(tx, async (job, opts) => (await many(job, [opts], 'enqueue'))[0]!, (job, items) => many(job, items, 'enqueueMany'), (opts, body) => runBatch(many, opts, body));
  });
  await sendNudges(rt, nudges, recordOn === undefined ? {} : { handle: recordOn });
  return result;
}

/**
 * Enqueues a list of jobs of one kind (`enqueue` is a list of one): validates each payload
 * with the job's schema, asks the core about all of them in one call, then writes them in ONE
 * statement. Results come back in list order. Of items sharing a dedupe key in one tenant
 * scope the first wins; the later ones are `exists` of it, or a conflict when they differ
 * from it. Under `strict`, the first refused
 * item throws `EnqueueRefusedError`: before anything is written, or, for a dedupe conflict
 * the statement found, after (the caller's transaction rolls back).
 */
export async function enqueueJobs<P, Tx>(env: EnqueueEnv<Tx>, q: Tx, job: JobDefinition<P>, items: readonly EnqueueOptions<P>[], api: Api): Promise<EnqueueOutcome> {
  const trace = startEnqueueTrace(env, job, items, api);
  try {
    const deps = env.store.dependencies;
    const planned = await planEnqueue(env, job, items, api, deps && ((refs) => deps.parentStates(q, refs)));
    keepTraceContext(planned, trace);
    const rows = planned.input ? await env.store.append(q, planned.input) : [];
    const outcome = finishEnqueue(env, job, planned, rows, api);
    if (deps) await addEdges(deps, q, planned, rows);
    endEnqueueTrace(trace, outcome.results);
    return outcome;
  } catch (error) {
    trace?.end({ created: 0, exists: 0, refused: 0, error });
    throw error;
  }
}

/** The enqueue's producer span, when the outbox has telemetry. */
export const startEnqueueTrace = <P>(env: EnqueueEnv<unknown>, job: JobDefinition<P>, items: readonly unknown[], api: Api): EnqueueTrace | undefined =>
  env.telemetry?.enqueue({ kind: job?.kind, lane: job?.lane, count: items?.length ?? 0, api });

/** Stores the span's trace context with the jobs. A context the column cannot hold is dropped: telemetry must never fail an enqueue. */
export function keepTraceContext(planned: PlannedEnqueue, trace: EnqueueTrace | undefined): void {
  const context = trace?.context;
  if (planned.input && typeof context === 'string' && context.length > 0 && context.length <= MAX_TRACE_CONTEXT_CHARS) planned.input.traceContext = context;
}

/** Ends the enqueue's span with how many items were created, found and refused. */
export function endEnqueueTrace(trace: EnqueueTrace | undefined, results: readonly (EnqueueResult | undefined)[]): void {
  if (!trace) return;
  let created = 0;
  let exists = 0;
  for (const r of results) {
    if (r?.status === 'created') created++;
    else if (r?.status === 'exists') exists++;
  }
  trace.end({ created, exists, refused: results.length - created - exists });
}

/**
 * Everything before the write: each item checked and serialised, the parents it names looked up
 * (`lookup`, absent for a store without dependencies, which then refuses `dependsOn`), the
 * core's decisions, ids drawn.
 */
export async function planEnqueue<P>(
  env: EnqueueEnv<unknown>, job: JobDefinition<P>, items: readonly EnqueueOptions<P>[], api: Api, lookup?: ParentLookup,
): Promise<PlannedEnqueue> {
  if (!Array.isArray(items)) throw new PostboxError('invalid_input', `${api}: items must be an array of enqueue options`);
  const prepared: Prepared[] = new Array(items.length);
  for (let i = 0; i < items.length; i++) {
    const p = prepare(job, items[i], api, i, env.maxKeyChars);
    prepared[i] = p instanceof Promise ? await p : p;
  }
  await findParents(prepared, api, lookup);

  // The core sees every item, so its cap on the list holds whatever the schema refused.
  const decisions = decide(env, prepared, api);
  const results: (EnqueueResult | undefined)[] = new Array(items.length);
  const writes: number[] = [];
  for (let i = 0; i < items.length; i++) {
    const d = decisions[i]!;
    results[i] = prepared[i]!.refused ?? (d.ok ? undefined : refusal(d.issues));
    if (results[i] === undefined) writes.push(i);
  }
  if (env.strict) throwFirstRefusal(results, api);
  const parents = prepared.map((p) => p.parents);
  if (writes.length === 0) return { input: null, results, writes, decisions, parents };
  const ids = writes.map(() => checkedId(env.generateId(), api));
  const input = appendInput(env, job, writes.map((i) => prepared[i]!), ids, writes.map((i) => decisions[i] as Extract<EnqueueDecision, { ok: true }>));
  return { input, results, writes, decisions, parents };
}

/** The core's refusal as a result: parents that cannot be met, or an invalid payload. */
function refusal(issues: { code: string; message: string }[]): EnqueueRefusal {
  const deps = issues.find((issue) => DEPENDENCY_REFUSALS.has(issue.code));
  if (deps) return { status: 'invalid_dependency', reason: deps.code as DependencyRefusalReason, message: deps.message };
  return { status: 'invalid_payload', issues: issues.map((issue) => ({ message: issue.message })) };
}

/** Looks up, in one call, every job id the items name as a parent, each in its item's tenant scope. */
async function findParents(prepared: readonly Prepared[], api: Api, lookup: ParentLookup | undefined): Promise<void> {
  const refs: { id: string; tenantKey: string | null }[] = [];
  for (const p of prepared) {
    if ((!p.parents && !p.completesBatch) || p.refused) continue;
    if (!lookup) throw new PostboxError('unsupported', `${api}: dependsOn needs a store that keeps dependencies (every built-in store does); this outbox's does not`);
    for (const parent of p.parents ?? []) if (typeof parent === 'string' && UUID.test(parent)) refs.push({ id: parent, tenantKey: p.tenantKey });
  }
  const found: (JobStatus | null)[] = refs.length > 0 && lookup ? await lookup(refs) : [];
  let n = 0;
  for (const p of prepared) {
    if (!p.parents || p.refused) continue;
    p.found = new Map();
    // An id that is not a UUID names no job: unknown, without asking the store.
    for (const parent of p.parents) if (typeof parent === 'string') p.found.set(parent, UUID.test(parent) ? (found[n++] ?? null) : null);
  }
}

/**
 * After the append: the edges of every created item with parents, its list parents named by the
 * job each resolved to (created, or holding its dedupe key). The append wrote each child as the
 * core decided from its parents' states; the edges let their settles count it down.
 */
async function addEdges<Tx>(deps: DependencyStore<unknown, Tx>, q: Tx, planned: PlannedEnqueue, rows: readonly AppendRow[]): Promise<void> {
  const { writes, decisions, parents } = planned;
  const rowOf = new Map<number, AppendRow>();
  writes.forEach((i, w) => rowOf.set(i, rows[w]!));
  const edges: DependencyEdge[] = [];
  for (const i of writes) {
    const row = rowOf.get(i)!;
    const decided = (decisions[i] as Extract<EnqueueDecision, { ok: true }>).parents;
    if (!row.created || !decided) continue;
    // The parents the core counted at birth, by their place in the list the core was given.
    const counted = new Set(decided.counted ?? []);
    (parents[i] ?? []).forEach((parent, k) => {
      edges.push({ child: row.id, parent: typeof parent === 'string' ? parent : rowOf.get(parent)!.id, parentEnded: counted.has(k) });
    });
  }
  await deps.addEdges(q, edges);
}

/** A stored parent for the core: its status (the core says what each means), or false when not found. */
const parentState = (status: JobStatus | null): string => (status === null ? 'false' : JSON.stringify(status));

/** The append's rows as results (a held key is `exists` or a conflict, as the core says), and the nudges the core asked for. */
export function finishEnqueue<P>(env: EnqueueEnv<unknown>, job: JobDefinition<P>, planned: PlannedEnqueue, rows: readonly AppendRow[], api: Api): EnqueueOutcome {
  const results = [...planned.results];
  const { writes, decisions } = planned;
  const nudges: PendingNudge[] = [];
  const held: number[] = [];
  writes.forEach((i, w) => {
    const row = rows[w]!;
    if (!row.created) {
      held.push(w);
      return;
    }
    results[i] = { status: 'created', id: row.id, kind: row.kind };
    const d = decisions[i] as Extract<EnqueueDecision, { ok: true }>;
    if (d.nudge) nudges.push({ id: row.id, kind: row.kind, lane: job.lane, delaySeconds: d.delaySeconds ?? 0 });
  });
  // A key already held: the core says whether this is the same request again or a conflict.
  if (held.length > 0) {
    const resolved = resolvedParents(planned, rows);
    // A holder this call appended: its parents are the call's, not yet stored as edges.
    const createdAt = new Map<string, number>();
    writes.forEach((i, w) => rows[w]!.created && createdAt.set(rows[w]!.id.toLowerCase(), i));
    const holderParents = (row: AppendRow): readonly string[] | null => {
      const i = createdAt.get(row.id.toLowerCase());
      return i !== undefined ? resolved(i) : (row.holderParents ?? null);
    };
    const verdicts = dedupeVerdicts(env, held.map((w) => dedupeItem(rows[w]!, job.kind, resolved(writes[w]!), holderParents(rows[w]!))), api);
    held.forEach((w, n) => {
      results[writes[w]!] = heldResult(rows[w]!, verdicts[n]!);
    });
  }
  if (env.strict) throwFirstRefusal(results, api);
  return { results: results as EnqueueResult[], nudges };
}

/**
 * Each item's parents as job ids (a list index resolved to the job that item became: created, or
 * holding its key), by the item's place in the call: what its edges name, and what a repeat of
 * its dedupe key must name too.
 */
function resolvedParents(planned: PlannedEnqueue, rows: readonly AppendRow[]): (i: number) => string[] {
  const rowOf = new Map<number, AppendRow>();
  planned.writes.forEach((i, w) => rowOf.set(i, rows[w]!));
  return (i) => (planned.parents[i] ?? []).flatMap((p) => (typeof p === 'string' ? [p.toLowerCase()] : rowOf.has(p) ? [rowOf.get(p)!.id.toLowerCase()] : []));
}

/** Checks one item's options and serialises its payload; synchronous unless the schema is not. */
function prepare<P>(job: JobDefinition<P>, opts: EnqueueOptions<P> | undefined, api: Api, index: number, maxChars: number): Prepared | Promise<Prepared> {
  if (!opts || typeof opts !== 'object') throw new PostboxError('invalid_input', `${where(api, index)}: options with a \`payload\` are required`);
  const delayMs = opts.delayMs ?? 0;
  if (typeof delayMs !== 'number' || !Number.isSafeInteger(delayMs)) {
    throw new PostboxError('invalid_input', `${where(api, index)}: delayMs must be an integer, got ${String(delayMs)}`);
  }
  // Only the type here (the JSON sent to the core must be a number); its range is the core's.
  if (opts.maxAttempts !== undefined && (typeof opts.maxAttempts !== 'number' || !Number.isSafeInteger(opts.maxAttempts))) {
    throw new PostboxError('invalid_input', `${where(api, index)}: maxAttempts must be an integer, got ${String(opts.maxAttempts)}`);
  }
  if (opts.priority !== undefined && (typeof opts.priority !== 'number' || !Number.isSafeInteger(opts.priority))) {
    throw new PostboxError('invalid_input', `${where(api, index)}: priority must be an integer, got ${String(opts.priority)}`);
  }
  const parents = dependsOn(opts.dependsOn, api, index);
  if (opts.onParentFailure !== undefined && opts.onParentFailure !== 'cancel' && opts.onParentFailure !== 'run') {
    throw new PostboxError('invalid_input', `${where(api, index)}: onParentFailure must be 'cancel' or 'run', got ${String(opts.onParentFailure)}`);
  }
  checkOptionalText(api, index, 'dedupeKey', opts.dedupeKey, maxChars);
  checkOptionalText(api, index, 'tenantKey', opts.tenantKey, maxChars);
  checkOptionalText(api, index, 'correlationId', opts.correlationId, maxChars);
  const p: Prepared = {
    refused: undefined,
    payloadJson: 'null',
    payloadBytes: 0,
    delayMs,
    tenantKey: opts.tenantKey ?? null,
    dedupeKey: opts.dedupeKey ?? null,
    correlationId: opts.correlationId ?? null,
    metadataJson: metadataJson(opts.metadata, api, index),
    maxAttempts: opts.maxAttempts ?? null,
    priority: opts.priority ?? job.policy.priority ?? 0,
    parents,
    onParentFailure: opts.onParentFailure ?? 'cancel',
    completesBatch: (opts as { [COMPLETES_BATCH]?: boolean })[COMPLETES_BATCH] === true,
  };
  // Texts PostgreSQL refuses: the item is refused as a result, before any statement, so neither
  // the caller's transaction nor the other items of a list share its fate.
  for (const field of ['dedupeKey', 'tenantKey', 'correlationId'] as const) {
    const text = p[field];
    if (text !== null && UNSTORABLE_TEXT.test(text)) {
      p.refused = { status: 'invalid_payload', issues: [{ message: `${field} ${unstorable(text)}`, path: [field] }] };
      return p;
    }
  }
  if (p.metadataJson !== null && hasUnstorableEscape(p.metadataJson)) {
    p.refused = { status: 'invalid_payload', issues: [{ message: `metadata ${UNSTORABLE_JSON}`, path: ['metadata'] }] };
    return p;
  }
  const validated = job.payload['~standard'].validate(opts.payload);
  // Validators may answer synchronously: a long list then pays no microtask per item.
  return validated instanceof Promise ? validated.then((v) => serialise(p, v)) : serialise(p, validated);
}

function serialise(p: Prepared, validated: StandardSchemaV1.Result<unknown>): Prepared {
  if (validated.issues) {
    p.refused = { status: 'invalid_payload', issues: validated.issues.map(toIssue) };
    return p;
  }
  let json: string | undefined;
  try {
    json = JSON.stringify(validated.value);
  } catch (error) {
    p.refused = { status: 'invalid_payload', issues: [{ message: `payload is not JSON-serialisable: ${String(error)}` }] };
    return p;
  }
  if (json === undefined) {
    p.refused = { status: 'invalid_payload', issues: [{ message: 'payload is not JSON-serialisable' }] };
    return p;
  }
  if (hasUnstorableEscape(json)) {
    p.refused = { status: 'invalid_payload', issues: [{ message: `payload ${UNSTORABLE_JSON}` }] };
    return p;
  }
  p.payloadJson = json;
  p.payloadBytes = utf8Length(json);
  return p;
}

/** A character PostgreSQL's text and jsonb refuse: U+0000, or half of a surrogate pair. */
const UNSTORABLE_TEXT = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function unstorable(text: string): string {
  return text.includes('\u0000')
    ? 'holds U+0000, which PostgreSQL cannot store in text'
    : 'holds half of a UTF-16 surrogate pair, which is not a character and PostgreSQL cannot store';
}

const UNSTORABLE_JSON = 'holds U+0000 or half of a UTF-16 surrogate pair, which PostgreSQL cannot store in jsonb';

/**
 * Whether JSON text from JSON.stringify holds an escape jsonb refuses: `\u0000`, or a lone
 * surrogate's `\udXXX` (JSON.stringify escapes exactly those, and writes real pairs as they are).
 * An escaped backslash before `u` (`\\u0000`, the six characters) is text, not an escape.
 */
function hasUnstorableEscape(json: string): boolean {
  return json.includes('\\u') && /(?<!\\)(?:\\\\)*\\u(?:0000|[dD][89abAB][0-9a-fA-F]{2}|[dD][c-fC-F][0-9a-fA-F]{2})/.test(json);
}

/**
 * `dependsOn`: an array of job ids (strings; a UUID in any case names the same job) and list
 * indexes (non-negative integers), each kept once; empty or absent is none. Its type is checked
 * here, what it names is the core's and the store's.
 */
function dependsOn(value: unknown, api: Api, index: number): (string | number)[] | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value)) throw new PostboxError('invalid_input', `${where(api, index)}: dependsOn must be an array of job ids and list indexes`);
  const out = new Set<string | number>();
  for (const parent of value) {
    if (typeof parent === 'string') out.add(parent.toLowerCase());
    else if (typeof parent === 'number' && Number.isSafeInteger(parent) && parent >= 0) out.add(parent);
    else throw new PostboxError('invalid_input', `${where(api, index)}: dependsOn holds ${JSON.stringify(parent) ?? String(parent)}, neither a job id nor a list index`);
  }
  return out.size > 0 ? [...out] : null;
}

/**
 * Metadata is a plain JSON object; `undefined` and `null` both mean none (SQL NULL), in
 * `enqueue` and `enqueueMany` alike.
 */
function metadataJson(metadata: unknown, api: Api, index: number): string | null {
  if (metadata === undefined || metadata === null) return null;
  if (typeof metadata !== 'object' || Array.isArray(metadata)) {
    throw new PostboxError('invalid_input', `${where(api, index)}: metadata must be a plain object, got ${Array.isArray(metadata) ? 'an array' : typeof metadata}`);
  }
  try {
    return JSON.stringify(metadata);
  } catch (error) {
    throw new PostboxError('invalid_input', `${where(api, index)}: metadata is not JSON-serialisable: ${String(error)}`);
  }
}

/** One core call for the whole list: each item's delay and payload size. */
function decide(env: EnqueueEnv<unknown>, prepared: readonly Prepared[], api: Api): EnqueueDecision[] {
  let items = '';
  for (let i = 0; i < prepared.length; i++) {
    const p = prepared[i]!;
    items += `${i ? ',' : ''}{"delayMs":${p.delayMs},"payloadBytes":${p.payloadBytes}${p.maxAttempts === null ? '' : `,"maxAttempts":${p.maxAttempts}`}${p.priority === 0 ? '' : `,"priority":${p.priority}`}${dependencyFields(p)}}`;
  }
  const input = `{"op":"batch","now":${env.now},"maxPayloadBytes":${env.maxPayloadBytes},"maxQueueDelayMs":${env.maxQueueDelayMs},"hasQueue":${env.hasQueue},"items":[${items}]}`;
  const out = env.core.callText('enqueue', input) as { results: EnqueueDecision[] } | { error: { code: string; message: string } };
  if (isCoreError(out)) throw new PostboxError(out.error.code, `${api}: ${out.error.message}`);
  return out.results;
}

/** An item's parents for the core: list indexes as they are, ids as found (true) or not (false). */
function dependencyFields(p: Prepared): string {
  let out = p.refused ? ',"refused":true' : '';
  if (p.completesBatch && !p.refused) return `${out},"completesBatch":true,"parents":[${(p.parents ?? []).map((id) => parentState(p.found?.get(id as string) ?? null)).join(',')}]`;
  if (!p.parents || p.refused) return out;
  out += `,"parents":[${p.parents.map((parent) => (typeof parent === 'number' ? parent : parentState(p.found?.get(parent) ?? null))).join(',')}]`;
  return p.onParentFailure === 'cancel' ? out : `${out},"onParentFailure":"${p.onParentFailure}"`;
}

/** The core's verdicts on items whose dedupe key was already held, in order. */
function dedupeVerdicts(env: EnqueueEnv<unknown>, items: ReturnType<typeof dedupeItem>[], api: Api) {
  const input = `{"op":"dedupe","items":${JSON.stringify(items)}}`;
  const out = env.core.callText('enqueue', input) as { results: DedupeVerdict[] } | { error: { code: string; message: string } };
  if (isCoreError(out)) throw new PostboxError(out.error.code, `${api}: ${out.error.message}`);
  return out.results;
}

/** The one append for the list (the store keeps it to one statement, bar a raced dedupe key). */
function appendInput<P>(env: EnqueueEnv<unknown>, job: JobDefinition<P>, writes: Prepared[], ids: string[], decided: Extract<EnqueueDecision, { ok: true }>[]): AppendInput {
  return {
    kind: job.kind,
    lane: job.lane,
    now: env.now,
    versionTs: env.versionTs,
    items: writes.map((w, i) => ({
      id: ids[i]!, payloadJson: w.payloadJson, tenantKey: w.tenantKey, dedupeKey: w.dedupeKey, correlationId: w.correlationId,
      metadataJson: w.metadataJson, dueAt: decided[i]!.dueAt, maxAttempts: w.maxAttempts,
      ...(w.priority === 0 ? {} : { priority: w.priority, boostMs: decided[i]!.boostMs ?? 0 }),
      ...(decided[i]!.parents ? { parents: appendParents(decided[i]!.parents!) } : {}),
    })),
  };
}

/** A child's parents as the append writes them (what it counted at birth goes to its edges, not its row). */
function appendParents({ counted: _counted, code, ...rest }: DecidedParents): AppendParents {
  return { ...rest, code: code ?? null };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A custom `generateId` must give UUIDs (the id column's type): caught here, named, before any write. */
function checkedId(id: unknown, api: Api): string {
  if (typeof id !== 'string' || !UUID.test(id)) {
    throw new PostboxError('invalid_id', `${api}: generateId returned ${JSON.stringify(id) ?? String(id)}, which is not a UUID`);
  }
  return id;
}

function throwFirstRefusal(results: readonly (EnqueueResult | undefined)[], api: Api): void {
  const index = results.findIndex((r) => r !== undefined && r.status !== 'created' && r.status !== 'exists');
  if (index >= 0) throw new EnqueueRefusedError(results[index] as EnqueueRefusal, api === 'enqueueMany' ? index : undefined);
}

function checkOptionalText(api: Api, index: number, name: string, value: unknown, maxChars: number): void {
  if (value === undefined || value === null) return;
  if (typeof value !== 'string' || value.length === 0 || value.length > maxChars) {
    throw new PostboxError('invalid_input', `${where(api, index)}: ${name} must be a non-empty string of at most ${maxChars} characters`);
  }
}

function toIssue(issue: StandardSchemaV1.Issue) {
  return issue.path ? { message: issue.message, path: issue.path } : { message: issue.message };
}

/** The UTF-8 length of a string, without encoding it (the core caps payloads by bytes). */
function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) bytes += 1;
    else if (c >= 0xd800 && c <= 0xdbff && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      bytes += 2; // a surrogate pair: 2 code units, 4 bytes
      i++;
    } else bytes += 2;
  }
  return bytes;
}
