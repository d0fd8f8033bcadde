// Fair share across tenants. With it on, a claim of `limit` jobs visits up to
// min(limit, kFairTenantsPerClaim) tenant scopes that have due jobs (jobs without a tenant are one
// scope), starting after the last scope the drain's previous claim visited and wrapping round,
// and takes up to fair_quota(limit, visited) of each scope's jobs in their claim order before it
// fills what room is left in the lane's claim order. So a tenant with one due job gets it into
// the next claim of every drain however large another tenant's backlog, and the large backlog
// still fills every claim. The claim statement applies both rules (the store computes `visited`).
#pragma once

#include <algorithm>
#include <cstdint>

namespace postbox {

// A claim visits at most this many tenants (and no more than the jobs it claims, which the
// store knows: a drain's claims vary in size), so a claim's statement stays bounded however
// many tenants wait; the next claim goes on after the last one visited.
constexpr int64_t kFairTenantsPerClaim = 64;

// Each visited tenant's share of a claim: the limit split evenly, rounded up, at least one.
constexpr int64_t fair_quota(int64_t limit, int64_t visited) {
  return visited <= 0 ? limit : std::max<int64_t>(1, (limit + visited - 1) / visited);
}

}  // namespace postbox
