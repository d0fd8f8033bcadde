import type { Clock, Connector, JobDefinition, OutboxEvent, QueueProducer, Queryable, Telemetry, VersionMetadata } from './types.js';

/** Transition facts passed to `onTransition`. */
export interface TransitionInfo {
  job: { id: string; kind: string; tenantKey: string | null; correlationId: string | null };
  transition: { from: 'running'; to: string; outcome: string; code: string | null; attempt: number };
}

type UnionToIntersection<U> = (U extends unknown ? (u: U) => void : never) extends (i: infer I) => void ? I : never;

/** The deps every job in `Jobs` needs, at once (`{}` when none declares any). */
export type JobsDeps<Jobs extends readonly JobDefinition<any, any>[]> = UnionToIntersection<
  // A job without deps (`unknown`) adds no requirement.
  { [K in keyof Jobs]: Jobs[K] extends JobDefinition<any, infer D> ? (unknown extends D ? {} : D) : never }[number]
>;

/** `deps` is required, and type-checked, once any job declares deps (via `defineJobFor`). */
export type DepsOption<Deps> = {} extends Deps ? { deps?: unknown } : { deps: Deps };

/** Options of `createOutbox`. Only `jobs` and `connect` are required. */
export interface OutboxOptions<Jobs extends readonly JobDefinition[] = readonly JobDefinition[], Deps = unknown> {
  /**
   * A named outbox: its own schema `outbox_<name>` (migrate it with `migrate(client, { name })`),
   * whose jobs, claims, sweeps, schedules and operator actions no other outbox sees. A lowercase
   * letter, then up to 31 lowercase letters, digits or `_`. Default: the default outbox, schema `outbox`.
   */
  name?: string;
  /** The jobs this deploy registers. Only registered kinds are claimed. */
  jobs: Jobs;
  /** Opens a lane connection (see `./pg`). Called lazily, never at construction. */
  connect: Connector;
  /** Passed to handlers as `ctx.deps`. */
  deps?: Deps;
  /**
   * One Queue for every lane (each message names its lane; consume it with
   * `createQueueHandler(outboxFor)`), or one per lane (`{ default: env.Q, bulk: env.BULK_Q }`,
   * each consumed with `createQueueHandler(outboxFor, { lane })`; a lane missing from the map is
   * not nudged). Without it, jobs run on the cron sweep only.
   */
  queue?: QueueProducer | Record<string, QueueProducer>;
  /** Handlers one lane runs at once (one claim statement claims this many). Default 1. */
  concurrency?: number;
  /**
   * Fair share across tenants: each claim takes the first jobs of every tenant with due work
   * (jobs without a `tenantKey` count as one tenant), round by round, before it fills the rest
   * in due order, so one tenant's backlog never holds up another tenant's next job. Off by
   * default (claims take due jobs oldest first). Lanes with a flow-limited kind claim in due
   * order. `{ weights: { acme: 3 } }` turns it on with weights: a tenant of weight 3 takes three
   * jobs a round where the others take one, and three times their share of each claim (integers
   * 1..100, at most 1000 tenants; tenants not named, and jobs without a tenant, weigh 1). See
   * README "Fair share across tenants".
   */
  fairShare?: FairShareOption;
  /** Connections one invocation may hold for the drain's own statements. Default 1; at most 5 (Workers allow 6 per invocation). */
  lanes?: number;
  /**
   * Connections one invocation may open for handlers' `ctx.db`, on first use, apart from the
   * lanes' (so a handler's transaction never holds up claims, settlements or heartbeats).
   * `lanes + handlerSessions` may be at most 5. Default: what the lanes leave of the 5, but no
   * more than `lanes × concurrency`. 0: `ctx.db` runs on the lane's own session.
   */
  handlerSessions?: number;
  /** `env.CF_VERSION_METADATA`: older deploys leave jobs from newer ones alone. */
  version?: VersionMetadata;
  /** Structured event sink. */
  events?: (event: OutboxEvent) => void;
  /** Runs inside every settle transaction. A throw rolls back and retries the job with `hook_failed`. */
  onTransition?: (tx: Queryable, info: TransitionInfo) => Promise<void>;
  /** Scrubs error messages before they are persisted. */
  redactError?: (message: string) => string;
  /** Emit `streak_warning` when one code repeats this many times (per job overrides). */
  warnAtStreak?: number;
  /**
   * Traces and metrics of enqueues, attempts, claim statements and sweeps: `openTelemetry()`
   * from `postbox/otel` (OpenTelemetry's API; a no-op until an SDK is registered).
   */
  telemetry?: Telemetry;
  /** Largest payload accepted, as JSON bytes. Default 256 KiB. */
  maxPayloadBytes?: number;
  /** Refusals throw `EnqueueRefusedError` instead of returning. */
  strictEnqueue?: boolean;
  /** Job id generator. Default uuid v7. Must return a UUID. */
  generateId?: () => string;
  /**
   * Write `nudge_sent_at` on the jobs of every nudge sent (one statement per sent batch, on a
   * connection of its own). Off by default: it costs a statement after each commit. A failed
   * write is an `infra_error` event and never fails the enqueue. Sweep hand-offs are always
   * recorded, since their cooldown reads it.
   */
  recordNudges?: boolean;
  /**
   * Bound, in ms, on one operator action (`cancel`, `replay`, `retryNow` and their `Many`
   * forms, `eraseTenant`) as a whole: opening its connection, its SQL (which also runs under
   * this `statement_timeout` and `lock_timeout`) and closing. Past it the action rejects with
   * `PostboxError('timeout')`, changes nothing, and its connection is destroyed (a connect
   * under way is aborted when the connector honours its `signal`). Default 60 000; an
   * integer in 1..2147483647.
   */
  operationTimeoutMs?: number;
  /** For tests: see `createTestClock` in `./testing`. */
  clock?: Clock;
}

/** An outbox's `fairShare`: on or off, or on with tenants' weights (by tenant key). */
export type FairShareOption = boolean | { readonly weights?: Readonly<Record<string, number>> };
