// Type-level tests of the store contract: the stores Postbox ships implement it, a store of
// one's own type-checks against it, and the suite takes any of them.
import { MemoryOutboxStore, postgresOutboxStore, type LaneDb, type OutboxStore, type Queryable } from 'postbox';
import { outboxStoreContract } from 'postbox/testing';

const memory: OutboxStore<unknown> = new MemoryOutboxStore();
const postgres: OutboxStore<LaneDb, Queryable> = postgresOutboxStore('billing');

declare const client: LaneDb;
outboxStoreContract({ makeStore: () => memory, db: () => undefined });
outboxStoreContract({ makeStore: (name) => postgresOutboxStore(name), db: () => client });
outboxStoreContract({ makeStore: () => postgres, db: async () => client, reset: async () => undefined, otherName: 'b' });

// A store must implement every required operation.
// @ts-expect-error: settleThenClaim (and the rest) are missing
const partial: OutboxStore<unknown> = { name: null, transaction: (_db, fn) => fn(undefined), claim: async () => [] };

// The suite's handle is the store's.
// @ts-expect-error: a string is not a LaneDb
outboxStoreContract({ makeStore: () => postgres, db: () => 'not a client' });

export { partial };
