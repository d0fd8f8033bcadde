// Retry backoff: a pure function of the attempt number, the policy's base and cap, and a seed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace postbox {

// The splitmix64 mixer: a good 64-bit hash from a counter, the same on every build.
uint64_t splitmix64(uint64_t x);

// The ceiling for attempt n (n ≥ 1): min(max_ms, base_ms · 2^(n−1)), without overflow.
int64_t backoff_cap(int64_t attempt, int64_t base_ms, int64_t max_ms);

// The delay in ms before attempt n+1, after attempt n failed. See backoff.cpp.
int64_t backoff_delay(int64_t attempt, int64_t base_ms, int64_t max_ms, uint32_t seed);

// The delay before attempt n+1 under an explicit schedule (n ≥ 1): entry n of `schedule`
// (the last entry for every later attempt), jittered down by at most a tenth. See backoff.cpp.
int64_t schedule_delay(const int64_t* schedule, size_t count, int64_t attempt, uint32_t seed);

}  // namespace postbox
