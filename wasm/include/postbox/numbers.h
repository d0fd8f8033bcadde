// The drain's per-job and per-event decisions (admit, pump, an ok settlement) with numbers in
// and out: the same rules as pb_claim's and pb_settle's JSON ops, without JSON either way
// (numbers.cpp; docs/ABI.md).
#pragma once

#include <cstdint>

namespace postbox {

// Where a numeric entry leaves its outputs; read them before the next numeric call.
double* numbers_out();

// pb_claim admit. Absent optional inputs are -1. Returns 1 start (outputs: deadline, timerMs,
// attempt, stopAt, heartbeatAt; -1 where absent), 2 released, 3 claim_late, 0 invalid input
// (the JSON op names the field).
int32_t admit_numbers(double now, double deadline_at, double lease_expires_at, double timeout_ms, double heartbeat_ms,
                      double attempts);

// pb_claim pump. Absent optional inputs are -1; mayClaim is 0 or 1. Returns 1 claim, 2 settle,
// 3 wait, 4 done (outputs: claim, waitMs or -1), 0 invalid input.
int32_t pump_numbers(double concurrency, double running, double buffered, double settles, double may_claim,
                     double remaining, double slowest_recent_ms, double oldest_settle_age_ms, double slack_ms,
                     double statement_ms, double max_batch, double max_jobs, double claimed);

// pb_settle for an `ok` outcome, the drain's common case, which reads no policy, code or text:
// the job's counters in (maxAttempts -1 when absent), the settlement out. Returns 1 (outputs:
// status as its index in kJobStatuses, dueAt or -1, attempts, crashes, streak, finished 0/1,
// charged 0/1, attempt), 0 for input the JSON op would refuse or a settlement that carries text.
int32_t settle_ok_numbers(double now, double attempts, double crashes, double streak, double max_attempts);

// The statuses a job row can hold, in the order settle_ok_numbers numbers them.
inline constexpr const char* kJobStatuses[] = {"pending", "running", "retrying", "succeeded", "dead", "cancelled", "waiting"};

}  // namespace postbox
