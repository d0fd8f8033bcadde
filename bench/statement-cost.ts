/**
 * What the drain's settle-and-claim statement costs the server, alone: no handlers, no Node-side
 * drain, one connection calling it in a loop, each call settling the jobs the previous one
 * claimed (as successes) and claiming `--batch` more. Variants of the statement, or of the
 * schema, take turns in rounds on one server; each prints the median server CPU per call and
 * per job over the rounds, and the WAL it wrote per job.
 *
 *   node --import tsx bench/statement-cost.ts [--batch 6] [--calls 1000] [--rounds 5] [--variants "current success-rows"]
 *
 * Variants (space-separated; join several with commas, e.g. `no-child-effects,success-rows`):
 *   current           the statement as the drain runs it
 *   success-rows      a success writes its attempt row too, as before migration 0016
 *   no-child-effects  without the effects of finished jobs on their waiting children
 *   sql:STATEMENT     a schema change first, `+` for spaces (e.g. `sql:DROP+INDEX+outbox.job_created`)
 * The schema is dropped and migrated afresh before every variant of every round.
 *
 * For deciding between statement or schema shapes: the drain's own benches (probe-drain.ts,
 * throughput.ts) put handlers and the client between calls, and their server CPU figures move by
 * a fifth between runs on a shared machine; here the rounds alternate, so a difference of a tenth
 * shows. The server's CPU is read from /proc in 10 ms ticks: keep calls × batch in the thousands.
 */
import pg from 'pg';
import { migrate } from 'postbox/sql';
import { jobSettleThenClaimDue } from '../js-shim/src/stores/pg/sql/drain.ts';
import { startPostgres, withClient } from '../tests/support/postgres.ts';
import { arg, postmasterPidOf, serverCpuMs } from './common.ts';

const BATCH = Number(arg('batch') ?? 6);
const CALLS = Number(arg('calls') ?? 1000);
const ROUNDS = Number(arg('rounds') ?? 5);
const VARIANTS = (arg('variants') ?? 'current success-rows').split(/\s+/).filter(Boolean);
const WARMUP = 20;

const current = jobSettleThenClaimDue('outbox').text;

/** The statement text of a variant: `current` with each named change applied. */
function statementOf(variant: string): string {
  let text = current;
  // Removes text[from .. to) and puts `keep` in its place.
  const cut = (from: string, to: string, keep: string) => {
    const a = text.indexOf(from);
    const b = text.indexOf(to, a);
    if (a < 0 || b < 0) throw new Error(`${variant}: the statement has no ${from}`);
    text = text.slice(0, a) + keep + text.slice(b + to.length);
  };
  for (const change of variant.split(',')) {
    if (change === 'success-rows') {
      const before = text;
      text = text.replace(/\n {3}WHERE NOT \(e\.outcome = 'ok' AND e\.status = 'succeeded'\)/, '');
      if (text === before) throw new Error('success-rows: the statement has no success filter');
    } else if (change === 'no-child-effects') {
      cut(', doomed AS (', '), lease AS (', ', lease AS (');
      text = text.replace(/\(SELECT json_agg\(json_build_array\(id, kind, lane\)\) FROM released WHERE status = 'pending'\) AS released/, 'NULL AS released');
    } else if (change !== 'current' && !change.startsWith('sql:')) {
      throw new Error(`unknown variant ${change}`);
    }
  }
  return text;
}
const schemaChangesOf = (variant: string) => variant.split(',').flatMap((c) => (c.startsWith('sql:') ? [c.slice(4).replaceAll('+', ' ')] : []));
for (const v of VARIANTS) statementOf(v);

const lit = (xs: unknown[]) => `{${xs.map((x) => (x === null ? 'NULL' : String(x))).join(',')}}`;
const walBytes = (lsn: string) => {
  const [hi, lo] = lsn.split('/');
  return parseInt(hi!, 16) * 2 ** 32 + parseInt(lo!, 16);
};

const server = await startPostgres();
try {
  const url = await server.createDatabase('statement_cost');
  const pm = await postmasterPidOf(url);
  if (pm === null) throw new Error('the server CPU is read from /proc: Linux only');
  const cpu = new Map<string, number[]>();
  const wal = new Map<string, number[]>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const variant of VARIANTS) {
      await withClient(url, async (c) => {
        await c.query('DROP SCHEMA IF EXISTS outbox CASCADE');
        await migrate(c);
        for (const statement of schemaChangesOf(variant)) await c.query(statement);
        await c.query(`INSERT INTO outbox.job (id, kind, lane, payload, due_at, created_at, updated_at)
          SELECT gen_random_uuid(), 'bench.k', 'default', '{"i": 1}', now() - interval '1 hour' + g * interval '1 ms', now(), now()
            FROM generate_series(1, ${(CALLS + WARMUP + 1) * BATCH}) g`);
        await c.query('VACUUM ANALYZE');
      });
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const text = statementOf(variant);
        let previous: unknown[][] = [];
        const call = async () => {
          const p = previous;
          const { rows: [row] } = await client.query({
            name: 'settle_then_claim', text,
            values: [Date.now(),
              lit(p.map((j) => j[0])), lit(p.map((j) => j[8])), lit(p.map(() => 'succeeded')), lit(p.map(() => null)), lit(p.map(() => 1)), lit(p.map(() => 0)),
              lit(p.map(() => null)), lit(p.map(() => 0)), lit(p.map(() => null)), lit(p.map(() => null)), lit(p.map(() => true)), lit(p.map(() => 'ok')),
              'default', ['bench.k'], [60_000], BATCH, null],
          });
          if ((row.settled as unknown[]).length !== p.length) throw new Error(`${variant}: settled ${row.settled.length} of ${p.length}`);
          previous = row.claimed as unknown[][];
          if (previous.length !== BATCH) throw new Error(`${variant}: claimed ${previous.length} of ${BATCH}`);
        };
        for (let i = 0; i < WARMUP; i++) await call();
        const lsn = async () => (await client.query('SELECT pg_current_wal_insert_lsn()::text AS l')).rows[0].l as string;
        const wal0 = walBytes(await lsn());
        const cpu0 = serverCpuMs(pm)!;
        for (let i = 0; i < CALLS; i++) await call();
        const cpu1 = serverCpuMs(pm)!;
        const wal1 = walBytes(await lsn());
        cpu.set(variant, [...(cpu.get(variant) ?? []), ((cpu1 - cpu0) * 1000) / CALLS]);
        wal.set(variant, [...(wal.get(variant) ?? []), (wal1 - wal0) / (CALLS * BATCH)]);
      } finally {
        await client.end();
      }
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.log(`settle-and-claim, ${BATCH} jobs a call, ${CALLS} calls, ${ROUNDS} rounds (medians)`);
  console.log('| variant | server CPU µs / call | µs / job | WAL B / job | rounds (µs / call) |\n|---|---:|---:|---:|---|');
  for (const v of VARIANTS) {
    const c = median(cpu.get(v)!);
    console.log(`| ${v} | ${c.toFixed(0)} | ${(c / BATCH).toFixed(0)} | ${median(wal.get(v)!).toFixed(0)} | ${cpu.get(v)!.map((x) => x.toFixed(0)).join(' ')} |`);
  }
} finally {
  await server.stop();
}
