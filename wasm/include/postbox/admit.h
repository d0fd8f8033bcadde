// Whether a claimed job may start now, and the numbers of its attempt (claim.cpp `admit`, and
// the numeric entry numbers.cpp gives the drain's hot path).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace postbox {

// The numbers an attempt's lease is judged by: admit and heartbeat read the same fields.
struct LeaseInput {
  int64_t now = 0;
  int64_t deadline_at = 0;       // admit: the invocation's deadline
  int64_t deadline = 0;          // heartbeat: the attempt's own (admit's `deadline`)
  int64_t lease_expires_at = 0;
  int64_t timeout_ms = 0;
  std::optional<int64_t> heartbeat_ms;
  std::optional<int64_t> attempts;  // admit: charged attempts before this one
};

struct AdmitDecision {
  bool start = false;
  std::string_view reason;  // not started: "released" or "claim_late"
  int64_t deadline = 0;     // started: when the attempt's time is up (the outbox's clock)
  int64_t timer_ms = 0;     // started: the handler's timer, in real time
  std::optional<int64_t> attempt;  // started, when `attempts` was given: the number to show
  bool heartbeats = false;  // started with heartbeats: stop_at and heartbeat_at apply
  int64_t stop_at = 0;
  std::optional<int64_t> heartbeat_at;
};

AdmitDecision decide_admit(const LeaseInput& in);

}  // namespace postbox
