#include <doctest/doctest.h>

#include "abi_call.h"
#include "postbox/claim_pump.h"

using postbox::PumpAction;
using postbox::PumpInput;
using postbox::decide_pump;

namespace {

PumpInput lane(int64_t concurrency, int64_t running, int64_t buffered, int64_t settles, bool may_claim) {
  PumpInput in;
  in.concurrency = concurrency;
  in.running = running;
  in.buffered = buffered;
  in.settles = settles;
  in.may_claim = may_claim;
  return in;
}

}  // namespace

TEST_CASE("pump: an empty lane claims a window: its slots plus one batch ahead") {
  const auto step = decide_pump(lane(8, 0, 0, 0, true));
  CHECK(step.action == PumpAction::claim);
  CHECK(step.claim == 16);
  CHECK(decide_pump(lane(1, 0, 0, 0, true)).claim == 2);
}

TEST_CASE("pump: at concurrency 1 the next job is claimed while the current one runs") {
  const auto step = decide_pump(lane(1, 1, 0, 0, true));
  CHECK(step.action == PumpAction::claim);
  CHECK(step.claim == 1);
  // One running and one buffered fills the window: wait for the handler.
  CHECK(decide_pump(lane(1, 1, 1, 0, true)).action == PumpAction::wait);
}

TEST_CASE("pump: claims wait until a batch's worth of room, so statements stay few") {
  // 8 running, 8 buffered: full. 8 running, 3 buffered: room 5 < 8, and no slot idles.
  CHECK(decide_pump(lane(8, 8, 8, 0, true)).action == PumpAction::wait);
  CHECK(decide_pump(lane(8, 8, 3, 5, true)).action == PumpAction::wait);
  // Room for a batch: claim it (the 8 settlements ride along).
  const auto step = decide_pump(lane(8, 8, 0, 8, true));
  CHECK(step.action == PumpAction::claim);
  CHECK(step.claim == 8);
}

TEST_CASE("pump: an idle slot with nothing buffered claims whatever room there is") {
  const auto step = decide_pump(lane(8, 7, 0, 1, true));
  CHECK(step.action == PumpAction::claim);
  CHECK(step.claim == 9);
}

TEST_CASE("pump: a claim never exceeds the batch cap or the remaining budget") {
  PumpInput in = lane(100, 0, 0, 0, true);
  CHECK(decide_pump(in).claim == 100);
  in.max_batch = 30;
  CHECK(decide_pump(in).claim == 30);
  in.remaining = 4;
  CHECK(decide_pump(in).claim == 4);
  in.remaining = 0;
  CHECK(decide_pump(in).action == PumpAction::done);
}

TEST_CASE("pump: without claims, settlements go out in batches, and all of them once the lane is idle") {
  CHECK(decide_pump(lane(8, 5, 0, 3, false)).action == PumpAction::wait);
  CHECK(decide_pump(lane(8, 5, 0, 8, false)).action == PumpAction::settle);
  CHECK(decide_pump(lane(8, 0, 0, 3, false)).action == PumpAction::settle);
  CHECK(decide_pump(lane(8, 0, 0, 0, false)).action == PumpAction::done);
  // Buffered jobs still to start keep the lane going.
  CHECK(decide_pump(lane(8, 0, 2, 0, false)).action == PumpAction::wait);
}

TEST_CASE("pump: through pb_claim") {
  using postbox::test::call;
  auto r = call(pb_claim, R"({"op":"pump","concurrency":8,"running":8,"buffered":0,"settles":8,"mayClaim":true,"remaining":null})");
  CHECK(r.rc == 0);
  CHECK(r.out == R"({"action":"claim","claim":8,"waitMs":null})");
  r = call(pb_claim, R"({"op":"pump","concurrency":8,"running":0,"buffered":0,"settles":0,"mayClaim":false})");
  CHECK(r.out == R"({"action":"done","claim":0,"waitMs":null})");
  r = call(pb_claim, R"({"op":"pump","concurrency":0,"mayClaim":true})");
  CHECK(r.rc == 1);
  r = call(pb_claim, R"({"op":"pump","concurrency":2})");
  CHECK(r.rc == 1);
  CHECK(r.out.find("mayClaim") != std::string::npos);
}

TEST_CASE("pump: the lookahead grows with fast handlers, up to four batches, and shrinks with slow ones") {
  PumpInput in = lane(8, 0, 0, 0, true);
  CHECK(postbox::lookahead_batches(in) == 1);  // nothing has run yet
  in.slowest_recent_ms = 2;
  CHECK(postbox::lookahead_batches(in) == 4);
  in.slowest_recent_ms = 6000;  // three batches of 6 s handlers fit the 20 s slack
  CHECK(postbox::lookahead_batches(in) == 3);
  in.slowest_recent_ms = 10000;
  CHECK(postbox::lookahead_batches(in) == 2);
  in.slowest_recent_ms = 15000;
  CHECK(postbox::lookahead_batches(in) == 1);
  in.slowest_recent_ms = 600000;
  CHECK(postbox::lookahead_batches(in) == 1);
  in.slowest_recent_ms = 0;
  CHECK(postbox::lookahead_batches(in) == 4);
}

TEST_CASE("pump: a lane of few slots claims sixteen fast jobs ahead, so statements carry several jobs each") {
  PumpInput in = lane(1, 0, 0, 0, true);
  in.slowest_recent_ms = 2;
  CHECK(postbox::lookahead_batches(in) == 16);
  CHECK(decide_pump(in).claim == 17);  // window 1 × 17
  // The next claim waits for eight jobs of room: one statement per eight jobs, not per two.
  in.running = 1;
  in.buffered = 9;  // room 7
  CHECK(decide_pump(in).action == PumpAction::wait);
  in.buffered = 8;
  CHECK(decide_pump(in).claim == 8);
  in.concurrency = 2;
  CHECK(postbox::lookahead_batches(in) == 8);
  in.concurrency = 4;  // the floor meets the four batches every lane gets
  CHECK(postbox::lookahead_batches(in) == 4);
  // Slower handlers: only as many jobs ahead as run in 40 ms, never under four batches.
  in.concurrency = 1;
  in.slowest_recent_ms = 5;
  CHECK(postbox::lookahead_batches(in) == 8);
  in.slowest_recent_ms = 20;
  CHECK(postbox::lookahead_batches(in) == 4);
  in.slowest_recent_ms = 6000;
  CHECK(postbox::lookahead_batches(in) == 3);
}

TEST_CASE("pump: with four batches ahead, the next claim leaves while two batches are still buffered") {
  // Two batches of buffered work cover a claim statement that takes up to two handler runs, so
  // a slot that frees never finds the buffer empty while the claim is on its way.
  PumpInput in = lane(8, 0, 0, 0, true);
  in.slowest_recent_ms = 2;
  CHECK(decide_pump(in).claim == 40);  // window 8 × 5
  in.running = 8;
  in.buffered = 20;  // room 12 < 16
  CHECK(decide_pump(in).action == PumpAction::wait);
  in.buffered = 16;  // room 16
  const auto step = decide_pump(in);
  CHECK(step.action == PumpAction::claim);
  CHECK(step.claim == 16);
}

TEST_CASE("pump: with three batches ahead (slower handlers), claims wait for two batches of room") {
  PumpInput in = lane(8, 0, 0, 0, true);
  in.slowest_recent_ms = 6000;
  CHECK(decide_pump(in).claim == 32);  // window 8 × 4
  in.running = 8;
  in.buffered = 12;  // room 12 < 16
  CHECK(decide_pump(in).action == PumpAction::wait);
  in.buffered = 8;
  CHECK(decide_pump(in).claim == 16);
}

TEST_CASE("pump: a settlement waits at most 20 ms for company, whatever else runs") {
  PumpInput in = lane(8, 5, 0, 2, false);
  in.oldest_settle_age_ms = 3;
  auto step = decide_pump(in);
  CHECK(step.action == PumpAction::wait);
  REQUIRE(step.wait_ms.has_value());
  CHECK(*step.wait_ms == 17);
  in.oldest_settle_age_ms = 20;
  CHECK(decide_pump(in).action == PumpAction::settle);
  // Nothing to settle: wait for a handler, no timer.
  in.settles = 0;
  in.oldest_settle_age_ms.reset();
  CHECK(!decide_pump(in).wait_ms.has_value());
}

TEST_CASE("pump: while claims go on, settlements wait (up to 20 ms) to ride on the next claim") {
  PumpInput in = lane(8, 8, 10, 8, true);  // room 6: below a batch, no claim yet
  in.oldest_settle_age_ms = 5;
  auto step = decide_pump(in);
  CHECK(step.action == PumpAction::wait);
  CHECK(step.wait_ms == std::optional<int64_t>(15));
  in.oldest_settle_age_ms = 20;
  CHECK(decide_pump(in).action == PumpAction::settle);
  // Claims over: a batch of settlements goes at once.
  in.may_claim = false;
  in.oldest_settle_age_ms = 1;
  CHECK(decide_pump(in).action == PumpAction::settle);
}

TEST_CASE("pump: statements slower than handlers (a far database) widen the lookahead to cover them") {
  PumpInput in = lane(8, 0, 0, 0, true);
  in.slowest_recent_ms = 2;
  in.statement_ms = 3;  // two handler runs: the minimum four batches already cover it
  CHECK(postbox::lookahead_batches(in) == 4);
  in.statement_ms = 5;  // three runs: six batches, so three are still buffered when a claim leaves
  CHECK(postbox::lookahead_batches(in) == 6);
  in.statement_ms = 12;
  CHECK(postbox::lookahead_batches(in) == 12);
  in.statement_ms = 1000;  // capped
  CHECK(postbox::lookahead_batches(in) == 16);
  // The claim slack still bounds it: 1.5 s handlers and 4 s of slack allow two batches.
  in.slowest_recent_ms = 1500;
  in.slack_ms = 4000;
  in.statement_ms = 30000;
  CHECK(postbox::lookahead_batches(in) == 2);
}

TEST_CASE("pump: a claim waits for no more room than one statement can take (maxBatch)") {
  PumpInput in = lane(32, 32, 0, 0, true);
  in.slowest_recent_ms = 2;
  in.statement_ms = 12;  // 12 batches: window 32 × 13 = 416, half the lookahead is 192 rows
  in.max_batch = 100;
  in.buffered = 300;     // room 84 < 100
  CHECK(decide_pump(in).action == PumpAction::wait);
  in.buffered = 284;     // room 100
  const auto step = decide_pump(in);
  CHECK(step.action == PumpAction::claim);
  CHECK(step.claim == 100);
}

TEST_CASE("pump: a step's job budget counts what the step claimed on every lane") {
  using postbox::test::call;
  // maxJobs 10 with 7 claimed (say, on an earlier lane): 3 left, whatever the window.
  CHECK(call(pb_claim, R"({"op":"pump","concurrency":8,"mayClaim":true,"maxJobs":10,"claimed":7})").out ==
        R"({"action":"claim","claim":3,"waitMs":null})");
  CHECK(call(pb_claim, R"({"op":"pump","concurrency":8,"mayClaim":true,"maxJobs":10,"claimed":10})").out ==
        R"({"action":"done","claim":0,"waitMs":null})");
  CHECK(call(pb_claim, R"({"op":"pump","concurrency":8,"mayClaim":true,"maxJobs":10,"claimed":12})").out ==
        R"({"action":"done","claim":0,"waitMs":null})");
  // Both a remaining count and a budget: the smaller wins.
  CHECK(call(pb_claim, R"({"op":"pump","concurrency":8,"mayClaim":true,"remaining":2,"maxJobs":10})").out ==
        R"({"action":"claim","claim":2,"waitMs":null})");
}

TEST_CASE("pump: claims paused by a flow limit keep an idle lane waiting for them, not done") {
  PumpInput in = lane(8, 0, 0, 0, false);
  CHECK(decide_pump(in).action == PumpAction::done);
  in.throttle_wait_ms = 250;
  auto step = decide_pump(in);
  CHECK(step.action == PumpAction::wait);
  CHECK(step.wait_ms == 250);
  // Settlements still go first; with handlers running, the sooner of the two waits.
  in.settles = 1;
  CHECK(decide_pump(in).action == PumpAction::settle);
  in = lane(8, 2, 0, 1, false);
  in.oldest_settle_age_ms = 5;
  in.throttle_wait_ms = 100;
  step = decide_pump(in);
  CHECK(step.action == PumpAction::wait);
  CHECK(step.wait_ms == 15);
  in.throttle_wait_ms = 3;
  CHECK(decide_pump(in).wait_ms == 3);
  // Once the wait is over the shim reports claiming allowed again, and the lane claims.
  in = lane(8, 0, 0, 0, true);
  in.throttle_wait_ms = 0;
  CHECK(decide_pump(in).action == PumpAction::claim);
}
