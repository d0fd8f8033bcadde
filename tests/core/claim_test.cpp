#include <doctest/doctest.h>

#include <string>

#include "abi_call.h"

using postbox::test::call;
using postbox::test::error_code_of;

namespace {

// Three kinds: a and b in lane default (timeouts 1 s and 20 s), c in lane bulk.
const char* kPolicies =
    R"([{"kind":"b","timeoutMs":20000},{"kind":"a","timeoutMs":1000},{"kind":"c","lane":"bulk","timeoutMs":1000}])";

std::string plan(const std::string& extra, int64_t deadline = 100000) {
  return R"({"op":"plan","now":0,"deadlineAt":)" + std::to_string(deadline) +
         R"(,"lane":"default","concurrency":8,"maxBatch":100,"policies":)" + kPolicies + extra + "}";
}

}  // namespace

TEST_CASE("claim plan: lane filter, sorted kinds with their leases (span + clamp(span, 6 s, 30 s)) and the smallest claim slack") {
  auto r = call(pb_claim, plan(R"(,"version":{"timestamp":1700000000000},"target":null)"));
  CHECK(r.rc == 0);
  CHECK(r.out == R"({"limit":8,"kinds":["a","b"],"leaseMs":[7000,40000],"versionCutoff":1700000000000,"targetOnly":false,"slackMs":4000})");
  CHECK(call(pb_claim, R"({"op":"plan","now":0,"deadlineAt":100000,"lane":"bulk","concurrency":8,"maxBatch":3,"policies":)" +
                           std::string(kPolicies) + "}")
            .out == R"({"limit":3,"kinds":["c"],"leaseMs":[7000],"versionCutoff":null,"targetOnly":false,"slackMs":4000})");
}

TEST_CASE("claim plan: only kinds whose attempt fits before the deadline") {
  CHECK(call(pb_claim, plan("", 20000)).out ==
        R"({"limit":8,"kinds":["a","b"],"leaseMs":[7000,40000],"versionCutoff":null,"targetOnly":false,"slackMs":4000})");
  CHECK(call(pb_claim, plan("", 19999)).out ==
        R"({"limit":8,"kinds":["a"],"leaseMs":[7000],"versionCutoff":null,"targetOnly":false,"slackMs":4000})");
  CHECK(call(pb_claim, plan("", 999)).out == R"({"limit":0,"kinds":[],"leaseMs":[],"versionCutoff":null,"targetOnly":false,"slackMs":null})");
}

TEST_CASE("claim plan: a target claims one job of its kind, or nothing") {
  const std::string id = R"("id":"123e4567-e89b-12d3-a456-426614174000")";
  CHECK(call(pb_claim, plan(R"(,"target":{)" + id + R"(,"kind":"b"})")).out ==
        R"({"limit":1,"kinds":["b"],"leaseMs":[40000],"versionCutoff":null,"targetOnly":true,"slackMs":13334})");
  CHECK(call(pb_claim, plan(R"(,"target":{)" + id + R"(,"kind":"c"})")).out ==
        R"({"limit":0,"kinds":[],"leaseMs":[],"versionCutoff":null,"targetOnly":true,"slackMs":null})");
  CHECK(call(pb_claim, plan(R"(,"target":{)" + id + R"(,"kind":"unknown"})")).out ==
        R"({"limit":0,"kinds":[],"leaseMs":[],"versionCutoff":null,"targetOnly":true,"slackMs":null})");
  CHECK(call(pb_claim, plan(R"(,"target":{"id":"nope","kind":"b"})")).out ==
        R"({"error":{"code":"invalid_input","message":"claim: field 'target.id' must be a UUID"}})");
}

TEST_CASE("claim plan: invalid inputs") {
  CHECK(call(pb_claim, R"({"op":"plan","now":0,"deadlineAt":1,"concurrency":1,"policies":[{"kind":"a","timeoutMs":1},{"kind":"a","timeoutMs":2}]})").out ==
        R"({"error":{"code":"invalid_policy","message":"claim: policies[1]: kind 'a' is listed twice"}})");
  CHECK(call(pb_claim, R"({"op":"plan","now":0,"deadlineAt":1,"concurrency":1,"policies":[{"kind":"a"}]})").out ==
        R"({"error":{"code":"invalid_policy","message":"claim: field 'policies[0].timeoutMs' is required"}})");
  CHECK(call(pb_claim, R"({"op":"plan","now":0,"deadlineAt":1,"policies":[]})").out ==
        R"({"error":{"code":"invalid_input","message":"claim: field 'concurrency' is required"}})");
  CHECK(call(pb_claim, R"({"now":0})").out == R"({"error":{"code":"invalid_input","message":"claim: field 'op' is required"}})");
  CHECK(call(pb_claim, R"({"op":"grab"})").out == R"({"error":{"code":"unknown_op","message":"claim: unknown op 'grab'"}})");
}

TEST_CASE("claim admit: start only when the attempt ends inside the invocation and leaves the settle reserve on its lease") {
  struct Row {
    int64_t now, deadline_at, lease_expires_at, timeout_ms;
    const char* expected;
  };
  const Row rows[] = {
      {1000, 100000, 61000, 30000, R"({"start":true,"deadline":31000,"timerMs":30000})"},
      {1000, 31000, 61000, 30000, R"({"start":true,"deadline":31000,"timerMs":30000})"},
      // The invocation ends first, the lease is fine: released, due again at once.
      {1000, 30999, 61000, 30000, R"({"start":false,"reason":"released"})"},
      // For a 30 s timeout, up to 20 s between taking a lease (timeout + 30 s) and starting is absorbed...
      {21000, 100000, 61000, 30000, R"({"start":true,"deadline":51000,"timerMs":30000})"},
      // ...one more ms and the attempt would eat into the 10 s settle reserve.
      {21001, 100000, 61000, 30000, R"({"start":false,"reason":"claim_late"})"},
      {0, 100000, 10000, 30000, R"({"start":false,"reason":"claim_late"})"},
  };
  for (const Row& row : rows) {
    const std::string in = R"({"op":"admit","now":)" + std::to_string(row.now) + R"(,"deadlineAt":)" +
                           std::to_string(row.deadline_at) + R"(,"leaseExpiresAt":)" + std::to_string(row.lease_expires_at) +
                           R"(,"timeoutMs":)" + std::to_string(row.timeout_ms) + "}";
    CAPTURE(in);
    CHECK(call(pb_claim, in).out == row.expected);
  }
  CHECK(call(pb_claim, R"({"op":"admit","now":0,"deadlineAt":1,"leaseExpiresAt":1})").out ==
        R"({"error":{"code":"invalid_input","message":"claim: field 'timeoutMs' is required"}})");
}

TEST_CASE("claim deadline: an invocation ends at its start plus its budget, 14 min by default, 15 at most") {
  struct Row {
    const char* in;
    const char* expected;
  };
  const Row rows[] = {
      {R"({"op":"deadline","startedAt":1000})", R"({"deadlineAt":841000})"},
      {R"({"op":"deadline","startedAt":1000,"invocationBudgetMs":null})", R"({"deadlineAt":841000})"},
      {R"({"op":"deadline","startedAt":1000,"invocationBudgetMs":60000})", R"({"deadlineAt":61000})"},
      {R"({"op":"deadline","startedAt":0,"invocationBudgetMs":900000})", R"({"deadlineAt":900000})"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.in);
    CHECK(call(pb_claim, row.in).out == row.expected);
  }
  CHECK(call(pb_claim, R"({"op":"deadline","startedAt":0,"invocationBudgetMs":900001})").rc == 1);
  CHECK(call(pb_claim, R"({"op":"deadline","startedAt":0,"invocationBudgetMs":0})").rc == 1);
  CHECK(call(pb_claim, R"({"op":"deadline"})").out ==
        R"({"error":{"code":"invalid_input","message":"claim: field 'startedAt' is required"}})");
}

TEST_CASE("claim plan: a drain leaves a backlog when kinds drop out after a full claim") {
  // Two kinds fit at first; near the deadline only the 1 s one does. After a full claim, that
  // means due jobs of the dropped kind stay behind: the lane's queue gets a drain message.
  const std::string head = R"({"op":"plan","deadlineAt":100000,"concurrency":4,)"
                           R"("policies":[{"kind":"a","timeoutMs":1000},{"kind":"b","timeoutMs":60000}],)";
  auto backlog = [&](int64_t now, const char* first, const char* full) {
    const std::string out = call(pb_claim, head + R"("now":)" + std::to_string(now) + R"(,"firstKinds":)" + first +
                                               R"(,"lastClaimFull":)" + full + "}").out;
    return out.substr(out.find("\"backlog\""));
  };
  CHECK(backlog(50000, "2", "true") == R"("backlog":true})");
  CHECK(backlog(50000, "2", "false") == R"("backlog":false})");  // a short claim: nothing was left due
  CHECK(backlog(10000, "2", "true") == R"("backlog":false})");   // both kinds still fit
  CHECK(backlog(99500, "2", "true") == R"("backlog":true})");    // no kind fits any more
  // Without firstKinds (the first plan of a drain) there is no verdict.
  CHECK(call(pb_claim, head + R"("now":50000})").out.find("backlog") == std::string::npos);
  CHECK(call(pb_claim, head + R"("now":50000,"firstKinds":null})").out.find("backlog") == std::string::npos);
  // A nudged target is claimed alone: its drain leaves no backlog of its own.
  CHECK(call(pb_claim, head + R"("now":50000,"firstKinds":2,"lastClaimFull":true,"target":{"id":"0b6f5c3e-2a4d-4c1f-9e8b-7d6a5f4e3c2b","kind":"a"}})")
            .out.find(R"("backlog":false)") != std::string::npos);
  CHECK(call(pb_claim, head + R"("now":0,"lastClaimFull":1})").out.find("lastClaimFull") != std::string::npos);
}

TEST_CASE("claim admit: the attempt number and the handler's timer") {
  // attempts counts charged attempts; a crash charges none, so the next run shows the same number.
  CHECK(call(pb_claim, R"({"op":"admit","now":0,"deadlineAt":100000,"leaseExpiresAt":60000,"timeoutMs":30000,"attempts":0})").out ==
        R"({"start":true,"deadline":30000,"timerMs":30000,"attempt":1})");
  CHECK(call(pb_claim, R"({"op":"admit","now":0,"deadlineAt":100000,"leaseExpiresAt":60000,"timeoutMs":30000,"attempts":4})").out ==
        R"({"start":true,"deadline":30000,"timerMs":30000,"attempt":5})");
  CHECK(call(pb_claim, R"({"op":"admit","now":0,"deadlineAt":100,"leaseExpiresAt":60000,"timeoutMs":30000,"attempts":4})").out ==
        R"({"start":false,"reason":"released"})");
  CHECK(error_code_of(call(pb_claim, R"({"op":"admit","now":0,"deadlineAt":100000,"leaseExpiresAt":60000,"timeoutMs":30000,"attempts":-1})").out) ==
        "invalid_input");
}

TEST_CASE("claim outbox: option bounds and defaults") {
  CHECK(call(pb_claim, R"({"op":"outbox"})").out ==
        R"({"concurrency":1,"lanes":1,"operationTimeoutMs":60000,"maxPayloadBytes":262144,"handlerSessions":1,"maxQueueDelayMs":86400000,"maxKeyChars":1024})");
  CHECK(call(pb_claim, R"({"op":"outbox","concurrency":100,"lanes":5,"operationTimeoutMs":2147483647,"maxPayloadBytes":null})").out ==
        R"({"concurrency":100,"lanes":5,"operationTimeoutMs":2147483647,"maxPayloadBytes":262144,"handlerSessions":0,"maxQueueDelayMs":86400000,"maxKeyChars":1024})");
  CHECK(call(pb_claim, R"({"op":"outbox","concurrency":101})").out ==
        R"({"error":{"code":"invalid_input","message":"options: field 'concurrency' must be an integer in [1, 100]"}})");
  CHECK(call(pb_claim, R"({"op":"outbox","lanes":6})").out ==
        R"({"error":{"code":"invalid_input","message":"options: field 'lanes' must be an integer in [1, 5]"}})");
  CHECK(call(pb_claim, R"({"op":"outbox","lanes":0})").out.find("'lanes'") != std::string::npos);
  CHECK(call(pb_claim, R"({"op":"outbox","operationTimeoutMs":0})").out.find("'operationTimeoutMs'") != std::string::npos);
  CHECK(call(pb_claim, R"({"op":"outbox","operationTimeoutMs":2147483648})").out.find("'operationTimeoutMs'") != std::string::npos);
  CHECK(call(pb_claim, R"({"op":"outbox","maxPayloadBytes":1048577})").out.find("'maxPayloadBytes'") != std::string::npos);
  CHECK(call(pb_claim, R"({"op":"outbox","concurrency":1.5})").out.find("'concurrency'") != std::string::npos);
}

TEST_CASE("claim outbox: handler sessions share the connection budget with the lanes") {
  auto sessions = [](const char* input) {
    std::string out = call(pb_claim, input).out;
    size_t at = out.find("\"handlerSessions\":");
    return at == std::string::npos ? std::string("none: ") + out : out.substr(at + 18, out.find(',', at) - at - 18);
  };
  // Default: what is left of the 5 after the lanes, but no more than handlers run at once.
  CHECK(sessions(R"({"op":"outbox"})") == "1");
  CHECK(sessions(R"({"op":"outbox","concurrency":8})") == "4");
  CHECK(sessions(R"({"op":"outbox","concurrency":2})") == "2");
  CHECK(sessions(R"({"op":"outbox","concurrency":8,"lanes":2})") == "3");
  CHECK(sessions(R"({"op":"outbox","concurrency":8,"lanes":5})") == "0");
  CHECK(sessions(R"({"op":"outbox","concurrency":8,"handlerSessions":null})") == "4");
  // Set: taken as given within the budget, even above concurrency, and 0 (ctx.db on the lane's session).
  CHECK(sessions(R"({"op":"outbox","handlerSessions":3})") == "3");
  CHECK(sessions(R"({"op":"outbox","lanes":4,"handlerSessions":1})") == "1");
  CHECK(sessions(R"({"op":"outbox","concurrency":8,"handlerSessions":0})") == "0");
  // Over the budget: refused, naming the field, whichever order the fields come in.
  CHECK(call(pb_claim, R"({"op":"outbox","handlerSessions":2,"lanes":4})").out ==
        R"x({"error":{"code":"invalid_input","message":"options: field 'handlerSessions' must be at most 1 with lanes 4: lanes + handlerSessions may hold at most 5 connections (Workers allow 6 per invocation; one stays free for queue sends)"}})x");
  CHECK(call(pb_claim, R"({"op":"outbox","lanes":5,"handlerSessions":1})").out.find("must be at most 0 with lanes 5") != std::string::npos);
  CHECK(call(pb_claim, R"({"op":"outbox","handlerSessions":5})").out ==
        R"({"error":{"code":"invalid_input","message":"options: field 'handlerSessions' must be an integer in [0, 4]"}})");
  CHECK(call(pb_claim, R"({"op":"outbox","handlerSessions":-1})").out.find("'handlerSessions'") != std::string::npos);
  CHECK(call(pb_claim, R"({"op":"outbox","handlerSessions":1.5})").out.find("'handlerSessions'") != std::string::npos);
}
