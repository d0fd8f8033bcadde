// The continuous drain's next statement (claim_pump.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "postbox/json_input.h"
#include "postbox/policy.h"

namespace postbox {

constexpr int64_t kMaxPumpConcurrency = 1000;
constexpr int64_t kDefaultPumpMaxBatch = 100;

struct PumpInput {
  int64_t concurrency = 1;          // handler slots of the lane
  int64_t running = 0;              // handlers running now
  int64_t buffered = 0;             // claimed, waiting for a slot
  int64_t settles = 0;              // finished attempts waiting to be written
  bool may_claim = false;           // the plan has kinds, the last claim came back full, budget left
  std::optional<int64_t> remaining; // jobs (or nudged targets) this drain may still claim
  int64_t max_batch = kDefaultPumpMaxBatch;  // most rows one claim statement returns
  std::optional<int64_t> slowest_recent_ms;  // the slowest of the lane's recent handler runs
  std::optional<int64_t> oldest_settle_age_ms;  // how long the oldest waiting settlement has waited
  std::optional<int64_t> slack_ms;  // the claim plan's smallest claim slack; null: 20 s
  std::optional<int64_t> statement_ms;  // the slowest of the lane's recent statements (real time)
  // A job budget (a reserved sweep's maxJobs) and what the sweep step has claimed so far, on
  // every lane it drained: the budget is the step's, not each lane's.
  std::optional<int64_t> max_jobs;
  int64_t claimed = 0;
  // Claims paused by a flow limit (claim op "throttle"): they may resume after this long. An
  // idle lane waits for it instead of being done.
  std::optional<int64_t> throttle_wait_ms;
};

// A finished attempt waits at most this long for others to share its statement, so a slow
// handler on the lane never keeps a fast one's settlement (and its lease) waiting.
constexpr int64_t kSettleFlushMs = 20;

// Batches of `concurrency` claimed ahead: at least kMinLookaheadBatches once handlers have run,
// more when statements take longer than handlers (twice the handler runs a statement takes, so
// the claim leaves with that many still buffered), never more than recent handlers say can wait
// their turn and still start inside a lease's claim slack, and at most kMaxLookaheadBatches.
constexpr int64_t kMinLookaheadBatches = 4;
constexpr int64_t kMaxLookaheadBatches = 16;
// A lane of few slots claims up to kMinLookaheadJobs ahead, as many batches as its recent
// handlers run in kLookaheadFloorMs: four batches of one slot made a statement per two jobs, and
// each statement costs the server far more than the rows it carries. Slow handlers gain nothing
// from fewer statements, so the floor shrinks with them and gives way to the four batches.
constexpr int64_t kMinLookaheadJobs = 16;
constexpr int64_t kLookaheadFloorMs = 40;
int64_t lookahead_batches(const PumpInput& in);

enum class PumpAction { claim, settle, wait, done };

struct PumpStep {
  PumpAction action = PumpAction::done;
  int64_t claim = 0;  // how many to claim when action is claim (settlements ride along)
  std::optional<int64_t> wait_ms;  // on wait: ask again after this long even if no handler ends
};

PumpStep decide_pump(const PumpInput& in);
std::string_view pump_action_name(PumpAction action);
Status claim_pump(input::od::object& root, const input::Where& where, JsonWriter& out);

}  // namespace postbox
