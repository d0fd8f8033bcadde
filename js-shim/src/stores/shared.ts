/**
 * Pieces every store shares: counts, page sizes, cursors and attempt views look the same
 * whatever holds the jobs.
 * @module
 */
import { PostboxError } from '../errors.js';
import type { AttemptView, JobStatus } from './contract.js';

/** Every status at zero: counts report all six. */
export const emptyCounts = (): Record<JobStatus, number> => ({ pending: 0, running: 0, retrying: 0, succeeded: 0, dead: 0, cancelled: 0 });

/** A page size must be an integer in 1..1000. */
export function checkLimit(limit: unknown): number {
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > 1000) throw new PostboxError('invalid_input', 'limit must be an integer in 1..1000');
  return limit;
}

/** A cursor names the last job of a page: its creation time (epoch ms) and id. */
export const encodeCursor = (createdMs: number, id: string): string => `${createdMs}.${id}`;

export function decodeCursor(cursor: string): [number, string] {
  const match = /^(\d+)\.([0-9a-f-]{36})$/i.exec(cursor);
  if (!match) throw new PostboxError('invalid_input', 'cursor is malformed: pass back nextCursor as it was returned');
  return [Number(match[1]), match[2]!.toLowerCase()];
}

/** An attempt record as `listAttempts` returns it. */
export function attemptView(seq: number, outcome: string | null, code: string | null, message: string | null, startedAt: number, finishedAt: number | null): AttemptView {
  return {
    attempt: seq,
    outcome,
    code,
    ...(message === null ? {} : { message }),
    startedAt: new Date(startedAt),
    finishedAt: finishedAt === null ? null : new Date(finishedAt),
    durationMs: finishedAt === null ? null : finishedAt - startedAt,
  };
}
