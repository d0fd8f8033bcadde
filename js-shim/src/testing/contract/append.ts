// The store conformance suite's appends: dedupe per key and tenant, held-key comparisons, batched statements, transactions.
import { OTHER_KIND, eq, rejects, type ScenarioOf, type StoreScenario } from './driver.js';


export function appendScenarios<Db, Tx>(scenario: ScenarioOf<Db, Tx>, batchedToo: boolean): StoreScenario[] {
  const batched = !batchedToo ? [] : [
    scenario('append as batched statements: the same rows as append', async (d) => {
      const list = await d.enqueue(d.db, [
        { payload: { n: 1 }, dedupeKey: 'b1' }, { payload: { n: 1 }, dedupeKey: 'b1' }, { payload: { n: 2 }, dedupeKey: 'b1' }, { payload: { n: 3 }, tenantKey: 't' },
      ]);
      eq(list.map((r) => r.verdict), ['created', 'exists', 'dedupe_conflict:payload', 'created'], 'within one batch the first item holds the key');
      const [again] = await d.enqueue(d.db, [{ payload: { n: 1 }, dedupeKey: 'b1' }]);
      eq([again!.verdict, again!.id], ['exists', list[0]!.id], 'a later batch finds the committed holder');
      const view = await d.job(list[3]!.id);
      eq([view.status, view.tenantKey, view.payload], ['pending', 't', { n: 3 }], 'the batched job is stored');
      eq((await d.store.countJobs(d.db, {})).pending, 2, 'two jobs were written');
    }, true),
  ];
  return [
    ...batched,
    scenario('append is idempotent per dedupe key and tenant, and reports conflicts', async (d) => {
      const [first] = await d.enqueue(d.db, [{ payload: { a: 1, b: [1, 2] }, dedupeKey: 'k1' }]);
      eq(first!.verdict, 'created', 'a new key is created');
      const [again] = await d.enqueue(d.db, [{ payload: { b: [1, 2], a: 1 }, dedupeKey: 'k1' }]);
      eq([again!.verdict, again!.id], ['exists', first!.id], 'the same key and payload (keys reordered) is the job that exists');
      const [other] = await d.enqueue(d.db, [{ payload: { a: 2 }, dedupeKey: 'k1' }]);
      eq([other!.verdict, other!.id], ['dedupe_conflict:payload', first!.id], 'the same key with another payload is a conflict');
      const [kind] = await d.enqueue(d.db, [{ payload: { a: 1, b: [1, 2] }, dedupeKey: 'k1' }], OTHER_KIND);
      eq(kind!.verdict, 'dedupe_conflict:kind', 'the same key held by another kind is a conflict');
      const [tenant] = await d.enqueue(d.db, [{ payload: { a: 1 }, dedupeKey: 'k1', tenantKey: 't1' }]);
      eq(tenant!.verdict, 'created', 'the key is unique per tenant scope');
      const list = await d.enqueue(d.db, [
        { payload: { n: 1 }, dedupeKey: 'k2' }, { payload: { n: 1 }, dedupeKey: 'k2' }, { payload: { n: 2 }, dedupeKey: 'k2' }, { payload: { n: 3 } },
      ]);
      eq(list.map((r) => r.verdict), ['created', 'exists', 'dedupe_conflict:payload', 'created'], 'within one list the first item holds the key');
      eq([list[1]!.id, list[2]!.id], [list[0]!.id, list[0]!.id], 'later items name the first');
      eq((await d.store.countJobs(d.db, {})).pending, 4, 'four jobs were written');
    }),

    scenario('append compares a held key\'s maxAttempts, metadata and correlationId; a repeat differing in one is a conflict naming it', async (d) => {
      const base = { payload: { a: 1 }, dedupeKey: 'f1', maxAttempts: 4, metadata: { m: 1, n: [1, 2] }, correlationId: 'c1' };
      const [first] = await d.enqueue(d.db, [base]);
      eq(first!.verdict, 'created', 'a new key is created');
      const [again] = await d.enqueue(d.db, [{ ...base, metadata: { n: [1, 2], m: 1 } }]);
      eq([again!.verdict, again!.id], ['exists', first!.id], 'the same fields (metadata keys reordered) are the job that exists');
      const repeats = await d.enqueue(d.db, [
        { ...base, maxAttempts: 5 }, { ...base, maxAttempts: undefined }, { ...base, metadata: { m: 2, n: [1, 2] } }, { ...base, metadata: undefined },
        { ...base, correlationId: 'c2' }, { ...base, correlationId: undefined },
      ]);
      eq(repeats.map((r) => [r.verdict, r.id]), [
        ['dedupe_conflict:maxAttempts', first!.id], ['dedupe_conflict:maxAttempts', first!.id], ['dedupe_conflict:metadata', first!.id],
        ['dedupe_conflict:metadata', first!.id], ['dedupe_conflict:correlationId', first!.id], ['dedupe_conflict:correlationId', first!.id],
      ], 'against a committed holder');
      const list = await d.enqueue(d.db, [
        { ...base, dedupeKey: 'f2' }, { ...base, dedupeKey: 'f2', metadata: { n: [1, 2], m: 1 } }, { ...base, dedupeKey: 'f2', maxAttempts: 3 },
        { ...base, dedupeKey: 'f2', metadata: {} }, { ...base, dedupeKey: 'f2', correlationId: undefined },
      ]);
      eq(list.map((r) => r.verdict), ['created', 'exists', 'dedupe_conflict:maxAttempts', 'dedupe_conflict:metadata', 'dedupe_conflict:correlationId'],
        'against an earlier item of the same list');
      eq((await d.store.countJobs(d.db, {})).pending, 2, 'two jobs were written');
    }),

    scenario('transaction: the append commits with the callback, or neither happens', async (d) => {
      const committed = await d.store.transaction(d.db, async (tx) => (await d.enqueue(tx, [{ payload: { n: 1 } }]))[0]!.id);
      eq((await d.job(committed)).status, 'pending', 'a committed append is there');
      const boom = new Error('the callback failed');
      let rolledBack = '';
      await rejects(
        d.store.transaction(d.db, async (tx) => {
          rolledBack = (await d.enqueue(tx, [{ payload: { n: 2 }, dedupeKey: 'rolled' }]))[0]!.id;
          throw boom;
        }),
        (e) => e === boom,
        'the callback\'s own error rejects the transaction',
      );
      eq(await d.store.getJob(d.db, { id: rolledBack }), null, 'a rolled-back append left nothing');
      const [again] = await d.enqueue(d.db, [{ payload: { n: 3 }, dedupeKey: 'rolled' }]);
      eq(again!.verdict, 'created', 'a rolled-back dedupe key is free again');
      // The store's handle still works after a rollback: resources were released.
      eq((await d.store.countJobs(d.db, {})).pending, 2, 'two jobs committed');
    }),
  ];
}
