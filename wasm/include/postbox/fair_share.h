// Fair share across tenants. With it on, a claim of `limit` jobs visits up to
// min(limit, kFairTenantsPerClaim) tenant scopes that have due jobs (jobs without a tenant are one
// scope), starting after the last scope the drain's previous claim visited and wrapping round,
// and takes up to fair_quota(limit, visited) of each scope's jobs in their claim order before it
// fills what room is left in the lane's claim order. So a tenant with one due job gets it into
// the next claim of every drain however large another tenant's backlog, and the large backlog
// still fills every claim. The claim statement applies both rules (the store computes `visited`).
//
// Weights (the outbox's `fairShare: { weights }`): a tenant of weight w offers w jobs a round
// where one of weight 1 offers one, and its share of a claim is in proportion to its weight among
// the visited tenants'. Tenants not named weigh 1, and so do jobs without a tenant.
#pragma once

#include <algorithm>
#include <cstdint>

namespace postbox {

// A claim visits at most this many tenants (and no more than the jobs it claims, which the
// store knows: a drain's claims vary in size), so a claim's statement stays bounded however
// many tenants wait; the next claim goes on after the last one visited.
constexpr int64_t kFairTenantsPerClaim = 64;

// The heaviest weight a tenant may have, and how many tenants an outbox may weigh: the weights
// travel with every fair claim.
constexpr int64_t kMaxFairWeight = 100;
constexpr int64_t kMaxFairWeights = 1000;

// A visited tenant's share of a claim: the limit in proportion to its weight among the visited
// tenants' (`total`), rounded up, at least one.
constexpr int64_t fair_share_of(int64_t limit, int64_t weight, int64_t total) {
  return total <= 0 ? limit : std::max<int64_t>(1, (limit * weight + total - 1) / total);
}

// Each visited tenant's share of a claim when all weigh the same: the limit split evenly.
constexpr int64_t fair_quota(int64_t limit, int64_t visited) { return fair_share_of(limit, 1, visited); }

// The round a tenant's k-th offered job (from 1) is taken in: a tenant of weight w offers w a round.
constexpr int64_t fair_round(int64_t k, int64_t weight) { return (k + weight - 1) / std::max<int64_t>(1, weight); }

}  // namespace postbox
