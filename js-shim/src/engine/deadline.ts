// The invocation's deadline, bounding every await that waits on something outside the isolate
// (connection acquisition, statements, queue sends). A Worker that outlives its platform limit
// is killed mid-write; one that gives up at its deadline reports what it could not finish, and
// the leases and sweeps pick the rest up, so nothing is lost.
import { PostboxError } from '../errors.js';

/** An invocation's deadline on the outbox's clock. */
export interface Deadline {
  at: number;
  now(): number;
}

export const deadlineError = (where: string): PostboxError =>
  new PostboxError('deadline_exceeded', `${where}: the invocation's deadline passed while waiting (a connection or queue that does not answer)`);

export function isDeadlineError(error: unknown): boolean {
  return error instanceof PostboxError && error.code === 'deadline_exceeded';
}

/**
 * Runs `work`, rejecting with `deadline_exceeded` once the deadline passes (at once when it
 * already has). `onExpire` runs then, before the rejection: the caller drops what is stuck.
 * The work itself cannot be cancelled; its late result is ignored.
 */
export function beforeDeadline<T>(deadline: Deadline | undefined, where: string, work: () => Promise<T>, onExpire?: () => void): Promise<T> {
  if (!deadline) return work();
  // Real time from the clock's reading, like the handler's timer.
  const ms = deadline.at - deadline.now();
  if (ms <= 0) {
    onExpire?.();
    return Promise.reject(deadlineError(where));
  }
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      onExpire?.();
      reject(deadlineError(where));
    }, ms);
    work().then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
