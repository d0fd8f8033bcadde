#include <doctest/doctest.h>

#include <string>

#include "abi_call.h"

using postbox::test::call;

namespace {

std::string fleet(const std::string& fields) { return call(pb_claim, R"({"op":"fleet",)" + fields + "}").out; }

std::string member(const std::string& key, int lanes, int handler_sessions) {
  return R"({"key":")" + key + R"(","lanes":)" + std::to_string(lanes) + R"(,"handlerSessions":)" + std::to_string(handler_sessions) + "}";
}

}  // namespace

TEST_CASE("fleet: as many outboxes at once as their connections fit in the invocation's 5") {
  // Default options at concurrency 1: 1 lane + 1 handler session each, so two at once (4), not three (6).
  CHECK(fleet(R"("outboxes":[)" + member("eu", 1, 1) + "," + member("us", 1, 1) + "," + member("ap", 1, 1) + R"(],"default":"eu")") ==
        R"({"default":"eu","queueParallel":2,"sweepParallel":2})");
  // Concurrency 8: 1 lane + 4 handler sessions, the whole budget: one at a time.
  CHECK(fleet(R"("outboxes":[)" + member("eu", 1, 4) + "," + member("us", 1, 4) + "]") == R"({"default":null,"queueParallel":1,"sweepParallel":1})");
  // A sweep holds one session (not `lanes`) beside its handlers': 2 lanes + 1 handler session
  // hold 3 connections in a queue invocation, 2 in a sweep.
  CHECK(fleet(R"("outboxes":[)" + member("eu", 2, 1) + "," + member("us", 2, 1) + "]") == R"({"default":null,"queueParallel":1,"sweepParallel":2})");
  // Without handler sessions (ctx.db on the lane's), six one-lane outboxes at once.
  std::string six;
  for (int i = 0; i < 6; ++i) six += std::string(i ? "," : "") + member("o" + std::to_string(i), 1, 0);
  CHECK(fleet(R"("outboxes":[)" + six + "]") == R"({"default":null,"queueParallel":5,"sweepParallel":5})");
  // The hungriest set the bound: 1 + 4 leaves nothing for another.
  CHECK(fleet(R"("outboxes":[)" + member("a", 1, 0) + "," + member("b", 1, 4) + "," + member("c", 1, 0) + "]") ==
        R"({"default":null,"queueParallel":1,"sweepParallel":1})");
}

TEST_CASE("fleet: a parallel that would exceed the connection budget is refused, naming the most that fits") {
  const std::string three = member("eu", 1, 1) + "," + member("us", 1, 1) + "," + member("ap", 1, 1);
  CHECK(fleet(R"("outboxes":[)" + three + R"(],"parallel":1)") == R"({"default":null,"queueParallel":1,"sweepParallel":1})");
  CHECK(fleet(R"("outboxes":[)" + three + R"(],"parallel":2)") == R"({"default":null,"queueParallel":2,"sweepParallel":2})");
  CHECK(fleet(R"("outboxes":[)" + three + R"(],"parallel":3)") ==
        R"x({"error":{"code":"invalid_input","message":"claim: field 'parallel' must be at most 2: the outboxes running at once may hold 5 connections together (lanes + handlerSessions each; Workers allow 6, one stays free for queue sends)"}})x");
  // More than there are outboxes is as many as there are.
  CHECK(fleet(R"("outboxes":[)" + member("eu", 1, 0) + R"(],"parallel":64)") == R"({"default":"eu","queueParallel":1,"sweepParallel":1})");
  CHECK(fleet(R"("outboxes":[)" + three + R"(],"parallel":0)").find("'parallel' must be an integer in [1, 64]") != std::string::npos);
  CHECK(fleet(R"("outboxes":[)" + three + R"(],"parallel":null)") == R"({"default":null,"queueParallel":2,"sweepParallel":2})");
}

TEST_CASE("fleet: the default outbox, keys and members are checked") {
  // One outbox is the default of messages naming none.
  CHECK(fleet(R"("outboxes":[)" + member("eu", 1, 1) + "]") == R"({"default":"eu","queueParallel":1,"sweepParallel":1})");
  CHECK(fleet(R"("outboxes":[)" + member("eu", 1, 1) + R"(],"default":"us")") ==
        R"({"error":{"code":"invalid_input","message":"claim: field 'default' must be one of the outboxes' keys"}})");
  CHECK(fleet(R"("outboxes":[)" + member("eu", 1, 1) + "," + member("eu", 1, 1) + "]") ==
        R"({"error":{"code":"invalid_input","message":"claim: field 'outboxes[1].key' names an outbox twice"}})");
  CHECK(fleet(R"("outboxes":[)" + member("Eu", 1, 1) + "]").find("'outboxes[0].key' must be a lowercase letter") != std::string::npos);
  CHECK(fleet(R"("outboxes":[)" + member("eu", 2, 4) + "]") ==
        R"({"error":{"code":"invalid_input","message":"claim: field 'outboxes[0].handlerSessions' must be at most 5 - lanes"}})");
  // A repeated list: the last one counts.
  std::string full;
  for (int i = 0; i < 64; ++i) full += std::string(i ? "," : "") + member("o" + std::to_string(i), 1, 0);
  CHECK(fleet(R"("outboxes":[)" + full + R"(],"outboxes":[)" + full + "]") == R"({"default":null,"queueParallel":5,"sweepParallel":5})");
  CHECK(fleet(R"("outboxes":[)" + full + R"(],"outboxes":[)" + member("eu", 1, 1) + "]") == R"({"default":"eu","queueParallel":1,"sweepParallel":1})");
  CHECK(fleet(R"("outboxes":[{"key":"eu","lanes":1}])") == R"({"error":{"code":"invalid_input","message":"claim: field 'outboxes[0].handlerSessions' is required"}})");
  CHECK(fleet(R"("outboxes":[{"lanes":1,"handlerSessions":0}])") == R"({"error":{"code":"invalid_input","message":"claim: field 'outboxes[0].key' is required"}})");
  CHECK(fleet(R"("outboxes":[])") == R"({"error":{"code":"invalid_input","message":"claim: field 'outboxes' must have at least 1 item"}})");
  CHECK(fleet(R"("default":null)") == R"({"error":{"code":"invalid_input","message":"claim: field 'outboxes' is required"}})");
  std::string many;
  for (int i = 0; i < 65; ++i) many += std::string(i ? "," : "") + member("o" + std::to_string(i), 1, 0);
  CHECK(fleet(R"("outboxes":[)" + many + "]") == R"({"error":{"code":"invalid_input","message":"claim: field 'outboxes' must have at most 64 items"}})");
}

TEST_CASE("share: each outbox's turn is what is left of the invocation, split over the turns still to come") {
  auto share = [](const std::string& fields) { return call(pb_claim, R"({"op":"share",)" + fields + "}").out; };
  // Defaults: 840 s, 120 s of it for a sweep's recovery. 3 outboxes one at a time: 280 s each, 40 s recovery.
  CHECK(share(R"("now":1000,"startedAt":1000,"left":3,"parallel":1)") == R"({"deadlineAt":841000,"budgetMs":280000,"recoveryBudgetMs":40000})");
  // The first took 10 s: the second gets half of the 830 s left.
  CHECK(share(R"("now":11000,"startedAt":1000,"left":2,"parallel":1)") == R"({"deadlineAt":841000,"budgetMs":415000,"recoveryBudgetMs":59285})");
  // Two slots: 3 outboxes are 2 turns a slot; 2 are one.
  CHECK(share(R"("now":0,"startedAt":0,"left":3,"parallel":2)") == R"({"deadlineAt":840000,"budgetMs":420000,"recoveryBudgetMs":60000})");
  CHECK(share(R"("now":0,"startedAt":0,"left":2,"parallel":2)") == R"({"deadlineAt":840000,"budgetMs":840000,"recoveryBudgetMs":120000})");
  // The last gets the rest.
  CHECK(share(R"("now":5,"startedAt":0,"left":1,"parallel":1)") == R"({"deadlineAt":840000,"budgetMs":839995,"recoveryBudgetMs":119999})");
  CHECK(share(R"("now":100000,"startedAt":0,"invocationBudgetMs":600000,"recoveryBudgetMs":60000,"left":2,"parallel":1)") ==
        R"({"deadlineAt":600000,"budgetMs":250000,"recoveryBudgetMs":25000})");
  // A recovery budget over the invocation's is the whole turn; 0 stays 0.
  CHECK(share(R"("now":0,"startedAt":0,"invocationBudgetMs":60000,"recoveryBudgetMs":900000,"left":2,"parallel":1)") ==
        R"({"deadlineAt":60000,"budgetMs":30000,"recoveryBudgetMs":30000})");
  CHECK(share(R"("now":0,"startedAt":0,"recoveryBudgetMs":0,"left":2,"parallel":1)") == R"({"deadlineAt":840000,"budgetMs":420000,"recoveryBudgetMs":0})");
  // At or past the deadline: a turn of 0 (the outbox waits for the next invocation).
  CHECK(share(R"("now":900000,"startedAt":0,"left":1,"parallel":1)") == R"({"deadlineAt":840000,"budgetMs":0,"recoveryBudgetMs":0})");
  CHECK(share(R"("now":840000,"startedAt":0,"left":1,"parallel":1)") == R"({"deadlineAt":840000,"budgetMs":0,"recoveryBudgetMs":0})");
  // A clock before the invocation's start (stepped back, or hostile input): never more than the
  // whole invocation, and no overflow however far apart the two are (found by the fuzzer).
  CHECK(share(R"("now":1000,"startedAt":61000,"left":1,"parallel":1)") == R"({"deadlineAt":901000,"budgetMs":840000,"recoveryBudgetMs":120000})");
  CHECK(share(R"("now":1700000840000,"startedAt":271700000000000,"left":1,"parallel":1)") ==
        R"({"deadlineAt":271700000840000,"budgetMs":840000,"recoveryBudgetMs":120000})");
  CHECK(share(R"("now":0,"startedAt":0,"invocationBudgetMs":null,"recoveryBudgetMs":null,"left":1,"parallel":1)") ==
        R"({"deadlineAt":840000,"budgetMs":840000,"recoveryBudgetMs":120000})");
  CHECK(share(R"("now":0,"startedAt":0,"invocationBudgetMs":900001,"left":1,"parallel":1)").find("'invocationBudgetMs' must be an integer in [1, 900000]") != std::string::npos);
  CHECK(share(R"("now":0,"startedAt":0,"left":0,"parallel":1)").find("'left' must be an integer in [1, 64]") != std::string::npos);
  CHECK(share(R"("now":0,"startedAt":0,"left":1)") == R"({"error":{"code":"invalid_input","message":"claim: field 'parallel' is required"}})");
  CHECK(share(R"("now":null,"startedAt":0,"left":1,"parallel":1)") == R"({"error":{"code":"invalid_input","message":"claim: field 'now' is required"}})");
}
