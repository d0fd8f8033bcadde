// The Worker bench/hyperdrive.ts runs inside workerd (Miniflare). Every endpoint opens its
// sessions through `via` (the Hyperdrive binding `OUTBOX_DB`, or `DIRECT_URL`, which workerd
// dials itself) and `connector`:
//
// - `postbox`: `createPgConnector` as shipped;
// - `bare`: a plain `pg.Client` with nothing added: how `createPgConnector` put statements on
//   the wire before it corked the Workers socket (one write per protocol message).
//
// POST /latency { via, connector, sql: 'plain' | 'param', n }: one session, 20 warm-up
//   statements, then n timed ones, sequential; returns each statement's milliseconds.
// POST /drain { via, connector, concurrency, handlerMs }: drains every due `bench.sleep` job
//   with `runDrain` until a drain finds nothing; returns what the drains claimed and ran.
import { createOutbox, defineJob, ok, runDrain, type Connector } from 'postbox';
import { createPgConnector } from 'postbox/pg';
import pg from 'pg';

interface Env {
  OUTBOX_DB: { connectionString: string };
  DIRECT_URL: string;
}

interface Body {
  via: 'binding' | 'direct';
  connector: 'postbox' | 'bare';
  sql?: 'plain' | 'param' | 'large';
  n?: number;
  concurrency?: number;
  handlerMs?: number;
}

function connectorFor(kind: Body['connector'], url: string): Connector {
  if (kind === 'postbox') return createPgConnector(url);
  return async () => {
    const client = new pg.Client({ connectionString: url });
    client.on('error', () => undefined);
    await client.connect();
    return { db: client, close: () => client.end(), destroy: async () => void client.end().catch(() => undefined) };
  };
}

/** Accepts any payload: the bench measures the round trips, not validation. */
const anyPayload = { '~standard': { version: 1 as const, vendor: 'bench', validate: (value: unknown) => ({ value }) } };

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const body = (await request.json()) as Body;
    const url = body.via === 'direct' ? env.DIRECT_URL : env.OUTBOX_DB.connectionString;
    const connect = connectorFor(body.connector, url);
    switch (new URL(request.url).pathname) {
      case '/latency': {
        const lane = await connect();
        const db = lane.db as unknown as pg.ClientBase;
        const run = (i: number) =>
          body.sql === 'param'
            ? db.query('SELECT $1::int', [i])
            : body.sql === 'large'
              ? db.query("SELECT repeat('x', 40000 + $1::int % 2) AS x", [i])
              : db.query('SELECT 1');
        try {
          for (let i = 0; i < 20; i++) await run(i);
          const ms: number[] = [];
          for (let i = 0; i < (body.n ?? 200); i++) {
            const t0 = performance.now();
            await run(i);
            ms.push(performance.now() - t0);
          }
          return Response.json({ ms });
        } finally {
          await lane.close();
        }
      }
      case '/drain': {
        const handlerMs = body.handlerMs ?? 2;
        const job = defineJob({
          kind: 'bench.sleep',
          payload: anyPayload,
          timeoutMs: 60_000,
          async handle() {
            await new Promise((resolve) => setTimeout(resolve, handlerMs));
            return ok();
          },
        });
        const outbox = createOutbox({ jobs: [job], connect, concurrency: body.concurrency ?? 1 });
        const report = { claimed: 0, succeeded: 0 };
        for (;;) {
          const r = await runDrain(outbox);
          report.claimed += r.claimed;
          report.succeeded += r.succeeded;
          if (r.claimed === 0) return Response.json(report);
        }
      }
    }
    return new Response('not found', { status: 404 });
  },
};
