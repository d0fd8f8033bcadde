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
