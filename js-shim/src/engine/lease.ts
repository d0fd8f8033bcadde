// An attempt's lease while its handler runs: `ctx.heartbeat()`, the automatic beats, and the
// stop point. The core decides every number (pb_claim `admit` and `heartbeat`: the new expiry,
// when the next beat is due, when the attempt must stop unless a beat got through); this writes
// the beats, fenced by the attempt, on the lane's session, and keeps the timers.
import type { ClaimedRow } from './attempt.js';
import { PostboxError, errorMessage } from '../errors.js';
import type { EngineRuntime } from './runtime.js';
import type { Session } from './session.js';
import type { JobDefinition } from '../types.js';

/** pb_claim admit's answer for a started attempt. */
export interface Admitted {
  deadline: number;
  /** How long the handler's timer runs (real time). */
  timerMs: number;
  /** The attempt's number (charged attempts + 1: a crash is not an attempt). */
  attempt: number;
  /** With heartbeats: when the attempt must stop unless a beat extends its lease. */
  stopAt?: number;
  /** With heartbeats: when the first beat is due (null: the lease covers the attempt). */
  heartbeatAt?: number | null;
}

type Beat = { extend: true; leaseExpiresAt: number; stopAt: number; nextAt: number | null } | { extend: false; reason: 'lease_expired' };

export type LostReason = 'not_owner' | 'lease_expired' | 'heartbeats_failed';

export class AttemptLease<Db> {
  #expiresAt: number;
  #beatTimer: ReturnType<typeof setTimeout> | undefined;
  #stopTimer: ReturnType<typeof setTimeout> | undefined;
  #inflight: Promise<number> | null = null;
  #lost: LostReason | null = null;
  #ended = false;

  constructor(
    readonly rt: EngineRuntime<Db>,
    readonly session: Session<Db>,
    readonly job: JobDefinition,
    readonly row: ClaimedRow,
    readonly admitted: Admitted,
    /** Called once when the attempt loses its job. */
    readonly onLost: (reason: LostReason) => void,
  ) {
    this.#expiresAt = Number(row.lease_expires_ms);
  }

  /** Arms the stop point and, for auto-beating kinds, the first beat. */
  start(): void {
    if (this.admitted.stopAt !== undefined) this.#armStop(this.admitted.stopAt);
    if (this.job.autoHeartbeat && this.admitted.heartbeatAt != null) this.#armBeat(this.admitted.heartbeatAt);
  }

  /** The attempt ended (returned, threw, timed out, lost): no more beats or stops. */
  end(): void {
    this.#ended = true;
    clearTimeout(this.#beatTimer);
    clearTimeout(this.#stopTimer);
  }

  get lost(): LostReason | null {
    return this.#lost;
  }

  /** One beat; concurrent callers share the one in flight. */
  beat(): Promise<number> {
    if (this.#lost) return Promise.reject(lostError(this.#lost));
    this.#inflight ??= this.#beat().finally(() => {
      this.#inflight = null;
    });
    return this.#inflight;
  }

  async #beat(): Promise<number> {
    const now = this.rt.clock.now();
    const decision = this.rt.core.call<Beat>('claim', {
      op: 'heartbeat',
      now,
      deadline: this.admitted.deadline,
      leaseExpiresAt: this.#expiresAt,
      timeoutMs: this.job.policy.timeoutMs,
      heartbeatMs: this.job.policy.heartbeatMs ?? null,
    });
    if (!decision.extend) throw this.#lose('lease_expired');
    // The next beat is due whatever this one's fate: a failed write is tried again then.
    if (this.job.autoHeartbeat && decision.nextAt !== null) this.#armBeat(decision.nextAt);
    let written: boolean;
    try {
      const ids = await this.session.exclusive((q) =>
        this.rt.store.heartbeat(q, { now, beats: [{ id: this.row.id, attemptSeq: this.row.attempt_seq, leaseExpiresAt: decision.leaseExpiresAt }] }),
      );
      written = ids.length > 0;
    } catch (error) {
      throw new PostboxError('heartbeat_failed', `heartbeat of ${this.row.kind} ${this.row.id} failed: ${errorMessage(error)}`, { cause: error });
    }
    if (!written) throw this.#lose('not_owner');
    if (this.#ended) return decision.leaseExpiresAt;
    this.#expiresAt = decision.leaseExpiresAt;
    this.#armStop(decision.stopAt);
    return decision.leaseExpiresAt;
  }

  #armBeat(at: number): void {
    if (this.#ended) return;
    clearTimeout(this.#beatTimer);
    this.#beatTimer = setTimeout(() => {
      this.beat().catch((error: unknown) => {
        // A lost lease has been reported; a failed write is retried at the next beat, and the
        // stop point ends the attempt if none gets through.
        if ((error as PostboxError)?.code === 'heartbeat_failed') this.rt.emit({ type: 'infra_error', where: 'heartbeat', error: errorMessage(error) });
      });
    }, Math.max(0, at - this.rt.clock.now()));
  }

  #armStop(at: number): void {
    if (this.#ended) return;
    clearTimeout(this.#stopTimer);
    // Real time, like the handler's timeout: the lease must outlast the attempt plus its reserve.
    this.#stopTimer = setTimeout(() => this.#lose('heartbeats_failed'), Math.max(0, at - this.rt.clock.now()));
  }

  #lose(reason: LostReason): PostboxError {
    if (!this.#lost && !this.#ended) {
      this.#lost = reason;
      this.rt.emit({ type: 'lease_lost', jobId: this.row.id, kind: this.row.kind, attempt: this.admitted.attempt, reason });
      this.end();
      this.onLost(reason);
    }
    return lostError(this.#lost ?? reason);
  }
}

export function lostError(reason: LostReason): PostboxError {
  const why =
    reason === 'not_owner'
      ? 'the attempt no longer owns its job (cancelled, or recovered after its lease ran out)'
      : reason === 'lease_expired'
        ? 'the lease ran out before the heartbeat'
        : 'no heartbeat got through before the lease ran short';
  return new PostboxError('lease_lost', `lease lost: ${why}`);
}
