import { RELEASED_COLUMN } from './dependencies.js';
import { CLAIM_ORDER, claimCtes, claimedArray, traceName, type Pick } from './claim.js';
import { SETTLE_PARAMS, settleCtes } from './settle.js';
import { GENERIC_PLAN_ONLY, type Statement } from './statement.js';

/**
 * JobSettleThenClaim: the previous batch's settlements and the next batch's claim in ONE
 * statement, so a drain pays one round trip per batch. The claim cannot pick a row the settle
 * touches: those were 'running' in the statement's snapshot. Parameters: $1 now, the 12
 * settle arrays, then the claim's (see claimCtes). Returns one row: the ids actually settled
 * and the claimed jobs (each an array, claimedArray; `traced` adds the trace columns), both as JSON.
 */
const settleThenClaim = (s: string, pick: Pick, traced: boolean): Statement => ({
  name: traceName(`postbox_settle_then_claim_${pick}`, traced),
  text: `WITH RECURSIVE ${settleCtes(s, 2)}, ${claimCtes(s, 2 + SETTLE_PARAMS, pick)}
SELECT (SELECT COALESCE(json_agg(id), '[]') FROM settled) AS settled, ${RELEASED_COLUMN},
       (SELECT COALESCE(json_agg(${claimedArray(traced)} ORDER BY ${CLAIM_ORDER}), '[]') FROM claimed) AS claimed${
         // The nudged pick's values are its plan (claimCtes): it keeps its custom plans.
         pick === 'due' ? `\n WHERE ${GENERIC_PLAN_ONLY}` : ''}`,
});

export const jobSettleThenClaimDue = (s: string, traced = false) => settleThenClaim(s, 'due', traced);
export const jobSettleThenClaimTargets = (s: string, traced = false) => settleThenClaim(s, 'targets', traced);
