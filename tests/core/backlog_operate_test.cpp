#include <doctest/doctest.h>

#include <string>

#include "abi_call.h"

using postbox::test::call;

TEST_CASE("backlog: the ABI example") {
  CHECK(call(pb_backlog, R"({"counts":{"due":12,"aged":3,"stuck":0},"thresholds":{"due":{"warn":100,"error":1000},"aged":{"warn":1,"error":50},"stuck":{"warn":1,"error":10}}})").out ==
        R"({"severity":"warn","reasons":[{"metric":"aged","severity":"warn","value":3}]})");
}

TEST_CASE("backlog: grades at the thresholds, worst wins, defaults apply") {
  struct Row {
    const char* input;
    const char* expected;
  };
  const Row rows[] = {
      {R"({"counts":{"due":0,"aged":0,"stuck":0}})", R"({"severity":"ok","reasons":[]})"},
      {R"({"counts":{"due":99,"aged":0,"stuck":0}})", R"({"severity":"ok","reasons":[]})"},
      {R"({"counts":{"due":100,"aged":0,"stuck":0}})", R"({"severity":"warn","reasons":[{"metric":"due","severity":"warn","value":100}]})"},
      {R"({"counts":{"due":1000,"aged":1,"stuck":10}})",
       R"({"severity":"error","reasons":[{"metric":"due","severity":"error","value":1000},{"metric":"aged","severity":"warn","value":1},{"metric":"stuck","severity":"error","value":10}]})"},
      {R"({"counts":{"stuck":2,"due":5,"aged":0},"thresholds":{"stuck":{"warn":3,"error":4},"due":{"warn":5}}})",
       R"({"severity":"warn","reasons":[{"metric":"due","severity":"warn","value":5}]})"},
      {R"({"counts":{"due":1,"aged":0}})", R"({"error":{"code":"invalid_input","message":"backlog: field 'counts.stuck' is required"}})"},
      {R"({"counts":{"due":-1,"aged":0,"stuck":0}})",
       R"({"error":{"code":"invalid_input","message":"backlog: field 'counts.due' must be an integer in [0, 9007199254740991]"}})"},
      {R"({"counts":{"due":0,"aged":0,"stuck":0},"thresholds":{"due":{"warn":10,"error":5}}})",
       R"({"error":{"code":"invalid_input","message":"backlog: thresholds.due: warn must not exceed error"}})"},
      {R"({})", R"({"error":{"code":"invalid_input","message":"backlog: field 'counts' is required"}})"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.input);
    CHECK(call(pb_backlog, row.input).out == row.expected);
  }
}

TEST_CASE("backlog window: the cut-off instants of the backlog counts") {
  CHECK(call(pb_backlog, R"({"op":"window","now":1000000})").out ==
        R"({"dueBefore":1000000,"agedBefore":700000,"stuckBefore":1000000,"deadLettersSince":-2600000,"deadLetterWindowMs":3600000})");
  CHECK(call(pb_backlog, R"({"op":"window","now":1000000,"agedMs":60000})").out.find(R"("agedBefore":940000,)") != std::string::npos);
  CHECK(call(pb_backlog, R"({"op":"window","now":1000000,"agedMs":null})").out.find(R"("agedBefore":700000,)") != std::string::npos);
  CHECK(call(pb_backlog, R"({"op":"window"})").out == R"({"error":{"code":"invalid_input","message":"backlog: field 'now' is required"}})");
  CHECK(call(pb_backlog, R"({"op":"window","now":1,"agedMs":-1})").out.find("agedMs") != std::string::npos);
  CHECK(call(pb_backlog, R"({"op":"sweep"})").out == R"({"error":{"code":"unknown_op","message":"backlog: unknown op 'sweep'"}})");
}

TEST_CASE("backlog health: dead tuples, autovacuum, an old snapshot and dead letters") {
  auto health = [](const std::string& in) { return call(pb_backlog, R"({"op":"health",)" + in + "}").out; };
  const char* kAllOk = R"({"deadTuples":"ok","autovacuum":"ok","xminHold":"ok","deadLetters":"ok"})";
  CHECK(call(pb_backlog, R"({"op":"health"})").out == kAllOk);  // no facts (a scoped operator): nothing to grade
  // Dead tuples: at least 1000 and 20% of live warns; as many as live is an error.
  CHECK(health(R"("deadTuples":999,"liveTuples":10,"lastAutovacuumAgeMs":1)") == kAllOk);
  CHECK(health(R"("deadTuples":1000,"liveTuples":5000,"lastAutovacuumAgeMs":1)").find(R"("deadTuples":"warn","autovacuum":"ok")") == 1);
  CHECK(health(R"("deadTuples":1000,"liveTuples":5001,"lastAutovacuumAgeMs":1)") == kAllOk);
  CHECK(health(R"("deadTuples":5000,"liveTuples":5000,"lastAutovacuumAgeMs":1)").find(R"("deadTuples":"error")") == 1);
  CHECK(health(R"("deadTuples":5000,"liveTuples":0,"lastAutovacuumAgeMs":1)").find(R"("deadTuples":"error")") == 1);
  // Autovacuum lags (over 1 h, or never) only matter while dead tuples pile up.
  CHECK(health(R"("deadTuples":2000,"liveTuples":2000,"lastAutovacuumAgeMs":3600001)").find(R"("autovacuum":"warn")") != std::string::npos);
  CHECK(health(R"("deadTuples":2000,"liveTuples":2000,"lastAutovacuumAgeMs":3600000)").find(R"("autovacuum":"ok")") != std::string::npos);
  CHECK(health(R"("deadTuples":2000,"liveTuples":2000,"lastAutovacuumAgeMs":null)").find(R"("autovacuum":"warn")") != std::string::npos);
  CHECK(health(R"("deadTuples":0,"liveTuples":2000,"lastAutovacuumAgeMs":null)") == kAllOk);
  // An old snapshot holds back cleanup: 5 min warns, 1 h is an error.
  CHECK(health(R"("xminHoldMs":299999)") == kAllOk);
  CHECK(health(R"("xminHoldMs":300000)").find(R"("xminHold":"warn")") != std::string::npos);
  CHECK(health(R"("xminHoldMs":3600000)").find(R"("xminHold":"error")") != std::string::npos);
  // Dead letters in the last window: any warns, 100 is an error.
  CHECK(health(R"("deadLetters":0)") == kAllOk);
  CHECK(health(R"("deadLetters":1)").find(R"("deadLetters":"warn")") != std::string::npos);
  CHECK(health(R"("deadLetters":100)").find(R"("deadLetters":"error")") != std::string::npos);
  CHECK(health(R"("deadLetters":-1)").find("invalid_input") != std::string::npos);
}

TEST_CASE("operate: every action against every status") {
  struct Row {
    const char* action;
    const char* status;
    const char* expected;
  };
  const char* kRefused = R"({"ok":false,"reason":"invalid_state"})";
  const Row rows[] = {
      {"cancel", "pending", R"({"ok":true,"status":"cancelled","dueAt":null,"reset":false,"nudge":false,"closeAttempt":null,"finished":true,"recordReason":true})"},
      {"cancel", "retrying", R"({"ok":true,"status":"cancelled","dueAt":null,"reset":false,"nudge":false,"closeAttempt":null,"finished":true,"recordReason":true})"},
      {"cancel", "running", R"({"ok":true,"status":"cancelled","dueAt":null,"reset":false,"nudge":false,"closeAttempt":"cancel","finished":true,"recordReason":true})"},
      {"cancel", "succeeded", kRefused},
      {"cancel", "dead", kRefused},
      {"cancel", "cancelled", kRefused},
      {"replay", "dead", R"({"ok":true,"status":"pending","dueAt":77,"reset":true,"nudge":true,"closeAttempt":null,"finished":false,"recordReason":false})"},
      {"replay", "cancelled", R"({"ok":true,"status":"pending","dueAt":77,"reset":true,"nudge":true,"closeAttempt":null,"finished":false,"recordReason":false})"},
      {"replay", "succeeded", kRefused},
      {"replay", "pending", kRefused},
      {"replay", "running", kRefused},
      {"retryNow", "pending", R"({"ok":true,"status":"pending","dueAt":77,"reset":false,"nudge":true,"closeAttempt":null,"finished":false,"recordReason":false})"},
      {"retryNow", "retrying", R"({"ok":true,"status":"retrying","dueAt":77,"reset":false,"nudge":true,"closeAttempt":null,"finished":false,"recordReason":false})"},
      {"retryNow", "running", kRefused},
      {"retryNow", "dead", kRefused},
  };
  for (const Row& row : rows) {
    const std::string in = std::string(R"({"action":")") + row.action + R"(","now":77,"job":{"status":")" + row.status + R"("}})";
    CAPTURE(in);
    CHECK(call(pb_operate, in).out == row.expected);
  }
}

TEST_CASE("operate: invalid inputs") {
  CHECK(call(pb_operate, R"({"action":"delete","now":1,"job":{"status":"dead"}})").out ==
        R"({"error":{"code":"unknown_op","message":"operate: unknown action 'delete'"}})");
  CHECK(call(pb_operate, R"({"action":"cancel","now":1,"job":{"status":"gone"}})").out ==
        R"({"error":{"code":"invalid_input","message":"operate: field 'job.status' must be one of pending, running, retrying, succeeded, dead, cancelled"}})");
  CHECK(call(pb_operate, R"({"action":"cancel","job":{"status":"dead"}})").out ==
        R"({"error":{"code":"invalid_input","message":"operate: field 'now' is required"}})");
  CHECK(call(pb_operate, R"({"action":"cancel","now":1,"job":{}})").out ==
        R"({"error":{"code":"invalid_input","message":"operate: field 'job.status' is required"}})");
}

TEST_CASE("operate: the actions each status allows are exactly those the decision accepts") {
  const char* statuses[] = {"pending", "running", "retrying", "succeeded", "dead", "cancelled"};
  const char* actions[] = {"cancel", "replay", "retryNow"};
  for (const char* status : statuses) {
    CAPTURE(status);
    // The list, built from the decisions themselves.
    std::string expected = R"({"actions":[)";
    bool first = true;
    for (const char* action : actions) {
      const std::string in = std::string(R"({"action":")") + action + R"(","now":1,"job":{"status":")" + status + R"("}})";
      if (call(pb_operate, in).out.find(R"("ok":true)") == std::string::npos) continue;
      expected += std::string(first ? "" : ",") + "\"" + action + "\"";
      first = false;
    }
    expected += "]}";
    CHECK(call(pb_operate, std::string(R"({"op":"actions","job":{"status":")") + status + R"("}})").out == expected);
  }
  CHECK(call(pb_operate, R"({"op":"actions","job":{"status":"dead"}})").out == R"({"actions":["replay"]})");
  CHECK(call(pb_operate, R"({"op":"actions","job":{"status":"succeeded"}})").out == R"({"actions":[]})");
  CHECK(call(pb_operate, R"({"op":"actions","job":{"status":"pending"}})").out == R"({"actions":["cancel","retryNow"]})");
  CHECK(call(pb_operate, R"({"op":"actions","job":{"status":"running"}})").out == R"({"actions":["cancel"]})");
  // The decision's first form keeps working with an explicit op.
  CHECK(call(pb_operate, R"({"op":"decide","action":"replay","now":5,"job":{"status":"dead"}})").out ==
        R"({"ok":true,"status":"pending","dueAt":5,"reset":true,"nudge":true,"closeAttempt":null,"finished":false,"recordReason":false})");
  CHECK(call(pb_operate, R"({"op":"actions","job":{}})").out ==
        R"({"error":{"code":"invalid_input","message":"operate: field 'job.status' is required"}})");
  CHECK(call(pb_operate, R"({"op":"actions","job":{"status":"gone"}})").out ==
        R"({"error":{"code":"invalid_input","message":"operate: field 'job.status' must be one of pending, running, retrying, succeeded, dead, cancelled"}})");
  CHECK(call(pb_operate, R"({"op":"purge","job":{"status":"dead"}})").out ==
        R"({"error":{"code":"unknown_op","message":"operate: unknown op 'purge'"}})");
}
