import { errorMessage } from '../errors.js';
import { isCoreError } from '../core/core.js';
import { deadlineError, isDeadlineError } from '../engine/deadline.js';
import { FLEET, isOutboxFleet, type FleetEngine, type OutboxFleet } from '../fleet.js';
import { sendDrains } from '../engine/nudge.js';
import { RUN, type DrivableOutbox } from '../engine/driven.js';
import type { Outbox } from '../outbox.js';
import { addReport, emptyReport, type RunReport } from '../engine/drain.js';
import type { EngineRuntime } from '../engine/runtime.js';
import type { OutboxEvent } from '../types.js';

/** The parts of a Cloudflare `MessageBatch` Postbox uses. */
export interface QueueBatch<Body = unknown> {
  readonly queue: string;
  readonly messages: readonly { readonly id: string; readonly body: Body; readonly attempts: number; ack(): void; retry(options?: { delaySeconds?: number }): void }[];
  ackAll(): void;
  retryAll(options?: { delaySeconds?: number }): void;
}

/**
 * Builds the outbox for one invocation from its `env` (and context): an `Outbox`
 * (`createOutbox`), or a SQLite outbox bound to its database (`createSqliteOutbox(...).bind(env.DB)`).
 */
export type OutboxFactory<Env> = (env: Env, ctx?: ExecutionContext) => DrivableOutbox;

/** Builds several outboxes (`createOutboxes`, one per database) for one invocation from its `env`. */
export type OutboxFleetFactory<Env> = (env: Env, ctx?: ExecutionContext) => OutboxFleet<string, any>;

/** Options of the queue consumer. */
export interface QueueHandlerOptions {
  /** One Queue per lane: this consumer drains this lane only and refuses another's messages (`wrong_lane`). */
  lane?: string;
  /** Wall time of the invocation. Default 840 s (Cloudflare allows 15 min). */
  invocationBudgetMs?: number;
}

/** What a queue invocation did for one of several outboxes. */
export interface OutboxQueueRun extends RunReport {
  /** The outbox's key. */
  outbox: string;
  /** Messages of the batch for it: acked when `ok`, else sent back to the queue. */
  messages: number;
  /** False when its database failed (or did not answer within its share of the invocation). */
  ok: boolean;
  error: string | null;
}

/** What a queue invocation of several outboxes did: the totals, and each outbox's part. */
export interface FleetQueueReport extends RunReport {
  /** Each outbox the batch had messages for, in the order of its first message. */
  outboxes: OutboxQueueRun[];
  /** Messages naming an outbox this consumer does not serve: sent back to the queue (then to its dead-letter queue). */
  unknownOutbox: number;
}

type Decoded =
  | { ok: true; t: 'job'; id: string; kind: string; lane: string; outbox?: string }
  | { ok: true; t: 'jobs'; kind: string; lane: string; ids: string[]; outbox?: string }
  | { ok: true; t: 'drain'; lane: string; outbox?: string }
  | { ok: false; code: string; message: string; retry?: boolean; delaySeconds?: number };

/**
 * The queue consumer. A nudge claims exactly the jobs it names (by id and kind: one, or up to
 * 100 of one kind in a coalesced message) if they are due and registered; a drain message runs
 * a bounded drain of the lane. Malformed, hostile or oversized messages are acked and reported
 * as `invalid_message` events: the job rows, not the messages, are the truth.
 *
 * Every message names its lane. Without `lane`, the consumer serves every lane (one Queue for
 * the whole outbox): it drains the lane each message names, lane after lane. With `lane` (one
 * Queue per lane), it drains that lane only and refuses a message for another as `wrong_lane`.
 *
 * With a factory of several outboxes (`createOutboxes`), each message names its outbox (one
 * naming none, from before there were several, is the default outbox's). The batch is grouped
 * by outbox and each group drained on that outbox's own connections, as many outboxes at once
 * as the core allows within the invocation's connections, each within its share of the
 * invocation. Each message is acked or retried on its own: a group whose database fails is
 * sent back to the queue while the others are acked. A message naming an outbox not served
 * here is an `invalid_message` event with code `unknown_outbox`, sent back to the queue
 * (delayed, then to its dead-letter queue) as the core decides; the others are acked.
 *
 * @example
 * ```ts
 * export default { queue: createQueueHandler(outboxFor) };
 * ```
 */
export function createQueueHandler<Env>(
  outboxFor: OutboxFactory<Env>,
  options?: QueueHandlerOptions,
): (batch: QueueBatch, env: Env, ctx?: ExecutionContext) => Promise<RunReport>;
export function createQueueHandler<Env>(
  outboxFor: OutboxFleetFactory<Env>,
  options?: QueueHandlerOptions,
): (batch: QueueBatch, env: Env, ctx?: ExecutionContext) => Promise<FleetQueueReport>;
export function createQueueHandler<Env>(outboxFor: (env: Env, ctx?: ExecutionContext) => DrivableOutbox | OutboxFleet<string, any>, options: QueueHandlerOptions = {}) {
  const only = options.lane;
  return async (batch: QueueBatch, env: Env, ctx?: ExecutionContext): Promise<RunReport | FleetQueueReport> => {
    const made = outboxFor(env, ctx);
    if (isOutboxFleet(made)) return consumeFleet(made[FLEET], batch, options);
    const engine = made[RUN];
    const rt = engine.runtime;
    const { deadlineAt } = rt.core.call<{ deadlineAt: number }>('claim', {
      op: 'deadline', startedAt: rt.clock.now(), invocationBudgetMs: options.invocationBudgetMs ?? null,
    });
    // Per lane; a job named twice (two nudges, or a retried message) is claimed once.
    const targets = new Map<string, Map<string, { id: string; kind: string }>>();
    const drains = new Set<string>();
    // Without a lane the core takes a message for any lane (docs/ABI.md, pb_nudge decode).
    const scope = only === undefined ? '' : `"lane":${JSON.stringify(only)},`;
    for (const message of batch.messages) {
      const d = decode(rt, scope, message.body);
      if (!d.ok) {
        rt.emit({ type: 'invalid_message', queue: batch.queue, messageId: message.id, code: d.code, message: d.message } satisfies OutboxEvent);
      } else if (d.t === 'drain') {
        drains.add(d.lane);
      } else {
        const lane = targets.get(d.lane) ?? targets.set(d.lane, new Map()).get(d.lane)!;
        for (const id of d.t === 'job' ? [d.id] : d.ids) lane.set(id, { id, kind: d.kind });
      }
    }
    const report = emptyReport();
    try {
      for (const [lane, named] of targets) addReport(report, await engine.drain({ lane, deadlineAt, targets: [...named.values()] }));
      for (const lane of drains) addReport(report, await engine.drain({ lane, deadlineAt }));
      batch.ackAll();
    } catch (error) {
      // Infrastructure failed (e.g. the database is down): let the queue redeliver; the sweep is the backstop.
      rt.emit(
        isDeadlineError(error)
          ? { type: 'deadline_exceeded', where: `queue ${batch.queue}`, severity: 'error' }
          : { type: 'infra_error', where: `queue ${batch.queue}`, error: errorMessage(error) },
      );
      redeliver(rt, batch.messages);
    }
    return report;
  };
}

/** Sends messages whose drain failed back to the queue, each after the core's delay for its delivery count. */
function redeliver(rt: EngineRuntime<unknown>, messages: readonly QueueBatch['messages'][number][]): void {
  // A queue batch holds at most 100 messages, the most the core takes a call.
  for (let at = 0; at < messages.length; at += 100) {
    const part = messages.slice(at, at + 100);
    const { delaySeconds } = rt.core.call<{ delaySeconds: number[] }>('nudge', { op: 'redeliver', attempts: part.map((m) => m.attempts) });
    part.forEach((message, i) => message.retry({ delaySeconds: delaySeconds[i]! }));
  }
}

/** A group of a batch: one outbox's nudged jobs per lane, its drain requests and its messages. */
interface Group {
  key: string;
  outbox: Outbox<any>;
  targets: Map<string, Map<string, { id: string; kind: string }>>;
  drains: Set<string>;
  messages: QueueBatch['messages'][number][];
}

/**
 * A batch for several outboxes: decoded against the outboxes served here, grouped by outbox,
 * each group drained in turn (up to the core's number at once, each within its share of the
 * invocation) and its messages acked, or retried when its database failed.
 */
async function consumeFleet(fleet: FleetEngine, batch: QueueBatch, options: QueueHandlerOptions): Promise<FleetQueueReport> {
  const outboxes = new Map(fleet.members);
  const rt = fleet.members[0]![1][RUN].runtime;
  const startedAt = rt.clock.now();
  const scope =
    (options.lane === undefined ? '' : `"lane":${JSON.stringify(options.lane)},`) +
    `"outboxes":${JSON.stringify(fleet.members.map(([key]) => key))},"defaultOutbox":${JSON.stringify(fleet.default)},`;
  const groups = new Map<string, Group>();
  let unknownOutbox = 0;
  for (const message of batch.messages) {
    const d = decode(rt, scope, message.body);
    if (!d.ok) {
      fleet.emit({ type: 'invalid_message', queue: batch.queue, messageId: message.id, code: d.code, message: d.message } satisfies OutboxEvent);
      // The core decides: a message for an outbox not served here goes back to the queue; a bad one is dropped.
      if (d.retry) {
        unknownOutbox++;
        message.retry(d.delaySeconds ? { delaySeconds: d.delaySeconds } : undefined);
      } else {
        message.ack();
      }
      continue;
    }
    const key = d.outbox!;
    let group = groups.get(key);
    if (!group) groups.set(key, (group = { key, outbox: outboxes.get(key)!, targets: new Map(), drains: new Set(), messages: [] }));
    group.messages.push(message);
    if (d.t === 'drain') {
      group.drains.add(d.lane);
    } else {
      const lane = group.targets.get(d.lane) ?? group.targets.set(d.lane, new Map()).get(d.lane)!;
      for (const id of d.t === 'job' ? [d.id] : d.ids) lane.set(id, { id, kind: d.kind });
    }
  }
  const turn = { startedAt, invocationBudgetMs: options.invocationBudgetMs ?? null, parallel: fleet.queueParallel };
  const runs = await inTurns([...groups.values()], fleet.queueParallel, (group, left) => drainGroup(group, batch.queue, turn, left));
  const report: FleetQueueReport = { ...emptyReport(), outboxes: runs, unknownOutbox };
  for (const { outbox: _key, messages: _n, ok: _ok, error: _error, ...counts } of runs) addReport(report, counts);
  return report;
}

/** The invocation a fleet's outboxes take turns in: its start, budget and how many turns run at once. */
interface Turns {
  startedAt: number;
  invocationBudgetMs: number | null;
  parallel: number;
}

/** One outbox's part of a batch, within its turn of the invocation; acks or retries its messages. */
async function drainGroup(group: Group, queue: string, turns: Turns, left: number): Promise<OutboxQueueRun> {
  const engine = group.outbox[RUN];
  const rt = engine.runtime;
  const report = emptyReport();
  try {
    // The core's share of what is left of the invocation: a backlog or a silent database here cannot take the others' time.
    const now = rt.clock.now();
    const { deadlineAt, budgetMs } = rt.core.call<{ deadlineAt: number; budgetMs: number }>('claim', { op: 'share', now, left, ...turns });
    // No time left for it: its messages come back to a fresh invocation.
    if (budgetMs === 0) throw deadlineError(`outbox ${group.key}: its turn`);
    const until = now + budgetMs;
    for (const [lane, named] of group.targets) addReport(report, await engine.drain({ lane, deadlineAt: until, targets: [...named.values()] }));
    for (const lane of group.drains) {
      // Cut short by its share with due jobs left: a drain message carries the backlog on.
      let backlog = false;
      addReport(report, await engine.drain({ lane, deadlineAt: until, onBacklog: () => void (backlog = true) }));
      if (backlog) await sendDrains(rt, [lane], { at: deadlineAt, now: () => rt.clock.now() });
    }
    for (const message of group.messages) message.ack();
    return { outbox: group.key, messages: group.messages.length, ok: true, error: null, ...report };
  } catch (error) {
    // This database failed (or did not answer in time): its messages come back; the sweep is the backstop.
    rt.emit(
      isDeadlineError(error)
        ? { type: 'deadline_exceeded', where: `queue ${queue}`, severity: 'error' }
        : { type: 'infra_error', where: `queue ${queue}`, error: errorMessage(error) },
    );
    redeliver(rt, group.messages);
    return { outbox: group.key, messages: group.messages.length, ok: false, error: errorMessage(error), ...report };
  }
}

/**
 * @internal Runs `run` over `items`, at most `parallel` at once, in order; `left` is how many
 * had not started when this one did (itself included), for the core's share of the invocation.
 */
export async function inTurns<T, R>(items: readonly T[], parallel: number, run: (item: T, left: number) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const slot = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await run(items[i]!, items.length - i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, items.length) }, slot));
  return results;
}

/**
 * Decodes one message on its own: a body that is not JSON, or too large for the core, is
 * reported like any other bad message without failing the rest of the batch. `scope` is the
 * consumer's fields of the core's input (lane, outboxes), each followed by a comma.
 */
function decode(rt: EngineRuntime<unknown>, scope: string, body: unknown): Decoded {
  let text: string | undefined;
  try {
    text = JSON.stringify(body);
  } catch (error) {
    return { ok: false, code: 'invalid_message', message: `nudge: body is not JSON: ${errorMessage(error)}` };
  }
  const out = rt.core.callText('nudge', `{"op":"decode",${scope}"messages":[${text ?? 'null'}]}`);
  if (isCoreError(out)) return { ok: false, code: out.error.code, message: out.error.message };
  return (out as { messages: Decoded[] }).messages[0]!;
}

/**
 * Consumes a dead-letter queue: reports each message as a `dlq_message` event and acks it.
 * The job row stays durable; the next sweep re-drives it.
 */
export function createDlqHandler(options: { events?: (event: OutboxEvent) => void } = {}) {
  return async (batch: QueueBatch): Promise<void> => {
    for (const message of batch.messages) {
      try {
        options.events?.({ type: 'dlq_message', queue: batch.queue, messageId: message.id, body: message.body });
      } catch {
        // The sink's failure must not loop the DLQ.
      }
    }
    batch.ackAll();
  };
}
