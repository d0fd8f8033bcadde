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
