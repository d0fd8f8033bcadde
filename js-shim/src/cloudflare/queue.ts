import { isCoreError } from '../core/core.js';
import { isDeadlineError } from '../deadline.js';
import { RUN, type Outbox, type OutboxEngine } from '../outbox.js';
import { addReport, emptyReport, type RunReport } from '../runner.js';
import { errorMessage } from '../session.js';
import type { OutboxEvent } from '../types.js';

/** The parts of a Cloudflare `MessageBatch` Postbox uses. */
export interface QueueBatch<Body = unknown> {
  readonly queue: string;
  readonly messages: readonly { readonly id: string; readonly body: Body; readonly attempts: number; ack(): void; retry(options?: { delaySeconds?: number }): void }[];
  ackAll(): void;
  retryAll(options?: { delaySeconds?: number }): void;
}

/** Builds the outbox for one invocation from its `env` (and context). */
export type OutboxFactory<Env> = (env: Env, ctx?: ExecutionContext) => Outbox<any>;

type Decoded =
  | { ok: true; t: 'job'; id: string; kind: string; lane: string }
  | { ok: true; t: 'jobs'; kind: string; lane: string; ids: string[] }
  | { ok: true; t: 'drain'; lane: string }
  | { ok: false; code: string; message: string };

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
 * @example
 * ```ts
 * export default { queue: createQueueHandler(outboxFor) };
 * ```
 */
export function createQueueHandler<Env>(outboxFor: OutboxFactory<Env>, options: { lane?: string; invocationBudgetMs?: number } = {}) {
  const only = options.lane;
  return async (batch: QueueBatch, env: Env, ctx?: ExecutionContext): Promise<RunReport> => {
    const engine = outboxFor(env, ctx)[RUN];
    const rt = engine.runtime;
    const { deadlineAt } = rt.core.call<{ deadlineAt: number }>('claim', {
      op: 'deadline', startedAt: rt.clock.now(), invocationBudgetMs: options.invocationBudgetMs ?? null,
    });
    // Per lane; a job named twice (two nudges, or a retried message) is claimed once.
    const targets = new Map<string, Map<string, { id: string; kind: string }>>();
    const drains = new Set<string>();
    for (const message of batch.messages) {
      const d = decode(rt, only, message.body);
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
      batch.retryAll();
    }
    return report;
  };
}

/**
 * Decodes one message on its own: a body that is not JSON, or too large for the core, is
 * reported like any other bad message without failing the rest of the batch.
 */
function decode(rt: OutboxEngine['runtime'], lane: string | undefined, body: unknown): Decoded {
  let text: string | undefined;
  try {
    text = JSON.stringify(body);
  } catch (error) {
    return { ok: false, code: 'invalid_message', message: `nudge: body is not JSON: ${errorMessage(error)}` };
  }
  // Without a lane the core takes a message for any lane (docs/ABI.md, pb_nudge decode).
  const scope = lane === undefined ? '' : `"lane":${JSON.stringify(lane)},`;
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
