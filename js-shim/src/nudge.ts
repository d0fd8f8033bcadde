import type { OutboxRuntime } from './runtime.js';
import { errorMessage } from './session.js';

export interface PendingNudge {
  id: string;
  kind: string;
  lane: string;
  delaySeconds: number;
}

const SEND_BATCH_MAX = 100;

/**
 * Sends nudges, grouped by lane, in `sendBatch` calls of at most 100. Never throws: a lost
 * nudge only delays a job until the next sweep, so failures become events.
 */
export async function sendNudges(rt: OutboxRuntime, nudges: readonly PendingNudge[]): Promise<void> {
  if (nudges.length === 0) return;
  const byLane = new Map<string, PendingNudge[]>();
  for (const n of nudges) byLane.set(n.lane, [...(byLane.get(n.lane) ?? []), n]);
  for (const [lane, group] of byLane) {
    const queue = rt.queueFor(lane);
    if (!queue) {
      rt.emit({ type: 'nudge_skipped', jobs: group.length, reason: `no queue for lane ${lane}; the cron sweep will run them` });
      continue;
    }
    const { messages } = rt.core.call<{ messages: unknown[] }>('nudge', { op: 'encode', jobs: group.map(({ id, kind, lane }) => ({ id, kind, lane })) });
    for (let i = 0; i < messages.length; i += SEND_BATCH_MAX) {
      const chunk = messages.slice(i, i + SEND_BATCH_MAX).map((body, j) => {
        const delaySeconds = group[i + j]!.delaySeconds;
        return delaySeconds > 0 ? { body, delaySeconds } : { body };
      });
      try {
        await queue.sendBatch(chunk);
      } catch (error) {
        rt.emit({ type: 'nudge_failed', jobs: chunk.length, error: errorMessage(error) });
      }
    }
  }
}

/**
 * Asks each lane's queue consumer to go on draining: a sweep sends this when its budget ran out
 * with due jobs left. Never throws.
 */
export async function sendDrains(rt: OutboxRuntime, lanes: readonly string[]): Promise<void> {
  for (const lane of lanes) {
    const queue = rt.queueFor(lane);
    if (!queue) {
      rt.emit({ type: 'nudge_skipped', jobs: 0, reason: `no queue for lane ${lane}: its backlog waits for the next sweep` });
      continue;
    }
    try {
      const { messages } = rt.core.call<{ messages: unknown[] }>('nudge', { op: 'encode', drains: [lane] });
      await queue.send(messages[0]);
      rt.emit({ type: 'drain_requested', lane });
    } catch (error) {
      rt.emit({ type: 'nudge_failed', jobs: 0, error: errorMessage(error) });
    }
  }
}
