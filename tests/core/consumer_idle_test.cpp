#include <doctest/doctest.h>

#include <string>

#include "abi_call.h"

using postbox::test::call;

TEST_CASE("claim idle: a consumer drains again at once after a claim, waits its idle time after an empty drain") {
  auto idle = [](const std::string& fields) { return call(pb_claim, R"({"op":"idle",)" + fields + "}").out; };
  CHECK(idle(R"("claimed":3,"failures":0)") == R"({"waitMs":0})");
  CHECK(idle(R"("claimed":0,"failures":0)") == R"({"waitMs":1000})");
  CHECK(idle(R"("idleMs":50,"claimed":0,"failures":0)") == R"({"waitMs":50})");
  CHECK(idle(R"("idleMs":0,"claimed":0,"failures":0)") == R"({"waitMs":0})");
  CHECK(idle(R"("idleMs":null,"claimed":0,"failures":0)") == R"({"waitMs":1000})");
}

TEST_CASE("claim idle: failures in a row double the wait, from 1 s (or the idle time) up to 30 s (or the idle time)") {
  auto after = [](const std::string& idle_ms, int failures) {
    return call(pb_claim, R"({"op":"idle","idleMs":)" + idle_ms + R"(,"claimed":0,"failures":)" + std::to_string(failures) + "}").out;
  };
  CHECK(after("null", 1) == R"({"waitMs":1000})");
  CHECK(after("null", 2) == R"({"waitMs":2000})");
  CHECK(after("null", 5) == R"({"waitMs":16000})");
  CHECK(after("null", 6) == R"({"waitMs":30000})");
  CHECK(after("null", 1000000) == R"({"waitMs":30000})");
  // A short idle time still backs off from 1 s: a failing database is not asked every 20 ms.
  CHECK(after("20", 1) == R"({"waitMs":1000})");
  // A long idle time is the floor and the cap.
  CHECK(after("5000", 1) == R"({"waitMs":5000})");
  CHECK(after("5000", 3) == R"({"waitMs":20000})");
  CHECK(after("60000", 4) == R"({"waitMs":60000})");
  // A failure counts whatever the claimed count says.
  CHECK(call(pb_claim, R"({"op":"idle","claimed":7,"failures":1})").out == R"({"waitMs":1000})");
}

TEST_CASE("claim idle: bad input is refused") {
  CHECK(call(pb_claim, R"({"op":"idle","failures":0})").out == R"({"error":{"code":"invalid_input","message":"claim: field 'claimed' is required"}})");
  CHECK(call(pb_claim, R"({"op":"idle","claimed":0})").out == R"({"error":{"code":"invalid_input","message":"claim: field 'failures' is required"}})");
  CHECK(call(pb_claim, R"({"op":"idle","idleMs":-1,"claimed":0,"failures":0})").out.find("'idleMs' must be an integer in [0, 3600000]") != std::string::npos);
  CHECK(call(pb_claim, R"({"op":"idle","idleMs":3600001,"claimed":0,"failures":0})").out.find("idleMs") != std::string::npos);
  CHECK(call(pb_claim, R"({"op":"idle","claimed":0,"failures":1000001})").out.find("failures") != std::string::npos);
  CHECK(call(pb_claim, R"({"op":"idle","claimed":1.5,"failures":0})").out.find("claimed") != std::string::npos);
}
