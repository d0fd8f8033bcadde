#include <doctest/doctest.h>

#include <string>

#include "abi_call.h"

using postbox::test::call;
using postbox::test::error_code_of;

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

namespace {
std::string health(const std::string& in) { return call(pb_backlog, R"({"op":"health",)" + in + "}").out; }
// The grades of one table (the first), as the core writes them.
std::string one_table(const std::string& table) {
  const std::string out = health(R"("tables":[)" + table + "]");
  return out.substr(0, out.find(R"(],"horizon")") + 1);
}
constexpr const char* kTableOk = R"({"tables":[{"deadTuples":"ok","autovacuum":"ok"}])";
}  // namespace

TEST_CASE("backlog health: no facts grade ok") {
  // A scoped operator reads no table statistics: nothing to grade.
  CHECK(call(pb_backlog, R"({"op":"health"})").out ==
        R"({"tables":[],"horizon":[],"deadTuples":"ok","autovacuum":"ok","xminHold":"ok","deadLetters":"ok","severity":"ok"})");
  CHECK(health(R"("tables":[{}],"horizon":[{}])") ==
        R"({"tables":[{"deadTuples":"ok","autovacuum":"ok"}],"horizon":["ok"],"deadTuples":"ok","autovacuum":"ok","xminHold":"ok","deadLetters":"ok","severity":"ok"})");
}

TEST_CASE("backlog health: a table's dead tuples warn at 1000 and 20% of live, error at live") {
  CHECK(one_table(R"({"deadTuples":999,"liveTuples":10,"lastAutovacuumAgeMs":1})") == kTableOk);
  CHECK(one_table(R"({"deadTuples":1000,"liveTuples":5000,"lastAutovacuumAgeMs":1})") == R"({"tables":[{"deadTuples":"warn","autovacuum":"ok"}])");
  CHECK(one_table(R"({"deadTuples":1000,"liveTuples":5001,"lastAutovacuumAgeMs":1})") == kTableOk);
  CHECK(one_table(R"({"deadTuples":5000,"liveTuples":5000,"lastAutovacuumAgeMs":1})") == R"({"tables":[{"deadTuples":"error","autovacuum":"ok"}])");
  CHECK(one_table(R"({"deadTuples":5000,"liveTuples":0,"lastAutovacuumAgeMs":1})") == R"({"tables":[{"deadTuples":"error","autovacuum":"ok"}])");
  // Either count unknown: nothing to compare.
  CHECK(one_table(R"({"deadTuples":5000})") == kTableOk);
  CHECK(one_table(R"({"deadTuples":5000,"liveTuples":null})") == kTableOk);
}

TEST_CASE("backlog health: a lagging autovacuum warns only while the table's dead tuples pile up") {
  CHECK(one_table(R"({"deadTuples":2000,"liveTuples":2000,"lastAutovacuumAgeMs":3600001})") == R"({"tables":[{"deadTuples":"error","autovacuum":"warn"}])");
  CHECK(one_table(R"({"deadTuples":2000,"liveTuples":2000,"lastAutovacuumAgeMs":3600000})") == R"({"tables":[{"deadTuples":"error","autovacuum":"ok"}])");
  CHECK(one_table(R"({"deadTuples":2000,"liveTuples":2000,"lastAutovacuumAgeMs":null})") == R"({"tables":[{"deadTuples":"error","autovacuum":"warn"}])");
  CHECK(one_table(R"({"deadTuples":0,"liveTuples":2000,"lastAutovacuumAgeMs":null})") == kTableOk);
  // Not reported at all is not "never".
  CHECK(one_table(R"({"deadTuples":2000,"liveTuples":2000})") == R"({"tables":[{"deadTuples":"error","autovacuum":"ok"}])");
}

TEST_CASE("backlog health: each table is graded on its own, in order; the top level takes the worst") {
  const std::string out = health(
      R"("tables":[{"deadTuples":0,"liveTuples":10,"lastAutovacuumAgeMs":1},)"
      R"({"deadTuples":3000,"liveTuples":10000,"lastAutovacuumAgeMs":null},)"
      R"({"deadTuples":9000,"liveTuples":10,"lastAutovacuumAgeMs":5}])");
  CHECK(out ==
        R"({"tables":[{"deadTuples":"ok","autovacuum":"ok"},{"deadTuples":"warn","autovacuum":"warn"},{"deadTuples":"error","autovacuum":"ok"}],)"
        R"("horizon":[],"deadTuples":"error","autovacuum":"warn","xminHold":"ok","deadLetters":"ok","severity":"error"})");
}

TEST_CASE("backlog health: a holder of the horizon warns at 5 min or 1,000,000 transactions, errors at 1 h or 100,000,000") {
  auto holder = [](const std::string& h) {
    const std::string out = health(R"("horizon":[)" + h + "]");
    return out.substr(out.find(R"("horizon":)"), out.find(R"(,"deadTuples")") - out.find(R"("horizon":)"));
  };
  CHECK(holder(R"({"ageMs":299999,"xidAge":10})") == R"("horizon":["ok"])");
  CHECK(holder(R"({"ageMs":300000,"xidAge":10})") == R"("horizon":["warn"])");
  CHECK(holder(R"({"ageMs":3600000,"xidAge":10})") == R"("horizon":["error"])");
  // A replication slot has no age in time: its transactions alone grade it.
  CHECK(holder(R"({"ageMs":null,"xidAge":999999})") == R"("horizon":["ok"])");
  CHECK(holder(R"({"ageMs":null,"xidAge":1000000})") == R"("horizon":["warn"])");
  CHECK(holder(R"({"xidAge":100000000})") == R"("horizon":["error"])");
  // Either measure grades: the worse wins.
  CHECK(holder(R"({"ageMs":3600000,"xidAge":1000000})") == R"("horizon":["error"])");
  CHECK(holder(R"({"ageMs":1,"xidAge":100000000})") == R"("horizon":["error"])");
  CHECK(holder(R"({"ageMs":null,"xidAge":null})") == R"("horizon":["ok"])");
  // Several holders: each graded, xminHold the worst.
  CHECK(health(R"("horizon":[{"ageMs":400000,"xidAge":5},{"ageMs":null,"xidAge":20}])").find(R"("horizon":["warn","ok"],"deadTuples":"ok","autovacuum":"ok","xminHold":"warn")") == 13);
}

TEST_CASE("backlog health: dead letters in the last window warn at 1, error at 100") {
  CHECK(health(R"("deadLetters":0)").find(R"("deadLetters":"ok","severity":"ok")") != std::string::npos);
  CHECK(health(R"("deadLetters":1)").find(R"("deadLetters":"warn","severity":"warn")") != std::string::npos);
  CHECK(health(R"("deadLetters":100)").find(R"("deadLetters":"error","severity":"error")") != std::string::npos);
}

TEST_CASE("backlog health: severity is the worst grade of all") {
  CHECK(health(R"("tables":[{"deadTuples":1000,"liveTuples":5000}],"horizon":[{"ageMs":3600000}],"deadLetters":1)").find(R"("severity":"error")") != std::string::npos);
  CHECK(health(R"("tables":[{"deadTuples":1000,"liveTuples":5000}],"deadLetters":0)").find(R"("severity":"warn")") != std::string::npos);
}

TEST_CASE("backlog health: malformed facts are refused, naming the field") {
  CHECK(health(R"("deadLetters":-1)") == R"({"error":{"code":"invalid_input","message":"backlog: field 'deadLetters' must be an integer in [0, 9007199254740991]"}})");
  CHECK(health(R"("tables":[{"deadTuples":-1}])") == R"({"error":{"code":"invalid_input","message":"backlog: field 'tables[0].deadTuples' must be an integer in [0, 9007199254740991]"}})");
  CHECK(health(R"("horizon":[{"ageMs":0},{"xidAge":1.5}])") == R"({"error":{"code":"invalid_input","message":"backlog: field 'horizon[1].xidAge' must be an integer in [0, 9007199254740991]"}})");
  CHECK(health(R"("tables":[1])") == R"({"error":{"code":"invalid_input","message":"backlog: tables[0]: must be an object"}})");
  CHECK(health(R"("tables":{})").find("invalid_input") != std::string::npos);
  std::string many = R"("tables":[{})";
  for (int i = 0; i < 16; ++i) many += ",{}";
  CHECK(health(many + "]").find("too_large") != std::string::npos);
}

TEST_CASE("operate: every action against every status") {
  struct Row {
    const char* action;
    const char* status;
    const char* expected;
  };
  const char* kRefused = R"({"ok":false,"reason":"invalid_state"})";
  const Row rows[] = {
      {"cancel", "pending", R"({"ok":true,"status":"cancelled","dueAt":null,"budget":null,"nudge":false,"closeAttempt":null,"finished":true,"recordReason":true})"},
      {"cancel", "retrying", R"({"ok":true,"status":"cancelled","dueAt":null,"budget":null,"nudge":false,"closeAttempt":null,"finished":true,"recordReason":true})"},
      {"cancel", "running", R"({"ok":true,"status":"cancelled","dueAt":null,"budget":null,"nudge":false,"closeAttempt":"cancel","finished":true,"recordReason":true})"},
      {"cancel", "succeeded", kRefused},
      {"cancel", "dead", kRefused},
      {"cancel", "cancelled", kRefused},
      {"replay", "dead", R"({"ok":true,"status":"pending","dueAt":77,"budget":{"attempts":0,"crashes":0,"streak":0},"nudge":true,"closeAttempt":null,"finished":false,"recordReason":false})"},
      {"replay", "cancelled", R"({"ok":true,"status":"pending","dueAt":77,"budget":{"attempts":0,"crashes":0,"streak":0},"nudge":true,"closeAttempt":null,"finished":false,"recordReason":false})"},
      {"replay", "succeeded", kRefused},
      {"replay", "pending", kRefused},
      {"replay", "running", kRefused},
      {"retryNow", "pending", R"({"ok":true,"status":"pending","dueAt":77,"budget":null,"nudge":true,"closeAttempt":null,"finished":false,"recordReason":false})"},
      {"retryNow", "retrying", R"({"ok":true,"status":"retrying","dueAt":77,"budget":null,"nudge":true,"closeAttempt":null,"finished":false,"recordReason":false})"},
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
        R"({"error":{"code":"invalid_input","message":"operate: field 'job.status' must be one of pending, running, retrying, succeeded, dead, cancelled, waiting"}})");
  CHECK(call(pb_operate, R"({"action":"cancel","job":{"status":"dead"}})").out ==
        R"({"error":{"code":"invalid_input","message":"operate: field 'now' is required"}})");
  CHECK(call(pb_operate, R"({"action":"cancel","now":1,"job":{}})").out ==
        R"({"error":{"code":"invalid_input","message":"operate: field 'job.status' is required"}})");
}

TEST_CASE("operate: a replay of a job its parent's failure cancelled answers to its parents") {
  auto replay = [](const std::string& job) { return call(pb_operate, R"({"action":"replay","now":5,"job":)" + job + "}").out; };
  const std::string fresh = R"("budget":{"attempts":0,"crashes":0,"streak":0})";
  // A parent still failed: refused (replaying that parent revives it, and only then can it run).
  CHECK(replay(R"({"status":"cancelled","code":"parent_failed","parents":{"failed":1,"open":0}})") == R"({"ok":false,"reason":"invalid_state"})");
  CHECK(replay(R"({"status":"cancelled","code":"parent_failed","parents":{"failed":1,"open":2}})") == R"({"ok":false,"reason":"invalid_state"})");
  // A parent open (or replayed by the same action): it waits on them, not nudged.
  CHECK(replay(R"({"status":"cancelled","code":"parent_failed","parents":{"failed":0,"open":2}})") ==
        R"({"ok":true,"status":"waiting","dueAt":5,)" + fresh + R"(,"nudge":false,"closeAttempt":null,"finished":false,"recordReason":false,"waitingOn":2})");
  // Every parent succeeded since: due now, as any replay.
  CHECK(replay(R"({"status":"cancelled","code":"parent_failed","parents":{"failed":0,"open":0}})") ==
        R"({"ok":true,"status":"pending","dueAt":5,)" + fresh + R"(,"nudge":true,"closeAttempt":null,"finished":false,"recordReason":false})");
  // Cancelled for any other reason, or dead: a replay as always, whatever its parents.
  for (const char* job : {R"({"status":"cancelled","code":"moot","parents":{"failed":1,"open":0}})", R"({"status":"dead","code":"parent_failed","parents":{"failed":1,"open":0}})",
                          R"({"status":"cancelled","code":"parent_failed"})", R"({"status":"cancelled","code":"parent_failed","parents":null})"}) {
    CHECK_MESSAGE(replay(job) == R"({"ok":true,"status":"pending","dueAt":5,)" + fresh + R"(,"nudge":true,"closeAttempt":null,"finished":false,"recordReason":false})", job);
  }
  // Cancel and retryNow do not read the parents.
  CHECK(call(pb_operate, R"({"action":"cancel","now":5,"job":{"status":"waiting","code":null,"parents":{"failed":3,"open":1}}})").out ==
        R"({"ok":true,"status":"cancelled","dueAt":null,"budget":null,"nudge":false,"closeAttempt":null,"finished":true,"recordReason":true})");
  // Malformed parents are refused, naming the field.
  CHECK(error_code_of(replay(R"({"status":"cancelled","code":"parent_failed","parents":{"failed":-1,"open":0}})")) == "invalid_input");
  CHECK(call(pb_operate, R"({"action":"replay","now":5,"job":{"status":"cancelled","parents":{"failed":0}}})").out ==
        R"({"error":{"code":"invalid_input","message":"operate: field 'job.parents.open' is required"}})");
  CHECK(error_code_of(replay(R"({"status":"cancelled","code":7})")) == "invalid_input");
}

TEST_CASE("operate: an operator's cancel reason is held to a handler's code rule") {
  const std::string refused =
      R"({"error":{"code":"invalid_input","message":"operate: field 'reason' must be a string of 1 to 128 bytes without control characters"}})";
  CHECK(call(pb_operate, R"({"op":"reason","reason":"moot"})").out == R"({"reason":"moot"})");
  CHECK(call(pb_operate, R"({"op":"reason","reason":")" + std::string(128, 'x') + R"("})").out ==
        R"({"reason":")" + std::string(128, 'x') + R"("})");
  CHECK(call(pb_operate, R"({"op":"reason","reason":")" + std::string(129, 'x') + R"("})").out == refused);
  CHECK(call(pb_operate, R"({"op":"reason","reason":"a\u0000b"})").out == refused);
  CHECK(call(pb_operate, R"({"op":"reason","reason":"tab\there"})").out == refused);
  CHECK(call(pb_operate, R"({"op":"reason","reason":""})").out == refused);
  CHECK(call(pb_operate, R"({"op":"reason","reason":null})").out == refused);
  CHECK(call(pb_operate, R"({"op":"reason","reason":7})").out == refused);
  CHECK(call(pb_operate, R"({"op":"reason"})").out ==
        R"({"error":{"code":"invalid_input","message":"operate: field 'reason' is required"}})");
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
        R"({"ok":true,"status":"pending","dueAt":5,"budget":{"attempts":0,"crashes":0,"streak":0},"nudge":true,"closeAttempt":null,"finished":false,"recordReason":false})");
  CHECK(call(pb_operate, R"({"op":"actions","job":{}})").out ==
        R"({"error":{"code":"invalid_input","message":"operate: field 'job.status' is required"}})");
  CHECK(call(pb_operate, R"({"op":"actions","job":{"status":"gone"}})").out ==
        R"({"error":{"code":"invalid_input","message":"operate: field 'job.status' must be one of pending, running, retrying, succeeded, dead, cancelled, waiting"}})");
  CHECK(call(pb_operate, R"({"op":"purge","job":{"status":"dead"}})").out ==
        R"({"error":{"code":"unknown_op","message":"operate: unknown op 'purge'"}})");
}

TEST_CASE("backlog read: the statement timeout of an operator's read, its default and bounds") {
  CHECK(call(pb_backlog, R"({"op":"read"})").out == R"({"statementTimeoutMs":30000})");
  CHECK(call(pb_backlog, R"({"op":"read","statementTimeoutMs":1})").out == R"({"statementTimeoutMs":1})");
  CHECK(call(pb_backlog, R"({"op":"read","statementTimeoutMs":2147483647})").out == R"({"statementTimeoutMs":2147483647})");
  CHECK(call(pb_backlog, R"({"op":"read","statementTimeoutMs":0})").out ==
        R"({"error":{"code":"invalid_input","message":"backlog: field 'statementTimeoutMs' must be an integer in [1, 2147483647]"}})");
  CHECK(call(pb_backlog, R"({"op":"read","statementTimeoutMs":2147483648})").out.find("invalid_input") != std::string::npos);
  CHECK(call(pb_backlog, R"({"op":"read","statementTimeoutMs":1.5})").out.find("invalid_input") != std::string::npos);
  CHECK(call(pb_backlog, R"({"op":"read","statementTimeoutMs":"30s"})").out.find("invalid_input") != std::string::npos);
}
