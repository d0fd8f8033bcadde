// The numeric admit and pump entries answer exactly what the JSON ops answer, over a grid of
// inputs, and refuse what the JSON ops refuse.
#include <cmath>
#include <string>

#include "abi_call.h"
#include <doctest/doctest.h>
#include "postbox/abi.h"
#include "postbox/numbers.h"

using postbox::test::call;
using postbox::test::error_code_of;

namespace {

std::string num(double v) { return std::to_string(static_cast<long long>(v)); }
std::string maybe(double v) { return v == -1 ? "null" : num(v); }

// The JSON op's answer, rebuilt from a numeric call's code and outputs.
std::string admit_as_json(int32_t rc, bool heartbeats) {
  if (rc == 2) return R"({"start":false,"reason":"released"})";
  if (rc == 3) return R"({"start":false,"reason":"claim_late"})";
  const double* o = pb_numbers_out();
  std::string s = R"({"start":true,"deadline":)" + num(o[0]) + R"(,"timerMs":)" + num(o[1]);
  if (o[2] != -1) s += R"(,"attempt":)" + num(o[2]);
  if (heartbeats) s += R"(,"stopAt":)" + num(o[3]) + R"(,"heartbeatAt":)" + maybe(o[4]);
  return s + "}";
}

std::string pump_as_json(int32_t rc) {
  static const char* const kActions[] = {"", "claim", "settle", "wait", "done"};
  const double* o = pb_numbers_out();
  return std::string(R"({"action":")") + kActions[rc] + R"(","claim":)" + num(o[0]) + R"(,"waitMs":)" + maybe(o[1]) + "}";
}

}  // namespace

TEST_CASE("numbers: admit agrees with the JSON op on every combination of a grid") {
  int compared = 0;
  for (double now : {0.0, 1000.0, 50000.0}) {
    for (double deadline : {0.0, 30000.0, 900000.0}) {
      for (double lease : {5000.0, 40000.0, 200000.0}) {
        for (double timeout : {1.0, 2000.0, 60000.0}) {
          for (double beat : {-1.0, 1000.0, 5000.0}) {
            for (double attempts : {-1.0, 0.0, 4.0}) {
              std::string json = R"({"op":"admit","now":)" + num(now) + R"(,"deadlineAt":)" + num(deadline) +
                                 R"(,"leaseExpiresAt":)" + num(lease) + R"(,"timeoutMs":)" + num(timeout);
              if (beat != -1) json += R"(,"heartbeatMs":)" + num(beat);
              if (attempts != -1) json += R"(,"attempts":)" + num(attempts);
              json += "}";
              const std::string expected = call(pb_claim, json).out;
              const int32_t rc = pb_admit_numbers(now, deadline, lease, timeout, beat, attempts);
              REQUIRE(rc >= 1);
              CHECK(admit_as_json(rc, beat != -1) == expected);
              ++compared;
            }
          }
        }
      }
    }
  }
  CHECK(compared == 729);
}

TEST_CASE("numbers: admit refuses what the JSON op refuses") {
  CHECK(error_code_of(call(pb_claim, R"({"op":"admit","now":0,"deadlineAt":1,"leaseExpiresAt":1,"timeoutMs":0})").out) == "invalid_input");
  CHECK(pb_admit_numbers(0, 1, 1, 0, -1, -1) == 0);      // timeout below 1 ms
  CHECK(pb_admit_numbers(0.5, 1, 1, 10, -1, -1) == 0);   // not a whole number
  CHECK(pb_admit_numbers(NAN, 1, 1, 10, -1, -1) == 0);
  CHECK(pb_admit_numbers(0, 1, 1, 10, 500, -1) == 0);    // heartbeat below 1 s
  CHECK(pb_admit_numbers(0, 1, 1, 10, -1, -2) == 0);     // attempts below 0 (and not the -1 of absent)
  CHECK(pb_admit_numbers(-5, 1, 1, 10, -1, -1) == 0);
}

TEST_CASE("numbers: pump agrees with the JSON op on every combination of a grid") {
  int compared = 0;
  for (double c : {1.0, 8.0, 32.0}) {
    for (double running : {0.0, 1.0, 8.0}) {
      for (double buffered : {0.0, 8.0, 30.0}) {
        for (double settles : {0.0, 3.0, 16.0}) {
          for (double may : {0.0, 1.0}) {
            for (double remaining : {-1.0, 0.0, 5.0}) {
              for (double slowest : {-1.0, 2.0, 15000.0}) {
                for (double age : {-1.0, 5.0, 25.0}) {
                  for (double statement : {-1.0, 12.0}) {
                    for (double budget : {-1.0, 10.0}) {
                      const double max_batch = c == 32 ? 40 : -1;  // absent: the default
                      std::string json = R"({"op":"pump","concurrency":)" + num(c) + R"(,"running":)" + num(running) +
                                         R"(,"buffered":)" + num(buffered) + R"(,"settles":)" + num(settles) +
                                         R"(,"mayClaim":)" + (may == 1 ? "true" : "false") + R"(,"remaining":)" +
                                         maybe(remaining) + R"(,"slowestRecentMs":)" + maybe(slowest) +
                                         R"(,"oldestSettleAgeMs":)" + maybe(age) + R"(,"slackMs":null,"statementMs":)" +
                                         maybe(statement);
                      if (max_batch != -1) json += R"(,"maxBatch":)" + num(max_batch);
                      if (budget != -1) json += R"(,"maxJobs":)" + num(budget) + R"(,"claimed":4)";
                      json += "}";
                      const std::string expected = call(pb_claim, json).out;
                      const int32_t rc = pb_pump_numbers(c, running, buffered, settles, may, remaining, slowest, age, -1,
                                                         statement, max_batch, budget, budget == -1 ? -1 : 4);
                      REQUIRE(rc >= 1);
                      CHECK(pump_as_json(rc) == expected);
                      ++compared;
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  CHECK(compared == 17496);
}

TEST_CASE("numbers: pump refuses what the JSON op refuses") {
  CHECK(pb_pump_numbers(0, 0, 0, 0, 1, -1, -1, -1, -1, -1, -1, -1, -1) == 0);     // concurrency below 1
  CHECK(pb_pump_numbers(1, 0, 0, 0, 2, -1, -1, -1, -1, -1, -1, -1, -1) == 0);     // mayClaim neither 0 nor 1
  CHECK(pb_pump_numbers(1, 0.5, 0, 0, 1, -1, -1, -1, -1, -1, -1, -1, -1) == 0);   // a fraction
  CHECK(pb_pump_numbers(1, 0, 0, 0, 1, -3, -1, -1, -1, -1, -1, -1, -1) == 0);     // a negative other than absent
  CHECK(pb_pump_numbers(1, 0, 0, 0, 1, -1, -1, -1, -1, 1.5, -1, -1, -1) == 0);
  CHECK(pb_pump_numbers(1, 0, 0, 0, 1, -1, -1, -1, -1, -1, -1, -1, -1) == 1);     // all absent is fine
}

namespace {

// The JSON op's answer, rebuilt from a numeric ok settlement.
std::string settle_ok_as_json() {
  const double* o = pb_numbers_out();
  const auto flag = [](double v) { return v == 1 ? std::string("true") : std::string("false"); };
  return std::string(R"({"results":[{"status":")") + postbox::kJobStatuses[static_cast<int>(o[0])] + R"(","dueAt":)" + maybe(o[1]) +
         R"(,"attempts":)" + num(o[2]) + R"(,"crashes":)" + num(o[3]) + R"(,"streakCode":null,"streak":)" + num(o[4]) +
         R"(,"errorCode":null,"errorMessage":null,"finished":)" + flag(o[5]) + R"(,"charged":)" + flag(o[6]) +
         R"(,"attemptOutcome":"ok","attempt":)" + num(o[7]) + R"(,"events":[]}]})";
}

}  // namespace

TEST_CASE("numbers: an ok settlement agrees with the JSON op, whatever the job's streak and error text") {
  int compared = 0;
  for (double now : {0.0, 1700000000000.0}) {
    for (double attempts : {0.0, 1.0, 7.0, 1000000.0}) {
      for (double crashes : {0.0, 4.0}) {
        for (double streak : {0.0, 3.0}) {
          for (double max_attempts : {-1.0, 1.0, 1000.0}) {
            // The text the row carries (a streak, the last error) goes into the JSON op but not the numeric entry: ok clears it.
            std::string json = R"({"policies":[{"kind":"k","timeoutMs":1000}],"batch":[{"now":)" + num(now) +
                               R"(,"seed":7,"policy":0,"job":{"status":"running","attempts":)" + num(attempts) + R"(,"crashes":)" +
                               num(crashes) + R"(,"streak":)" + num(streak) + R"(,"streakCode":"rate_limited","errorCode":"rate_limited","errorMessage":"429")";
            if (max_attempts != -1) json += R"(,"maxAttempts":)" + num(max_attempts);
            json += R"(},"outcome":{"type":"ok"}}]})";
            const std::string expected = call(pb_settle, json).out;
            REQUIRE(pb_settle_ok_numbers(now, attempts, crashes, streak, max_attempts) == 1);
            CHECK(settle_ok_as_json() == expected);
            ++compared;
          }
        }
      }
    }
  }
  CHECK(compared == 96);
}

TEST_CASE("numbers: an ok settlement refuses what the JSON op refuses") {
  const double nan = std::nan("");
  CHECK(pb_settle_ok_numbers(-1, 0, 0, 0, -1) == 0);
  CHECK(pb_settle_ok_numbers(nan, 0, 0, 0, -1) == 0);
  CHECK(pb_settle_ok_numbers(1000, 1000001, 0, 0, -1) == 0);
  CHECK(pb_settle_ok_numbers(1000, 0.5, 0, 0, -1) == 0);
  CHECK(pb_settle_ok_numbers(1000, 0, -2, 0, -1) == 0);
  CHECK(pb_settle_ok_numbers(1000, 0, 0, nan, -1) == 0);
  CHECK(pb_settle_ok_numbers(1000, 0, 0, 0, 0) == 0);
  CHECK(pb_settle_ok_numbers(1000, 0, 0, 0, 1001) == 0);
  CHECK(pb_settle_ok_numbers(1000, 0, 0, 0, 1000) == 1);
}
