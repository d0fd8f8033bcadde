// A job kind's normalised policy: timeout, lease, lane and retry rules with defaults applied.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "postbox/json_input.h"
#include "postbox/json_writer.h"
#include "postbox/result.h"

namespace postbox {

constexpr int64_t kMaxTimeoutMs = 600000;      // 10 minutes
// One queue or cron invocation: Cloudflare allows 15 minutes of wall time; the default keeps
// a minute of it for closing connections and returning.
constexpr int64_t kDefaultInvocationBudgetMs = 840000;
constexpr int64_t kMaxInvocationBudgetMs = 900000;
constexpr int64_t kSettleMarginMs = 30000;     // lease = timeout + margin
// Of that margin, the part an attempt must leave on its lease to settle; the rest (20 s)
// absorbs the time between taking the lease and starting the handler.
constexpr int64_t kSettleReserveMs = 10000;
constexpr int64_t kMaxBackoffMs = 604800000;   // 7 days
constexpr uint32_t kMaxPerCodeRules = 64;
// An explicit retry schedule (backoff.scheduleMs) has at most this many entries.
constexpr uint32_t kMaxScheduleEntries = 32;
// The longest delay any input may ask for (retry `after`, enqueue `delayMs`): 10 × 365 days.
constexpr int64_t kMaxDelayMs = 315360000000;

struct CodeRule {
  std::string code;
  std::optional<int64_t> streak;
  std::optional<int64_t> max_attempts;
  std::optional<int64_t> max_delay_ms;
  bool cancel_on_exhaustion = false;
};

struct Policy {
  std::string kind;
  std::string lane = "default";
  int64_t timeout_ms = 0;
  int64_t lease_ms = 0;
  int64_t max_attempts = 20;
  int64_t base_ms = 30000;
  int64_t max_ms = 3600000;
  int64_t max_crashes = 3;
  std::optional<int64_t> warn_at_streak;
  // When set, replaces the doubling backoff: delay n is entry n (the last entry repeats).
  std::vector<int64_t> schedule_ms;
  std::vector<CodeRule> per_code;  // sorted by code, byte order

  const CodeRule* rule_for(std::string_view code) const;
};

// Reads a job definition (pb_policy's input) or an already normalised policy: both shapes are
// accepted, so normalising is idempotent. Errors carry the code invalid_policy.
Result<Policy> read_policy(input::od::object& obj, const input::Where& where);

// An array of normalised policies (pb_claim, pb_sweep); a kind listed twice is an error.
constexpr uint32_t kMaxPolicies = 1000;
Status read_policies(input::od::value& v, const input::Where& where, std::vector<Policy>& policies);

void write_policy(JsonWriter& out, const Policy& policy);

}  // namespace postbox
