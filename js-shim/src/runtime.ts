import type { OutboxOptions } from './config.js';
import type { Core } from './core/core.js';
import type { OutboxStore } from './store/contract.js';
import type { Clock, CorePolicy, JobDefinition, LaneDb, OutboxEvent, QueueProducer, Queryable } from './types.js';

/** What every I/O routine of an outbox needs: the core, the registry, the clock, the sinks. */
export interface OutboxRuntime {
  core: Core;
  options: OutboxOptions<readonly JobDefinition[], unknown>;
  registry: ReadonlyMap<string, JobDefinition>;
  policies: readonly CorePolicy[];
  clock: Clock;
  concurrency: number;
  versionTs: number | null;
  emit(event: OutboxEvent): void;
  queueFor(lane: string): QueueProducer | undefined;
  /** The outbox's key among several (`createOutboxes`), named in every nudge it sends; null for an outbox of its own. */
  key: string | null;
  /** Where the outbox's jobs live, behind the store contract: a lane session's handle, and a transaction's. */
  store: OutboxStore<LaneDb, Queryable>;
  /** A uint32 of entropy for the core's jitter. */
  seed(): number;
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
