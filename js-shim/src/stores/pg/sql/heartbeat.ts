import type { Statement } from './statement.js';
import { ts } from './time.js';

/**
 * JobHeartbeat: writes the lease the core decided for a running attempt, on its job (where a
 * running attempt's lease lives). Fenced by the attempt (attempt_seq), by status 'running' and by a lease that has
 * not run out at `now` (a recovery may be taking an expired one), so a beat from an attempt that
 * no longer owns the job changes nothing. $1 id, $2 attempt_seq, $3 new lease (epoch ms), $4 now.
 * Returns the job's id when the lease was written.
 */
export const jobHeartbeat = (s: string): Statement => ({
  name: 'postbox_heartbeat',
  text: `UPDATE ${s}.job SET lease_expires_at = ${ts('$3')}
 WHERE id = $1 AND attempt_seq = $2 AND status = 'running' AND lease_expires_at > ${ts('$4')}
RETURNING id`,
});
