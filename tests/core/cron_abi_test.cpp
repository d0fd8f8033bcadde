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
