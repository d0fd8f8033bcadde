#include <doctest/doctest.h>

#include <string>

#include "abi_call.h"
#include "postbox/fair_share.h"

using postbox::test::call;
using postbox::test::error_code_of;

namespace {

std::string plan(const std::string& extra) {
  return R"({"op":"plan","now":0,"deadlineAt":100000,"lane":"default","concurrency":8,"maxBatch":100,"policies":[{"kind":"a","timeoutMs":1000}])" +
         extra + "}";
}

}  // namespace

TEST_CASE("fair share: each visited tenant's share is the limit split evenly, rounded up, never 0") {
  CHECK(postbox::fair_quota(16, 2) == 8);
  CHECK(postbox::fair_quota(16, 3) == 6);  // 18 offered, the claim keeps the first 16 by round
  CHECK(postbox::fair_quota(16, 40) == 1);
  CHECK(postbox::fair_quota(16, 1) == 16);
  CHECK(postbox::fair_quota(16, 0) == 16);  // no tenant visited: the lane's order fills it all
}

TEST_CASE("fair share: the plan names how many tenants a claim visits (64) only with fairShare on, and never for nudged jobs") {
  CHECK(call(pb_claim, plan(R"(,"fairShare":true)")).out.find(R"("fairTenants":64)") != std::string::npos);
  CHECK(call(pb_claim, plan(R"(,"fairShare":false)")).out.find("fairTenants") == std::string::npos);
  CHECK(call(pb_claim, plan("")).out.find("fairTenants") == std::string::npos);
  CHECK(call(pb_claim, plan(R"(,"fairShare":true,"target":{"id":"0b6f5c3e-2a4d-4c1f-9e8b-7d6a5f4e3c2b","kind":"a"})")).out.find("fairTenants") ==
        std::string::npos);
  CHECK(error_code_of(call(pb_claim, plan(R"(,"fairShare":1)")).out) == "invalid_input");
}
