import type { RunReport } from './drain.js';
import type { EngineRuntime } from './runtime.js';
import type { Session } from './session.js';
import type { SweepOptions, SweepPlan, SweepReport } from './sweep.js';
import type { EnqueueOptions, EnqueueResult, JobDefinition } from '../types.js';
import type { BatchCreated, BatchMembers, BatchOptions } from './batch.js';

/** The `enqueue` function a transaction hands its callback. */
export type TxEnqueue<R = EnqueueResult> = <P>(job: JobDefinition<P>, opts: EnqueueOptions<P>) => Promise<R>;

/** The `enqueueMany` function a transaction hands its callback: one write for the list. */
export type TxEnqueueMany<R = EnqueueResult> = <P>(job: JobDefinition<P>, items: readonly EnqueueOptions<P>[]) => Promise<R[]>;

/** The `batch` function a transaction hands its callback (`outbox.batch` in that transaction, nudged when it commits). */
export type TxBatch<R = EnqueueResult> = <T>(opts: BatchOptions, fn: (members: BatchMembers<R>) => Promise<T>) => Promise<BatchCreated<T>>;

/** @internal The key under which an outbox carries the engine the Cloudflare handlers drive. */
export const RUN: unique symbol = Symbol.for('postbox.run');

/** One drain of a lane, as the queue consumer and the sweep ask for it. */
export interface DrainRequest {
  lane: string;
  deadlineAt: number;
  /** Claim only these nudged jobs. */
  targets?: { id: string; kind: string }[];
  signal?: AbortSignal;
  /** Called when the drain stopped with due jobs likely left. */
  onBacklog?: () => void;
}

/**
 * @internal What the queue consumer and the Cron Trigger handler drive, whichever store the
 * jobs live in: a PostgreSQL outbox (`createOutbox`), or a SQLite outbox bound to its database
 * (`createSqliteOutbox(...).bind(env.DB)`). `Db` is the store's handle on a session.
 */
export interface DrivenEngine<Db = any> {
  readonly runtime: EngineRuntime<Db>;
  drain(opts: DrainRequest): Promise<RunReport>;
  /** A sweep of the invocation that started at `startedAt`, by `plan` (default: planned now). */
  sweep(startedAt: number, opts: SweepOptions, plan?: SweepPlan): Promise<SweepReport>;
  /** Settles every expired lease as a crash (the sweep's first step, alone). */
  recover(): Promise<RunReport>;
  /** A session for `fn`, closed after; with `deadlineAt`, every use of it gives up then. */
  withSession<T>(fn: (session: Session<Db>) => Promise<T>, deadlineAt?: number): Promise<T>;
  /**
   * Runs `fn` and every enqueue it makes in one transaction of the store on `db` (a session's
   * handle), then nudges what it enqueued once it has committed.
   */
  transaction<T>(db: Db, fn: (tx: any, enqueue: TxEnqueue, enqueueMany: TxEnqueueMany, batch: TxBatch) => Promise<T>): Promise<T>;
}

/** Anything the Cloudflare handlers can drive: an `Outbox`, or a bound SQLite outbox. */
export interface DrivableOutbox {
  /** @internal */
  readonly [RUN]: DrivenEngine;
}
