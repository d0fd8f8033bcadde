#include <doctest/doctest.h>

#include "abi_call.h"

using postbox::test::call;
using postbox::test::error_code_of;

namespace {

const char* kDefaults =
    R"({"kind":"email.welcome","lane":"default","timeoutMs":30000,"leaseMs":60000,"maxAttempts":20,)"
    R"("baseMs":30000,"maxMs":3600000,"maxCrashes":3,"warnAtStreak":null,"perCode":{)"
    R"("invalid_payload":{"streak":3,"maxAttempts":null,"maxDelayMs":null,"onExhaustion":"dead"},)"
    R"("timeout":{"streak":5,"maxAttempts":null,"maxDelayMs":null,"onExhaustion":"dead"}}})";

}  // namespace

TEST_CASE("policy: defaults fill every field, in the documented key order") {
  auto r = call(pb_policy, R"({"kind":"email.welcome","timeoutMs":30000})");
  CHECK(r.rc == 0);
  CHECK(r.out == kDefaults);
}

TEST_CASE("policy: the ABI example normalises with user perCode rules replacing defaults") {
  auto r = call(pb_policy,
                R"({"kind":"email.welcome","timeoutMs":30000,"lane":"mail","warnAtStreak":4,"retry":{"maxAttempts":25,)"
                R"("backoff":{"baseMs":1000,"maxMs":60000},"maxCrashes":5,"perCode":{"timeout":3,)"
                R"("rate_limited":{"maxAttempts":50,"maxDelayMs":600000},"bounced":{"streak":2,"onExhaustion":"cancel"}}}})");
  CHECK(r.rc == 0);
  CHECK(r.out ==
        R"({"kind":"email.welcome","lane":"mail","timeoutMs":30000,"leaseMs":60000,"maxAttempts":25,"baseMs":1000,)"
        R"("maxMs":60000,"maxCrashes":5,"warnAtStreak":4,"perCode":{)"
        R"("bounced":{"streak":2,"maxAttempts":null,"maxDelayMs":null,"onExhaustion":"cancel"},)"
        R"("invalid_payload":{"streak":3,"maxAttempts":null,"maxDelayMs":null,"onExhaustion":"dead"},)"
        R"("rate_limited":{"streak":null,"maxAttempts":50,"maxDelayMs":600000,"onExhaustion":"dead"},)"
        R"("timeout":{"streak":3,"maxAttempts":null,"maxDelayMs":null,"onExhaustion":"dead"}}})");
}

TEST_CASE("policy: normalising a normalised policy changes nothing") {
  auto first = call(pb_policy, R"({"kind":"k","timeoutMs":1,"retry":{"perCode":{"x":{"maxDelayMs":0}}}})");
  REQUIRE(first.rc == 0);
  auto second = call(pb_policy, first.out);
  CHECK(second.rc == 0);
  CHECK(second.out == first.out);
  CHECK(call(pb_policy, kDefaults).out == kDefaults);
}

TEST_CASE("policy: limits are inclusive") {
  CHECK(call(pb_policy, R"({"kind":"k","timeoutMs":600000})").rc == 0);
  CHECK(call(pb_policy, R"({"kind":"k","timeoutMs":1,"retry":{"maxAttempts":1000,"maxCrashes":100}})").rc == 0);
  CHECK(call(pb_policy, R"({"kind":"k","timeoutMs":1,"retry":{"backoff":{"baseMs":604800000,"maxMs":604800000}}})").rc == 0);
  CHECK(call(pb_policy, R"({"kind":"k","timeoutMs":1,"warnAtStreak":2})").rc == 0);
  CHECK(call(pb_policy, (R"({"kind":")" + std::string(128, 'a') + R"(","timeoutMs":1})")).rc == 0);
  CHECK(call(pb_policy, (R"({"kind":"k","lane":")" + std::string(64, 'b') + R"(","timeoutMs":1})")).rc == 0);
}

TEST_CASE("policy: invalid definitions name the field") {
  struct Row {
    const char* input;
    const char* message;
  };
  const Row rows[] = {
      {R"({"timeoutMs":1})", "policy: field 'kind' is required"},
      {R"({"kind":"k"})", "policy: field 'timeoutMs' is required"},
      {R"({"kind":"","timeoutMs":1})", "policy: field 'kind' must be 1-128 bytes of [A-Za-z0-9._:-]"},
      {R"({"kind":"a b","timeoutMs":1})", "policy: field 'kind' must be 1-128 bytes of [A-Za-z0-9._:-]"},
      {R"({"kind":"k","lane":"l/1","timeoutMs":1})", "policy: field 'lane' must be 1-64 bytes of [A-Za-z0-9._:-]"},
      {R"({"kind":"k","timeoutMs":0})", "policy: field 'timeoutMs' must be an integer in [1, 600000]"},
      {R"({"kind":"k","timeoutMs":600001})", "policy: field 'timeoutMs' must be an integer in [1, 600000]"},
      {R"({"kind":"k","timeoutMs":1.5})", "policy: field 'timeoutMs' must be an integer in [1, 600000]"},
      {R"({"kind":"k","timeoutMs":"30"})", "policy: field 'timeoutMs' must be an integer"},
      {R"({"kind":"k","timeoutMs":1,"retry":{"maxAttempts":0}})", "policy: field 'retry.maxAttempts' must be an integer in [1, 1000]"},
      {R"({"kind":"k","timeoutMs":1,"retry":{"maxCrashes":101}})", "policy: field 'retry.maxCrashes' must be an integer in [1, 100]"},
      {R"({"kind":"k","timeoutMs":1,"retry":{"backoff":{"maxMs":604800001}}})", "policy: field 'retry.backoff.maxMs' must be an integer in [0, 604800000]"},
      {R"({"kind":"k","timeoutMs":1,"retry":{"backoff":{"baseMs":10,"maxMs":9}}})", "policy: baseMs (10) must not exceed maxMs (9)"},
      {R"({"kind":"k","timeoutMs":1,"warnAtStreak":1})", "policy: field 'warnAtStreak' must be an integer in [2, 1000]"},
      {R"({"kind":"k","timeoutMs":1,"retry":{"perCode":{"x":0}}})", "policy: field 'retry.perCode.x' must be an integer in [1, 1000]"},
      {R"({"kind":"k","timeoutMs":1,"retry":{"perCode":{"x":{"streak":0}}}})", "policy: field 'retry.perCode.x.streak' must be an integer in [1, 1000]"},
      {R"({"kind":"k","timeoutMs":1,"retry":{"perCode":{"x":{"maxDelayMs":-1}}}})", "policy: field 'retry.perCode.x.maxDelayMs' must be an integer in [0, 604800000]"},
      {R"({"kind":"k","timeoutMs":1,"retry":{"perCode":{"x":{"onExhaustion":"drop"}}}})", "policy: field 'retry.perCode.x.onExhaustion' must be \\\"dead\\\" or \\\"cancel\\\""},
      {R"({"kind":"k","timeoutMs":1,"retry":{"perCode":{"x":"3"}}})", "policy: field 'retry.perCode.x' must be a number (a streak) or an object"},
      {R"({"kind":"k","timeoutMs":1,"retry":{"perCode":{"a b":3}}})", "policy: retry.perCode: code 'a b' must be 1-64 bytes of [A-Za-z0-9._:-]"},
      {R"({"kind":"k","timeoutMs":1,"retry":{"maxAttempt":3}})", "policy: field 'retry.maxAttempt' is not a known field"},
      {R"({"kind":"k","timeoutMs":1,"timeout":3})", "policy: field 'timeout' is not a known field"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.input);
    auto r = call(pb_policy, row.input);
    CHECK(r.rc == 1);
    CHECK(r.out == std::string(R"({"error":{"code":"invalid_policy","message":")") + row.message + "\"}}");
  }
}

TEST_CASE("policy: a non-object input is invalid_input, broken JSON is invalid_json") {
  CHECK(error_code_of(call(pb_policy, "[1]").out) == "invalid_input");
  CHECK(error_code_of(call(pb_policy, "{\"kind\":").out) == "invalid_json");
}
