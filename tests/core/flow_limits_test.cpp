#include <doctest/doctest.h>

#include <string>

#include "abi_call.h"
#include "postbox/flow_limits.h"

using postbox::test::call;
using postbox::test::error_code_of;

TEST_CASE("flow limits: a rate becomes burst slots, each held long enough that the rate is never exceeded") {
  // 20 starts a second, bursting to 5: 5 slots of 250 ms.
  auto r = postbox::rate_slots(20, 1000, 5);
  CHECK(r.slots == 5);
  CHECK(r.hold_ms == 250);
  // Without an exact quotient the hold rounds up (3 per 1 s: 334 ms, not 333).
  CHECK(postbox::rate_slots(3, 1000, 1).hold_ms == 334);
  // A burst above the rate holds each slot longer than the period.
  CHECK(postbox::rate_slots(1, 1000, 10).hold_ms == 10000);
}

TEST_CASE("flow limits: a policy carries them normalised, and normalising again changes nothing") {
  auto r = call(pb_policy, R"({"kind":"sms","timeoutMs":1000,"concurrency":5,"rateLimit":{"starts":20,"perMs":1000,"burst":5}})");
  REQUIRE(r.rc == 0);
  CHECK(r.out.find(R"("concurrency":5,"rateSlots":5,"rateHoldMs":250,)") != std::string::npos);
  CHECK(call(pb_policy, r.out).out == r.out);
  // Without a burst the period's whole allowance may start at once.
  CHECK(call(pb_policy, R"({"kind":"sms","timeoutMs":1000,"rateLimit":{"starts":10,"perMs":60000}})").out.find(
            R"("rateSlots":10,"rateHoldMs":60000,)") != std::string::npos);
  // No limits: the policy's bytes are as they were.
  CHECK(call(pb_policy, R"({"kind":"sms","timeoutMs":1000,"concurrency":null,"rateLimit":null})").out.find("concurrency") ==
        std::string::npos);
}

TEST_CASE("flow limits: bad limits are refused as invalid_policy, naming the field") {
  for (const char* bad : {R"("concurrency":0)", R"("concurrency":10001)", R"("concurrency":"5")", R"("rateLimit":{"starts":0,"perMs":1000})",
                          R"("rateLimit":{"starts":5})", R"("rateLimit":{"perMs":1000})", R"("rateLimit":{"starts":5,"perMs":0})",
                          R"("rateLimit":{"starts":5,"perMs":1000,"burst":0})", R"("rateLimit":{"starts":5,"perMs":1000,"every":1})",
                          R"("rateLimit":5)"}) {
    auto r = call(pb_policy, std::string(R"({"kind":"sms","timeoutMs":1000,)") + bad + "}");
    CHECK_MESSAGE(r.rc != 0, bad);
    CHECK_MESSAGE(error_code_of(r.out) == "invalid_policy", bad);
  }
  auto r = call(pb_policy, R"({"kind":"sms","timeoutMs":1000,"rateLimit":{"starts":5,"perMs":0}})");
  CHECK(r.out.find("rateLimit.perMs") != std::string::npos);
}

TEST_CASE("flow limits: the claim plan lists limited kinds only when there are any") {
  const std::string policies =
      R"([{"kind":"a","timeoutMs":1000},{"kind":"b","timeoutMs":1000,"concurrency":2},{"kind":"c","timeoutMs":1000,"rateLimit":{"starts":4,"perMs":1000}}])";
  auto r = call(pb_claim, R"({"op":"plan","now":0,"deadlineAt":100000,"lane":"default","concurrency":8,"policies":)" + policies + "}");
  REQUIRE(r.rc == 0);
  CHECK(r.out.find(R"("limits":{"kinds":["b","c"],"concurrency":[2,0],"rateSlots":[0,4],"rateHoldMs":[0,1000],"tenantConcurrency":[0,0]})") != std::string::npos);
  auto plain = call(pb_claim, R"({"op":"plan","now":0,"deadlineAt":100000,"lane":"default","concurrency":8,"policies":[{"kind":"a","timeoutMs":1000}]})");
  CHECK(plain.out.find("limits") == std::string::npos);
}

TEST_CASE("flow limits: a throttled drain asks again when a rate slot frees, or polls for concurrency, within bounds") {
  // The answer's retryAt (its kinds' reasons are checked below).
  auto throttle = [](const std::string& kinds, int64_t deadline = 100000) {
    const std::string out = call(pb_claim, R"({"op":"throttle","now":1000,"deadlineAt":)" + std::to_string(deadline) + R"(,"throttled":)" + kinds + "}").out;
    return out.substr(0, out.find(",\"resumeAfterSeconds\"")) + "}";
  };
  // A rate slot frees at 1250: ask then.
  CHECK(throttle(R"([{"kind":"c","retryAt":1250,"timeoutMs":1000}])") == R"({"retryAt":1250})");
  // Only concurrency in the way: poll.
  CHECK(throttle(R"([{"kind":"b","retryAt":null,"timeoutMs":1000}])") == R"({"retryAt":1100})");
  // The soonest of several; a time already past means now.
  CHECK(throttle(R"([{"kind":"c","retryAt":1250,"timeoutMs":1000},{"kind":"b","retryAt":null,"timeoutMs":1000}])") == R"({"retryAt":1100})");
  CHECK(throttle(R"([{"kind":"c","retryAt":900,"timeoutMs":1000}])") == R"({"retryAt":1000})");
  // Too far off (the next nudge or sweep takes it), or past the deadline: stop.
  CHECK(throttle(R"([{"kind":"c","retryAt":6001,"timeoutMs":1000}])") == R"({"retryAt":null})");
  CHECK(throttle(R"([{"kind":"c","retryAt":6000,"timeoutMs":1000}])") == R"({"retryAt":6000})");
  CHECK(throttle(R"([{"kind":"c","retryAt":1250,"timeoutMs":1000}])", 2249) == R"({"retryAt":null})");
  CHECK(throttle("[]") == R"({"retryAt":null})");
  // Held back without taking a job since 5050 (4950 ms ago): the poll at 1100 comes too late.
  CHECK(call(pb_claim, R"({"op":"throttle","now":10000,"deadlineAt":100000,"throttledSince":5050,"throttled":[{"kind":"b","retryAt":null,"timeoutMs":1000}]})").out ==
        R"({"retryAt":null,"resumeAfterSeconds":null,"kinds":[{"kind":"b","reason":"concurrency_limit"}]})");
  CHECK(call(pb_claim, R"({"op":"throttle","now":10000,"deadlineAt":100000,"throttledSince":5100,"throttled":[{"kind":"b","retryAt":null,"timeoutMs":1000}]})").out ==
        R"({"retryAt":10100,"resumeAfterSeconds":null,"kinds":[{"kind":"b","reason":"concurrency_limit"}]})");
  // A kind with a known release time waits for a rate slot.
  CHECK(call(pb_claim, R"({"op":"throttle","now":1000,"deadlineAt":100000,"throttled":[{"kind":"c","retryAt":1250,"timeoutMs":1000}]})").out ==
        R"({"retryAt":1250,"resumeAfterSeconds":null,"kinds":[{"kind":"c","reason":"rate_limit"}]})");
  auto bad = call(pb_claim, R"({"op":"throttle","now":1000,"deadlineAt":2000,"throttled":[{"kind":"c"}]})");
  CHECK(bad.rc != 0);
  CHECK(error_code_of(bad.out) == "invalid_input");
}

TEST_CASE("flow limits: a drain that stops behind a rate slot asks for its lane's drain message when the slot frees") {
  // At 10000, held back since `since` (10000: this claim; 4000: for 6 s, past the drain's 5 s wait).
  auto resume = [](const std::string& kinds, int64_t since = 10000, int64_t deadline = 100000) {
    const std::string out = call(pb_claim, R"({"op":"throttle","now":10000,"deadlineAt":)" + std::to_string(deadline) +
                                               R"(,"throttledSince":)" + std::to_string(since) + R"(,"throttled":)" + kinds + "}").out;
    const size_t from = out.find("\"resumeAfterSeconds\":") + 21;
    return out.substr(from, out.find(",\"kinds\"") - from);
  };
  // 2 per minute: the next slot a minute off is past the drain's 5 s wait; the message comes back in 60 s.
  CHECK(resume(R"([{"kind":"c","retryAt":70000,"timeoutMs":1000}])") == "60");
  // Whole seconds, rounded up, so the message never arrives before the slot frees.
  CHECK(resume(R"([{"kind":"c","retryAt":15001,"timeoutMs":1000}])") == "6");
  // The soonest of the rate slots, once the drain stopped polling for a kind held by concurrency.
  CHECK(resume(R"([{"kind":"c","retryAt":100000,"timeoutMs":1000},{"kind":"d","retryAt":40000,"timeoutMs":1000},{"kind":"b","retryAt":null,"timeoutMs":1000}])", 4000) == "30");
  // Held by concurrency or tenants' slots alone: they free in the drains that run those attempts.
  CHECK(resume(R"([{"kind":"b","retryAt":null,"timeoutMs":1000}])", 4000) == "null");
  CHECK(resume(R"([{"kind":"t","retryAt":10000,"timeoutMs":1000,"tenant":true}])", 4000) == "null");
  // Stopped by the deadline with a slot freeing in 250 ms: the next invocation, a second later.
  CHECK(resume(R"([{"kind":"c","retryAt":10250,"timeoutMs":1000}])", 10000, 11249) == "1");
  // At most a day, what a queue message's delay may be.
  CHECK(resume(R"([{"kind":"c","retryAt":900000000,"timeoutMs":1000}])") == "86400");
  // While the drain waits itself (or polls), no message.
  CHECK(resume(R"([{"kind":"c","retryAt":10250,"timeoutMs":1000}])") == "null");
  CHECK(resume(R"([{"kind":"c","retryAt":100000,"timeoutMs":1000},{"kind":"b","retryAt":null,"timeoutMs":1000}])") == "null");
}

TEST_CASE("flow limits: inspection counts the due jobs a kind's limits hold back now") {
  auto r = call(pb_backlog, R"({"op":"throttled","rows":[)"
                            R"({"due":10,"running":3,"concurrency":5,"rateSlots":0,"rateHeld":0},)"   // room 2
                            R"({"due":10,"running":0,"concurrency":0,"rateSlots":4,"rateHeld":4},)"   // no rate slot free
                            R"({"due":1,"running":9,"concurrency":5,"rateSlots":0,"rateHeld":0},)"    // over its limit (lowered by a deploy)
                            R"({"due":3,"running":0,"concurrency":5,"rateSlots":8,"rateHeld":1},)"    // room for all
                            R"({"due":7,"running":1,"concurrency":0,"rateSlots":0,"rateHeld":0}]})");  // no limits
  CHECK(r.out == R"({"throttled":[8,10,1,0,0]})");
  CHECK(error_code_of(call(pb_backlog, R"({"op":"throttled"})").out) == "invalid_input");
}

TEST_CASE("flow limits: a tenant's concurrency is normalised, planned, and bounded by the kind's") {
  auto r = call(pb_policy, R"({"kind":"sync","timeoutMs":1000,"concurrency":10,"tenantConcurrency":2})");
  REQUIRE(r.rc == 0);
  CHECK(r.out.find(R"("concurrency":10,"tenantConcurrency":2,)") != std::string::npos);
  CHECK(call(pb_policy, r.out).out == r.out);
  // A tenant limit alone makes the kind limited; a plan then says how many tenants a claim visits.
  auto plan = call(pb_claim, R"({"op":"plan","now":0,"deadlineAt":100000,"lane":"default","concurrency":8,"policies":[)"
                             R"({"kind":"a","timeoutMs":1000},{"kind":"t","timeoutMs":1000,"tenantConcurrency":3}]})");
  REQUIRE(plan.rc == 0);
  CHECK(plan.out.find(R"("limits":{"kinds":["t"],"concurrency":[0],"rateSlots":[0],"rateHoldMs":[0],"tenantConcurrency":[3],"tenantVisits":64})") !=
        std::string::npos);
  // Limited kinds without one plan 0, and no visits.
  auto kindOnly = call(pb_claim, R"({"op":"plan","now":0,"deadlineAt":100000,"lane":"default","concurrency":8,"policies":[{"kind":"b","timeoutMs":1000,"concurrency":2}]})");
  CHECK(kindOnly.out.find(R"("tenantConcurrency":[0]})") != std::string::npos);
  // More per tenant than the whole kind may run is a mistake, refused with both numbers.
  auto over = call(pb_policy, R"({"kind":"sync","timeoutMs":1000,"concurrency":2,"tenantConcurrency":3})");
  CHECK(error_code_of(over.out) == "invalid_policy");
  CHECK(over.out.find("tenantConcurrency (3) must not exceed concurrency (2)") != std::string::npos);
  for (const char* bad : {R"("tenantConcurrency":0)", R"("tenantConcurrency":10001)", R"("tenantConcurrency":"2")"}) {
    CHECK_MESSAGE(error_code_of(call(pb_policy, std::string(R"({"kind":"s","timeoutMs":1000,)") + bad + "}").out) == "invalid_policy", bad);
  }
}

TEST_CASE("flow limits: a kind held back by its tenants' limits says so, and polls like concurrency") {
  CHECK(call(pb_claim, R"({"op":"throttle","now":1000,"deadlineAt":100000,"throttled":[{"kind":"t","retryAt":null,"timeoutMs":1000,"tenant":true}]})").out ==
        R"({"retryAt":1100,"resumeAfterSeconds":null,"kinds":[{"kind":"t","reason":"tenant_concurrency_limit"}]})");
  // Slots just made for a tenant: claim again at once.
  CHECK(call(pb_claim, R"({"op":"throttle","now":1000,"deadlineAt":100000,"throttled":[{"kind":"t","retryAt":1000,"timeoutMs":1000,"tenant":true}]})").out ==
        R"({"retryAt":1000,"resumeAfterSeconds":null,"kinds":[{"kind":"t","reason":"tenant_concurrency_limit"}]})");
  CHECK(error_code_of(call(pb_claim, R"({"op":"throttle","now":1,"deadlineAt":2,"throttled":[{"kind":"t","timeoutMs":1,"tenant":1}]})").out) == "invalid_input");
}

TEST_CASE("flow limits: inspection holds back what does not fit in the tenants' room") {
  auto throttled = [](const std::string& row) { return call(pb_backlog, R"({"op":"throttled","rows":[)" + row + "]}").out; };
  // 10 due, room for 5 in the kind; tenants with limit 2: one with 6 due and 1 running fits 1,
  // one with 3 due fits 2, one with 1 due and 2 running (a limit lowered) fits none: 3 fit.
  CHECK(throttled(R"({"due":10,"running":3,"concurrency":8,"rateSlots":0,"rateHeld":0,"tenantConcurrency":2,"tenants":[[6,1],[3,0],[1,2]]})") ==
        R"({"throttled":[7]})");
  // The kind's own limit is the tighter one.
  CHECK(throttled(R"({"due":10,"running":4,"concurrency":5,"rateSlots":0,"rateHeld":0,"tenantConcurrency":2,"tenants":[[5,0],[5,0]]})") ==
        R"({"throttled":[9]})");
  // Without tenants listed, the tenant limit is not applied.
  CHECK(throttled(R"({"due":4,"running":0,"concurrency":0,"rateSlots":0,"rateHeld":0,"tenantConcurrency":1})") == R"({"throttled":[0]})");
  CHECK(error_code_of(throttled(R"({"due":4,"tenantConcurrency":1,"tenants":[[1]]})")) == "invalid_input");
  CHECK(error_code_of(throttled(R"({"due":4,"tenants":[[1,0]],"tenantConcurrency":1})")) == "invalid_input");
}
