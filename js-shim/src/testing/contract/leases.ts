// The store conformance suite's claims and leases: due order within lane, kinds and limit; fenced settlements; heartbeats.
import { KIND, OTHER_KIND, T0, eq, ok, type ScenarioOf, type StoreScenario } from './driver.js';


export function leasesScenarios<Db, Tx>(scenario: ScenarioOf<Db, Tx>): StoreScenario[] {
  return [
    scenario('claim takes due jobs oldest due first, within lane, kinds and limit', async (d) => {
      const late = await d.one({ delayMs: 3000 });
      const early = await d.one({ delayMs: 1000 });
      const middle = await d.one({ delayMs: 2000 });
      const future = await d.one({ delayMs: 60_000 });
      await d.one({ kind: OTHER_KIND });
      eq(await d.store.nextDue(d.db, { lane: 'default', kinds: [KIND], versionCutoff: null }), T0 + 1000, 'nextDue is the earliest due time');
      eq((await d.claim(10)).length, 0, 'nothing is due yet');
      d.now = T0 + 5000;
      const first = await d.claim(2);
      eq(first.map((j) => j.id), [early, middle], 'the two oldest due come first, in order');
      ok(first.every((j) => j.attempt_seq === 1 && Number(j.lease_expires_ms) === d.now + d.policy(KIND).leaseMs), 'each claim opens attempt 1 with the lease asked for');
      eq((await d.claim(10)).map((j) => j.id), [late], 'then the rest that is due; never a running one, a future one or another lane\'s');
      eq((await d.job(future)).status, 'pending', 'the future job waits');
      // Claims racing each other never share a job.
      d.now = T0 + 120_000;
      for (let i = 0; i < 6; i++) await d.one();
      const raced = await Promise.all([d.claim(4), d.claim(4), d.claim(4)]);
      const all = raced.flat().map((j) => j.id);
      eq([all.length, new Set(all).size], [7, 7], 'concurrent claims take every due job once');
      const targeted = await d.claim(10, { lane: 'bulk', kinds: [OTHER_KIND], leaseMs: [d.policy(OTHER_KIND).leaseMs], targets: [{ id: future, kind: KIND }] });
      eq(targeted.length, 0, 'a target of another kind or lane is not claimed');
    }),

    scenario('a traced claim returns the trace context each job\'s list was appended with, and when it was enqueued', async (d) => {
      const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
      const traced = await d.enqueue(d.db, [{ payload: { n: 1 } }, { payload: { n: 2 } }], KIND, d.store, traceparent);
      const plain = await d.one();
      d.now = T0 + 1000;
      const claimed = await d.claim(10, { traced: true });
      const byId = new Map(claimed.map((j) => [j.id, j]));
      eq(traced.map((r) => byId.get(r.id)?.trace_context), [traceparent, traceparent], 'every job of the list keeps its trace context');
      eq(byId.get(plain)?.trace_context, null, 'a job appended without one has none');
      eq(claimed.map((j) => Number(j.created_ms)), [T0, T0, T0], 'created_ms is the append\'s now');
      d.now = Number(claimed[0]!.lease_expires_ms) + 1;
      const expired = await d.store.listExpiredLeases(d.db, { now: d.now, kinds: [KIND], limit: 10 });
      eq(expired.filter((j) => j.trace_context === traceparent).length, 2, 'recovery sees it too');
    }),

    scenario('leases fence settlements: a stale attempt changes nothing', async (d) => {
      const id = await d.one();
      const [job] = await d.claim();
      ok(job, 'claimed');
      eq((await d.settle(job, { type: 'ok' }, job.attempt_seq + 1)).settled, false, 'a settle of another attempt is refused');
      eq((await d.settle(job, { type: 'crash' })).settled, false, 'a crash before the lease ran out is refused');
      eq((await d.job(id)).status, 'running', 'the job still runs');
      d.now = Number(job.lease_expires_ms) + 1;
      const expired = await d.store.listExpiredLeases(d.db, { now: d.now, kinds: [KIND], limit: 10 });
      eq(expired.map((j) => [j.id, j.attempt_seq]), [[id, 1]], 'the expired lease is listed with its attempt');
      eq((await d.store.listExpiredLeases(d.db, { now: d.now, kinds: [KIND], limit: 10, unregistered: true })).length, 0, 'not among the unregistered kinds\' leases');
      eq((await d.store.listExpiredLeases(d.db, { now: d.now, kinds: ['other.kind'], limit: 10, unregistered: true })).map((j) => j.id), [id], 'a deploy without its kind lists it as unregistered');
      eq((await d.store.listExpiredLeases(d.db, { now: d.now, kinds: [], limit: 10, unregistered: true })).map((j) => j.id), [id], 'as does one with no kinds at all');
      const recovered = await d.settle(expired[0]!, { type: 'crash' });
      eq(recovered.settled, true, 'recovery settles it as a crash');
      eq([(await d.job(id)).status, (await d.job(id)).crashes], [recovered.write.status, 1], 'as the core decided');
      d.now = recovered.write.dueAt!;
      const [second] = await d.claim();
      eq(second?.attempt_seq, 2, 'the next claim is attempt 2');
      eq((await d.settle(job, { type: 'ok' })).settled, false, 'attempt 1 finishing late changes nothing');
      eq((await d.job(id)).status, 'running', 'attempt 2 still owns the job');
      eq((await d.settle(second!, { type: 'ok' })).settled, true, 'attempt 2 settles');
      eq((await d.settle(second!, { type: 'ok' })).settled, false, 'a duplicate settle changes nothing');
    }),

    scenario('heartbeat extends a live lease; recovery waits for it', async (d) => {
      const id = await d.one();
      const [job] = await d.claim();
      const lease = Number(job!.lease_expires_ms);
      d.now += 1000;
      const extended = lease + 60_000;
      eq(await d.store.heartbeat(d.db, { now: d.now, beats: [{ id, attemptSeq: 2, leaseExpiresAt: extended }] }), [], 'a beat of another attempt is refused');
      eq(await d.store.heartbeat(d.db, { now: d.now, beats: [{ id, attemptSeq: 1, leaseExpiresAt: extended }] }), [id], 'the owner\'s beat is written');
      d.now = lease + 1;
      eq((await d.store.listExpiredLeases(d.db, { now: d.now, kinds: [KIND], limit: 10 })).length, 0, 'the extended lease has not expired');
      eq((await d.settle(job!, { type: 'crash' })).settled, false, 'a recovery listed before the beat loses to it');
      d.now = extended + 1;
      eq(await d.store.heartbeat(d.db, { now: d.now, beats: [{ id, attemptSeq: 1, leaseExpiresAt: d.now + 60_000 }] }), [], 'an expired lease cannot be extended');
      const [expired] = await d.store.listExpiredLeases(d.db, { now: d.now, kinds: [KIND], limit: 10 });
      eq(expired?.id, id, 'then it is listed');
      eq((await d.settle(expired!, { type: 'crash' })).settled, true, 'and recovered');
      eq((await d.store.listAttempts(d.db, { jobId: id })).map((a) => a.outcome), ['crash'], 'its attempt closed as a crash');
      // Beats are batch-shaped: several attempts in one call, each fenced on its own.
      const x = await d.one();
      const y = await d.one();
      const claimed = await d.claim(2);
      eq(claimed.map((j) => j.id).sort(), [x, y].sort(), 'two claimed');
      const beats = claimed.map((j) => ({ id: j.id, attemptSeq: j.attempt_seq, leaseExpiresAt: Number(j.lease_expires_ms) + 5000 }));
      beats.push({ id: x, attemptSeq: 99, leaseExpiresAt: d.now + 1 });
      eq((await d.store.heartbeat(d.db, { now: d.now, beats })).sort(), [x, y].sort(), 'both owners\' beats are written, the stray one is not');
      const expiries = (await d.store.listExpiredLeases(d.db, { now: d.now + 10 * 86_400_000, kinds: [KIND], limit: 10 })).map((j) => [j.id, Number(j.lease_expires_ms)]);
      eq(expiries.sort(), beats.slice(0, 2).map((b) => [b.id, b.leaseExpiresAt]).sort(), 'each lease is the one written for it');
    }),
  ];
}
