import type { OutboxOptions } from '../config.js';
import { PostboxError } from '../errors.js';
import type { Core } from '../core/core.js';
import type { Session } from './session.js';
import type { OutboxStore } from '../stores/contract.js';
import type { Clock, CorePolicy, JobDefinition, LaneDb, OutboxEvent, QueueProducer, Queryable, VersionMetadata } from '../types.js';

/** The options the engine reads while it runs jobs, whichever store they live in. */
export type EngineOptions = Pick<OutboxOptions<readonly JobDefinition[], unknown>, 'deps' | 'onTransition' | 'redactError' | 'warnAtStreak' | 'recordNudges' | 'telemetry' | 'fairShare'>;

/**
 * What every I/O routine of the engine needs: the core, the registry, the clock, the sinks and
 * the store. `Db` is the store's handle on a session, `Tx` its handle inside a transaction:
 * PostgreSQL's by default; a SQLite store's (D1, Durable Objects) for `createSqliteOutbox`.
 */
export interface OutboxRuntime<Db = LaneDb, Tx = Queryable> {
  core: Core;
  options: EngineOptions;
  registry: ReadonlyMap<string, JobDefinition>;
  policies: readonly CorePolicy[];
  clock: Clock;
  concurrency: number;
  versionTs: number | null;
  emit(event: OutboxEvent): void;
  queueFor(lane: string): QueueProducer | undefined;
  /** The outbox's key among several (`createOutboxes`), named in every nudge it sends; null for an outbox of its own. */
  key: string | null;
  /** Where the outbox's jobs live, behind the store contract. */
  store: OutboxStore<Db, Tx>;
  /** A session of its own for work outside a drain (recording nudges); its user closes it. */
  openSession(): Session<Db>;
  /** A uint32 of entropy for the core's jitter. */
  seed(): number;
}

/** An engine routine's view of a runtime: any transaction handle, since the drain never opens one of the store's own. */
export type EngineRuntime<Db> = OutboxRuntime<Db, unknown>;

/** The outbox's jobs by kind, and their policies; a kind registered twice is `invalid_config`, prefixed with `who`. */
export function jobRegistry(jobs: readonly JobDefinition[], who: string): { registry: Map<string, JobDefinition>; policies: CorePolicy[] } {
  const registry = new Map<string, JobDefinition>();
  for (const job of jobs) {
    if (registry.has(job.kind)) throw new PostboxError('invalid_config', `${who}: kind ${job.kind} is registered twice`);
    registry.set(job.kind, job);
  }
  return { registry, policies: [...registry.values()].map((j) => j.policy) };
}

/** The outbox's event sink as the engine calls it: a sink that throws must not break job processing. */
export function eventSink(events: ((event: OutboxEvent) => void) | undefined): (event: OutboxEvent) => void {
  return (event) => {
    try {
      events?.(event);
    } catch {
      // The sink's fault, not the job's.
    }
  };
}

/** The deploy's version timestamp (epoch ms) from `env.CF_VERSION_METADATA`; null without one; one that does not parse is `invalid_config`. */
export function versionTimestamp(version: VersionMetadata | undefined | null, who: string): number | null {
  if (version === undefined || version === null) return null;
  // A deploy whose timestamp cannot be read would claim every other deploy's jobs: refused,
  // never taken for "no version".
  const ts = typeof version === 'object' && typeof version.timestamp === 'string' ? Date.parse(version.timestamp) : NaN;
  if (!Number.isFinite(ts)) {
    throw new PostboxError('invalid_config', `${who}: options: version.timestamp must be a date (Cloudflare's version metadata binding gives one), got ${JSON.stringify((version as { timestamp?: unknown })?.timestamp ?? null)}`);
  }
  return ts;
}

// Entropy is drawn 256 values at a time: one getRandomValues call per settled job was a visible
// share of a short job's cost.
const pool = new Uint32Array(256);
let poolAt = pool.length;

export function randomSeed(): number {
  if (poolAt === pool.length) {
    crypto.getRandomValues(pool);
    poolAt = 0;
  }
  return pool[poolAt++]!;
}
