import { EnqueueRefusedError, PostboxError } from '../errors.js';
import type { OperateResult } from './operate.js';
import { COMPLETES_BATCH } from './enqueue.js';
import type { EnqueueOptions, EnqueueRefusal, EnqueueResult, JobDefinition } from '../types.js';

/**
 * A batch's completion job: its kind and its enqueue options. It is enqueued in the batch's
 * transaction, waiting on every member, and falls due once the last member has reached a final
 * status (succeeded, dead or cancelled), whatever each one's was: its handler reads the counts
 * in `ctx.parents`, and the batch's id is its own. It shares its members' tenant.
 */
export type BatchCompletion<P> = { job: JobDefinition<P> } & Omit<EnqueueOptions<P>, 'dependsOn' | 'onParentFailure' | 'dedupeKey'>;

/** `outbox.batch`'s options. */
export interface BatchOptions<P = any> {
  onComplete: BatchCompletion<P>;
}

/** What a batch's callback enqueues its members with (in the batch's transaction). */
export interface BatchMembers<R = EnqueueResult> {
  enqueue<P>(job: JobDefinition<P>, opts: EnqueueOptions<P>): Promise<R>;
  enqueueMany<P>(job: JobDefinition<P>, items: readonly EnqueueOptions<P>[]): Promise<R[]>;
}

/** A batch as written: its id (its completion job's), how many members it has, and what the callback returned. */
export interface BatchCreated<T> {
  id: string;
  members: number;
  result: T;
}

/** Enqueues a list of one kind in the batch's transaction, as the outbox does it there. */
export type EnqueueList = <P>(job: JobDefinition<P>, items: readonly EnqueueOptions<P>[], api: 'enqueue' | 'enqueueMany') => Promise<EnqueueResult[]>;

/**
 * Runs `fn` with member enqueues, then enqueues the completion job waiting on every member the
 * callback got an id for (created, or the job already holding its dedupe key). The completion's
 * refusal throws (`EnqueueRefusedError`): its members are written in the caller's transaction by
 * then, and a batch without its completion must not commit, so the transaction rolls back.
 */
export async function runBatch<T>(enqueue: EnqueueList, opts: BatchOptions, fn: (members: BatchMembers<any>) => Promise<T>): Promise<BatchCreated<T>> {
  const completion = checkCompletion(opts);
  const members: string[] = [];
  let open = true;
  const take = (results: EnqueueResult[]) => {
    for (const r of results) if (r.status === 'created' || r.status === 'exists') members.push(r.id);
    return results;
  };
  const guard = (api: string) => {
    if (!open) throw new PostboxError('invalid_input', `batch: ${api} after the batch's callback returned; enqueue its members inside it`);
  };
  const result = await fn({
    async enqueue(job, o) {
      guard('enqueue');
      return take(await enqueue(job, [o], 'enqueue'))[0]!;
    },
    async enqueueMany(job, items) {
      guard('enqueueMany');
      return take(await enqueue(job, items, 'enqueueMany'));
    },
  });
  open = false;
  const { job, ...options } = completion;
  const unique = [...new Set(members.map((id) => id.toLowerCase()))];
  const [done] = await enqueue(job, [{ ...options, dependsOn: unique, [COMPLETES_BATCH]: true } as EnqueueOptions<unknown>], 'enqueue');
  if (done?.status !== 'created') throw new EnqueueRefusedError(done as EnqueueRefusal);
  return { id: done.id, members: unique.length, result };
}

function checkCompletion(opts: BatchOptions): BatchCompletion<unknown> {
  const c = opts?.onComplete;
  if (!c || typeof c !== 'object' || !c.job || typeof c.job.kind !== 'string') {
    throw new PostboxError('invalid_input', 'batch: onComplete must name the completion job: { job, payload, … }');
  }
  for (const key of ['dependsOn', 'onParentFailure', 'dedupeKey'] as const) {
    if ((c as Record<string, unknown>)[key] !== undefined) throw new PostboxError('invalid_input', `batch: onComplete cannot take ${key}: the completion waits on the batch's members and is written once per batch`);
  }
  return c;
}

/** `cancelBatch`'s answer: the completion job's cancellation, then each member's that had not ended. */
export interface BatchCancelled {
  completion: OperateResult;
  members: OperateResult[];
}

/** Members cancelled per operator transaction: each one's locks stay short, however large the batch. */
const CANCEL_CHUNK = 1000;

/**
 * Cancels a batch as a whole: its completion job first (so the members' ends no longer release
 * it), then every member that has not ended, in chunks. Only a batch's id is one: any other job's
 * id (a child's, whose parents are no batch) is `not_found`, and nothing is cancelled. A batch whose
 * completion is not found in the scope is left alone, and so is one that has completed (its
 * completion ran or ended): the members are cancelled only under a cancelled completion, which a
 * second call after an interrupted one finds cancelled already and goes on from.
 */
export async function cancelBatch(
  openMembers: ((id: string) => Promise<string[] | null>) | undefined, cancel: (ids: readonly string[]) => Promise<OperateResult[]>, id: string,
): Promise<BatchCancelled> {
  if (!openMembers) throw new PostboxError('unsupported', 'cancelBatch: batches need a store that keeps dependencies (every built-in store does)');
  if (typeof id !== 'string' || id.length === 0) throw new PostboxError('invalid_input', 'cancelBatch: id must be the batch id (its completion job id)');
  if ((await openMembers(id)) === null) return { completion: { id, status: 'not_found' }, members: [] };
  const [completion] = await cancel([id]);
  if (!completion || completion.status === 'not_found') return { completion: completion ?? { id, status: 'not_found' }, members: [] };
  if (completion.status === 'invalid_state' && completion.jobStatus !== 'cancelled') return { completion, members: [] };
  const open = (await openMembers(completion.id)) ?? [];
  const members: OperateResult[] = [];
  for (let i = 0; i < open.length; i += CANCEL_CHUNK) members.push(...(await cancel(open.slice(i, i + CANCEL_CHUNK))));
  return { completion, members };
}
