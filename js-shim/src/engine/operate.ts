// Operator actions on named jobs, for every store: lock the jobs, ask the core about each
// (pb_operate), write its decisions, all in one transaction of the store; the nudges the core
// asks for go out after the commit (the caller's).
import { PostboxError } from '../errors.js';
import type { PendingNudge } from './nudge.js';
import type { OutboxRuntime } from './runtime.js';
import type { ApplyOperateInput, OperateTarget, RetryBudget } from '../stores/contract.js';
import type { JobStatus } from '../types.js';

/** An operator action on named jobs. */
export type OperatorVerb = 'cancel' | 'replay' | 'retryNow';

/** Scope of an operator action: omit for any tenant; `null` for jobs without a tenant. */
export interface TenantScope {
  tenantKey?: string | null;
}

/** Per-job result of an operator action. */
export type OperateResult = { id: string; status: 'ok'; jobStatus: string } | { id: string; status: 'not_found' | 'invalid_state'; jobStatus?: string };

/** The core's decision on one operator action (docs/ABI.md, `pb_operate`). */
type OperateDecision =
  | { ok: true; status: JobStatus; dueAt: number | null; budget: RetryBudget | null; nudge: boolean; closeAttempt: string | null; finished: boolean; recordReason: boolean; waitingOn?: number }
  | { ok: false; reason: 'invalid_state' };

/**
 * Runs `action` on `ids` in one transaction of the store (`transaction`, the outbox's own:
 * PostgreSQL's bounded one, or the store's). Results come in `ids`' order; a job that changed
 * between the read and the write (a store without row locks, D1) is `invalid_state`.
 */
export async function operateJobs<Tx>(
  rt: OutboxRuntime<unknown, Tx>,
  transaction: <T>(what: string, fn: (tx: Tx) => Promise<T>) => Promise<T>,
  action: OperatorVerb,
  ids: readonly string[],
  scope: TenantScope | undefined,
  reason: string | null,
): Promise<{ results: OperateResult[]; nudges: PendingNudge[] }> {
  if (!Array.isArray(ids) || !ids.every((id) => typeof id === 'string')) throw new PostboxError('invalid_input', `${action}: ids must be an array of job ids`);
  // The reason becomes each job's error code: the core checks it once, before any job is locked.
  if (action === 'cancel') rt.core.call('operate', { op: 'reason', reason });
  const anyTenant = !scope || !('tenantKey' in scope);
  const now = rt.clock.now();
  return transaction(action, async (tx) => {
    const withParents = action === 'replay';
    const rows = await rt.store.lockForOperate(tx, anyTenant ? { ids, withParents } : { ids, tenantKey: scope!.tenantKey ?? null, withParents });
    const found = new Map<string, OperateTarget>(rows.map((r) => [r.id, r]));
    const results: OperateResult[] = [];
    const writes: ({ id: string } & Extract<OperateDecision, { ok: true }>)[] = [];
    for (const id of ids) {
      const row = found.get(id);
      if (!row) {
        results.push({ id, status: 'not_found' });
        continue;
      }
      // A replay shows the core what a job its parent's failure cancelled would rejoin.
      const job = withParents ? { status: row.status, code: row.code ?? null, parents: row.parents ?? null } : { status: row.status };
      const decision = rt.core.call<OperateDecision>('operate', { action, now, job });
      if (!decision.ok) {
        results.push({ id, status: 'invalid_state', jobStatus: row.status });
        continue;
      }
      writes.push({ id, ...decision });
      results.push({ id, status: 'ok', jobStatus: decision.status });
    }
    const written = new Set(
      writes.length === 0
        ? []
        : (await rt.store.applyOperate(tx, {
            now,
            writes: writes.map((w) => ({
              id: w.id, status: w.status, dueAt: w.dueAt, budget: w.budget, reason, closeAttempt: w.closeAttempt, finished: w.finished, recordReason: w.recordReason,
              ...(w.waitingOn === undefined ? {} : { waitingOn: w.waitingOn }),
            })),
          })).map((w) => w.id),
    );
    const nudges: PendingNudge[] = writes
      .filter((w) => w.nudge && written.has(w.id))
      .map((w) => {
        const row = found.get(w.id)!;
        return { id: w.id, kind: row.kind, lane: row.lane, delaySeconds: 0 };
      });
    return { results: results.map((r): OperateResult => (r.status === 'ok' && !written.has(r.id) ? { id: r.id, status: 'invalid_state' } : r)), nudges };
  });
}

/** The code an erased parent's waiting children are cancelled with. */
export const PARENT_ERASED = 'parent_erased';

/** What erasing named jobs needs of a store: its operator reads and writes, the orphans' lock and the delete. */
export interface ErasingStore<Tx> {
  lockForOperate(tx: Tx, input: { ids: readonly string[]; tenantKey: string | null }): Promise<OperateTarget[]>;
  lockOrphans(tx: Tx, ids: readonly string[]): Promise<OperateTarget[]>;
  applyOperate(tx: Tx, input: ApplyOperateInput): Promise<OperateTarget[]>;
  eraseTenantIds(tx: Tx, tenantKey: string, ids: readonly string[]): Promise<number>;
}

/**
 * Erases the tenant's jobs among `ids`, in one transaction. A parent erased never runs, so its
 * waiting children that stay (not erased with it) are cancelled first, as an operator's cancel
 * (the core's decision) with the code `parent_erased`, whatever their `onParentFailure`: they
 * neither run nor wait forever, and their own children take that cancel as any other.
 */
export async function eraseJobs<Tx>(
  rt: Pick<OutboxRuntime, 'core' | 'clock'>,
  store: ErasingStore<Tx>,
  transaction: <T>(what: string, fn: (tx: Tx) => Promise<T>) => Promise<T>,
  tenantKey: string,
  ids: readonly string[],
): Promise<number> {
  const now = rt.clock.now();
  return transaction('eraseTenant', async (tx) => {
    const erased = (await store.lockForOperate(tx, { ids, tenantKey })).map((r) => r.id);
    const writes = [];
    for (const orphan of await store.lockOrphans(tx, erased)) {
      const decision = rt.core.call<OperateDecision>('operate', { action: 'cancel', now, job: { status: orphan.status } });
      if (decision.ok) {
        const { ok: _ok, nudge: _nudge, ...write } = decision;
        writes.push({ id: orphan.id, ...write, reason: PARENT_ERASED });
      }
    }
    if (writes.length > 0) await store.applyOperate(tx, { now, writes });
    return store.eraseTenantIds(tx, tenantKey, erased);
  });
}
