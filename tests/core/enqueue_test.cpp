#include <doctest/doctest.h>

#include <string>

#include "abi_call.h"

using postbox::test::call;

TEST_CASE("enqueue: payload size is the raw JSON text length") {
  CHECK(call(pb_enqueue, R"({"now":1000,"payload":{"to":"a@b.c","n":[1,2]},"hasQueue":true})").out ==
        R"({"ok":true,"payloadBytes":24,"dueAt":1000,"nudge":true,"delaySeconds":0})");
  // Whitespace inside the value counts; whitespace after it does not.
  CHECK(call(pb_enqueue, R"({"now":0,"payload":[1, 2] ,"hasQueue":false})").out ==
        R"({"ok":true,"payloadBytes":6,"dueAt":0,"nudge":false,"delaySeconds":null})");
  CHECK(call(pb_enqueue, R"({"now":0,"payload":"\u00e9"})").out ==
        R"({"ok":true,"payloadBytes":8,"dueAt":0,"nudge":false,"delaySeconds":null})");
  CHECK(call(pb_enqueue, R"({"now":0,"payload":null})").out ==
        R"({"ok":true,"payloadBytes":4,"dueAt":0,"nudge":false,"delaySeconds":null})");
  CHECK(call(pb_enqueue, R"({"now":0,"payload":123456789012345678901234567890})").out ==
        R"({"ok":true,"payloadBytes":30,"dueAt":0,"nudge":false,"delaySeconds":null})");
}

TEST_CASE("enqueue: payload over the cap is an issue, not an error") {
  const std::string big = "\"" + std::string(300000 - 2, 'x') + "\"";
  auto r = call(pb_enqueue, R"({"now":0,"payload":)" + big + "}");
  CHECK(r.rc == 0);
  CHECK(r.out == R"({"ok":false,"issues":[{"code":"payload_too_large","message":"payload is 300000 bytes; the limit is 262144"}]})");
  CHECK(call(pb_enqueue, R"({"now":0,"maxPayloadBytes":5,"payload":"abc"})").out ==
        R"({"ok":true,"payloadBytes":5,"dueAt":0,"nudge":false,"delaySeconds":null})");
  CHECK(call(pb_enqueue, R"({"now":0,"maxPayloadBytes":4,"payload":"abc"})").out ==
        R"({"ok":false,"issues":[{"code":"payload_too_large","message":"payload is 5 bytes; the limit is 4"}]})");
}

TEST_CASE("enqueue: delay, nudge and delaySeconds") {
  struct Row {
    const char* extra;
    const char* expected;
  };
  const Row rows[] = {
      {R"("delayMs":1,"hasQueue":true)", R"({"ok":true,"payloadBytes":2,"dueAt":1001,"nudge":true,"delaySeconds":1})"},
      {R"("delayMs":1000,"hasQueue":true)", R"({"ok":true,"payloadBytes":2,"dueAt":2000,"nudge":true,"delaySeconds":1})"},
      {R"("delayMs":1001,"hasQueue":true)", R"({"ok":true,"payloadBytes":2,"dueAt":2001,"nudge":true,"delaySeconds":2})"},
      {R"("delayMs":86400000,"hasQueue":true)", R"({"ok":true,"payloadBytes":2,"dueAt":86401000,"nudge":true,"delaySeconds":86400})"},
      {R"("delayMs":86400001,"hasQueue":true)", R"({"ok":true,"payloadBytes":2,"dueAt":86401001,"nudge":false,"delaySeconds":null})"},
      {R"("delayMs":5000,"maxQueueDelayMs":4000,"hasQueue":true)", R"({"ok":true,"payloadBytes":2,"dueAt":6000,"nudge":false,"delaySeconds":null})"},
      {R"("delayMs":0)", R"({"ok":true,"payloadBytes":2,"dueAt":1000,"nudge":false,"delaySeconds":null})"},
      {R"("delayMs":315360000000)", R"({"ok":true,"payloadBytes":2,"dueAt":315360001000,"nudge":false,"delaySeconds":null})"},
      {R"("delayMs":315360000001)", R"({"error":{"code":"invalid_input","message":"enqueue: field 'delayMs' must be an integer in [0, 315360000000]"}})"},
      {R"("delayMs":-1)", R"({"error":{"code":"invalid_input","message":"enqueue: field 'delayMs' must be an integer in [0, 315360000000]"}})"},
      {R"("hasQueue":1)", R"({"error":{"code":"invalid_input","message":"enqueue: field 'hasQueue' must be a boolean"}})"},
  };
  for (const Row& row : rows) {
    const std::string in = R"({"now":1000,"payload":{},)" + std::string(row.extra) + "}";
    CAPTURE(in);
    CHECK(call(pb_enqueue, in).out == row.expected);
  }
}

TEST_CASE("enqueue: missing or malformed payload") {
  CHECK(call(pb_enqueue, R"({"now":0})").out == R"({"error":{"code":"invalid_input","message":"enqueue: field 'payload' is required"}})");
  auto r = call(pb_enqueue, R"({"now":0,"payload":{"a":tru}})");
  CHECK(r.rc == 1);
  CHECK(postbox::test::error_code_of(r.out) == "invalid_json");
  CHECK(postbox::test::error_code_of(call(pb_enqueue, R"({"now":0,"payload":{"a":1,}})").out) == "invalid_json");
  CHECK(postbox::test::error_code_of(call(pb_enqueue, R"({"now":0,"payload":"\x"})").out) == "invalid_json");
  CHECK(postbox::test::error_code_of(call(pb_enqueue, "{\"now\":0,\"payload\":\"\xff\"}").out) == "invalid_json");
}
