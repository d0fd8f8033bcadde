/**
 * Every statement of one outbox, built once per schema and cached: the default outbox's
 * statements name schema `outbox` exactly as before; a named outbox's name its own schema (a
 * checked name, quoted) and carry their own prepared-statement names, since one connection may
 * serve two outboxes and the server keeps one plan per name.
 * @module
 */
import { checkOutboxName, outboxSchemaName, schemaIdent } from '../../../name.js';
import { jobClaimDue, jobClaimTargets, jobListExpiredLeases, jobListExpiredUnregistered, jobNextDue } from './claim.js';
import { jobSettleThenClaimDue, jobSettleThenClaimTargets } from './drain.js';
import { jobClaimFairDue, jobSettleThenClaimFairDue } from './fair.js';
import {
  jobClaimLimitedDue, jobClaimLimitedFairDue, jobSettleThenClaimLimitedFairDue, jobClaimLimitedTargets, jobSettleThenClaimLimitedDue, jobSettleThenClaimLimitedTargets, kindSlotsEnsure,
} from './limits.js';
import { jobDependencies, jobEdgesInsert, jobLockOrphans, jobOpenBatchMembers, jobParentStates, jobParentTally, jobResolveWaiting } from './dependencies.js';
import { jobFindByDedupeMany, jobInsertMany, jobInsertOne } from './enqueue.js';
import { jobHeartbeat } from './heartbeat.js';
import { jobApplyOperate, jobEraseTenant, jobEraseTenantIds, jobLockForOperate } from './operate.js';
import { scheduleLastRuns, scheduleRecord } from './schedule.js';
import { jobSettleBatch } from './settle.js';
import type { Statement } from './statement.js';
import { jobCountActive, jobCountUnregistered, jobDeleteFinished, jobListDueForHandoff, jobRecordNudges } from './sweep.js';
import { webhookEndpointEnable, webhookEndpointGet, webhookEndpointList, webhookEndpointSet } from './webhook.js';

/** The statements of one outbox. */
export interface OutboxSql {
  /** The outbox's name; `null` for the default outbox. */
  readonly name: string | null;
  /** Its schema, unquoted: `outbox` or `outbox_<name>`. */
  readonly schema: string;
  /** Its schema as written in SQL (`outbox`, or `"outbox_<name>"`). */
  readonly ident: string;
  readonly claimDue: Statement;
  readonly claimTargets: Statement;
  readonly listExpiredLeases: Statement;
  readonly listExpiredUnregistered: Statement;
  readonly nextDue: Statement;
  readonly settleThenClaimDue: Statement;
  readonly settleThenClaimTargets: Statement;
  /** The four claim statements again, returning each job's trace context and enqueue time too (`ClaimInput.traced`). */
  readonly traced: { readonly claimDue: Statement; readonly claimTargets: Statement; readonly settleThenClaimDue: Statement; readonly settleThenClaimTargets: Statement };
  /** The four claim statements of a lane with flow-limited kinds (limits.ts): JSON answers with the throttled kinds, always traced. */
  readonly limited: { readonly claimDue: Statement; readonly claimTargets: Statement; readonly settleThenClaimDue: Statement; readonly settleThenClaimTargets: Statement };
  /** The due claims of an outbox with fair share (fair.ts): JSON answers in the claim's order, with where the next claim starts; always traced. */
  readonly fair: { readonly claimDue: Statement; readonly settleThenClaimDue: Statement };
  /** The due claims of a limited lane in an outbox with fair share (limits.ts, with fair.ts's pick): as `limited`'s, with where the next fair pick starts. */
  readonly limitedFair: { readonly claimDue: Statement; readonly settleThenClaimDue: Statement };
  /** Creates the slot rows limited kinds need. */
  readonly kindSlotsEnsure: Statement;
  readonly settleBatch: Statement;
  readonly heartbeat: Statement;
  readonly scheduleLastRuns: Statement;
  readonly scheduleRecord: Statement;
  readonly insertOne: string;
  readonly insertMany: string;
  readonly findByDedupeMany: string;
  readonly lockForOperate: string;
  readonly applyOperate: string;
  readonly eraseTenant: string;
  readonly eraseTenantIds: string;
  readonly deleteFinished: string;
  readonly listDueForHandoff: string;
  readonly recordNudges: string;
  readonly countUnregistered: string;
  readonly countActive: string;
  readonly webhookEndpointGet: string;
  readonly webhookEndpointSet: string;
  readonly webhookEndpointEnable: string;
  readonly webhookEndpointList: string;
  /** Job dependencies (dependencies.ts). */
  readonly parentStates: string;
  readonly addEdges: string;
  readonly resolveWaiting: string;
  readonly dependencies: string;
  readonly parentTally: string;
  readonly openBatchMembers: string;
  readonly lockOrphans: string;
}

const cache = new Map<string | null, OutboxSql>();

/**
 * A named outbox's prepared statements are `<name>:<statement>` (e.g. `billing:claim_due`),
 * within PostgreSQL's 63 bytes for any valid name; the default outbox's keep their names.
 */
function named(name: string | null, statement: Statement): Statement {
  if (name === null) return statement;
  return { name: `${name}:${statement.name.replace(/^postbox_/, '')}`, text: statement.text };
}

/**
 * The statements of the outbox `name` (`undefined` / `null`: the default outbox). Throws
 * `PostboxError('invalid_config')` for an invalid name.
 */
export function outboxSql(name?: string | null): OutboxSql {
  const checked = checkOutboxName(name);
  const hit = cache.get(checked);
  if (hit) return hit;
  const s = schemaIdent(checked);
  const n = (statement: Statement) => named(checked, statement);
  const sql: OutboxSql = Object.freeze({
    name: checked,
    schema: outboxSchemaName(checked),
    ident: s,
    claimDue: n(jobClaimDue(s)),
    claimTargets: n(jobClaimTargets(s)),
    listExpiredLeases: n(jobListExpiredLeases(s)),
    listExpiredUnregistered: n(jobListExpiredUnregistered(s)),
    nextDue: n(jobNextDue(s)),
    settleThenClaimDue: n(jobSettleThenClaimDue(s)),
    settleThenClaimTargets: n(jobSettleThenClaimTargets(s)),
    traced: Object.freeze({
      claimDue: n(jobClaimDue(s, true)),
      claimTargets: n(jobClaimTargets(s, true)),
      settleThenClaimDue: n(jobSettleThenClaimDue(s, true)),
      settleThenClaimTargets: n(jobSettleThenClaimTargets(s, true)),
    }),
    limited: Object.freeze({
      claimDue: n(jobClaimLimitedDue(s)),
      claimTargets: n(jobClaimLimitedTargets(s)),
      settleThenClaimDue: n(jobSettleThenClaimLimitedDue(s)),
      settleThenClaimTargets: n(jobSettleThenClaimLimitedTargets(s)),
    }),
    fair: Object.freeze({ claimDue: n(jobClaimFairDue(s)), settleThenClaimDue: n(jobSettleThenClaimFairDue(s)) }),
    limitedFair: Object.freeze({ claimDue: n(jobClaimLimitedFairDue(s)), settleThenClaimDue: n(jobSettleThenClaimLimitedFairDue(s)) }),
    kindSlotsEnsure: n(kindSlotsEnsure(s)),
    settleBatch: n(jobSettleBatch(s)),
    heartbeat: n(jobHeartbeat(s)),
    scheduleLastRuns: n(scheduleLastRuns(s)),
    scheduleRecord: n(scheduleRecord(s)),
    insertOne: jobInsertOne(s),
    insertMany: jobInsertMany(s),
    findByDedupeMany: jobFindByDedupeMany(s),
    lockForOperate: jobLockForOperate(s),
    applyOperate: jobApplyOperate(s),
    eraseTenant: jobEraseTenant(s),
    eraseTenantIds: jobEraseTenantIds(s),
    deleteFinished: jobDeleteFinished(s),
    listDueForHandoff: jobListDueForHandoff(s),
    recordNudges: jobRecordNudges(s),
    countUnregistered: jobCountUnregistered(s),
    countActive: jobCountActive(s),
    webhookEndpointGet: webhookEndpointGet(s),
    webhookEndpointSet: webhookEndpointSet(s),
    webhookEndpointEnable: webhookEndpointEnable(s),
    webhookEndpointList: webhookEndpointList(s),
    parentStates: jobParentStates(s),
    addEdges: jobEdgesInsert(s),
    resolveWaiting: jobResolveWaiting(s),
    dependencies: jobDependencies(s),
    parentTally: jobParentTally(s),
    openBatchMembers: jobOpenBatchMembers(s),
    lockOrphans: jobLockOrphans(s),
  });
  cache.set(checked, sql);
  return sql;
}
