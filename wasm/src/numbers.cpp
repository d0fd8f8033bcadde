// Numeric forms of admit, pump and an ok settlement, for the drain's hot path: one call per
// started job, one per handler that ends, one per job that succeeded. They read the same fields
// with the same bounds as the JSON ops, run the same decision functions, and refuse what the
// JSON op would refuse (the shim then asks the JSON op, which says why), so the forms never disagree.
#include "postbox/numbers.h"

#include <iterator>
#include <optional>

#include "postbox/admit.h"
#include "postbox/claim_pump.h"
#include "postbox/json_input.h"
#include "postbox/policy.h"
#include "postbox/settle.h"

namespace postbox {
namespace {

double g_out[8];

// A whole number in [lo, hi] (wasm passes f64). NaN and fractions fail the checks.
bool whole(double v, int64_t lo, int64_t hi, int64_t& out) {
  if (!(v >= static_cast<double>(lo) && v <= static_cast<double>(hi))) return false;
  const auto n = static_cast<int64_t>(v);
  if (static_cast<double>(n) != v) return false;
  out = n;
  return true;
}

// -1 is absent (null); anything else must be a whole number in [lo, hi].
bool maybe_whole(double v, int64_t lo, int64_t hi, std::optional<int64_t>& out) {
  if (v == -1) {
    out.reset();
    return true;
  }
  int64_t n = 0;
  if (!whole(v, lo, hi, n)) return false;
  out = n;
  return true;
}

double or_absent(const std::optional<int64_t>& v) { return v ? static_cast<double>(*v) : -1; }

}  // namespace

double* numbers_out() { return g_out; }

int32_t admit_numbers(double now, double deadline_at, double lease_expires_at, double timeout_ms, double heartbeat_ms,
                      double attempts) {
  LeaseInput in;
  if (!whole(now, 0, input::kMaxSafeInteger, in.now) || !whole(deadline_at, 0, input::kMaxSafeInteger, in.deadline_at) ||
      !whole(lease_expires_at, 0, input::kMaxSafeInteger, in.lease_expires_at) ||
      !whole(timeout_ms, 1, kMaxTimeoutMs, in.timeout_ms) ||
      !maybe_whole(heartbeat_ms, kMinHeartbeatMs, kMaxTimeoutMs, in.heartbeat_ms) ||
      !maybe_whole(attempts, 0, input::kMaxSafeInteger, in.attempts)) {
    return 0;
  }
  const AdmitDecision d = decide_admit(in);
  if (!d.start) return d.reason == "released" ? 2 : 3;
  g_out[0] = static_cast<double>(d.deadline);
  g_out[1] = static_cast<double>(d.timer_ms);
  g_out[2] = or_absent(d.attempt);
  g_out[3] = d.heartbeats ? static_cast<double>(d.stop_at) : -1;
  g_out[4] = or_absent(d.heartbeat_at);
  return 1;
}

int32_t pump_numbers(double concurrency, double running, double buffered, double settles, double may_claim,
                     double remaining, double slowest_recent_ms, double oldest_settle_age_ms, double slack_ms,
                     double statement_ms, double max_batch, double max_jobs, double claimed) {
  constexpr int64_t kSafe = input::kMaxSafeInteger;
  PumpInput in;
  int64_t flag = 0;
  std::optional<int64_t> batch, done;
  if (!whole(concurrency, 1, kMaxPumpConcurrency, in.concurrency) || !whole(running, 0, 1000000, in.running) ||
      !whole(buffered, 0, 1000000, in.buffered) || !whole(settles, 0, 1000000, in.settles) ||
      !whole(may_claim, 0, 1, flag) || !maybe_whole(remaining, 0, kSafe, in.remaining) ||
      !maybe_whole(slowest_recent_ms, 0, kSafe, in.slowest_recent_ms) ||
      !maybe_whole(oldest_settle_age_ms, 0, kSafe, in.oldest_settle_age_ms) || !maybe_whole(slack_ms, 0, kSafe, in.slack_ms) ||
      !maybe_whole(statement_ms, 0, kSafe, in.statement_ms) || !maybe_whole(max_batch, 0, 1000000, batch) ||
      !maybe_whole(max_jobs, 0, kSafe, in.max_jobs) || !maybe_whole(claimed, 0, kSafe, done)) {
    return 0;
  }
  in.may_claim = flag == 1;
  in.max_batch = batch.value_or(0);  // 0 or absent: the default, as in the JSON op
  in.claimed = done.value_or(0);
  const PumpStep step = decide_pump(in);
  g_out[0] = static_cast<double>(step.claim);
  g_out[1] = or_absent(step.wait_ms);
  switch (step.action) {
    case PumpAction::claim: return 1;
    case PumpAction::settle: return 2;
    case PumpAction::wait: return 3;
    case PumpAction::done: return 4;
  }
  return 4;
}

int32_t settle_ok_numbers(double now, double attempts, double crashes, double streak, double max_attempts) {
  // The JSON op's bounds for the same fields (settle.cpp, read_settle and read_job).
  SettleInput in;
  in.outcome.type = OutcomeType::ok;
  if (!whole(now, 0, input::kMaxSafeInteger, in.now) || !whole(attempts, 0, 1000000, in.job.attempts) ||
      !whole(crashes, 0, 1000000, in.job.crashes) || !whole(streak, 0, 1000000, in.job.streak) ||
      !maybe_whole(max_attempts, 1, 1000, in.job.max_attempts)) {
    return 0;
  }
  const Settlement s = settle(in);
  if (s.streak_code || s.error_code || s.error_message || !s.events.empty()) return 0;
  int32_t status = -1;
  for (int32_t i = 0; i < static_cast<int32_t>(std::size(kJobStatuses)); ++i) {
    if (s.status == kJobStatuses[i]) status = i;
  }
  if (status < 0) return 0;
  g_out[0] = status;
  g_out[1] = or_absent(s.due_at);
  g_out[2] = static_cast<double>(s.attempts);
  g_out[3] = static_cast<double>(s.crashes);
  g_out[4] = static_cast<double>(s.streak);
  g_out[5] = s.finished ? 1 : 0;
  g_out[6] = s.charged ? 1 : 0;
  g_out[7] = static_cast<double>(s.attempt);
  return 1;
}

}  // namespace postbox
