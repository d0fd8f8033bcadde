#include <doctest/doctest.h>

#include <string>

#include "abi_call.h"
#include "postbox/priority.h"

using postbox::test::call;
using postbox::test::error_code_of;

TEST_CASE("priority: each level is worth a minute of waiting, so priority 10 is claimed as if due 10 minutes sooner") {
  CHECK(postbox::priority_boost_ms(0) == 0);
  CHECK(postbox::priority_boost_ms(1) == 60000);
  CHECK(postbox::priority_boost_ms(postbox::kMaxPriority) == 600000);
}

TEST_CASE("priority: an enqueue decision carries the boost, only for a job with a priority") {
  CHECK(call(pb_enqueue, R"({"now":1000,"payload":{},"priority":3})").out ==
        R"({"ok":true,"payloadBytes":2,"dueAt":1000,"boostMs":180000,"nudge":false,"delaySeconds":null})");
  CHECK(call(pb_enqueue, R"({"now":1000,"payload":{},"priority":0})").out ==
        R"({"ok":true,"payloadBytes":2,"dueAt":1000,"nudge":false,"delaySeconds":null})");
  auto batch = call(pb_enqueue, R"({"op":"batch","now":1000,"items":[{"payloadBytes":2,"priority":10},{"payloadBytes":2}]})");
  CHECK(batch.out.find(R"("boostMs":600000)") != std::string::npos);
  for (const char* bad : {R"("priority":11)", R"("priority":-1)", R"("priority":1.5)", R"("priority":"high")"}) {
    auto r = call(pb_enqueue, std::string(R"({"now":1000,"payload":{},)") + bad + "}");
    CHECK_MESSAGE(r.rc != 0, bad);
    CHECK_MESSAGE(error_code_of(r.out) == "invalid_input", bad);
  }
}

TEST_CASE("priority: a kind's default priority is part of its policy, 0-10") {
  auto r = call(pb_policy, R"({"kind":"k","timeoutMs":1000,"priority":7})");
  CHECK(r.out.find(R"("priority":7,)") != std::string::npos);
  CHECK(call(pb_policy, r.out).out == r.out);
  CHECK(call(pb_policy, R"({"kind":"k","timeoutMs":1000})").out.find("priority") == std::string::npos);
  CHECK(error_code_of(call(pb_policy, R"({"kind":"k","timeoutMs":1000,"priority":11})").out) == "invalid_policy");
}
