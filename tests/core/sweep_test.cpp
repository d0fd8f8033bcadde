#include <doctest/doctest.h>

#include <string>

#include "abi_call.h"

using postbox::test::call;

// The unregistered step's default policy: defaults only, the longest timeout.
#define UNREGISTERED_POLICY R"(,"recoverLimit":500,"policy":{"kind":"unregistered","lane":"default","timeoutMs":600000,"leaseMs":630000,"maxAttempts":20,"baseMs":30000,"maxMs":3600000,"maxCrashes":3,"warnAtStreak":null,"perCode":{"invalid_payload":{"streak":3,"maxAttempts":null,"maxDelayMs":null,"onExhaustion":"dead"},"timeout":{"streak":5,"maxAttempts":null,"maxDelayMs":null,"onExhaustion":"dead"}}})"

TEST_CASE("sweep plan: recover, reserved, drain, handoff, retention") {
  const std::string in =
      R"({"op":"plan","now":1700000010000,"startedAt":1700000000000,"invocationBudgetMs":840000,"recoveryBudgetMs":120000,)"
      R"("sweepLeaseBudgetMs":180000,"reserved":[{"name":"mail","kinds":["email.welcome","org.export","ghost"],"maxJobs":50,"deadlineMs":45000}],)"
      R"("retention":{"succeededMs":604800000,"deadMs":7776000000},"policies":[)"
      R"({"kind":"org.export","lane":"bulk","timeoutMs":600000},{"kind":"email.welcome","timeoutMs":30000},)"
      R"({"kind":"audit.log","timeoutMs":150000},{"kind":"a.report","lane":"bulk","timeoutMs":300000},{"kind":"z.big","lane":"alpha","timeoutMs":160000}]})";
  auto r = call(pb_sweep, in);
  CHECK(r.rc == 0);
  CHECK(r.out ==
        R"({"deadlineAt":1700000840000,"schedulesUntil":1700000720000,"steps":[)"
        R"({"type":"recover","deadlineAt":1700000130000,"limit":500},)"
        R"({"type":"reserved","name":"mail","kinds":["email.welcome"],"maxJobs":50,"deadlineAt":1700000055000},)"
        R"({"type":"drain","kinds":["audit.log","email.welcome"],"deadlineAt":1700000840000},)"
        R"({"type":"handoff","nudgedBefore":1699999110000,"limit":100,"lanes":[{"lane":"alpha","kinds":["z.big"]},{"lane":"bulk","kinds":["a.report","org.export"]}]},)"
        R"({"type":"unregistered","dueBefore":1699999710000)" UNREGISTERED_POLICY R"(},)"
        R"({"type":"retention","succeededBefore":1699395210000,"deadBefore":1692224010000,"limit":1000,"budgetMs":60000,"deadlineAt":1700000840000},)"
        R"({"type":"compact","deadlineAt":1700000840000}]})");
}

TEST_CASE("sweep plan: budgets cap each other and defaults apply") {
  // Recovery and reserved sweeps never outlive the invocation.
  const std::string in =
      R"({"op":"plan","now":500,"startedAt":0,"invocationBudgetMs":1000,"recoveryBudgetMs":5000,)"
      R"("reserved":[{"name":"r","kinds":["k"],"maxJobs":1,"deadlineMs":9000}],"policies":[{"kind":"k","timeoutMs":1000}]})";
  CHECK(call(pb_sweep, in).out ==
        R"({"deadlineAt":1000,"schedulesUntil":0,"steps":[{"type":"recover","deadlineAt":1000,"limit":500},)"
        R"({"type":"reserved","name":"r","kinds":["k"],"maxJobs":1,"deadlineAt":1000},)"
        R"({"type":"drain","kinds":["k"],"deadlineAt":1000},{"type":"handoff","nudgedBefore":0,"limit":100,"lanes":[]},)"
        R"({"type":"unregistered","dueBefore":0)" UNREGISTERED_POLICY R"(},{"type":"retention","succeededBefore":0,"deadBefore":0,"limit":1000,"budgetMs":60000,"deadlineAt":1000},)"
        R"({"type":"compact","deadlineAt":1000}]})");
  CHECK(call(pb_sweep, R"({"op":"plan","now":0,"startedAt":0,"policies":[]})").out ==
        R"({"deadlineAt":840000,"schedulesUntil":720000,"steps":[{"type":"recover","deadlineAt":120000,"limit":500},{"type":"drain","kinds":[],"deadlineAt":840000},)"
        R"({"type":"handoff","nudgedBefore":0,"limit":100,"lanes":[]},{"type":"unregistered","dueBefore":0)" UNREGISTERED_POLICY R"(},)"
        R"({"type":"retention","succeededBefore":0,"deadBefore":0,"limit":1000,"budgetMs":60000,"deadlineAt":840000},)"
        R"({"type":"compact","deadlineAt":840000}]})");
}

TEST_CASE("sweep plan: the hand-off cooldown") {
  // Jobs nudged within the cooldown are skipped; the cutoff never goes below 0.
  const std::string base = R"({"op":"plan","now":1700000000000,"startedAt":1700000000000,"policies":[{"kind":"k","timeoutMs":600000}])";
  CHECK(call(pb_sweep, base + R"(,"handoffCooldownMs":60000})").out.find(R"("type":"handoff","nudgedBefore":1699999940000,)") != std::string::npos);
  CHECK(call(pb_sweep, base + "}").out.find(R"("type":"handoff","nudgedBefore":1699999100000,)") != std::string::npos);
  CHECK(call(pb_sweep, base + R"(,"handoffCooldownMs":0})").out.find(R"("nudgedBefore":1700000000000,)") != std::string::npos);
  CHECK(call(pb_sweep, R"({"op":"plan","now":5,"startedAt":0,"handoffCooldownMs":60000,"policies":[]})").out.find(R"("nudgedBefore":0,)") != std::string::npos);
  CHECK(call(pb_sweep, base + R"(,"handoffCooldownMs":-1})").out ==
        R"({"error":{"code":"invalid_input","message":"sweep: field 'handoffCooldownMs' must be an integer in [0, 9007199254740991]"}})");
}

TEST_CASE("sweep plan: invalid inputs") {
  CHECK(call(pb_sweep, R"({"op":"plan","now":0,"policies":[]})").out ==
        R"({"error":{"code":"invalid_input","message":"sweep: field 'startedAt' is required"}})");
  CHECK(call(pb_sweep, R"({"op":"plan","now":0,"startedAt":0,"policies":[],"reserved":[{"name":"x","kinds":[],"maxJobs":-1,"deadlineMs":1}]})").out ==
        R"({"error":{"code":"invalid_input","message":"sweep: field 'reserved[0].maxJobs' must be an integer in [0, 9007199254740991]"}})");
  CHECK(call(pb_sweep, R"({"op":"plan","now":0,"startedAt":0,"policies":{}})").out ==
        R"({"error":{"code":"invalid_input","message":"sweep: field 'policies' must be an array"}})");
  CHECK(call(pb_sweep, R"({"op":"run"})").out == R"({"error":{"code":"unknown_op","message":"sweep: unknown op 'run'"}})");
}

TEST_CASE("sweep plan: recovery's budget is held back from schedules and starts with the sweep") {
  // Schedules run before the sweep and stop at deadline - recoveryBudget; recovery, planned when
  // the sweep starts (now), still gets its whole budget, capped by the invocation.
  const std::string base = R"({"op":"plan","startedAt":0,"invocationBudgetMs":600000,"recoveryBudgetMs":120000,"policies":[])";
  const std::string early = call(pb_sweep, base + R"(,"now":0})").out;
  CHECK(early.find(R"("schedulesUntil":480000,)") != std::string::npos);
  CHECK(early.find(R"({"type":"recover","deadlineAt":120000,"limit":500})") != std::string::npos);
  const std::string late = call(pb_sweep, base + R"(,"now":480000})").out;
  CHECK(late.find(R"({"type":"recover","deadlineAt":600000,"limit":500})") != std::string::npos);
  const std::string later = call(pb_sweep, base + R"(,"now":550000})").out;
  CHECK(later.find(R"({"type":"recover","deadlineAt":600000,"limit":500})") != std::string::npos);
  // A recovery budget larger than the invocation leaves the schedules no time past their start.
  CHECK(call(pb_sweep, R"({"op":"plan","now":10,"startedAt":10,"invocationBudgetMs":1000,"recoveryBudgetMs":5000,"policies":[]})")
            .out.find(R"("schedulesUntil":10,)") != std::string::npos);
}

TEST_CASE("sweep plan: hand-off limit and the unregistered-kind report") {
  // 100 hand-offs per lane per sweep; unregistered kinds are reported once due for 5 minutes.
  const std::string out = call(pb_sweep, R"({"op":"plan","now":1000000,"startedAt":1000000,"policies":[]})").out;
  CHECK(out.find(R"("limit":100,"lanes":[])") != std::string::npos);
  CHECK(out.find(R"({"type":"unregistered","dueBefore":700000,"recoverLimit":500,)") != std::string::npos);
  CHECK(call(pb_sweep, R"({"op":"plan","now":299999,"startedAt":0,"policies":[]})").out.find(R"({"type":"unregistered","dueBefore":0,"recoverLimit":500,)") !=
        std::string::npos);
}

TEST_CASE("sweep plan: retention batches and budget; unregistered kinds get the default policy") {
  const std::string base = R"({"op":"plan","now":1000,"startedAt":0,"invocationBudgetMs":5000,"policies":[],"retention":)";
  const std::string set = call(pb_sweep, base + R"({"batchSize":250,"budgetMs":2000}})").out;
  CHECK(set.find(R"({"type":"retention","succeededBefore":0,"deadBefore":0,"limit":250,"budgetMs":2000,"deadlineAt":5000})") != std::string::npos);
  // The default policy is pb_policy's answer for a definition with the longest timeout.
  CHECK(set.find(R"("policy":)" + call(pb_policy, R"({"kind":"unregistered","timeoutMs":600000})").out + "}") != std::string::npos);
  CHECK(call(pb_sweep, base + R"({"batchSize":0}})").out == R"({"error":{"code":"invalid_input","message":"sweep: field 'retention.batchSize' must be an integer in [1, 10000]"}})");
  CHECK(call(pb_sweep, base + R"({"batchSize":10001}})").out.find("invalid_input") != std::string::npos);
  CHECK(call(pb_sweep, base + R"({"budgetMs":900001}})").out.find("invalid_input") != std::string::npos);
  CHECK(call(pb_sweep, base + R"({"budgetMs":0}})").out.find(R"("limit":1000,"budgetMs":0,)") != std::string::npos);
}

TEST_CASE("sweep retention: another batch while the last was full and the budget lasts") {
  auto again = [](const std::string& fields) {
    return call(pb_sweep, R"({"op":"retention","startedAt":1000,"budgetMs":500,"deadlineAt":10000,"limit":100,)" + fields + "}").out;
  };
  const std::string yes = R"({"again":true})", no = R"({"again":false})";
  CHECK(again(R"("now":1000,"deleted":100)") == yes);
  CHECK(again(R"("now":1499,"deleted":100)") == yes);
  // A short batch: nothing (of this cutoff) is left.
  CHECK(again(R"("now":1000,"deleted":99)") == no);
  CHECK(again(R"("now":1000,"deleted":0)") == no);
  // The step's budget, from its first batch, is spent.
  CHECK(again(R"("now":1500,"deleted":100)") == no);
  // The invocation's deadline caps the budget.
  CHECK(call(pb_sweep, R"({"op":"retention","startedAt":1000,"budgetMs":500,"deadlineAt":1200,"limit":100,"now":1200,"deleted":100})").out == no);
  CHECK(call(pb_sweep, R"({"op":"retention","startedAt":1000,"budgetMs":500,"deadlineAt":1200,"limit":100,"now":1199,"deleted":100})").out == yes);
  // Every field is required and bounded.
  CHECK(call(pb_sweep, R"({"op":"retention","startedAt":1000,"budgetMs":500,"deadlineAt":1200,"limit":100,"now":1199})").out ==
        R"({"error":{"code":"invalid_input","message":"sweep: field 'deleted' is required"}})");
  CHECK(again(R"("now":1000,"deleted":-1)").find("invalid_input") != std::string::npos);
  CHECK(call(pb_sweep, R"({"op":"retention","startedAt":0,"budgetMs":0,"deadlineAt":0,"limit":0,"now":0,"deleted":0})").out.find("invalid_input") != std::string::npos);
}

TEST_CASE("sweep recover: another batch while the last was full and the step's deadline has not passed") {
  auto again = [](const std::string& fields) {
    return call(pb_sweep, R"({"op":"recover","deadlineAt":2000,"limit":500,)" + fields + "}").out;
  };
  const std::string yes = R"({"again":true})", no = R"({"again":false})";
  CHECK(again(R"("now":1000,"found":500)") == yes);
  CHECK(again(R"("now":1999,"found":500)") == yes);
  // A short batch: every expired lease of this listing is settled.
  CHECK(again(R"("now":1000,"found":499)") == no);
  CHECK(again(R"("now":1000,"found":0)") == no);
  // The deadline is the step's own (its budget from the sweep's start, capped by the invocation).
  CHECK(again(R"("now":2000,"found":500)") == no);
  CHECK(again(R"("now":5000,"found":500)") == no);
  CHECK(call(pb_sweep, R"({"op":"recover","deadlineAt":2000,"limit":500,"now":1000})").out ==
        R"({"error":{"code":"invalid_input","message":"sweep: field 'found' is required"}})");
  CHECK(again(R"("now":1000,"found":-1)").find("invalid_input") != std::string::npos);
  CHECK(call(pb_sweep, R"({"op":"recover","deadlineAt":2000,"limit":0,"now":1000,"found":0})").out.find("'limit'") != std::string::npos);
  CHECK(call(pb_sweep, R"({"op":"recover","deadlineAt":2000,"limit":10001,"now":1000,"found":0})").out.find("'limit'") != std::string::npos);
}

TEST_CASE("sweep schedule: occurrences start only before the plan's schedulesUntil") {
  CHECK(call(pb_sweep, R"({"op":"schedule","now":999,"until":1000})").out == R"({"start":true})");
  CHECK(call(pb_sweep, R"({"op":"schedule","now":1000,"until":1000})").out == R"({"start":false})");
  CHECK(call(pb_sweep, R"({"op":"schedule","now":1001,"until":1000})").out == R"({"start":false})");
  CHECK(call(pb_sweep, R"({"op":"schedule","now":1000})").out ==
        R"({"error":{"code":"invalid_input","message":"sweep: field 'until' is required"}})");
  CHECK(call(pb_sweep, R"({"op":"schedule","now":"soon","until":1000})").out.find("invalid_input") != std::string::npos);
}
