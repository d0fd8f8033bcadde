// pb_claim op "pump": the continuous drain's next statement. A lane runs `concurrency` handler
// slots; jobs are claimed ahead into a buffer so a freed slot starts its next job without a
// round trip. One statement at a time carries every finished settlement plus, when the window
// has room, a claim. This decides, from the lane's counts, what that statement is and when.
//
//   batches    = lookahead in batches of `concurrency`: 1 until handlers have run; then 4, or
//                min(⌈16 / concurrency⌉, 40 ms / slowest recent handler) on a small lane, or
//                2 × ⌈statementMs / slowest recent handler⌉ when statements are slower (a far
//                database), at most 16; never more than keep a buffered job's wait, one
//                slowest-recent handler per batch ahead of it, inside the claim slack
//                (`slackMs`, the plan's smallest: margin − settle reserve, 20 s for spans of
//                30 s and more; 20 s when not given)
//   window     = concurrency × (1 + batches)
//   room       = window − running − buffered
//   claim when   claiming is allowed and (room ≥ min(concurrency × ⌈batches / 2⌉, maxBatch),
//                or a slot is idle with nothing buffered): claims stay large, and the next
//                claim leaves while ⌊batches / 2⌋ batches are still buffered, which covers a
//                statement that takes that many handler runs, so a freed slot never finds the
//                buffer empty while a claim is on its way
//   settle when  not claiming, and: claims are over and `concurrency` settlements wait, the
//                oldest has waited kSettleFlushMs (20 ms), or the lane is idle. While claims
//                go on, settlements ride on the next claim (within those 20 ms) rather than
//                cost a statement of their own
//   done when    nothing runs, nothing is buffered, nothing waits to be settled, and no flow
//                limit has paused claims (then: wait until they may resume, throttleWaitMs)
//   otherwise    wait for a handler to finish, or until the oldest settlement is due to go
//
// "Claiming allowed" is the shim's report of what earlier plans and claims said: the plan
// still has kinds that fit the deadline, the last claim came back full, and a job or target
// budget remains. A job that still waits too long is refused at admit (claim_late), uncharged.
#include <algorithm>

#include "postbox/claim_pump.h"
#include "postbox/flow_limits.h"
#include "postbox/families.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

int64_t lookahead_batches(const PumpInput& in) {
  if (!in.slowest_recent_ms) return 1;
  const int64_t slack = in.slack_ms.value_or(claim_slack_ms(kSettleMarginMs));
  const int64_t run_ms = std::max<int64_t>(*in.slowest_recent_ms, 1);
  int64_t want = kMinLookaheadBatches;
  const int64_t concurrency = std::max<int64_t>(in.concurrency, 1);
  want = std::max(want, std::min((kMinLookaheadJobs + concurrency - 1) / concurrency, kLookaheadFloorMs / run_ms));
  if (in.statement_ms) want = std::max(want, 2 * ((*in.statement_ms + run_ms - 1) / run_ms));
  return std::clamp<int64_t>(std::min(want, slack / run_ms), 1, kMaxLookaheadBatches);
}

PumpStep decide_pump(const PumpInput& given) {
  PumpInput in = given;
  if (in.max_batch == 0) in.max_batch = kDefaultPumpMaxBatch;
  if (in.max_jobs) {
    const int64_t left = *in.max_jobs > in.claimed ? *in.max_jobs - in.claimed : 0;
    in.remaining = in.remaining ? std::min(*in.remaining, left) : left;
  }
  const int64_t batches = lookahead_batches(in);
  const int64_t window = in.concurrency * (1 + batches);
  const int64_t room = std::max<int64_t>(0, window - in.running - in.buffered);
  const int64_t claim_at = std::min(in.concurrency * ((batches + 1) / 2), std::max<int64_t>(in.max_batch, 1));
  const bool idle_slot = in.running < in.concurrency && in.buffered == 0;
  PumpStep step;
  if (in.may_claim && room > 0 && (room >= claim_at || idle_slot)) {
    int64_t n = std::min(room, in.max_batch);
    if (in.remaining) n = std::min(n, *in.remaining);
    if (n > 0) {
      step.action = PumpAction::claim;
      step.claim = n;
      return step;
    }
  }
  const bool lane_idle = in.running == 0 && in.buffered == 0;
  const int64_t age = in.oldest_settle_age_ms.value_or(0);
  const bool batch_done = !in.may_claim && in.settles >= in.concurrency;
  if (in.settles > 0 && (batch_done || lane_idle || age >= kSettleFlushMs)) {
    step.action = PumpAction::settle;
  } else if (lane_idle && !in.throttle_wait_ms) {
    step.action = PumpAction::done;
  } else {
    step.action = PumpAction::wait;
    if (in.settles > 0) step.wait_ms = kSettleFlushMs - age;
    if (in.throttle_wait_ms) step.wait_ms = std::min(step.wait_ms.value_or(*in.throttle_wait_ms), std::max<int64_t>(*in.throttle_wait_ms, 0));
  }
  return step;
}

std::string_view pump_action_name(PumpAction action) {
  switch (action) {
    case PumpAction::claim: return "claim";
    case PumpAction::settle: return "settle";
    case PumpAction::wait: return "wait";
    case PumpAction::done: return "done";
  }
  return "done";
}

Status claim_pump(od::object& root, const Where& where, JsonWriter& out) {
  PumpInput in;
  bool has_concurrency = false, has_may_claim = false;
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "concurrency") {
      Result<int64_t> n = input::read_int(field, where, key, 1, kMaxPumpConcurrency);
      if (!n) return n.take_error();
      in.concurrency = n.value();
      has_concurrency = true;
    } else if (key == "running" || key == "buffered" || key == "settles" || key == "maxBatch") {
      Result<int64_t> n = input::read_int(field, where, key, 0, 1000000);
      if (!n) return n.take_error();
      (key == "running" ? in.running : key == "buffered" ? in.buffered : key == "settles" ? in.settles : in.max_batch) = n.value();
    } else if (key == "throttleWaitMs") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key, 0, kMaxThrottleWaitMs);
      if (!n) return n.take_error();
      in.throttle_wait_ms = n.value();
    } else if (key == "remaining" || key == "slowestRecentMs" || key == "oldestSettleAgeMs" || key == "slackMs" ||
               key == "statementMs") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key);
      if (!n) return n.take_error();
      (key == "remaining"         ? in.remaining
       : key == "slowestRecentMs" ? in.slowest_recent_ms
       : key == "slackMs"         ? in.slack_ms
       : key == "statementMs"     ? in.statement_ms
                                  : in.oldest_settle_age_ms) = n.value();
    } else if (key == "maxJobs" || key == "claimed") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key);
      if (!n) return n.take_error();
      if (key == "maxJobs") in.max_jobs = n.value();
      else in.claimed = n.value().value_or(0);
    } else if (key == "mayClaim") {
      Result<bool> b = input::read_bool(field, where, key);
      if (!b) return b.take_error();
      in.may_claim = b.value();
      has_may_claim = true;
    }
    return ok_status();
  });
  if (!status) return status;
  if (!has_concurrency) return input::missing(where, "concurrency");
  if (!has_may_claim) return input::missing(where, "mayClaim");
  const PumpStep step = decide_pump(in);
  out.begin_object();
  out.field("action", pump_action_name(step.action));
  out.field("claim", step.claim);
  out.field("waitMs", step.wait_ms);
  out.end_object();
  return ok_status();
}

}  // namespace postbox
