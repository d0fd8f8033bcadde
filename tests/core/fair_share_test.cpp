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

TEST_CASE("fair share: in a lane with limited kinds every limited kind visits tenants, not only those limited per tenant") {
  const std::string limited = R"({"op":"plan","now":0,"deadlineAt":100000,"lane":"default","concurrency":8,"policies":[)"
                              R"({"kind":"a","timeoutMs":1000},{"kind":"c","timeoutMs":1000,"concurrency":2}])";
  auto fair = call(pb_claim, limited + R"(,"fairShare":true})");
  CHECK(fair.out.find(R"("tenantConcurrency":[0],"tenantVisits":64})") != std::string::npos);
  CHECK(fair.out.find(R"("fairTenants":64)") != std::string::npos);
  // Without fair share such a lane claims its limited kind in due order: no visits.
  CHECK(call(pb_claim, limited + "}").out.find("tenantVisits") == std::string::npos);
  // Nudged jobs are named, not picked: no visits either.
  CHECK(call(pb_claim, limited + R"(,"fairShare":true,"target":{"id":"0b6f5c3e-2a4d-4c1f-9e8b-7d6a5f4e3c2b","kind":"c"}})").out.find("tenantVisits") ==
        std::string::npos);
}

TEST_CASE("fair share: a weighted tenant's share is in proportion to its weight among the visited, and it offers that many jobs a round") {
  // Weights 3 and 1 sharing a claim of 16: 12 and 4.
  CHECK(postbox::fair_share_of(16, 3, 4) == 12);
  CHECK(postbox::fair_share_of(16, 1, 4) == 4);
  // Rounded up, never 0: weight 1 among a total of 100 still offers one.
  CHECK(postbox::fair_share_of(16, 1, 100) == 1);
  CHECK(postbox::fair_share_of(16, 5, 0) == 16);
  // Unweighted, it is the even split.
  CHECK(postbox::fair_quota(16, 3) == postbox::fair_share_of(16, 1, 3));
  // A tenant of weight 3 takes its first three jobs in round 1, the next three in round 2.
  CHECK(postbox::fair_round(1, 3) == 1);
  CHECK(postbox::fair_round(3, 3) == 1);
  CHECK(postbox::fair_round(4, 3) == 2);
  CHECK(postbox::fair_round(2, 1) == 2);
}

TEST_CASE("fair share: an outbox's weights are integers 1..100 for at most 1000 named tenants") {
  CHECK(call(pb_claim, R"({"op":"outbox","fairWeights":{"acme":3,"globex":100}})").out.find("\"concurrency\":1") != std::string::npos);
  CHECK(call(pb_claim, R"({"op":"outbox","fairWeights":null})").out.find("error") == std::string::npos);
  const std::string zero = call(pb_claim, R"({"op":"outbox","fairWeights":{"acme":0}})").out;
  CHECK(error_code_of(zero) == "invalid_input");
  CHECK(zero.find("fairWeights.acme") != std::string::npos);
  CHECK(error_code_of(call(pb_claim, R"({"op":"outbox","fairWeights":{"acme":101}})").out) == "invalid_input");
  CHECK(error_code_of(call(pb_claim, R"({"op":"outbox","fairWeights":{"acme":1.5}})").out) == "invalid_input");
  CHECK(error_code_of(call(pb_claim, R"({"op":"outbox","fairWeights":[3]})").out) == "invalid_input");
  CHECK(error_code_of(call(pb_claim, R"({"op":"outbox","fairWeights":{"":2}})").out) == "invalid_input");
  std::string many = R"({"op":"outbox","fairWeights":{)";
  for (int i = 0; i <= 1000; ++i) many += (i ? "," : "") + std::string("\"t") + std::to_string(i) + "\":1";
  CHECK(call(pb_claim, many + "}}").out.find("at most 1000 tenants") != std::string::npos);
  CHECK(postbox::kMaxFairWeight == 100);
}
