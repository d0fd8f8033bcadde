// Named exclusions: what the simulation leaves out because the stores or the engine are known to
// fail it (README.md, Known failures), so that the suite stays green while the failure stands.
// Each one is listed here, in README.md, and where it acts; the campaign can run without any
// of them (`--without NAME`) to reproduce its failure.

export const EXCLUSIONS = {
  'standing-clock-throttle':
    'A drain on a clock that stands still never returns while a rate slot frees within 5 s (flow_limits.cpp throttle_retry_at reads ' +
    'the outbox clock, which does not move while the drain waits in real time). The runner moves the clock to the second after ' +
    'such a slot frees before each drain and sweep. (Crashes are injected only on kinds without limits for the same reason: an ' +
    'attempt outside the drain holding a concurrency slot hangs it the same way.)',
  'replay-ignores-parents':
    'replayMany of a child an operator cancelled (its last error code is not parent_failed) makes it due at once whatever its ' +
    'parents: it runs before a parent has ended, or after one failed though it is kept `cancel` (a batch completion before its ' +
    'members ended). The checker does not hold such a child to the order of its parents.',
  'revived-child-tally':
    'A child enqueued after its parent had failed is cancelled at birth (parent_failed) with that failure in its parents\' tally; ' +
    'brought back by the parent\'s replay, it keeps it: when the parent then succeeds, ctx.parents still counts it dead or ' +
    'cancelled (a child cancelled by the parent\'s settle is told right). The checker does not read ctx.parents of a child ' +
    'born cancelled.',
  'cross-tenant-list-parent':
    'enqueueMany lets an item name an earlier item of another tenant as its parent (dependsOn by list index), where a parent ' +
    'named by id must be in the item\'s own tenant scope (unknown_parent). The checker allows an edge to another tenant only when ' +
    'the child named that parent by index.',
  'duplicate-operator-ids':
    'cancelMany([a, a]) cancels a twice (both results ok) and counts its end twice for each waiting child: a child with another ' +
    'parent still open (a batch\'s completion with another member running) falls due and runs before that parent ends. The runner ' +
    'names each job once per operator action.',
  'cancel-with-descendant':
    'PostgreSQL only: cancelMany([parent, child]) with the child waiting on the parent counts the child\'s end twice for the ' +
    'child\'s own waiting children (once as the parent\'s cancel reaches it, once as the operator\'s write), so a grandchild with ' +
    'another parent still open falls due and runs early. The memory and SQLite stores count it once. The runner names no job ' +
    'together with one of its descendants in one cancel.',
  'held-list-parent':
    'enqueueMany: an item naming by index an earlier item whose dedupe key was held (exists, or a conflict) gets the holder as ' +
    'its parent, but its status is decided from what the earlier item would have been: if that item named a parent that had ' +
    'failed, the child is written due (onParentFailure run; or cancelled at birth) while the holder is still open, and runs ' +
    'before it. The checker does not hold such a child to the order of its parents.',
  'erase-holds-slots':
    'PostgreSQL only: eraseTenant deletes jobs whose last attempts took a kind\'s concurrency slots, and each such slot stays ' +
    'held until that attempt\'s lease would have ended (kind_slot.held_until backs a slot whose job is gone), where the memory ' +
    'and SQLite stores count running jobs: the kind is throttled for up to its lease, and a drain on a clock that stands still ' +
    'polls for it forever. Before a drain or sweep, the runner moves the clock past the leases of jobs an erase removed.',
} as const;

export type ExclusionName = keyof typeof EXCLUSIONS;

export const ALL_EXCLUSIONS: ReadonlySet<ExclusionName> = new Set(Object.keys(EXCLUSIONS) as ExclusionName[]);

/** The exclusions left when `without` are turned off; an unknown name is an error. */
export function exclusionsWithout(without: readonly string[]): Set<ExclusionName> {
  for (const name of without) if (!(name in EXCLUSIONS)) throw new Error(`no exclusion named ${name}; there are: ${Object.keys(EXCLUSIONS).join(', ')}`);
  return new Set([...ALL_EXCLUSIONS].filter((n) => !without.includes(n)));
}
