/**
 * Several outboxes behind one consumer: one per database (tenants spread over several
 * PostgreSQL databases), each job in its tenant's database, in the same transaction as the
 * business write. Every nudge names its outbox; one queue consumer and one Cron Trigger serve
 * them all, each outbox on its own connections, within the invocation's connection budget (the
 * core decides how many outboxes run at once).
 * @module
 */
import type { DepsOption, JobsDeps, OutboxOptions } from './config.js';
import { getCore, isCoreError } from './core/core.js';
import { PostboxError } from './errors.js';
import { checkOutboxName } from './name.js';
import { buildOutbox, RUN, type Outbox } from './outbox.js';
import type { Connector, EnqueueAccepted, EnqueueResult, JobDefinition, OutboxEvent } from './types.js';

/** An event of one of several outboxes: `outbox` is its key (null: the consumer's own, such as a message for no outbox it serves). */
export type FleetEvent = OutboxEvent & { outbox: string | null };

/**
 * One database of `createOutboxes`: its connector (`createPgConnector(env.HYPERDRIVE_EU.connectionString)`),
 * or the connector with options of this database's own in place of the shared ones.
 */
export type DatabaseOptions =
  | Connector
  | ({ connect: Connector } & Partial<Pick<OutboxOptions, 'name' | 'queue' | 'concurrency' | 'lanes' | 'handlerSessions' | 'operationTimeoutMs' | 'maxPayloadBytes' | 'recordNudges'>>);

/** Options of `createOutboxes`: those of `createOutbox`, less `connect`, plus the databases. */
export interface OutboxesOptions<Jobs extends readonly JobDefinition[] = readonly JobDefinition[], Deps = unknown, K extends string = string>
  extends Omit<OutboxOptions<Jobs, Deps>, 'connect' | 'events'> {
  /**
   * The databases, by key: `{ eu: createPgConnector(env.HYPERDRIVE_EU.connectionString), us: … }`.
   * A key is a lowercase letter, then up to 31 lowercase letters, digits or `_`; every nudge an
   * outbox sends names its key. Each database holds the same outbox (schema `outbox`, or
   * `outbox_<name>` with `name`), migrated there. At most 64.
   */
  databases: Readonly<Record<K, DatabaseOptions>>;
  /**
   * The database whose outbox takes Queue messages that name none: those sent before there were
   * several (an upgrade from one database: name the one you had). With one database, that one.
   * Without it, such a message is refused as `unknown_outbox`, like one naming a key not here.
   */
  default?: NoInfer<K>;
  /**
   * How many outboxes a queue invocation or a cron tick runs at once. Default: as many as their
   * connections fit in the invocation's 5 (a queue drain holds `lanes + handlerSessions`, a
   * sweep `1 + handlerSessions`); more is `PostboxError('invalid_config')`.
   */
  parallel?: number;
  /** Every outbox's events, each with `outbox`: the key of the outbox it happened in. */
  events?: (event: FleetEvent) => void;
}

/** @internal What the Cloudflare handlers drive. */
export interface FleetEngine {
  /** Key and outbox, in the order of `databases`. */
  members: readonly (readonly [string, Outbox<any>])[];
  /** The outbox that takes messages naming none (the core's decision); null: none does. */
  default: string | null;
  /** Outboxes a queue invocation drains at once, and a cron tick sweeps at once. */
  queueParallel: number;
  sweepParallel: number;
  /** The fleet's own events (not one outbox's). */
  emit(event: OutboxEvent): void;
}

export const FLEET: unique symbol = Symbol.for('postbox.fleet');

/** Several outboxes by key, as `createOutboxes` returns them: `outboxes.eu.transaction(…)`. */
export type OutboxFleet<K extends string = string, R = EnqueueResult> = { readonly [P in K]: Outbox<R> } & {
  /** @internal */
  readonly [FLEET]: FleetEngine;
};

/** Whether `value` is a fleet from `createOutboxes`. */
export function isOutboxFleet(value: unknown): value is OutboxFleet<string, any> {
  return typeof value === 'object' && value !== null && FLEET in value;
}

/**
 * Creates one outbox per database, sharing one set of jobs and options: for a SaaS whose
 * tenants live in several PostgreSQL databases, each job is enqueued in its tenant's database
 * (in the business transaction, as always) and its nudge names that database's key. One
 * consumer serves them all: give the factory that returns this to `createQueueHandler` and
 * `createScheduledHandler`. Cheap, like `createOutbox`: nothing connects until used.
 *
 * @example
 * ```ts
 * const outboxesFor = (env: Env) =>
 *   createOutboxes({
 *     jobs: [welcomeEmail],
 *     databases: {
 *       eu: createPgConnector(env.HYPERDRIVE_EU.connectionString),
 *       us: createPgConnector(env.HYPERDRIVE_US.connectionString),
 *     },
 *     default: 'eu',
 *     queue: env.OUTBOX_QUEUE,
 *   });
 * // In fetch: outboxesFor(env)[tenant.region].transaction(client, …), with a client of that database.
 * ```
 */
export function createOutboxes<const Jobs extends readonly JobDefinition<any, any>[], const K extends string>(
  options: Omit<OutboxesOptions<Jobs, JobsDeps<Jobs>, K>, 'deps'> & DepsOption<JobsDeps<Jobs>> & { strictEnqueue: true },
): OutboxFleet<K, EnqueueAccepted>;
export function createOutboxes<const Jobs extends readonly JobDefinition<any, any>[], const K extends string>(
  options: Omit<OutboxesOptions<Jobs, JobsDeps<Jobs>, K>, 'deps'> & DepsOption<JobsDeps<Jobs>>,
): OutboxFleet<K>;
export function createOutboxes(options: OutboxesOptions): OutboxFleet<string, any> {
  const databases = options?.databases;
  if (!databases || typeof databases !== 'object' || Array.isArray(databases)) {
    throw new PostboxError('invalid_config', 'createOutboxes: `databases` (an object of connectors by key) is required');
  }
  const { databases: _databases, default: fallback, parallel, events, ...shared } = options;
  const sink = (event: FleetEvent) => {
    try {
      events?.(event);
    } catch {
      // A broken sink must not break job processing.
    }
  };
  const members: [string, Outbox<any>][] = [];
  for (const [key, database] of Object.entries(databases)) {
    checkOutboxName(key, 'createOutboxes: databases key');
    const own = typeof database === 'function' ? { connect: database } : database;
    if (!own || typeof own.connect !== 'function') {
      throw new PostboxError('invalid_config', `createOutboxes: databases.${key} must be a connector, or { connect, … }`);
    }
    const outbox = buildOutbox({ ...shared, ...own, events: (event) => sink({ ...event, outbox: key }) } as OutboxOptions, key, `createOutboxes: databases.${key}`);
    members.push([key, outbox]);
  }
  if (fallback !== undefined && (typeof fallback !== 'string' || !members.some(([key]) => key === fallback))) {
    throw new PostboxError('invalid_config', `createOutboxes: default must be one of the databases' keys (${members.map(([k]) => k).join(', ')}), not ${JSON.stringify(fallback)}`);
  }
  if (parallel !== undefined && !Number.isInteger(parallel)) {
    throw new PostboxError('invalid_config', 'createOutboxes: parallel must be an integer in 1..64');
  }
  // The core decides whether the outboxes fit the invocation's connections, and how many run at once.
  const decided = getCore().callText(
    'claim',
    JSON.stringify({
      op: 'fleet',
      outboxes: members.map(([key, outbox]) => ({ key, lanes: outbox[RUN].config.lanes, handlerSessions: outbox[RUN].config.handlerSessions })),
      default: fallback ?? null,
      parallel: parallel ?? null,
    }),
  );
  if (isCoreError(decided)) {
    // The core's field names, as the caller wrote them.
    const message = decided.error.message
      .replace(/^claim: field 'outboxes' /, 'databases ')
      .replace(/^claim: field '(\w+)' /, '$1 ')
      .replace(/^claim: /, '');
    throw new PostboxError('invalid_config', `createOutboxes: ${message}`);
  }
  const plan = decided as { default: string | null; queueParallel: number; sweepParallel: number };
  const engine: FleetEngine = {
    members,
    default: plan.default,
    queueParallel: plan.queueParallel,
    sweepParallel: plan.sweepParallel,
    emit: (event) => sink({ ...event, outbox: null }),
  };
  const fleet = Object.fromEntries(members) as Record<string, Outbox<any>>;
  Object.defineProperty(fleet, FLEET, { value: engine, enumerable: false });
  return Object.freeze(fleet) as OutboxFleet<string, any>;
}
