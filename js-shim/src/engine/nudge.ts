import { beforeDeadline, type Deadline } from './deadline.js';
import type { EngineRuntime } from './runtime.js';
import { errorMessage } from '../errors.js';
import type { Session } from './session.js';
import type { QueueProducer } from '../types.js';

/** One Queue serves every lane (its messages name the lane); a map gives each lane its own. */
export function queueForLane(queue: QueueProducer | Record<string, QueueProducer> | undefined, lane: string): QueueProducer | undefined {
  if (!queue) return undefined;
  if (typeof (queue as QueueProducer).sendBatch === 'function') return queue as QueueProducer;
  return (queue as Record<string, QueueProducer>)[lane];
}

export interface PendingNudge {
  id: string;
  kind: string;
  lane: string;
  delaySeconds: number;
}

/** A coalesced nudge from the core's pack: a single-job or a multi-job message body. */
type Body = { t: 'job'; id: string; outbox?: string } | { t: 'jobs'; ids: string[]; outbox?: string };
interface Batch {
  lane: string;
  messages: { body: Body; delaySeconds: number }[];
}

/** The `outbox` field of the core's pack and encode input: one of several outboxes names itself. */
const named = (rt: EngineRuntime<unknown>) => (rt.key === null ? {} : { outbox: rt.key });

// The core packs at most this many jobs a call (pb_nudge pack).
const PACK_MAX_JOBS = 5000;

/** How `sendNudges` records what it sent in `nudge_sent_at`. */
export interface RecordNudges<Db = unknown> {
  /** Write `nudge_sent_at` (default: the outbox's `recordNudges` option). */
  record?: boolean;
  /** The session to write on; without it (and without `handle`), one is opened for the call and closed after. */
  session?: Session<Db>;
  /**
   * A handle to write on instead: the application's own, after its transaction committed, so
   * nudges from `outbox.transaction(ctx.db, …)` take no connection beyond the invocation's.
   */
  handle?: Db;
  /** The invocation's deadline: a send still waiting at it is given up (`nudge_failed`). */
  deadline?: Deadline;
}

/**
 * Nudges for jobs the application committed itself (`outbox.nudge(refs)` of either outbox): due
 * now, each on its own lane or its kind's. Never throws: a failure is a `nudge_failed` event.
 */
export async function nudgeCommitted<Db>(rt: EngineRuntime<Db>, refs: readonly { id: string; kind: string; lane?: string }[]): Promise<void> {
  try {
    await sendNudges(rt, refs.map((r) => ({ id: r.id, kind: r.kind, lane: r.lane ?? rt.registry.get(r.kind)?.lane ?? 'default', delaySeconds: 0 })));
  } catch (error) {
    rt.emit({ type: 'nudge_failed', jobs: refs.length, error: errorMessage(error) });
  }
}

/**
 * Sends nudges after a commit. The core coalesces them: jobs of one lane, kind and delay share
 * messages of up to 100 ids, and each lane's messages go in `sendBatch` calls sized to Queues'
 * limits. When recording, each sent batch's jobs get `nudge_sent_at` in one statement. Returns
 * the ids of the jobs whose nudge went out. Never throws: a lost nudge only delays a job until
 * the next sweep, so failures become events.
 */
export async function sendNudges<Db>(rt: EngineRuntime<Db>, nudges: readonly PendingNudge[], opts: RecordNudges<Db> = {}): Promise<string[]> {
  const queued: PendingNudge[] = [];
  const unqueued = new Map<string, number>();
  for (const n of nudges) {
    if (rt.queueFor(n.lane)) queued.push(n);
    else unqueued.set(n.lane, (unqueued.get(n.lane) ?? 0) + 1);
  }
  for (const [lane, jobs] of unqueued) {
    rt.emit({ type: 'nudge_skipped', jobs, reason: `no queue for lane ${lane}; the cron sweep will run them` });
  }
  const sent: string[] = [];
  const recorder = (opts.record ?? rt.options.recordNudges === true) ? new Recorder(rt, opts) : null;
  try {
    for (let i = 0; i < queued.length; i += PACK_MAX_JOBS) {
      const jobs = queued.slice(i, i + PACK_MAX_JOBS);
      let batches: Batch[];
      try {
        // One of several outboxes names itself in every message, so the consumer finds its database.
        batches = rt.core.call<{ batches: Batch[] }>('nudge', { op: 'pack', ...named(rt), jobs }).batches;
      } catch (error) {
        rt.emit({ type: 'nudge_failed', jobs: jobs.length, error: errorMessage(error) });
        continue;
      }
      for (const batch of batches) {
        const ids = batch.messages.flatMap(({ body }) => (body.t === 'jobs' ? body.ids : [body.id]));
        try {
          const queue = rt.queueFor(batch.lane)!;
          await beforeDeadline(opts.deadline, `send to lane ${batch.lane}`, () =>
            queue.sendBatch(batch.messages.map(({ body, delaySeconds }) => (delaySeconds > 0 ? { body, delaySeconds } : { body }))),
          );
        } catch (error) {
          rt.emit({ type: 'nudge_failed', jobs: ids.length, error: errorMessage(error) });
          continue;
        }
        sent.push(...ids);
        await recorder?.record(ids);
      }
    }
  } finally {
    await recorder?.close();
  }
  return sent;
}

/**
 * Writes `nudge_sent_at` after each sent batch. A failed write is an `infra_error` event and
 * ends recording for the call (the nudges themselves went out; only the note is missing).
 */
class Recorder<Db> {
  #rt: EngineRuntime<Db>;
  #session: Session<Db> | null;
  #handle: Db | undefined;
  #own: boolean;
  #deadline: Deadline | undefined;
  #failed = false;
  constructor(rt: EngineRuntime<Db>, opts: RecordNudges<Db>) {
    this.#rt = rt;
    this.#handle = opts.handle;
    this.#own = opts.session === undefined && opts.handle === undefined;
    this.#session = opts.session ?? (opts.handle === undefined ? rt.openSession() : null);
    this.#deadline = opts.deadline;
  }
  async record(ids: readonly string[]): Promise<void> {
    if (this.#failed || ids.length === 0) return;
    const write = (q: Db) => this.#rt.store.recordNudges(q, { now: this.#rt.clock.now(), ids });
    try {
      await beforeDeadline(this.#deadline, 'record nudges', () => (this.#session ? this.#session.exclusive(write) : write(this.#handle as Db)));
    } catch (error) {
      this.#failed = true;
      this.#rt.emit({ type: 'infra_error', where: 'record nudges', error: errorMessage(error) });
    }
  }
  async close(): Promise<void> {
    if (this.#own) await this.#session?.close();
  }
}

/**
 * Asks each lane's queue consumer to go on draining: a sweep sends this when its budget ran out
 * with due jobs left, a drain stopped behind a rate slot after `delaySeconds` (the core's). Never throws.
 */
export async function sendDrains(rt: EngineRuntime<unknown>, lanes: readonly string[], deadline?: Deadline, delaySeconds = 0): Promise<void> {
  for (const lane of lanes) {
    const queue = rt.queueFor(lane);
    if (!queue) {
      rt.emit({ type: 'nudge_skipped', jobs: 0, reason: `no queue for lane ${lane}: its backlog waits for the next sweep` });
      continue;
    }
    try {
      const { messages } = rt.core.call<{ messages: unknown[] }>('nudge', { op: 'encode', ...named(rt), drains: [lane] });
      await beforeDeadline(deadline, `drain message to lane ${lane}`, () => (delaySeconds > 0 ? queue.send(messages[0], { delaySeconds }) : queue.send(messages[0])));
      rt.emit(delaySeconds > 0 ? { type: 'drain_requested', lane, delaySeconds } : { type: 'drain_requested', lane });
    } catch (error) {
      rt.emit({ type: 'nudge_failed', jobs: 0, error: errorMessage(error) });
    }
  }
}
