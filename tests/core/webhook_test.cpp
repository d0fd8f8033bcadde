#include <doctest/doctest.h>

#include <string>

#include "abi_call.h"
#include "postbox/backoff.h"
#include "postbox/webhook.h"

using postbox::test::call;
using postbox::test::error_code_of;
namespace wh = postbox::webhook;

namespace {

constexpr int64_t kNow = 1700000000000;  // Tue, 14 Nov 2023 22:13:20 GMT

std::string outcome(const std::string& fields) {
  return call(pb_webhook, R"({"op":"outcome","now":1700000000000,)" + fields + "}").out;
}

}  // namespace

TEST_CASE("webhook outcome: every status class maps as the table says") {
  CHECK(outcome(R"("status":200)") == R"({"type":"ok","code":null,"after":null,"signal":"success"})");
  CHECK(outcome(R"("status":204)") == R"({"type":"ok","code":null,"after":null,"signal":"success"})");
  CHECK(outcome(R"("status":500)") == R"({"type":"retry","code":"http_500","after":null,"signal":"failure"})");
  CHECK(outcome(R"("status":503)") == R"({"type":"retry","code":"http_503","after":null,"signal":"failure"})");
  CHECK(outcome(R"("status":408)") == R"({"type":"retry","code":"http_408","after":null,"signal":"failure"})");
  CHECK(outcome(R"("status":429)") == R"({"type":"retry","code":"http_429","after":null,"signal":"neutral"})");
  CHECK(outcome(R"("status":410)") == R"({"type":"fail","code":"http_410","after":null,"signal":"gone"})");
  CHECK(outcome(R"("status":400)") == R"({"type":"fail","code":"http_400","after":null,"signal":"neutral"})");
  CHECK(outcome(R"("status":404)") == R"({"type":"fail","code":"http_404","after":null,"signal":"neutral"})");
  CHECK(outcome(R"("status":301)") == R"({"type":"fail","code":"http_301","after":null,"signal":"neutral"})");
  CHECK(outcome(R"("status":101)") == R"({"type":"fail","code":"http_101","after":null,"signal":"neutral"})");
  CHECK(outcome(R"("error":"network")") == R"({"type":"retry","code":"network_error","after":null,"signal":"failure"})");
  CHECK(outcome(R"("error":"timeout")") == R"({"type":"retry","code":"request_timeout","after":null,"signal":"failure"})");
}

TEST_CASE("webhook outcome: Retry-After in seconds or as a date, capped, ignored when unusable") {
  CHECK(outcome(R"("status":429,"retryAfter":"120")") == R"({"type":"retry","code":"http_429","after":120000,"signal":"neutral"})");
  CHECK(outcome(R"("status":503,"retryAfter":" 0 ")") == R"({"type":"retry","code":"http_503","after":0,"signal":"failure"})");
  // One hour after now, as an IMF-fixdate.
  CHECK(outcome(R"("status":503,"retryAfter":"Tue, 14 Nov 2023 23:13:20 GMT")") ==
        R"({"type":"retry","code":"http_503","after":3600000,"signal":"failure"})");
  // A date in the past means now.
  CHECK(outcome(R"("status":503,"retryAfter":"Sun, 06 Nov 1994 08:49:37 GMT")") ==
        R"({"type":"retry","code":"http_503","after":0,"signal":"failure"})");
  // Capped: the default 6 h, or the caller's cap.
  CHECK(outcome(R"("status":429,"retryAfter":"86400")") == R"({"type":"retry","code":"http_429","after":21600000,"signal":"neutral"})");
  CHECK(outcome(R"("status":429,"retryAfter":"86400","maxRetryAfterMs":60000)") ==
        R"({"type":"retry","code":"http_429","after":60000,"signal":"neutral"})");
  for (const char* bad : {"soon", "-5", "1.5", "", "12345678901", "Tue, 31 Nov 2023 23:13:20 GMT", "Tue, 14 Nov 2023 23:13:20 UTC",
                          "Tuesday, 14-Nov-23 23:13:20 GMT"}) {
    CAPTURE(bad);
    CHECK(outcome(std::string(R"("status":503,"retryAfter":")") + bad + "\"") ==
          R"({"type":"retry","code":"http_503","after":null,"signal":"failure"})");
  }
  // A success or a dead end ignores it.
  CHECK(outcome(R"("status":410,"retryAfter":"5")") == R"({"type":"fail","code":"http_410","after":null,"signal":"gone"})");
}

TEST_CASE("webhook outcome: bad input is a typed error") {
  CHECK(error_code_of(outcome(R"("status":200,"error":"network")")) == "invalid_input");
  CHECK(error_code_of(outcome("\"x\":1")) == "invalid_input");
  CHECK(error_code_of(outcome(R"("status":99)")) == "invalid_input");
  CHECK(error_code_of(outcome(R"("status":600)")) == "invalid_input");
  CHECK(error_code_of(outcome(R"("error":"dns")")) == "invalid_input");
  CHECK(error_code_of(call(pb_webhook, R"({"op":"outcome","status":200})").out) == "invalid_input");
  CHECK(error_code_of(call(pb_webhook, R"({"op":"explode"})").out) == "unknown_op");
}

TEST_CASE("webhook breaker: closed until threshold failures, then open with an event") {
  wh::Endpoint e;
  for (int i = 1; i < 3; ++i) {
    const wh::Record r = wh::record(e, wh::Signal::failure, kNow + i, 3, std::nullopt);
    CHECK(r.endpoint.state == wh::State::closed);
    CHECK(r.event.empty());
    e = r.endpoint;
  }
  CHECK(e.failures == 2);
  CHECK(e.failing_since == kNow + 1);
  const wh::Record opened = wh::record(e, wh::Signal::failure, kNow + 3, 3, std::nullopt);
  CHECK(opened.endpoint.state == wh::State::open);
  CHECK(opened.endpoint.opened_at == kNow + 3);
  CHECK(opened.event == "webhook_endpoint_paused");
  // A neutral answer (a 4xx) neither counts nor resets.
  const wh::Record neutral = wh::record(e, wh::Signal::neutral, kNow + 4, 3, std::nullopt);
  CHECK_FALSE(neutral.changed);
  CHECK(neutral.endpoint.failures == 2);
  // A success resets the count.
  const wh::Record reset = wh::record(e, wh::Signal::success, kNow + 4, 3, std::nullopt);
  CHECK(reset.changed);
  CHECK(reset.endpoint.failures == 0);
  CHECK_FALSE(reset.endpoint.failing_since.has_value());
  CHECK(reset.event.empty());
}

TEST_CASE("webhook breaker: open waits the cooldown, then one probe; its result closes or reopens") {
  wh::Endpoint open{wh::State::open, 5, kNow, kNow - 1000};
  wh::Gate g = wh::gate(open, kNow + 59999, 60000, 30000);
  CHECK_FALSE(g.deliver);
  CHECK(g.retry_at == kNow + 60000);
  g = wh::gate(open, kNow + 60000, 60000, 30000);
  CHECK(g.deliver);
  CHECK(g.probe);
  REQUIRE(g.write.has_value());
  CHECK(g.write->state == wh::State::half_open);
  CHECK(g.write->opened_at == kNow + 60000);
  // Others wait while the probe is out, looking again each second (so they follow soon after
  // it closes the breaker); a probe that never reported is replaced after probeMs.
  const wh::Endpoint probing = *g.write;
  g = wh::gate(probing, kNow + 60001, 60000, 30000);
  CHECK_FALSE(g.deliver);
  CHECK(g.retry_at == kNow + 61001);
  g = wh::gate(probing, kNow + 89500, 60000, 30000);
  CHECK_FALSE(g.deliver);
  CHECK(g.retry_at == kNow + 90000);
  g = wh::gate(probing, kNow + 90000, 60000, 30000);
  CHECK(g.probe);

  const wh::Record back = wh::record(probing, wh::Signal::success, kNow + 60500, 5, std::nullopt);
  CHECK(back.endpoint.state == wh::State::closed);
  CHECK(back.event == "webhook_endpoint_resumed");
  const wh::Record answered = wh::record(probing, wh::Signal::neutral, kNow + 60500, 5, std::nullopt);
  CHECK(answered.endpoint.state == wh::State::closed);
  const wh::Record again = wh::record(probing, wh::Signal::failure, kNow + 60500, 5, std::nullopt);
  CHECK(again.endpoint.state == wh::State::open);
  CHECK(again.endpoint.opened_at == kNow + 60500);
  CHECK(again.endpoint.failures == 6);
  CHECK(again.event == "webhook_endpoint_paused");
  CHECK(wh::gate(wh::Endpoint{}, kNow, 60000, 30000).deliver);
}

TEST_CASE("webhook breaker: 410 or failures lasting disableAfterMs disable; disabled stays") {
  const wh::Record gone = wh::record(wh::Endpoint{}, wh::Signal::gone, kNow, 5, std::nullopt);
  CHECK(gone.endpoint.state == wh::State::disabled);
  CHECK(gone.event == "webhook_endpoint_disabled");
  CHECK(gone.reason == "gone");
  const wh::Record still = wh::record(gone.endpoint, wh::Signal::success, kNow + 1, 5, std::nullopt);
  CHECK(still.endpoint.state == wh::State::disabled);
  CHECK_FALSE(still.changed);
  const wh::Gate g = wh::gate(gone.endpoint, kNow + 1, 60000, 30000);
  CHECK_FALSE(g.deliver);
  CHECK(g.disabled);

  wh::Endpoint failing{wh::State::open, 40, kNow - 10, kNow - 86400000};
  const wh::Record soon = wh::record(failing, wh::Signal::failure, kNow - 1, 5, 86400000);
  CHECK(soon.endpoint.state == wh::State::open);
  const wh::Record off = wh::record(failing, wh::Signal::failure, kNow, 5, 86400000);
  CHECK(off.endpoint.state == wh::State::disabled);
  CHECK(off.reason == "failing");
}

TEST_CASE("webhook breaker over the ABI: gate, record and their errors") {
  CHECK(call(pb_webhook, R"({"op":"gate","now":10,"cooldownMs":5,"probeMs":3,"endpoint":{"state":"open","failures":5,"openedAt":0}})").out ==
        R"({"deliver":true,"probe":true,"disabled":false,"retryAt":null,"endpoint":{"state":"half_open","failures":5,"openedAt":10,"failingSince":null}})");
  CHECK(call(pb_webhook, R"({"op":"record","now":10,"threshold":1,"signal":"gone","endpoint":{"state":"closed"}})").out ==
        R"({"endpoint":{"state":"disabled","failures":0,"openedAt":null,"failingSince":null},"changed":true,"event":{"type":"webhook_endpoint_disabled","reason":"gone"}})");
  CHECK(error_code_of(call(pb_webhook, R"({"op":"gate","now":1,"cooldownMs":5,"probeMs":3,"endpoint":{"state":"ajar"}})").out) == "invalid_input");
  CHECK(error_code_of(call(pb_webhook, R"({"op":"gate","now":1,"cooldownMs":5,"probeMs":3})").out) == "invalid_input");
  CHECK(error_code_of(call(pb_webhook, R"({"op":"record","now":1,"threshold":0,"signal":"failure","endpoint":{"state":"open"}})").out) == "invalid_input");
  CHECK(error_code_of(call(pb_webhook, R"({"op":"record","now":1,"threshold":1,"signal":"meh","endpoint":{"state":"open"}})").out) == "invalid_input");
}

TEST_CASE("webhook timestamp: within tolerance either way, else too_old / too_new / invalid") {
  auto ts = [](const std::string& t) {
    return call(pb_webhook, R"({"op":"timestamp","now":1700000000000,"toleranceSec":300,"timestamp":")" + t + "\"}").out;
  };
  CHECK(ts("1700000000") == R"({"ok":true,"timestamp":1700000000})");
  CHECK(ts("1699999700") == R"({"ok":true,"timestamp":1699999700})");
  CHECK(ts("1700000300") == R"({"ok":true,"timestamp":1700000300})");
  CHECK(ts("1699999699") == R"({"ok":false,"reason":"too_old"})");
  CHECK(ts("1700000301") == R"({"ok":false,"reason":"too_new"})");
  for (const char* bad : {"", "-1", "17e8", " 1700000000", "1700000000.5", "1234567890123"}) {
    CAPTURE(bad);
    CHECK(ts(bad) == R"({"ok":false,"reason":"invalid_timestamp"})");
  }
}

TEST_CASE("schedule: delays follow the entries, the last repeats, jitter takes at most a tenth") {
  const int64_t schedule[] = {5000, 300000, 1800000};
  for (uint32_t seed : {0u, 7u, 0xFFFFFFFFu}) {
    for (int64_t n = 1; n <= 6; ++n) {
      const int64_t entry = schedule[n <= 3 ? n - 1 : 2];
      const int64_t d = postbox::schedule_delay(schedule, 3, n, seed);
      CAPTURE(seed);
      CAPTURE(n);
      CHECK(d >= entry - entry / 10);
      CHECK(d <= entry);
    }
  }
  CHECK(postbox::schedule_delay(schedule, 3, 0, 1) >= 4500);
}

TEST_CASE("schedule: a policy with scheduleMs normalises with it and settles by it") {
  auto p = call(pb_policy, R"({"kind":"k","timeoutMs":1000,"retry":{"maxAttempts":4,"backoff":{"scheduleMs":[5000,300000]}}})");
  REQUIRE(p.rc == 0);
  CHECK(p.out.find(R"("warnAtStreak":null,"scheduleMs":[5000,300000],"perCode")") != std::string::npos);
  // Idempotent: the normalised policy reads back to itself.
  CHECK(call(pb_policy, p.out).out == p.out);
  const std::string job = R"(,"job":{"status":"running","attempts":)";
  auto settle = [&](int attempts) {
    return call(pb_settle, R"({"now":1000,"seed":3,"policy":)" + p.out + job + std::to_string(attempts) +
                               R"(},"outcome":{"type":"retry","code":"http_500"}})").out;
  };
  const std::string first = settle(0);
  CHECK(first.find(R"("status":"retrying")") != std::string::npos);
  const int64_t due1 = std::stoll(first.substr(first.find("\"dueAt\":") + 8));
  CHECK(due1 >= 1000 + 4500);
  CHECK(due1 <= 1000 + 5000);
  const std::string third = settle(2);
  const int64_t due3 = std::stoll(third.substr(third.find("\"dueAt\":") + 8));
  CHECK(due3 >= 1000 + 270000);
  CHECK(due3 <= 1000 + 300000);
  CHECK(settle(3).find(R"("status":"dead")") != std::string::npos);
  CHECK(error_code_of(call(pb_policy, R"({"kind":"k","timeoutMs":1,"retry":{"backoff":{"scheduleMs":[]}}})").out) == "invalid_policy");
  CHECK(error_code_of(call(pb_policy, R"({"kind":"k","timeoutMs":1,"retry":{"backoff":{"scheduleMs":[-1]}}})").out) == "invalid_policy");
  CHECK(error_code_of(call(pb_policy, R"({"kind":"k","timeoutMs":1,"retry":{"backoff":{"scheduleMs":[604800001]}}})").out) == "invalid_policy");
  CHECK(error_code_of(call(pb_policy, R"({"kind":"k","timeoutMs":1,"retry":{"backoff":{"scheduleMs":"5s"}}})").out) == "invalid_policy");
}

TEST_CASE("settle defer: nothing charged, counters kept, due after `after`, the code recorded") {
  const std::string policy = call(pb_policy, R"({"kind":"k","timeoutMs":1000})").out;
  auto settle = [&](const std::string& job, const std::string& outcome) {
    return call(pb_settle, R"({"now":1000,"seed":1,"policy":)" + policy + R"(,"job":)" + job + R"(,"outcome":)" + outcome + "}").out;
  };
  CHECK(settle(R"({"status":"running","attempts":0})", R"({"type":"defer","code":"endpoint_paused","after":60000})") ==
        R"({"status":"pending","dueAt":61000,"attempts":0,"crashes":0,"streakCode":null,"streak":0,"errorCode":"endpoint_paused",)"
        R"("errorMessage":null,"finished":false,"charged":false,"attemptOutcome":"defer","attempt":1,"events":[]})");
  CHECK(settle(R"({"status":"running","attempts":3,"crashes":1,"streakCode":"http_500","streak":3})", R"({"type":"defer"})") ==
        R"({"status":"retrying","dueAt":1000,"attempts":3,"crashes":1,"streakCode":"http_500","streak":3,"errorCode":"deferred",)"
        R"("errorMessage":null,"finished":false,"charged":false,"attemptOutcome":"defer","attempt":4,"events":[]})");
}

TEST_CASE("webhook config: the defaults and what is derived from the request timeout") {
  CHECK(call(pb_webhook, R"({"op":"config"})").out ==
        R"({"requestTimeoutMs":15000,"timeoutMs":20000,"probeMs":50000,)"
        R"("scheduleMs":[5000,300000,1800000,7200000,18000000,36000000,36000000,50400000,50400000,57600000],"maxAttempts":11,)"
        R"("maxRetryAfterMs":21600000,"breaker":{"threshold":10,"cooldownMs":300000,"disableAfterMs":432000000},)"
        R"("endpointReads":3,"recordTries":5,"probeTakenMs":1000})");
  // The job's timeout is the request's plus 5 s; a lost probe is replaced 30 s after that.
  CHECK(call(pb_webhook, R"({"op":"config","requestTimeoutMs":1})").out.find(R"("requestTimeoutMs":1,"timeoutMs":5001,"probeMs":35001,)") == 1);
  CHECK(call(pb_webhook, R"({"op":"config","requestTimeoutMs":590000})").out.find(R"("timeoutMs":595000,"probeMs":625000,)") != std::string::npos);
}

TEST_CASE("webhook config: a schedule, a Retry-After cap and the breaker as given") {
  const std::string out =
      call(pb_webhook, R"({"op":"config","scheduleMs":[0,60000],"maxRetryAfterMs":0,"breaker":{"threshold":1,"cooldownMs":0,"disableAfterMs":null}})").out;
  CHECK(out.find(R"("scheduleMs":[0,60000],"maxAttempts":3,"maxRetryAfterMs":0,"breaker":{"threshold":1,"cooldownMs":0,"disableAfterMs":null})") != std::string::npos);
  // A breaker given in part keeps the other defaults.
  CHECK(call(pb_webhook, R"({"op":"config","breaker":{"threshold":3}})").out.find(R"("breaker":{"threshold":3,"cooldownMs":300000,"disableAfterMs":432000000})") !=
        std::string::npos);
}

TEST_CASE("webhook config: out-of-range settings are typed errors naming the field") {
  const auto message = [](const std::string& in) { return call(pb_webhook, in).out; };
  CHECK(message(R"({"op":"config","requestTimeoutMs":0})") ==
        R"({"error":{"code":"invalid_input","message":"webhook: field 'requestTimeoutMs' must be an integer in [1, 590000]"}})");
  CHECK(message(R"({"op":"config","requestTimeoutMs":590001})").find("requestTimeoutMs") != std::string::npos);
  CHECK(message(R"({"op":"config","requestTimeoutMs":1.5})").find("invalid_input") != std::string::npos);
  CHECK(message(R"({"op":"config","scheduleMs":[]})") ==
        R"({"error":{"code":"invalid_input","message":"webhook: field 'scheduleMs' must have at least one entry"}})");
  CHECK(message(R"({"op":"config","scheduleMs":[-1]})").find("scheduleMs") != std::string::npos);
  CHECK(message(R"({"op":"config","scheduleMs":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33]})")
            .find("must have at most 32 items") != std::string::npos);
  CHECK(message(R"({"op":"config","maxRetryAfterMs":604800001})").find("maxRetryAfterMs") != std::string::npos);
  CHECK(message(R"({"op":"config","breaker":{"threshold":0}})") ==
        R"({"error":{"code":"invalid_input","message":"webhook: field 'breaker.threshold' must be an integer in [1, 1000]"}})");
  CHECK(message(R"({"op":"config","breaker":{"cooldownMs":-5}})").find("breaker.cooldownMs") != std::string::npos);
  CHECK(message(R"({"op":"config","breaker":{"disableAfterMs":"never"}})").find("breaker.disableAfterMs") != std::string::npos);
  CHECK(message(R"({"op":"config","breaker":7})").find("breaker") != std::string::npos);
}
