// Malformed input reads the same in every build: one message, whatever the parser found first.
#include <doctest/doctest.h>

#include <string>

#include "abi_call.h"
#include "postbox/json_error.h"

using postbox::test::call;

TEST_CASE("json_error: every parse failure is one stable message; running out of memory is too_large") {
  const simdjson::error_code syntax[] = {
      simdjson::TAPE_ERROR,   simdjson::UTF8_ERROR,      simdjson::UNCLOSED_STRING,  simdjson::UNESCAPED_CHARS,
      simdjson::STRING_ERROR, simdjson::NUMBER_ERROR,    simdjson::BIGINT_ERROR,     simdjson::N_ATOM_ERROR,
      simdjson::T_ATOM_ERROR, simdjson::F_ATOM_ERROR,    simdjson::DEPTH_ERROR,      simdjson::EMPTY,
      simdjson::INCORRECT_TYPE, simdjson::TRAILING_CONTENT, simdjson::INCOMPLETE_ARRAY_OR_OBJECT,
  };
  for (simdjson::error_code e : syntax) {
    CAPTURE(simdjson::error_message(e));
    const postbox::Error error = postbox::json_error("claim", e);
    CHECK(error.code() == postbox::ErrorCode::invalid_json);
    CHECK(error.message() == "claim: invalid JSON");
  }
  const postbox::Error oom = postbox::json_error("settle", simdjson::MEMALLOC);
  CHECK(oom.code() == postbox::ErrorCode::too_large);
  CHECK(oom.message() == "settle: out of memory");
}

TEST_CASE("json_error: inputs on which the kernels used to name different errors") {
  // Found by the differential test (tests/corpus/differential.mjs) against SIMD native builds.
  CHECK(call(pb_claim, "\x80").out == R"({"error":{"code":"invalid_json","message":"claim: invalid JSON"}})");
  CHECK(call(pb_backlog, "!\"").out == R"({"error":{"code":"invalid_json","message":"backlog: invalid JSON"}})");
  CHECK(call(pb_policy, "4\xef").out == R"({"error":{"code":"invalid_json","message":"policy: invalid JSON"}})");
  CHECK(call(pb_policy, "{op\":\"").out == R"({"error":{"code":"invalid_json","message":"policy: invalid JSON"}})");
  CHECK(call(pb_policy, std::string("{\"kind\0:\"k\"", 11)).out ==
        R"({"error":{"code":"invalid_json","message":"policy: invalid JSON"}})");
}
