#include <doctest/doctest.h>

#include <string>

#include "abi_call.h"
#include "postbox/backoff.h"
#include "postbox/settle.h"

using postbox::backoff_delay;
using postbox::test::call;

namespace {

constexpr int64_t kNow = 1700000000000;

std::string policy(const std::string& definition) {
  auto r = call(pb_policy, definition);
  REQUIRE(r.rc == 0);
  return r.out;
}

std::string default_policy() { return policy(R"({"kind":"email.welcome","timeoutMs":30000})"); }

std::string input(const std::string& pol, const std::string& job, const std::string& outcome, uint32_t seed = 42) {
  return R"({"now":)" + std::to_string(kNow) + R"(,"seed":)" + std::to_string(seed) + R"(,"policy":)" + pol +
         R"(,"job":)" + job + R"(,"outcome":)" + outcome + "}";
}

std::string settle(const std::string& pol, const std::string& job, const std::string& outcome) {
  auto r = call(pb_settle, input(pol, job, outcome));
  CHECK(r.rc == 0);
  return r.out;
}

std::string due(int64_t delay) { return std::to_string(kNow + delay); }

const char* kJob = R"({"status":"running","attempts":2,"crashes":1,"streakCode":"x","streak":2})";

}  // namespace

TEST_CASE("settle: finished outcomes") {
  struct Row {
    const char* outcome;
    const char* expected;
  };
  const Row rows[] = {
      {R"({"type":"ok","message":"ignored"})",
       R"({"status":"succeeded","dueAt":null,"attempts":3,"crashes":0,"streakCode":null,"streak":0,"errorCode":null,"errorMessage":null,"finished":true,"charged":true,"attemptOutcome":"ok","attempt":3,"events":[]})"},
      {R"({"type":"cancel","reason":"user_left","message":"bye"})",
       R"({"status":"cancelled","dueAt":null,"attempts":3,"crashes":0,"streakCode":"x","streak":2,"errorCode":"user_left","errorMessage":"bye","finished":true,"charged":true,"attemptOutcome":"cancel","attempt":3,"events":[]})"},
      {R"({"type":"cancel"})",
       R"({"status":"cancelled","dueAt":null,"attempts":3,"crashes":0,"streakCode":"x","streak":2,"errorCode":"cancelled","errorMessage":null,"finished":true,"charged":true,"attemptOutcome":"cancel","attempt":3,"events":[]})"},
      {R"({"type":"fail","code":"bad_address","message":"no such user"})",
       R"({"status":"dead","dueAt":null,"attempts":3,"crashes":0,"streakCode":"x","streak":2,"errorCode":"bad_address","errorMessage":"no such user","finished":true,"charged":true,"attemptOutcome":"fail","attempt":3,"events":[{"type":"dead_letter","code":"bad_address","reason":"failed"}]})"},
  };
  const std::string pol = default_policy();
  for (const Row& row : rows) {
    CAPTURE(row.outcome);
    CHECK(settle(pol, kJob, row.outcome) == row.expected);
  }
}

TEST_CASE("settle: the ABI example (retry with after)") {
  CHECK(settle(default_policy(), R"({"status":"running","attempts":2,"crashes":0,"streakCode":"rate_limited","streak":1})",
               R"({"type":"retry","code":"rate_limited","after":5000,"message":"429"})") ==
        R"({"status":"retrying","dueAt":1700000005000,"attempts":3,"crashes":0,"streakCode":"rate_limited","streak":2,"errorCode":"rate_limited","errorMessage":"429","finished":false,"charged":true,"attemptOutcome":"retry","attempt":3,"events":[]})");
}

TEST_CASE("settle: retryable outcomes take the type's name as code and back off") {
  struct Row {
    const char* outcome;
    const char* code;
    int64_t streak;  // after this attempt, from kJob (streakCode x, streak 2)
  };
  const Row rows[] = {
      {R"({"type":"retry","code":"x"})", "x", 3},
      {R"({"type":"retry","code":"y"})", "y", 1},
      {R"({"type":"retry"})", "retry", 1},
      {R"({"type":"timeout"})", "timeout", 1},
      {R"({"type":"hook_failed"})", "hook_failed", 1},
      {R"({"type":"invalid_payload"})", "invalid_payload", 1},
      {R"({"type":"timeout","code":"x"})", "x", 3},
  };
  const std::string pol = default_policy();
  for (const Row& row : rows) {
    CAPTURE(row.outcome);
    const std::string type = std::string(row.outcome).substr(9, std::string(row.outcome).find('"', 9) - 9);
    CHECK(settle(pol, kJob, row.outcome) ==
          R"({"status":"retrying","dueAt":)" + due(backoff_delay(3, 30000, 3600000, 42)) +
              R"(,"attempts":3,"crashes":0,"streakCode":")" + row.code + R"(","streak":)" + std::to_string(row.streak) +
              R"(,"errorCode":")" + row.code + R"(","errorMessage":null,"finished":false,"charged":true,"attemptOutcome":")" +
              type + R"(","attempt":3,"events":[]})");
  }
}

TEST_CASE("settle: the attempt budget") {
  const std::string pol = policy(R"({"kind":"k","timeoutMs":1000,"retry":{"maxAttempts":3,"perCode":{"rate_limited":{"maxAttempts":50}}}})");
  CHECK(settle(pol, R"({"status":"running","attempts":2})", R"({"type":"retry","code":"boom"})") ==
        R"({"status":"dead","dueAt":null,"attempts":3,"crashes":0,"streakCode":"boom","streak":1,"errorCode":"boom","errorMessage":null,"finished":true,"charged":true,"attemptOutcome":"retry","attempt":3,"events":[{"type":"dead_letter","code":"boom","reason":"attempts_exhausted"}]})");
  CHECK(settle(pol, R"({"status":"running","attempts":1})", R"({"type":"retry","code":"boom","after":7})") ==
        R"({"status":"retrying","dueAt":1700000000007,"attempts":2,"crashes":0,"streakCode":"boom","streak":1,"errorCode":"boom","errorMessage":null,"finished":false,"charged":true,"attemptOutcome":"retry","attempt":2,"events":[]})");
  // A per-code budget replaces the policy's for that code only.
  CHECK(settle(pol, R"({"status":"running","attempts":25})", R"({"type":"retry","code":"rate_limited","after":1})")
            .find(R"("status":"retrying")") != std::string::npos);
  CHECK(settle(pol, R"({"status":"running","attempts":49})", R"({"type":"retry","code":"rate_limited","after":1})")
            .find(R"("events":[{"type":"dead_letter","code":"rate_limited","reason":"attempts_exhausted"}])") != std::string::npos);
}

TEST_CASE("settle: a job's own maxAttempts replaces its kind's budget, not a code's") {
  const std::string pol = policy(R"({"kind":"k","timeoutMs":1000,"retry":{"maxAttempts":3,"perCode":{"rate_limited":{"maxAttempts":50}}}})");
  const auto status_of = [&](const std::string& job, const std::string& outcome) {
    const std::string out = settle(pol, job, outcome);
    return out.substr(0, out.find(','));
  };
  // The kind allows 3; this job allows 5, another only 1.
  CHECK(status_of(R"({"status":"running","attempts":2,"maxAttempts":5})", R"({"type":"retry","code":"boom","after":1})") == R"({"status":"retrying")");
  CHECK(status_of(R"({"status":"running","attempts":4,"maxAttempts":5})", R"({"type":"retry","code":"boom","after":1})") == R"({"status":"dead")");
  CHECK(status_of(R"({"status":"running","attempts":0,"maxAttempts":1})", R"({"type":"timeout"})") == R"({"status":"dead")");
  // null is the kind's budget.
  CHECK(status_of(R"({"status":"running","attempts":2,"maxAttempts":null})", R"({"type":"retry","code":"boom","after":1})") == R"({"status":"dead")");
  // A per-code budget still rules while that code is the failure.
  CHECK(status_of(R"({"status":"running","attempts":10,"maxAttempts":2})", R"({"type":"retry","code":"rate_limited","after":1})") == R"({"status":"retrying")");
  CHECK(call(pb_settle, input(pol, R"({"status":"running","attempts":0,"maxAttempts":0})", R"({"type":"ok"})")).out ==
        R"({"error":{"code":"invalid_input","message":"settle: field 'job.maxAttempts' must be an integer in [1, 1000]"}})");
}

TEST_CASE("settle: default streak caps for timeout (5) and invalid_payload (3)") {
  const std::string pol = default_policy();
  CHECK(settle(pol, R"({"status":"running","attempts":4,"streakCode":"timeout","streak":3})", R"({"type":"timeout"})")
            .find(R"("status":"retrying")") != std::string::npos);
  CHECK(settle(pol, R"({"status":"running","attempts":4,"streakCode":"timeout","streak":4})", R"({"type":"timeout"})") ==
        R"({"status":"dead","dueAt":null,"attempts":5,"crashes":0,"streakCode":"timeout","streak":5,"errorCode":"timeout","errorMessage":null,"finished":true,"charged":true,"attemptOutcome":"timeout","attempt":5,"events":[{"type":"dead_letter","code":"timeout","reason":"streak_exhausted"}]})");
  CHECK(settle(pol, R"({"status":"running","attempts":2,"streakCode":"invalid_payload","streak":2})", R"({"type":"invalid_payload","message":"bad"})") ==
        R"({"status":"dead","dueAt":null,"attempts":3,"crashes":0,"streakCode":"invalid_payload","streak":3,"errorCode":"invalid_payload","errorMessage":"bad","finished":true,"charged":true,"attemptOutcome":"invalid_payload","attempt":3,"events":[{"type":"dead_letter","code":"invalid_payload","reason":"streak_exhausted"}]})");
  // A different code in between restarts the streak.
  CHECK(settle(pol, R"({"status":"running","attempts":2,"streakCode":"other","streak":9})", R"({"type":"invalid_payload"})")
            .find(R"("streak":1,)") != std::string::npos);
}

TEST_CASE("settle: onExhaustion cancel, streak rules and warnAtStreak") {
  const std::string pol = policy(
      R"({"kind":"k","timeoutMs":1000,"warnAtStreak":2,"retry":{"perCode":{"bounced":{"streak":2,"onExhaustion":"cancel"},"flaky":4}}})");
  CHECK(settle(pol, R"({"status":"running","attempts":1,"streakCode":"bounced","streak":1})", R"({"type":"fail","code":"x"})")
            .find(R"("status":"dead")") != std::string::npos);
  CHECK(settle(pol, R"({"status":"running","attempts":1,"streakCode":"bounced","streak":1})", R"({"type":"retry","code":"bounced"})") ==
        R"({"status":"cancelled","dueAt":null,"attempts":2,"crashes":0,"streakCode":"bounced","streak":2,"errorCode":"bounced","errorMessage":null,"finished":true,"charged":true,"attemptOutcome":"retry","attempt":2,"events":[{"type":"streak_warning","code":"bounced","streak":2},{"type":"cancelled","code":"bounced","reason":"streak_exhausted"}]})");
  CHECK(settle(pol, R"({"status":"running","attempts":1,"streakCode":"flaky","streak":1})", R"({"type":"retry","code":"flaky","after":10})") ==
        R"({"status":"retrying","dueAt":1700000000010,"attempts":2,"crashes":0,"streakCode":"flaky","streak":2,"errorCode":"flaky","errorMessage":null,"finished":false,"charged":true,"attemptOutcome":"retry","attempt":2,"events":[{"type":"streak_warning","code":"flaky","streak":2}]})");
  // The warning fires once, when the streak equals warnAtStreak, not after.
  CHECK(settle(pol, R"({"status":"running","attempts":1,"streakCode":"flaky","streak":2})", R"({"type":"retry","code":"flaky","after":10})")
            .find(R"("events":[])") != std::string::npos);
}

TEST_CASE("settle: maxDelayMs caps both after and backoff") {
  const std::string pol = policy(
      R"({"kind":"k","timeoutMs":1000,"retry":{"backoff":{"baseMs":3600000,"maxMs":3600000},"perCode":{"rate_limited":{"maxDelayMs":600000},"zero":{"maxDelayMs":0}}}})");
  CHECK(settle(pol, R"({"status":"running","attempts":0})", R"({"type":"retry","code":"rate_limited","after":9999999})")
            .find(R"("dueAt":1700000600000,)") != std::string::npos);
  CHECK(settle(pol, R"({"status":"running","attempts":0})", R"({"type":"retry","code":"rate_limited"})")
            .find(R"("dueAt":1700000600000,)") != std::string::npos);
  CHECK(settle(pol, R"({"status":"running","attempts":0})", R"({"type":"retry","code":"zero","after":5})")
            .find(R"("dueAt":1700000000000,)") != std::string::npos);
  // Uncapped codes back off between half and all of the 1 h ceiling.
  const int64_t d = backoff_delay(1, 3600000, 3600000, 42);
  CHECK(d >= 1800000);
  CHECK(d <= 3600000);
  CHECK(settle(pol, R"({"status":"running","attempts":0})", R"({"type":"retry","code":"other"})")
            .find(R"("dueAt":)" + due(d) + ",") != std::string::npos);
}

TEST_CASE("settle: crash and crash_loop are not charged") {
  const std::string pol = default_policy();
  CHECK(settle(pol, R"({"status":"running","attempts":4,"crashes":0,"streakCode":"x","streak":2})", R"({"type":"crash","message":"isolate died"})") ==
        R"({"status":"retrying","dueAt":)" + due(backoff_delay(1, 30000, 3600000, 42)) +
            R"(,"attempts":4,"crashes":1,"streakCode":"x","streak":2,"errorCode":"crash","errorMessage":"isolate died","finished":false,"charged":false,"attemptOutcome":"crash","attempt":5,"events":[]})");
  CHECK(settle(pol, R"({"status":"running","attempts":4,"crashes":1})", R"({"type":"crash"})")
            .find(R"("dueAt":)" + due(backoff_delay(2, 30000, 3600000, 42)) + R"(,"attempts":4,"crashes":2,)") != std::string::npos);
  CHECK(settle(pol, R"({"status":"running","attempts":4,"crashes":2})", R"({"type":"crash"})") ==
        R"({"status":"dead","dueAt":null,"attempts":4,"crashes":3,"streakCode":null,"streak":0,"errorCode":"crash_loop","errorMessage":null,"finished":true,"charged":false,"attemptOutcome":"crash","attempt":5,"events":[{"type":"crash_loop","crashes":3},{"type":"dead_letter","code":"crash_loop","reason":"crash_loop"}]})");
}

TEST_CASE("settle: claim_late charges nothing and keeps the error fields") {
  const std::string pol = default_policy();
  CHECK(settle(pol, R"({"status":"running","attempts":0})", R"({"type":"claim_late"})") ==
        R"({"status":"pending","dueAt":1700000005000,"attempts":0,"crashes":0,"streakCode":null,"streak":0,"errorCode":null,"errorMessage":null,"finished":false,"charged":false,"attemptOutcome":"claim_late","attempt":1,"events":[]})");
  CHECK(settle(pol, R"({"status":"running","attempts":2,"crashes":1,"streakCode":"x","streak":2,"errorCode":"x","errorMessage":"earlier"})", R"({"type":"claim_late"})") ==
        R"({"status":"retrying","dueAt":1700000005000,"attempts":2,"crashes":1,"streakCode":"x","streak":2,"errorCode":"x","errorMessage":"earlier","finished":false,"charged":false,"attemptOutcome":"claim_late","attempt":3,"events":[]})");
}

TEST_CASE("settle: released (claimed ahead, never started) charges nothing and is due at once") {
  const std::string pol = default_policy();
  CHECK(settle(pol, R"({"status":"running","attempts":0})", R"({"type":"released"})") ==
        R"({"status":"pending","dueAt":1700000000000,"attempts":0,"crashes":0,"streakCode":null,"streak":0,"errorCode":null,"errorMessage":null,"finished":false,"charged":false,"attemptOutcome":"released","attempt":1,"events":[]})");
  CHECK(settle(pol, R"({"status":"running","attempts":3,"crashes":0,"streakCode":"x","streak":1,"errorCode":"x","errorMessage":"m"})", R"({"type":"released"})") ==
        R"({"status":"retrying","dueAt":1700000000000,"attempts":3,"crashes":0,"streakCode":"x","streak":1,"errorCode":"x","errorMessage":"m","finished":false,"charged":false,"attemptOutcome":"released","attempt":4,"events":[]})");
}

TEST_CASE("settle: messages are cut to 2000 bytes on a UTF-8 boundary") {
  std::string message(1999, 'a');
  message += "\xc3\xa9";  // é straddles the limit
  const std::string out = settle(default_policy(), R"({"status":"running","attempts":0})",
                                 R"({"type":"retry","after":1,"message":")" + message + "\"}");
  CHECK(out.find(R"("errorMessage":")" + std::string(1999, 'a') + "\",") != std::string::npos);
  // Control characters and quotes are escaped.
  CHECK(settle(default_policy(), R"({"status":"running","attempts":0})", R"({"type":"fail","message":"a\"b\u0001\n"})")
            .find(R"("errorMessage":"a\"b\u0001\n")") != std::string::npos);
}

TEST_CASE("settle: invalid inputs") {
  const std::string pol = default_policy();
  struct Row {
    std::string input;
    const char* expected;
  };
  const Row rows[] = {
      {input(pol, R"({"status":"pending","attempts":0})", R"({"type":"ok"})"),
       R"({"error":{"code":"invalid_input","message":"settle: job is not running"}})"},
      {input(pol, R"({"status":"running"})", R"({"type":"ok"})"),
       R"({"error":{"code":"invalid_input","message":"settle: field 'job.attempts' is required"}})"},
      {input(pol, R"({"status":"running","attempts":-1})", R"({"type":"ok"})"),
       R"({"error":{"code":"invalid_input","message":"settle: field 'job.attempts' must be an integer in [0, 1000000]"}})"},
      {input(pol, R"({"status":"running","attempts":0})", R"({"type":"explode"})"),
       R"({"error":{"code":"invalid_input","message":"settle: field 'outcome.type' must be one of ok, retry, fail, cancel, timeout, crash, claim_late, released, hook_failed, invalid_payload, defer"}})"},
      {input(R"({"kind":"k"})", R"({"status":"running","attempts":0})", R"({"type":"ok"})"),
       R"({"error":{"code":"invalid_policy","message":"settle: field 'policy.timeoutMs' is required"}})"},
      {R"({"seed":1,"policy":)" + pol + R"(,"job":{"status":"running","attempts":0},"outcome":{"type":"ok"}})",
       R"({"error":{"code":"invalid_input","message":"settle: field 'now' is required"}})"},
      {R"({"now":1e3,"seed":1})", R"({"error":{"code":"invalid_input","message":"settle: field 'now' must be an integer in [0, 9007199254740991]"}})"},
      {R"({"now":9007199254740992,"seed":1})", R"({"error":{"code":"invalid_input","message":"settle: field 'now' must be an integer in [0, 9007199254740991]"}})"},
      {R"({"now":1,"seed":4294967296})", R"({"error":{"code":"invalid_input","message":"settle: field 'seed' must be an integer in [0, 4294967295]"}})"},
      {R"({"now":"1"})", R"({"error":{"code":"invalid_input","message":"settle: field 'now' must be an integer"}})"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.input);
    auto r = call(pb_settle, row.input);
    CHECK(r.rc == 1);
    CHECK(r.out == row.expected);
  }
}

TEST_CASE("settle: batch form settles each item and reports errors per item") {
  const std::string pol = default_policy();
  const std::string good = input(pol, R"({"status":"running","attempts":0})", R"({"type":"ok"})");
  const std::string bad = input(pol, R"({"status":"dead","attempts":0})", R"({"type":"ok"})");
  auto r = call(pb_settle, R"({"batch":[)" + good + "," + bad + ",7]}");
  CHECK(r.rc == 0);
  CHECK(r.out ==
        R"({"results":[{"status":"succeeded","dueAt":null,"attempts":1,"crashes":0,"streakCode":null,"streak":0,"errorCode":null,"errorMessage":null,"finished":true,"charged":true,"attemptOutcome":"ok","attempt":1,"events":[]},)"
        R"({"error":{"code":"invalid_input","message":"settle: batch[1]: job is not running"}},)"
        R"({"error":{"code":"invalid_input","message":"settle: batch[2]: must be an object"}}]})");
  CHECK(call(pb_settle, R"({"batch":[]})").out == R"({"results":[]})");

  std::string many = R"({"batch":[)";
  for (int i = 0; i < 1001; ++i) many += (i ? ",{}" : "{}");
  many += "]}";
  auto over = call(pb_settle, many);
  CHECK(over.rc == 1);
  CHECK(over.out == R"({"error":{"code":"invalid_input","message":"settle: field 'batch' must have at most 1000 items"}})");
  CHECK(call(pb_settle, R"({"batch":{}})").out == R"({"error":{"code":"invalid_input","message":"settle: field 'batch' must be an array"}})");
}

TEST_CASE("settle: a batch's shared policies, named by index, decide as the same policies inline") {
  const std::string a = policy(R"({"kind":"a","timeoutMs":1000,"retry":{"maxAttempts":2}})");
  const std::string b = policy(R"({"kind":"b","timeoutMs":1000,"retry":{"perCode":{"slow":{"maxDelayMs":5}}}})");
  const auto item = [](const std::string& pol, const char* outcome) {
    return input(pol, R"({"status":"running","attempts":1})", outcome);
  };
  const char* retry = R"({"type":"retry","code":"slow"})";
  const std::string inline_form = R"({"batch":[)" + item(a, retry) + "," + item(b, retry) + "," + item(a, R"({"type":"ok"})") + "]}";
  const std::string shared_form = R"({"policies":[)" + a + "," + b + R"(],"batch":[)" + item("0", retry) + "," + item("1", retry) + "," +
                                  item("0", R"({"type":"ok"})") + "]}";
  const auto inline_out = call(pb_settle, inline_form);
  CHECK(inline_out.rc == 0);
  CHECK(call(pb_settle, shared_form).out == inline_out.out);
  // The policies may follow the batch; an item may still carry its own policy.
  CHECK(call(pb_settle, R"({"batch":[)" + item("1", retry) + "," + item(a, retry) + R"(],"policies":[)" + a + "," + b + "]}").out ==
        call(pb_settle, R"({"batch":[)" + item(b, retry) + "," + item(a, retry) + "]}").out);
  // A bad index is that item's error; a bad shared policy fails the call.
  CHECK(call(pb_settle, R"({"policies":[)" + a + R"(],"batch":[)" + item("1", retry) + "]}").out ==
        R"({"results":[{"error":{"code":"invalid_input","message":"settle: field 'batch[0].policy' must be an integer in [0, 0]"}}]})");
  CHECK(call(pb_settle, R"({"policies":[{"kind":"a"}],"batch":[]})").out ==
        R"({"error":{"code":"invalid_policy","message":"settle: field 'policies[0].timeoutMs' is required"}})");
  // Without shared policies a number is not a policy.
  CHECK(call(pb_settle, R"({"batch":[)" + item("0", retry) + "]}").out ==
        R"({"results":[{"error":{"code":"invalid_input","message":"settle: field 'batch[0].policy' must be an object"}}]})");
}

TEST_CASE("settle: ok({ commit }) on a store that cannot run it fails the job at once, never retries it") {
  const std::string out = settle(default_policy(), kJob, R"({"type":"commit_unsupported","code":"ignored","message":"ignored too"})");
  CHECK(out.find(R"("status":"dead")") != std::string::npos);
  CHECK(out.find(R"x("errorCode":"commit_unsupported","errorMessage":"the handler returned ok({ commit }), but this store cannot run user code inside its settlement transaction")x") !=
        std::string::npos);
  CHECK(out.find(R"("attemptOutcome":"fail")") != std::string::npos);
  // Charged like any failure; dead whatever budget is left (20 attempts by default, 3 used here).
  CHECK(settle(default_policy(), kJob, R"({"type":"commit_unsupported"})").find(R"("attempts":3,)") != std::string::npos);
}

TEST_CASE("settle: a handler that returned no outcome, or threw unclassified, retries under a fixed code") {
  const std::string none = settle(default_policy(), kJob, R"({"type":"none"})");
  CHECK(none.find(R"("status":"retrying")") != std::string::npos);
  CHECK(none.find(R"x("errorCode":"invalid_outcome","errorMessage":"handler returned no outcome: return ok(), retry(), fail() or cancel()")x") !=
        std::string::npos);
  CHECK(none.find(R"("attemptOutcome":"retry")") != std::string::npos);
  CHECK(none.find(R"("charged":true)") != std::string::npos);
  const std::string thrown = settle(default_policy(), kJob, R"({"type":"thrown","message":"boom"})");
  CHECK(thrown.find(R"("errorCode":"unexpected","errorMessage":"boom")") != std::string::npos);
  CHECK(thrown.find(R"("attemptOutcome":"retry")") != std::string::npos);
  // A classify that returned something that is no outcome: the error's message is kept.
  CHECK(settle(default_policy(), kJob, R"({"type":"none","message":"boom"})").find(R"("errorCode":"invalid_outcome","errorMessage":"boom")") !=
        std::string::npos);
  // The same as an explicit retry with those codes.
  CHECK(thrown == settle(default_policy(), kJob, R"({"type":"retry","code":"unexpected","message":"boom"})"));
}

TEST_CASE("settle: the attempt number shown is charged attempts plus one; a crash keeps its number") {
  const std::string pol = default_policy();
  auto attempt_of = [&](const char* job, const char* outcome) {
    const std::string out = settle(pol, job, outcome);
    const size_t at = out.find(R"("attempt":)");
    return out.substr(at + 10, out.find(',', at) - at - 10);
  };
  CHECK(attempt_of(R"({"status":"running","attempts":0})", R"({"type":"ok"})") == "1");
  CHECK(attempt_of(R"({"status":"running","attempts":2})", R"({"type":"retry"})") == "3");
  // Two crashes in a row: neither is charged, both show attempt 3 (the one that crashed).
  CHECK(attempt_of(R"({"status":"running","attempts":2,"crashes":0})", R"({"type":"crash"})") == "3");
  CHECK(attempt_of(R"({"status":"running","attempts":2,"crashes":1})", R"({"type":"crash"})") == "3");
  CHECK(attempt_of(R"({"status":"running","attempts":2})", R"({"type":"claim_late"})") == "3");
}

TEST_CASE("settle: a malformed handler outcome is the handler's fault (invalid_outcome), never a refusal") {
  const std::string pol = default_policy();
  const std::string job = R"({"status":"running","attempts":0})";
  struct Row {
    const char* outcome;
    const char* message;
  };
  const Row rows[] = {
      {R"({"type":"retry","after":1.5})", "handler outcome's after must be a whole number of ms from 0 to 10 years"},
      {R"({"type":"retry","code":"a\u0000b"})", "handler outcome's code must be a string of 1 to 128 bytes without control characters"},
      {R"({"type":"fail","code":""})", "handler outcome's code must be a string of 1 to 128 bytes without control characters"},
      {R"({"type":"fail","code":7})", "handler outcome's code must be a string of 1 to 128 bytes without control characters"},
      {R"({"type":"cancel","reason":"line\nbreak"})", "handler outcome's reason must be a string of 1 to 128 bytes without control characters"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.outcome);
    const std::string out = settle(pol, job, row.outcome);
    CHECK(out.find(R"("status":"retrying")") != std::string::npos);
    CHECK(out.find(R"("errorCode":"invalid_outcome")") != std::string::npos);
    CHECK(out.find(std::string(R"("errorMessage":")") + row.message + "\"") != std::string::npos);
  }
  // A code of 128 bytes is fine; 129 is not.
  CHECK(settle(pol, job, R"({"type":"fail","code":")" + std::string(128, 'c') + "\"}").find(R"("status":"dead")") != std::string::npos);
  CHECK(settle(pol, job, R"({"type":"fail","code":")" + std::string(129, 'c') + "\"}").find(R"("errorCode":"invalid_outcome")") !=
        std::string::npos);
}

TEST_CASE("settle: error text is made storable: U+0000 and lone surrogates become U+FFFD") {
  const std::string pol = default_policy();
  const std::string job = R"({"status":"running","attempts":0})";
  CHECK(settle(pol, job, R"({"type":"thrown","message":"bad\u0000byte"})").find("\"errorMessage\":\"bad\xEF\xBF\xBD" "byte\"") !=
        std::string::npos);
  CHECK(settle(pol, job, R"({"type":"thrown","message":"lone \ud800 half"})").find("\"errorMessage\":\"lone \xEF\xBF\xBD half\"") !=
        std::string::npos);
  // A message of any length is cut, never refused.
  const std::string huge(1100000, 'm');
  CHECK(settle(pol, job, R"({"type":"thrown","message":")" + huge + "\"}").find(R"("errorCode":"unexpected")") != std::string::npos);
  // The row's own text, read back, too.
  CHECK(settle(pol, R"({"status":"running","attempts":0,"errorMessage":"x\ud800"})", R"({"type":"claim_late"})")
            .find("\"errorMessage\":\"x\xEF\xBF\xBD\"") != std::string::npos);
}

TEST_CASE("hooks: an attempt that never started settles without them; a commit runs only on success") {
  using postbox::OutcomeType;
  for (OutcomeType type : {OutcomeType::ok, OutcomeType::cancel, OutcomeType::fail, OutcomeType::retry, OutcomeType::timeout,
                           OutcomeType::hook_failed, OutcomeType::invalid_payload, OutcomeType::crash, OutcomeType::defer}) {
    CAPTURE(postbox::outcome_name(type));
    CHECK(postbox::outcome_runs_hooks(type));
  }
  CHECK_FALSE(postbox::outcome_runs_hooks(OutcomeType::claim_late));
  CHECK_FALSE(postbox::outcome_runs_hooks(OutcomeType::released));
  auto r = call(pb_settle, R"({"op":"hooks"})");
  CHECK(r.rc == 0);
  CHECK(r.out == R"({"withoutHooks":["claim_late","released"],"commitStatus":"succeeded"})");
  auto bad = call(pb_settle, R"({"op":"purge"})");
  CHECK(bad.rc != 0);
  CHECK(bad.out.find("unknown_op") != std::string::npos);
}

TEST_CASE("unclassified: what a handler did instead of an outcome settles as the table says") {
  for (const char* name : {"none", "thrown", "commit_unsupported"}) {
    CAPTURE(name);
    const postbox::Unclassified* u = postbox::unclassified_from_name(name);
    REQUIRE(u != nullptr);
    CHECK(u->name == name);
  }
  CHECK(postbox::unclassified_from_name("ok") == nullptr);
  CHECK(postbox::unclassified_from_name("retry") == nullptr);
  CHECK(postbox::unclassified_from_name("none")->as == postbox::OutcomeType::retry);
  CHECK(postbox::unclassified_from_name("none")->code == "invalid_outcome");
  CHECK(postbox::unclassified_from_name("thrown")->code == "unexpected");
  CHECK(postbox::unclassified_from_name("thrown")->message.empty());
  CHECK(postbox::unclassified_from_name("commit_unsupported")->as == postbox::OutcomeType::fail);
  CHECK(postbox::unclassified_from_name("commit_unsupported")->replaces_message);
  // A handler's own message of a none is kept; thrown keeps the error's.
  CHECK(settle(default_policy(), kJob, R"({"type":"none","message":"mine"})").find(R"("errorMessage":"mine")") != std::string::npos);
  CHECK(settle(default_policy(), kJob, R"({"type":"thrown","message":"boom"})").find(R"("errorCode":"unexpected","errorMessage":"boom")") != std::string::npos);
}
