// Type-level tests, checked by `tsc -p tests/types` (stage c of npm test): each
// `@ts-expect-error` must be an error, or tsc fails on the unused directive.
import { createOutbox, defineJob, defineJobFor, ok, type Connector } from 'postbox';
import { z } from 'zod';

declare const connect: Connector;
interface Mailer {
  send(to: string): Promise<void>;
}

const plain = defineJob({ kind: 'plain', payload: z.object({ n: z.number() }), timeoutMs: 1_000, handle: async () => ok() });
const mailing = defineJobFor<{ mailer: Mailer }>()({
  kind: 'mailing',
  payload: z.object({ to: z.string() }),
  timeoutMs: 1_000,
  async handle({ to }, ctx) {
    await ctx.deps.mailer.send(to);
    return ok();
  },
});
const billing = defineJobFor<{ stripeKey: string }>()({
  kind: 'billing',
  payload: z.object({}),
  timeoutMs: 1_000,
  handle: async () => ok(),
});

// Jobs without deps: deps is optional.
createOutbox({ jobs: [plain], connect });

// A job with deps: they are required...
// @ts-expect-error deps missing
createOutbox({ jobs: [plain, mailing], connect });
// ...and must have the right shape.
// @ts-expect-error wrong deps
createOutbox({ jobs: [mailing], connect, deps: { mailer: 42 } });
createOutbox({ jobs: [plain, mailing], connect, deps: { mailer: { send: async () => undefined } } });

// Several jobs: deps must satisfy all of them at once.
// @ts-expect-error stripeKey missing
createOutbox({ jobs: [mailing, billing], connect, deps: { mailer: { send: async () => undefined } } });
createOutbox({ jobs: [mailing, billing], connect, deps: { mailer: { send: async () => undefined }, stripeKey: 'k' } });

// Payloads are typed from the schema.
// @ts-expect-error n must be a number
export const enqueueWrongPayload = (tx: unknown) => createOutbox({ jobs: [plain], connect }).enqueue(tx, plain, { payload: { n: 'x' } });

// enqueueMany: every item's payload is typed from the schema...
// @ts-expect-error n must be a number
export const enqueueManyWrongPayload = (tx: unknown) => createOutbox({ jobs: [plain], connect }).enqueueMany(tx, plain, [{ payload: { n: 1 } }, { payload: { n: 'x' } }]);
// ...and under strictEnqueue every result is an accepted one.
export const enqueueManyStrict = async (tx: unknown): Promise<'created' | 'exists'> =>
  (await createOutbox({ jobs: [plain], connect, strictEnqueue: true }).enqueueMany(tx, plain, [{ payload: { n: 1 } }]))[0]!.status;
// The transaction callback's third argument is enqueueMany.
export const enqueueManyInTransaction = (db: import('pg').Pool) =>
  createOutbox({ jobs: [plain], connect }).transaction(db, (_tx, _enqueue, enqueueMany) => enqueueMany(plain, [{ payload: { n: 1 } }]));
