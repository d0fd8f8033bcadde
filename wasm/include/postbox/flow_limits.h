// Flow limits of a job kind (flow_limits.cpp): how many of its attempts may run at once across
// every consumer, and how many may start in a window. Both are enforced by the claim statement
// through slot rows: a claim takes a free slot per job, so the limits hold across isolates.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "postbox/json_input.h"
#include "postbox/result.h"

namespace postbox {

struct Policy;

constexpr int64_t kMaxFlowSlots = 10000;
constexpr int64_t kMaxRatePeriodMs = 86400000;  // one day
// The most tenants inspection's backlog op is told of per kind.
constexpr uint32_t kMaxBacklogTenants = 100000;

// How long a drain waits for a throttled kind before asking again when no slot says when it
// frees (a concurrency slot frees when another consumer settles), and the longest wait a drain
// sits through at all: longer, it stops and leaves the work to the next nudge or sweep.
constexpr int64_t kThrottlePollMs = 100;
constexpr int64_t kMaxThrottleWaitMs = 5000;
// The longest delay a lane's drain message may carry (Queues accept up to 24 h): a rate slot that
// frees later is reached by a drain that stops early and sends another.
constexpr int64_t kMaxResumeDelaySeconds = 86400;

// Reads a flow-limit field of a definition (`concurrency`, `rateLimit: {starts, perMs, burst}`)
// or of a normalised policy (`concurrency`, `rateSlots`, `rateHoldMs`). Returns false when
// `key` is none of them.
bool read_flow_field(std::string_view key, input::od::value& field, const input::Where& where, Policy& policy, Status& status);

// A rate of `starts` per `per_ms`, bursting to `burst`, as slots: `burst` slots, each held for
// ceil(burst × per_ms / starts) ms after a start. No window of that length sees more than
// `burst` starts, so the long-run rate never exceeds starts/per_ms.
struct RateSlots {
  int64_t slots = 0;
  int64_t hold_ms = 0;
};
RateSlots rate_slots(int64_t starts, int64_t per_ms, int64_t burst);

// A claim left due jobs of limited kinds behind (their slots were all held). `retry_at` is when
// a held rate slot frees, if known. The drain asks again at the soonest such time, or after
// kThrottlePollMs when only concurrency slots are in the way (a handler of its own ending asks
// at once). It stops (nullopt) once its claims have been held back for kMaxThrottleWaitMs
// without taking a job (`throttled_since`: the first such claim), when the next try would
// come later than that, or when the kind's attempt would no longer fit before the deadline.
// `tenant`: the kind had room, but each tenant with due jobs of it ran its `tenantConcurrency`.
struct ThrottledKind {
  std::string_view kind;
  std::optional<int64_t> retry_at;
  int64_t timeout_ms = 0;
  bool tenant = false;
};

// Why a throttled kind waits, as the claim op answers it.
std::string_view throttle_reason(const ThrottledKind& kind);
std::optional<int64_t> throttle_retry_at(int64_t now, int64_t deadline_at, int64_t throttled_since, const ThrottledKind* kinds,
                                         size_t count);
// A drain that stops claiming (throttle_retry_at gave nullopt) while a rate slot holds jobs back
// must not leave them to the next nudge or cron tick: its lane gets a drain message delayed until
// the soonest rate slot frees, in whole seconds (at least 1, at most kMaxResumeDelaySeconds).
// nullopt when no rate slot is in the way.
std::optional<int64_t> throttle_resume_after_seconds(int64_t now, const ThrottledKind* kinds, size_t count);

}  // namespace postbox
