import type { LaneDb } from '../../../types.js';

/** A named SQL statement: the name lets the server plan it once per session. */
export interface Statement {
  name: string;
  text: string;
}

/** Runs a named statement on a lane session. */
export function run(q: LaneDb, statement: Statement, values: unknown[]) {
  return q.query({ name: statement.name, text: statement.text, values });
}

/** The series' length in {@link GENERIC_PLAN_ONLY}: 4,000,000 rows at 0.0125 cost units each. */
export const CUSTOM_PLAN_WEIGHT_ROWS = 4_000_000;

/**
 * A condition that is always true and keeps the server on a statement's generic plan: append
 * it to the statements a drain runs on every call (`WHERE …`).
 *
 * The server plans a named statement's first five calls with their values (custom plans), then
 * uses its generic plan while that costs less than the custom plans' average, and keeps the
 * generic cost it computed last for as long as it goes on making custom plans. The drain's
 * statements read every value through a scalar subquery, so a custom plan is never better; but
 * when new statistics (a backlog, or a held snapshot's bloat) raised the generic cost during a
 * stretch of custom plans, the custom plans made after the tables shrank all cost less than
 * that stale figure, and the session planned every call afresh for the rest of its life (a
 * soak's sessions at twice the claim's time after the pin). Here a series whose length only a
 * custom plan can see (from the instant `$1`, {@link CUSTOM_PLAN_WEIGHT_ROWS} long) adds about
 * 50,000 cost units to every custom plan and about 12 to the generic one, above any generic
 * cost of the plain drain's statements (under 10,000 with a million jobs due). The weight stays
 * below the server's default `jit_above_cost` (100,000): a weight above it had every custom
 * plan compiled by LLVM on servers built with JIT (Debian's, most managed ones), some 200 ms
 * for each of a session's first five calls. The series is never read: its filter is false.
 */
export const GENERIC_PLAN_ONLY = `(SELECT count(*) FROM generate_series($1::bigint, $1::bigint + ${CUSTOM_PLAN_WEIGHT_ROWS}) WHERE (SELECT false)) = 0`;
