import { RUN, type Outbox } from '../outbox.js';
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

type Decoded = { ok: true; t: 'job'; id: string; kind: string; lane: string } | { ok: true; t: 'drain'; lane: string } | { ok: false; code: string; message: string };

/**
 * The queue consumer. A nudge claims exactly that job (by id and kind) if it is due and
 * registered; a drain message runs a bounded drain of the lane. Malformed messages are acked
 * and reported as `invalid_message` events: the job rows, not the messages, are the truth.
 *
 * @example
 * ```ts
 * export default { queue: createQueueHandler(outboxFor) };
 * ```
 */
export function createQueueHandler<Env>(outboxFor: OutboxFactory<Env>, options: { lane?: string; invocationBudgetMs?: number } = {}) {
  const lane = options.lane ?? 'default';
  return async (batch: QueueBatch, env: Env, ctx?: ExecutionContext): Promise<RunReport> => {
    const engine = outboxFor(env, ctx)[RUN];
    const rt = engine.runtime;
    const { deadlineAt } = rt.core.call<{ deadlineAt: number }>('claim', {
      op: 'deadline', startedAt: rt.clock.now(), invocationBudgetMs: options.invocationBudgetMs ?? null,
    });
    const bodies = batch.messages.map((m) => m.body);
    const decoded = rt.core.call<{ messages: Decoded[] }>('nudge', { op: 'decode', lane, messages: bodies }).messages;
    const targets: { id: string; kind: string }[] = [];
    let drain = false;
    decoded.forEach((d, i) => {
      const message = batch.messages[i]!;
      if (!d.ok) {
        rt.emit({ type: 'invalid_message', queue: batch.queue, messageId: message.id, code: d.code, message: d.message } satisfies OutboxEvent);
        return;
      }
      if (d.t === 'drain') drain = true;
      else targets.push({ id: d.id, kind: d.kind });
    });
    const report = emptyReport();
    try {
      if (targets.length > 0) addReport(report, await engine.drain({ lane, deadlineAt, targets }));
      if (drain) addReport(report, await engine.drain({ lane, deadlineAt }));
      batch.ackAll();
    } catch (error) {
      // Infrastructure failed (e.g. the database is down): let the queue redeliver; the sweep is the backstop.
      rt.emit({ type: 'infra_error', where: `queue ${batch.queue}`, error: errorMessage(error) });
      batch.retryAll();
    }
    return report;
  };
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
