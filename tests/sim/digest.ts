// Compares one seed's results across stores: each step's result line and each job's end state
// (status, attempts, crashes, last error code, and its ledger's outcomes and codes, in order).
//
// Compared as the stores report them, except (each left out everywhere, for the reason given):
// - the drain's `throttled` count: how often it polled a limited kind, timed in real time;
// - every time (due, finished, an attempt's start and end): within a step the clock moves a
//   millisecond per handler run, in an order the drain's real-time pipelining decides;
// - error messages: the thrown attempts' messages are the same, but an operator's cancel keeps
//   none and the stores are free to word theirs;
// - the order of cancelBatch's member results (the runner sorts them by id): it follows
//   openBatchMembers, whose order the store contract leaves to the store.
import type { Flavor, SimResult } from './runner.ts';

/** The differences between `results` (one per store, for one seed), against the first store's; empty when they agree. */
export function compareResults(results: readonly { flavor: Flavor; result: SimResult }[]): string[] {
  const [base, ...others] = results;
  if (!base) return [];
  const out: string[] = [];
  for (const { flavor, result } of others) {
    const a = base.result.digest;
    const b = result.digest;
    const steps = Math.max(a.steps.length, b.steps.length);
    for (let i = 0; i < steps; i++) {
      if (a.steps[i] !== b.steps[i]) {
        out.push(`${flavor} differs from ${base.flavor} first at step ${i}:\n    ${base.flavor}: ${a.steps[i] ?? '(none)'}\n    ${flavor}: ${b.steps[i] ?? '(none)'}`);
        break;
      }
    }
    const ids = [...new Set([...Object.keys(a.jobs), ...Object.keys(b.jobs)])].sort();
    const jobs = ids.filter((id) => a.jobs[id] !== b.jobs[id]);
    for (const id of jobs.slice(0, 5)) out.push(`${flavor} differs from ${base.flavor} on job ${id}:\n    ${base.flavor}: ${a.jobs[id] ?? '(none)'}\n    ${flavor}: ${b.jobs[id] ?? '(none)'}`);
    if (jobs.length > 5) out.push(`${flavor}: ${jobs.length - 5} more jobs differ`);
  }
  return out;
}

/** Why one store's run of a seed fails on its own: its error or violations. */
export function failuresOf(flavor: Flavor, result: SimResult): string[] {
  return [...(result.error ? [`${flavor}: ${result.error}`] : []), ...result.violations.map((v) => `${flavor}: ${v}`)];
}
