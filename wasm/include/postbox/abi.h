// The exported entries (docs/ABI.md). Natively they are plain extern "C" functions, which the
// doctest suite calls directly; the wasm builds export them by name.
#pragma once

#include <cstdint>

#include "postbox/family_list.h"

namespace postbox {
// Inputs above this many bytes get `too_large` before any parsing: 1 MiB of document plus
// the largest payload cap pb_enqueue accepts (kMaxPayloadCapBytes).
constexpr int32_t kMaxInputBytes = 2 * 1024 * 1024;
constexpr int32_t kAbiVersion = 2;
}  // namespace postbox

extern "C" {
int32_t pb_abi_version();
void* pb_alloc(int32_t len);
void pb_free(void* ptr);
const char* pb_result_ptr();
int32_t pb_result_len();
// pb_policy, pb_settle, …: one JSON entry per family of family_list.h.
#define POSTBOX_DECLARE_ENTRY(name) int32_t pb_##name(const char* ptr, int32_t len);
POSTBOX_FAMILIES(POSTBOX_DECLARE_ENTRY)
#undef POSTBOX_DECLARE_ENTRY
double* pb_numbers_out();
int32_t pb_admit_numbers(double now, double deadline_at, double lease_expires_at, double timeout_ms, double heartbeat_ms,
                         double attempts);
int32_t pb_pump_numbers(double concurrency, double running, double buffered, double settles, double may_claim,
                        double remaining, double slowest_recent_ms, double oldest_settle_age_ms, double slack_ms,
                        double statement_ms, double max_batch, double max_jobs, double claimed);
int32_t pb_settle_ok_numbers(double now, double attempts, double crashes, double streak, double max_attempts);
}
