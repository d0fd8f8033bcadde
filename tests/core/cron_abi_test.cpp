// pb_cron's JSON glue; the cron rules themselves are tested in cron_test.cpp.
#include <doctest/doctest.h>

#include "abi_call.h"

using postbox::test::call;

TEST_CASE("cron glue: parse, match, next, prev, key") {
  CHECK(call(pb_cron, R"({"op":"parse","expr":"0 9 * * MON"})").out == R"({"ok":true})");
  // 2023-11-14T22:13:20Z is a Tuesday; the next Monday 09:00 UTC is 2023-11-20.
  CHECK(call(pb_cron, R"({"op":"next","expr":"0 9 * * MON","after":1700000000000})").out == R"({"at":1700470800000})");
  CHECK(call(pb_cron, R"({"op":"prev","expr":"0 9 * * MON","before":1700470800000})").out == R"({"at":1699866000000})");
  CHECK(call(pb_cron, R"({"op":"match","expr":"0 9 * * MON","at":1700470859999})").out == R"({"match":true})");
  CHECK(call(pb_cron, R"({"op":"match","expr":"0 9 * * MON","at":1700470860000})").out == R"({"match":false})");
  CHECK(call(pb_cron, R"({"op":"key","name":"newsletter.weekly","scheduledAt":1795942800000})").out ==
        R"({"key":"schedule:newsletter.weekly:2026-11-29T09:00:00.000Z"})");
  // February 30th never comes: no occurrence within the search window.
  CHECK(call(pb_cron, R"({"op":"next","expr":"0 0 30 2 *","after":0})").out == R"({"at":null})");
}

TEST_CASE("cron glue: errors") {
  auto r = call(pb_cron, R"({"op":"parse","expr":"0 9 * * 0"})");
  CHECK(r.rc == 1);
  CHECK(r.out == R"j({"error":{"code":"invalid_cron","message":"cron: day-of-week: '0' is out of range 1-7 (1 = SUN)"}})j");
  CHECK(call(pb_cron, R"({"op":"next","expr":"* * * * *"})").out ==
        R"({"error":{"code":"invalid_input","message":"cron: field 'after' is required"}})");
  CHECK(call(pb_cron, R"({"op":"key","scheduledAt":0})").out ==
        R"({"error":{"code":"invalid_input","message":"cron: field 'name' is required"}})");
  CHECK(call(pb_cron, R"({"op":"tick"})").out == R"({"error":{"code":"unknown_op","message":"cron: unknown op 'tick'"}})");
}

// `due`: which occurrences a tick enqueues, given each schedule's last handled occurrence.
// 1796029200000 is Monday 2026-11-30T09:00:00Z.
TEST_CASE("cron due: the first run enqueues only the tick's own minute and records a baseline") {
  CHECK(call(pb_cron, R"({"op":"due","at":1796029200000,"schedules":[{"name":"weekly","expr":"0 9 * * MON","lastAt":null}]})").out ==
        R"({"schedules":[{"name":"weekly","baseline":1796029199999,"occurrences":[{"at":1796029200000,"key":"schedule:weekly:2026-11-30T09:00:00.000Z"}],"skipped":false}]})");
  // Five minutes later, with no row yet: the 09:00 occurrence is not this tick's.
  CHECK(call(pb_cron, R"({"op":"due","at":1796029500000,"schedules":[{"name":"weekly","expr":"0 9 * * MON"}]})").out ==
        R"({"schedules":[{"name":"weekly","baseline":1796029499999,"occurrences":[],"skipped":false}]})");
  // A tick's time within its minute (seconds, ms) still counts the minute's start.
  CHECK(call(pb_cron, R"({"op":"due","at":1796029230500,"schedules":[{"name":"weekly","expr":"0 9 * * MON"}]})").out ==
        R"({"schedules":[{"name":"weekly","baseline":1796029199999,"occurrences":[{"at":1796029200000,"key":"schedule:weekly:2026-11-30T09:00:00.000Z"}],"skipped":false}]})");
}

TEST_CASE("cron due: missed occurrences since the last one are caught up, oldest first") {
  // Hourly, last handled 05:00, tick at 09:00: 06, 07, 08 and 09.
  auto r = call(pb_cron, R"({"op":"due","at":1796029200000,"schedules":[{"name":"h","expr":"0 * * * *","lastAt":1796014800000}]})");
  CHECK(r.out ==
        R"({"schedules":[{"name":"h","baseline":null,"occurrences":[)"
        R"({"at":1796018400000,"key":"schedule:h:2026-11-30T06:00:00.000Z"},)"
        R"({"at":1796022000000,"key":"schedule:h:2026-11-30T07:00:00.000Z"},)"
        R"({"at":1796025600000,"key":"schedule:h:2026-11-30T08:00:00.000Z"},)"
        R"({"at":1796029200000,"key":"schedule:h:2026-11-30T09:00:00.000Z"}],"skipped":false}]})");
  // Already handled (or a late tick behind a newer one): nothing.
  CHECK(call(pb_cron, R"({"op":"due","at":1796029200000,"schedules":[{"name":"h","expr":"0 * * * *","lastAt":1796029200000}]})").out ==
        R"({"schedules":[{"name":"h","baseline":null,"occurrences":[],"skipped":false}]})");
  CHECK(call(pb_cron, R"({"op":"due","at":1796025600000,"schedules":[{"name":"h","expr":"0 * * * *","lastAt":1796029200000}]})").out ==
        R"({"schedules":[{"name":"h","baseline":null,"occurrences":[],"skipped":false}]})");
}

TEST_CASE("cron due: at most 24 occurrences and 24 hours are caught up") {
  // Every 5 minutes, three hours missed (36 occurrences): the newest 24, from 07:05.
  auto r = call(pb_cron, R"({"op":"due","at":1796029200000,"schedules":[{"name":"f","expr":"*/5 * * * *","lastAt":1796018400000}]})");
  CHECK(r.out.find(R"("occurrences":[{"at":1796022300000,)") != std::string::npos);
  CHECK(r.out.find(R"({"at":1796029200000,"key":"schedule:f:2026-11-30T09:00:00.000Z"}],"skipped":true})") != std::string::npos);
  size_t count = 0;
  for (size_t at = r.out.find("\"at\":"); at != std::string::npos; at = r.out.find("\"at\":", at + 1)) ++count;
  CHECK(count == 24);
  // Daily at 09:00, last handled a week ago, tick at 10:00: only today's is within 24 hours.
  CHECK(call(pb_cron, R"({"op":"due","at":1796032800000,"schedules":[{"name":"d","expr":"0 9 * * *","lastAt":1795424400000}]})").out ==
        R"({"schedules":[{"name":"d","baseline":null,"occurrences":[{"at":1796029200000,"key":"schedule:d:2026-11-30T09:00:00.000Z"}],"skipped":true}]})");
  // A long gap with nothing scheduled in it skips nothing.
  CHECK(call(pb_cron, R"({"op":"due","at":1796032800000,"schedules":[{"name":"w","expr":"0 9 * * MON","lastAt":1795424400000}]})").out ==
        R"({"schedules":[{"name":"w","baseline":null,"occurrences":[{"at":1796029200000,"key":"schedule:w:2026-11-30T09:00:00.000Z"}],"skipped":false}]})");
}

TEST_CASE("cron due: several schedules, and errors") {
  CHECK(call(pb_cron, R"({"schedules":[{"name":"a","expr":"0 9 * * *","lastAt":1796025600000},{"expr":"0 3 * * *","name":"b","lastAt":1796025600000}],"op":"due","at":1796029200000})").out ==
        R"({"schedules":[{"name":"a","baseline":null,"occurrences":[{"at":1796029200000,"key":"schedule:a:2026-11-30T09:00:00.000Z"}],"skipped":false},)"
        R"({"name":"b","baseline":null,"occurrences":[],"skipped":false}]})");
  CHECK(call(pb_cron, R"({"op":"due","at":0,"schedules":[]})").out == R"({"schedules":[]})");
  CHECK(call(pb_cron, R"({"op":"due","schedules":[]})").out == R"({"error":{"code":"invalid_input","message":"cron: field 'at' is required"}})");
  CHECK(call(pb_cron, R"({"op":"due","at":0})").out == R"({"error":{"code":"invalid_input","message":"cron: field 'schedules' is required"}})");
  CHECK(call(pb_cron, R"({"op":"due","at":0,"schedules":[7]})").out ==
        R"({"error":{"code":"invalid_input","message":"cron: schedules[0]: must be an object"}})");
  CHECK(call(pb_cron, R"({"op":"due","at":0,"schedules":[{"name":"a b","expr":"* * * * *"}]})").out ==
        R"({"error":{"code":"invalid_input","message":"cron: field 'schedules[0].name' must be 1-128 bytes of [A-Za-z0-9._:-]"}})");
  CHECK(call(pb_cron, R"({"op":"due","at":0,"schedules":[{"name":"a","expr":"* * * * *"},{"name":"b","expr":"0 9 * * 0"}]})").out ==
        R"j({"error":{"code":"invalid_cron","message":"cron: schedules[1]: day-of-week: '0' is out of range 1-7 (1 = SUN)"}})j");
  CHECK(call(pb_cron, R"({"op":"due","at":0,"schedules":[{"name":"a","expr":"* * * * *","lastAt":-1}]})").out ==
        R"({"error":{"code":"invalid_input","message":"cron: field 'schedules[0].lastAt' must be an integer in [0, 9007199254740991]"}})");
}
