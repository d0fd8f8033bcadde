// Operation sequences, generated from a seed. An operation names jobs it acts on by `pick`
// numbers that the runner resolves against the jobs created so far (in creation order, the same
// on every store), so any prefix of a sequence is a sequence too: a failure shrinks by prefix.
import { Rng } from './prng.ts';
import type { KindName, Tenant } from './world.ts';
import { CRASHABLE, TENANTS } from './world.ts';

/** A parent: an earlier item of the same list, a created job (by pick, in the item's tenant when one is), or an id nobody has. */
export type ParentRef = { index: number } | { pick: number } | { unknown: true };

export interface ItemSpec {
  /** The handler's script (world.ts) and its retry wait. */
  s: string;
  a: number;
  /** Same key and tag: the same payload (exists); another tag: a conflict. */
  tag: string;
  dedupe?: string;
  delayMs?: number;
  priority?: number;
  tenant: Tenant;
  maxAttempts?: number;
  parents?: ParentRef[];
  onParentFailure?: 'cancel' | 'run';
}

export type Op =
  | { t: 'enqueue'; kind: KindName; many: boolean; items: ItemSpec[] }
  | { t: 'batch'; tenant: Tenant; members: { kind: KindName; items: ItemSpec[] }[] }
  | { t: 'drain' }
  | { t: 'sweep' }
  | { t: 'recover' }
  | { t: 'clock'; ms: number }
  /** Claims the picked jobs of `kind` that are due (targets: a claim's order would follow due times the drift decides). */
  | { t: 'crash'; kind: KindName; picks: number[] }
  | { t: 'cancel'; picks: number[]; reason: string; scope?: Tenant }
  | { t: 'replay'; picks: number[]; scope?: Tenant }
  | { t: 'retryNow'; picks: number[]; scope?: Tenant }
  | { t: 'cancelBatch'; pick: number }
  | { t: 'erase'; tenant: 'a' | 'b' };

/** A whole run's settings, also from the seed. */
export interface SimConfig {
  /** Handlers at once per drain. */
  concurrency: number;
  /** Fair share across tenants (the rate-limited kind has no tenant, so its slots go by due order). */
  fairShare: boolean;
}

/** Sentinel pick: an id no job has (`not_found`). */
export const UNKNOWN_PICK = -1;

const OP_WEIGHTS = {
  enqueue: 13, enqueueMany: 11, batch: 6, drain: 16, sweep: 7, recover: 3, clock: 12, crash: 7, cancel: 5, replay: 5, retryNow: 3, cancelBatch: 3, erase: 1,
} as const;

const SCRIPT_KINDS: readonly KindName[] = ['plain', 'plain', 'capped', 'tenant', 'rated', 'bulk'];

export function configFor(seed: number): SimConfig {
  const rng = new Rng(seed ^ 0x51f15eed);
  return { concurrency: rng.pick([1, 2, 4, 8, 8]), fairShare: rng.chance(0.3) };
}

function script(rng: Rng, kind: KindName): string {
  if (kind === 'rated') return rng.pick(['o', 'o', 'o', 'f']);
  const len = rng.int(1, 4);
  let s = '';
  for (let i = 0; i < len; i++) s += rng.weighted({ o: 5, r: 4, f: 1, t: 2 });
  return s;
}

function item(rng: Rng, kind: KindName, tenant: Tenant, earlier: number): ItemSpec {
  const it: ItemSpec = { s: script(rng, kind), a: rng.pick([500, 1_500, 4_500, 30_500, 60_500]), tag: rng.pick(['x', 'y']), tenant: kind === 'rated' ? null : tenant };
  if (rng.chance(0.25)) {
    it.dedupe = `k${rng.int(0, 3)}`;
    // Mostly the key's own payload, so that a repeat is `exists`; else a conflict.
    if (rng.chance(0.6)) Object.assign(it, { s: kind === 'rated' ? 'o' : 'ro', a: 1_500, tag: it.dedupe });
  }
  if (rng.chance(0.2)) it.delayMs = rng.pick([500, 1_500, 10_500, 60_500]);
  if (rng.chance(0.2)) it.priority = rng.int(0, 10);
  if (rng.chance(0.1)) it.maxAttempts = rng.int(1, 5);
  // The rate-limited kind has no parents: a child released mid-drain would race its kind's
  // older jobs for the rate's slots, and the drain's claim sizes (timed in real time) would decide.
  if (kind !== 'rated' && rng.chance(0.4)) {
    const parents: ParentRef[] = [];
    for (let n = rng.int(1, 3); n > 0; n--) {
      if (rng.chance(0.03)) parents.push({ unknown: true });
      else if (earlier > 0 && rng.chance(0.5)) parents.push({ index: rng.int(0, earlier - 1) });
      else parents.push({ pick: rng.next() });
    }
    it.parents = parents;
    if (rng.chance(0.45)) it.onParentFailure = rng.chance(0.7) ? 'run' : 'cancel';
  }
  return it;
}

function picks(rng: Rng): number[] {
  const out: number[] = [];
  for (let n = rng.int(1, 3); n > 0; n--) out.push(rng.chance(0.05) ? UNKNOWN_PICK : rng.next());
  return out;
}

function scope(rng: Rng): { scope?: Tenant } {
  return rng.chance(0.2) ? { scope: rng.pick(TENANTS) } : {};
}

/** The first `count` operations of seed `seed`'s sequence. */
export function generate(seed: number, count: number): Op[] {
  const rng = new Rng(seed);
  const ops: Op[] = [];
  while (ops.length < count) {
    const what = rng.weighted(OP_WEIGHTS);
    switch (what) {
      case 'enqueue':
      case 'enqueueMany': {
        const kind = rng.pick(SCRIPT_KINDS);
        const many = what === 'enqueueMany';
        // A list mostly shares one tenant, so that its items may name each other as parents.
        const listTenant = rng.pick(TENANTS);
        const n = many ? rng.int(1, 6) : 1;
        const items: ItemSpec[] = [];
        for (let i = 0; i < n; i++) items.push(item(rng, kind, rng.chance(0.85) ? listTenant : rng.pick(TENANTS), many ? i : 0));
        ops.push({ t: 'enqueue', kind, many, items });
        break;
      }
      case 'batch': {
        const tenant = rng.pick(TENANTS);
        const members: { kind: KindName; items: ItemSpec[] }[] = [];
        for (let g = rng.int(0, 2); g > 0; g--) {
          // Rate-limited members only in a batch without a tenant (see SimConfig.fairShare).
          const kind = rng.pick(SCRIPT_KINDS.filter((k) => tenant === null || k !== 'rated'));
          const items: ItemSpec[] = [];
          for (let i = rng.int(1, 4); i > 0; i--) {
            // Mostly the batch's tenant: a member of another scope refuses the whole batch.
            const it = item(rng, kind, rng.chance(0.92) ? tenant : rng.pick(TENANTS), 0);
            // A member's parents are other jobs (not list items: each group is its own list).
            if (it.parents) it.parents = it.parents.filter((p) => !('index' in p));
            if (it.parents?.length === 0) delete it.parents;
            items.push(it);
          }
          members.push({ kind, items });
        }
        ops.push({ t: 'batch', tenant, members });
        break;
      }
      case 'drain':
      case 'sweep':
      case 'recover':
        ops.push({ t: what });
        break;
      case 'clock':
        // Whole seconds only: the grid (world.ts).
        ops.push({ t: 'clock', ms: Number(rng.weighted({ 1000: 6, 2000: 5, 5000: 4, 12000: 3, 31000: 2, 61000: 3, 300000: 1, 660000: 1, 1860000: 1, 7200000: 1 })) });
        break;
      case 'crash':
        ops.push({ t: 'crash', kind: rng.pick(CRASHABLE), picks: rng.chance(0.5) ? [rng.next()] : [rng.next(), rng.next()] });
        // Often past the lease (11 s), so that a sweep or recovery finds it.
        if (rng.chance(0.5)) ops.push({ t: 'clock', ms: rng.pick([11_000, 12_000, 31_000]) });
        break;
      case 'cancel':
        ops.push({ t: 'cancel', picks: picks(rng), reason: rng.pick(['moot', 'operator', 'stop: customer left']), ...scope(rng) });
        break;
      case 'replay':
      case 'retryNow':
        ops.push({ t: what, picks: picks(rng), ...scope(rng) });
        break;
      case 'cancelBatch':
        ops.push({ t: 'cancelBatch', pick: rng.next() });
        break;
      case 'erase':
        ops.push({ t: 'erase', tenant: rng.pick(['a', 'b'] as const) });
        break;
    }
  }
  return ops.slice(0, count);
}

/** One line per operation, for a failure's report. */
export function describe(op: Op): string {
  return JSON.stringify(op);
}
