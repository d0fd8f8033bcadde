// The never-trap rule at the ABI: any bytes into any entry give a document back.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "abi_call.h"
#include "postbox/json_writer.h"

using postbox::test::call;
using postbox::test::Entry;
using postbox::test::error_code_of;

namespace {

struct Named {
  const char* name;
  Entry entry;
};

const Named kEntries[] = {{"policy", pb_policy}, {"settle", pb_settle}, {"claim", pb_claim},
                          {"sweep", pb_sweep},   {"enqueue", pb_enqueue}, {"cron", pb_cron},
                          {"nudge", pb_nudge},   {"backlog", pb_backlog}, {"operate", pb_operate}};

}  // namespace

TEST_CASE("abi: version and allocation") {
  CHECK(pb_abi_version() == 2);
  char* p = static_cast<char*>(pb_alloc(10));
  REQUIRE(p != nullptr);
  for (int i = 10; i < 10 + 64; ++i) CHECK(p[i] == 0);  // the simdjson padding is zeroed
  pb_free(p);
  CHECK(pb_alloc(-1) == nullptr);
  pb_free(nullptr);
}

TEST_CASE("abi: malformed JSON is invalid_json in every family") {
  const std::vector<std::string> inputs = {
      "", " ", "{", "}", "{\"a\":}", "{\"a\" 1}", "[1,2", "tru", "nul", "{\"a\":1}}", "{\"a\":1} x", "\"open",
      "{\"a\":\"\\q\"}", "{\"a\":01}", "{\"a\":-}", "{\"a\":1.}", std::string("{\"a\":\"\xc3\x28\"}"),
      std::string(300, '['),
  };
  for (const Named& e : kEntries) {
    for (const std::string& in : inputs) {
      CAPTURE(e.name);
      CAPTURE(in.substr(0, 40));
      auto r = call(e.entry, in);
      CHECK(r.rc == 1);
      CHECK(error_code_of(r.out) == "invalid_json");
      CHECK(r.out.find(std::string("\"message\":\"") + e.name + ": ") != std::string::npos);
    }
  }
}

TEST_CASE("abi: well-formed JSON of the wrong shape is invalid_input") {
  const char* inputs[] = {"[]", "1", "\"s\"", "null", "true", "-0", "1e999999999999"};
  for (const Named& e : kEntries) {
    for (const char* in : inputs) {
      CAPTURE(e.name);
      CAPTURE(in);
      auto r = call(e.entry, in);
      CHECK(r.rc == 1);
      const std::string code = error_code_of(r.out);
      // simdjson refuses numbers beyond double range as malformed; everything else is a shape error.
      CHECK((code == "invalid_input" || (code == "invalid_json" && std::string(in) == "1e999999999999")));
    }
  }
}

TEST_CASE("abi: numbers must be integers in [0, 2^53)") {
  struct Row {
    const char* now;
    const char* expected;
  };
  const char* kRange = R"({"error":{"code":"invalid_input","message":"operate: field 'now' must be an integer in [0, 9007199254740991]"}})";
  const Row rows[] = {
      {"0", R"({"ok":true,"status":"cancelled","dueAt":null,"budget":null,"nudge":false,"closeAttempt":null,"finished":true,"recordReason":true})"},
      {"9007199254740991", R"({"ok":true,"status":"cancelled","dueAt":null,"budget":null,"nudge":false,"closeAttempt":null,"finished":true,"recordReason":true})"},
      {"9007199254740992", kRange},
      {"18446744073709551615", kRange},
      {"18446744073709551616", kRange},
      {"123456789012345678901234567890", kRange},
      {"-1", kRange},
      {"-9223372036854775809", kRange},
      {"1.0", kRange},
      {"1e3", kRange},
      {"0.5", kRange},
      {"\"5\"", R"({"error":{"code":"invalid_input","message":"operate: field 'now' must be an integer"}})"},
      {"true", R"({"error":{"code":"invalid_input","message":"operate: field 'now' must be an integer"}})"},
      {"null", R"({"error":{"code":"invalid_input","message":"operate: field 'now' must be an integer"}})"},
      {"{}", R"({"error":{"code":"invalid_input","message":"operate: field 'now' must be an integer"}})"},
  };
  for (const Row& row : rows) {
    const std::string in = std::string(R"({"action":"cancel","now":)") + row.now + R"(,"job":{"status":"pending"}})";
    CAPTURE(in);
    CHECK(call(pb_operate, in).out == row.expected);
  }
}

TEST_CASE("abi: truncated documents never trap") {
  const std::string full =
      R"({"now":1700000000000,"seed":42,"policy":{"kind":"k","timeoutMs":1000},"job":{"status":"running","attempts":2},"outcome":{"type":"retry","code":"x","after":5}})";
  REQUIRE(call(pb_settle, full).rc == 0);
  for (size_t cut = 0; cut < full.size(); ++cut) {
    CAPTURE(cut);
    auto r = call(pb_settle, full.substr(0, cut));
    CHECK(r.rc == 1);
    CHECK(error_code_of(r.out) == "invalid_json");
  }
}

TEST_CASE("abi: oversized inputs are too_large, without reading them") {
  const std::string big(static_cast<size_t>(postbox::kMaxInputBytes) + 1, ' ');
  auto r = call(pb_enqueue, big);
  CHECK(r.rc == 1);
  CHECK(r.out == R"({"error":{"code":"too_large","message":"enqueue: input is 2097153 bytes; the limit is 2097152"}})");
  CHECK(pb_settle(nullptr, 5) == 1);
  CHECK(pb_settle("{}", -1) == 1);
  CHECK(error_code_of(std::string(pb_result_ptr(), static_cast<size_t>(pb_result_len()))) == "invalid_input");
  // The largest accepted input still works and the next small call is unaffected.
  std::string payload = R"({"now":0,"maxPayloadBytes":1048576,"payload":")" + std::string(1048576 - 2, 'x') + "\"}";
  CHECK(call(pb_enqueue, payload).out == R"({"ok":true,"payloadBytes":1048576,"dueAt":0,"nudge":false,"delaySeconds":null})");
  CHECK(call(pb_enqueue, R"({"now":0,"payload":1})").out == R"({"ok":true,"payloadBytes":1,"dueAt":0,"nudge":false,"delaySeconds":null})");
}

TEST_CASE("abi: deep nesting is refused, not recursed into") {
  std::string deep = R"({"now":0,"payload":)";
  for (int i = 0; i < 300; ++i) deep += "[";
  for (int i = 0; i < 300; ++i) deep += "]";
  deep += "}";
  CHECK(error_code_of(call(pb_enqueue, deep).out) == "invalid_json");
  std::string ok = R"({"now":0,"payload":)";
  for (int i = 0; i < 200; ++i) ok += "[";
  for (int i = 0; i < 200; ++i) ok += "]";
  ok += "}";
  CHECK(call(pb_enqueue, ok).out == R"({"ok":true,"payloadBytes":400,"dueAt":0,"nudge":false,"delaySeconds":null})");
}

TEST_CASE("abi: unknown fields are ignored outside policies; duplicate keys take the last") {
  CHECK(call(pb_operate, R"({"action":"cancel","now":1,"extra":[1,{"x":null}],"job":{"status":"dead","status":"pending"}})").out ==
        R"({"ok":true,"status":"cancelled","dueAt":null,"budget":null,"nudge":false,"closeAttempt":null,"finished":true,"recordReason":true})");
}

TEST_CASE("json writer: escapes quote, backslash and control characters") {
  std::string out;
  postbox::append_json_string(out, std::string("a\"b\\c\n\r\t\b\f\x01\x1f\x7f\xc3\xa9", 15));
  CHECK(out == "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\\u001f\x7f\xc3\xa9\"");
  postbox::JsonWriter w;
  w.begin_object();
  w.field("a", int64_t{-9223372036854775807 - 1});
  w.key("b");
  w.begin_array();
  w.integer(0);
  w.null();
  w.boolean(true);
  w.begin_object();
  w.end_object();
  w.end_array();
  w.field("c", std::optional<int64_t>{});
  w.end_object();
  CHECK(w.text() == R"({"a":-9223372036854775808,"b":[0,null,true,{}],"c":null})");
}
