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
// A cron sweep's recovery of expired leases may take this long from the sweep's start, and is
// held back from the schedules that run before it.
constexpr int64_t kDefaultRecoveryBudgetMs = 120000;
// Leases. A lease covers a span of work S plus a margin M(S) = clamp(S, 6 s, 30 s). Of the
// margin, a third is the settle reserve R (what an attempt must leave on its lease to settle)
// and the rest the claim slack K (how long a claimed job may wait for a slot). S is the
// timeout, or with heartbeats every E ms min(timeout, 3E): each beat extends the lease to
// min(now + S, deadline) + R, so a crash is recovered about one window after the last beat.
constexpr int64_t kMinSettleMarginMs = 6000;
constexpr int64_t kSettleMarginMs = 30000;     // the largest margin: spans of 30 s and more
constexpr int64_t kSettleReserveMs = kSettleMarginMs / 3;
// Heartbeats: 1 s to 10 min apart; `heartbeat: true` beats every clamp(timeout / 10, 1 s, 10 s).
constexpr int64_t kMinHeartbeatMs = 1000;
constexpr int64_t kDefaultHeartbeatMaxMs = 10000;
constexpr int64_t kHeartbeatSpans = 3;          // a lease outlives two missed beats

inline int64_t settle_margin_ms(int64_t span_ms) {
  return span_ms < kMinSettleMarginMs ? kMinSettleMarginMs : span_ms > kSettleMarginMs ? kSettleMarginMs : span_ms;
}
inline int64_t settle_reserve_ms(int64_t span_ms) { return settle_margin_ms(span_ms) / 3; }
inline int64_t claim_slack_ms(int64_t span_ms) { return settle_margin_ms(span_ms) - settle_reserve_ms(span_ms); }
// The span one lease covers: the timeout, or with heartbeats min(timeout, 3 × heartbeat).
inline int64_t lease_span_ms(int64_t timeout_ms, std::optional<int64_t> heartbeat_ms) {
  return heartbeat_ms && kHeartbeatSpans * *heartbeat_ms < timeout_ms ? kHeartbeatSpans * *heartbeat_ms : timeout_ms;
}
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
  // Set when the kind heartbeats: its lease is a window of lease_span_ms() extended by beats.
  std::optional<int64_t> heartbeat_ms;
  // When set, replaces the doubling backoff: delay n is entry n (the last entry repeats).
  std::vector<int64_t> schedule_ms;
  std::vector<CodeRule> per_code;  // sorted by code, byte order
  // Flow limits (flow_limits.h): at most `concurrency` attempts at once across every consumer;
  // at most `rate_slots` starts in any window of `rate_hold_ms`; at most `tenant_concurrency`
  // attempts of one tenant at once.
  std::optional<int64_t> concurrency;
  std::optional<int64_t> rate_slots;
  int64_t rate_hold_ms = 0;
  std::optional<int64_t> tenant_concurrency;
  bool limited() const { return concurrency.has_value() || rate_slots.has_value() || tenant_concurrency.has_value(); }
  // The priority its jobs get when enqueued without one (priority.h); 0 when unset.
  std::optional<int64_t> priority;

  const CodeRule* rule_for(std::string_view code) const;
  int64_t span_ms() const { return lease_span_ms(timeout_ms, heartbeat_ms); }
  // The lease a whole attempt would need without heartbeats: timeout + M(timeout).
  int64_t attempt_lease_ms() const { return timeout_ms + settle_margin_ms(timeout_ms); }
};

// Reads a job definition (pb_policy's input) or an already normalised policy: both shapes are
// accepted, so normalising is idempotent. Errors carry the code invalid_policy.
Result<Policy> read_policy(input::od::object& obj, const input::Where& where);

// An array of normalised policies (pb_claim, pb_sweep); a kind listed twice is an error.
constexpr uint32_t kMaxPolicies = 1000;
Status read_policies(input::od::value& v, const input::Where& where, std::vector<Policy>& policies);

void write_policy(JsonWriter& out, const Policy& policy);

// The policy a kind gets from defaults alone (the longest timeout, default retry rules): what
// the sweep settles an expired attempt of a kind no job registers with.
Policy default_policy(std::string_view kind);

}  // namespace postbox
