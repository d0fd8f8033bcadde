// Leases: the margin derived from the work a lease covers, heartbeats that extend a window
// shorter than the timeout, and admit / pump / sweep kept consistent with both.
#include <doctest/doctest.h>

#include <string>

#include "abi_call.h"
#include "postbox/policy.h"

using postbox::test::call;

namespace {

std::string lease_of(const std::string& definition) {
  const std::string out = call(pb_policy, definition).out;
  const auto at = out.find("\"leaseMs\":");
  if (at == std::string::npos) return out;
  return out.substr(at + 10, out.find(',', at) - at - 10);
}

std::string heartbeat(int64_t now, int64_t deadline, int64_t lease, int64_t timeout, const char* every) {
  return call(pb_claim, R"({"op":"heartbeat","now":)" + std::to_string(now) + R"(,"deadline":)" + std::to_string(deadline) +
                            R"(,"leaseExpiresAt":)" + std::to_string(lease) + R"(,"timeoutMs":)" + std::to_string(timeout) +
                            R"(,"heartbeatMs":)" + every + "}")
      .out;
}

std::string admit(int64_t now, int64_t deadline_at, int64_t lease, int64_t timeout, const char* every) {
  return call(pb_claim, R"({"op":"admit","now":)" + std::to_string(now) + R"(,"deadlineAt":)" + std::to_string(deadline_at) +
                            R"(,"leaseExpiresAt":)" + std::to_string(lease) + R"(,"timeoutMs":)" + std::to_string(timeout) +
                            R"(,"heartbeatMs":)" + every + "}")
      .out;
}

}  // namespace

TEST_CASE("lease: the margin is the span clamped to 6-30 s; a third of it is the settle reserve, the rest the claim slack") {
  using namespace postbox;
  CHECK(settle_margin_ms(1) == 6000);
  CHECK(settle_margin_ms(6000) == 6000);
  CHECK(settle_margin_ms(12000) == 12000);
  CHECK(settle_margin_ms(30000) == 30000);
  CHECK(settle_margin_ms(600000) == 30000);
  CHECK(settle_reserve_ms(1000) == 2000);
  CHECK(claim_slack_ms(1000) == 4000);
  CHECK(settle_reserve_ms(30000) == 10000);
  CHECK(claim_slack_ms(30000) == 20000);
  CHECK(settle_reserve_ms(12000) == 4000);
  CHECK(claim_slack_ms(12000) == 8000);
  // With heartbeats every E, a lease covers min(timeout, 3E).
  CHECK(lease_span_ms(600000, 10000) == 30000);
  CHECK(lease_span_ms(20000, 10000) == 20000);
  CHECK(lease_span_ms(30000, 10000) == 30000);
  CHECK(lease_span_ms(600000, std::nullopt) == 600000);
}

TEST_CASE("lease: a short timeout gets a short lease, not timeout + 30 s") {
  CHECK(lease_of(R"({"kind":"k","timeoutMs":1})") == "6001");
  CHECK(lease_of(R"({"kind":"k","timeoutMs":1000})") == "7000");
  CHECK(lease_of(R"({"kind":"k","timeoutMs":2000})") == "8000");
  CHECK(lease_of(R"({"kind":"k","timeoutMs":10000})") == "20000");
  CHECK(lease_of(R"({"kind":"k","timeoutMs":30000})") == "60000");
  CHECK(lease_of(R"({"kind":"k","timeoutMs":300000})") == "330000");
}

TEST_CASE("lease: with heartbeats a long job's lease is a window of three beats plus its margin") {
  // heartbeat: true beats every clamp(timeout / 10, 1 s, 10 s).
  CHECK(call(pb_policy, R"({"kind":"k","timeoutMs":600000,"heartbeat":true})").out.find(R"("leaseMs":60000,)") != std::string::npos);
  CHECK(call(pb_policy, R"({"kind":"k","timeoutMs":600000,"heartbeat":true})").out.find(R"("heartbeatMs":10000,)") != std::string::npos);
  CHECK(call(pb_policy, R"({"kind":"k","timeoutMs":60000,"heartbeat":true})").out.find(R"("heartbeatMs":6000,)") != std::string::npos);
  CHECK(lease_of(R"({"kind":"k","timeoutMs":60000,"heartbeat":true})") == "36000");
  CHECK(call(pb_policy, R"({"kind":"k","timeoutMs":5000,"heartbeat":true})").out.find(R"("heartbeatMs":1000,)") != std::string::npos);
  CHECK(lease_of(R"({"kind":"k","timeoutMs":60000,"heartbeat":{"everyMs":1000}})") == "9000");
  // Beats slower than a third of the timeout do not shorten the lease.
  CHECK(lease_of(R"({"kind":"k","timeoutMs":20000,"heartbeat":{"everyMs":10000}})") == "40000");
  // Off, null and the normalised form.
  const std::string off = call(pb_policy, R"({"kind":"k","timeoutMs":60000,"heartbeat":false})").out;
  CHECK(off == call(pb_policy, R"({"kind":"k","timeoutMs":60000})").out);
  CHECK(off == call(pb_policy, R"({"kind":"k","timeoutMs":60000,"heartbeat":null})").out);
  CHECK(off.find("heartbeatMs") == std::string::npos);
  const std::string on = call(pb_policy, R"({"kind":"k","timeoutMs":60000,"heartbeat":{"everyMs":2000}})").out;
  CHECK(call(pb_policy, on).out == on);
  CHECK(on.find(R"("warnAtStreak":null,"heartbeatMs":2000,"perCode")") != std::string::npos);
}

TEST_CASE("lease: bad heartbeat options name the field") {
  CHECK(call(pb_policy, R"({"kind":"k","timeoutMs":1000,"heartbeat":{"everyMs":999}})").out ==
        R"({"error":{"code":"invalid_policy","message":"policy: field 'heartbeat.everyMs' must be an integer in [1000, 600000]"}})");
  CHECK(call(pb_policy, R"({"kind":"k","timeoutMs":1000,"heartbeat":{"every":1000}})").out ==
        R"({"error":{"code":"invalid_policy","message":"policy: field 'heartbeat.every' is not a known field"}})");
  CHECK(call(pb_policy, R"({"kind":"k","timeoutMs":1000,"heartbeat":"yes"})").out ==
        R"({"error":{"code":"invalid_policy","message":"policy: field 'heartbeat' must be true, false, null or an object"}})");
  CHECK(call(pb_policy, R"({"kind":"k","timeoutMs":1000,"heartbeatMs":600001})").out ==
        R"({"error":{"code":"invalid_policy","message":"policy: field 'heartbeatMs' must be an integer in [1000, 600000]"}})");
}

TEST_CASE("lease: admit checks the lease against the span and its reserve, the invocation against the timeout") {
  // A 1 s job: lease 7 s, reserve 2 s, so it may wait up to 4 s for a slot.
  CHECK(call(pb_claim, R"({"op":"admit","now":4000,"deadlineAt":100000,"leaseExpiresAt":7000,"timeoutMs":1000})").out ==
        R"({"start":true,"deadline":5000,"timerMs":1000})");
  CHECK(call(pb_claim, R"({"op":"admit","now":4001,"deadlineAt":100000,"leaseExpiresAt":7000,"timeoutMs":1000})").out ==
        R"({"start":false,"reason":"claim_late"})");
  // A 10 min job beating every 10 s: lease 60 s (span 30 s, reserve 10 s, slack 20 s). It starts
  // while 30 s of work + 10 s fit in the lease; the invocation must still hold all 10 min.
  CHECK(admit(20000, 900000, 60000, 600000, "10000") == R"({"start":true,"deadline":620000,"timerMs":600000,"stopAt":50000,"heartbeatAt":30000})");
  CHECK(admit(20001, 900000, 60000, 600000, "10000") == R"({"start":false,"reason":"claim_late"})");
  CHECK(admit(0, 599999, 60000, 600000, "10000") == R"({"start":false,"reason":"released"})");
  // A lease that already covers the attempt needs no beat.
  CHECK(admit(0, 900000, 40000, 20000, "10000") == R"({"start":true,"deadline":20000,"timerMs":20000,"stopAt":33334,"heartbeatAt":null})");
  CHECK(admit(0, 900000, 60000, 600000, "null") == R"({"start":false,"reason":"claim_late"})");
}

TEST_CASE("lease: a heartbeat extends to min(now + span, deadline) + reserve, never shortens, and is refused once expired") {
  // Started at 0, deadline 600 s, beats every 10 s: span 30 s, reserve 10 s.
  CHECK(heartbeat(10000, 600000, 60000, 600000, "10000") ==
        R"({"extend":true,"leaseExpiresAt":60000,"stopAt":50000,"nextAt":20000})");
  CHECK(heartbeat(25000, 600000, 60000, 600000, "10000") ==
        R"({"extend":true,"leaseExpiresAt":65000,"stopAt":55000,"nextAt":35000})");
  // Near the deadline the lease stops at deadline + reserve; once it covers that, no more beats.
  CHECK(heartbeat(580000, 600000, 600000, 600000, "10000") ==
        R"({"extend":true,"leaseExpiresAt":610000,"stopAt":600000,"nextAt":590000})");
  CHECK(heartbeat(590000, 600000, 605000, 600000, "10000") ==
        R"({"extend":true,"leaseExpiresAt":610000,"stopAt":600000,"nextAt":600000})");
  CHECK(heartbeat(595000, 600000, 610000, 600000, "10000") ==
        R"({"extend":true,"leaseExpiresAt":610000,"stopAt":600000,"nextAt":null})");
  // Expired: a recovery may already be taking the job.
  CHECK(heartbeat(60000, 600000, 60000, 600000, "10000") == R"({"extend":false,"reason":"lease_expired"})");
  // A kind without heartbeats: its lease covers the attempt already, so a beat only checks it.
  CHECK(heartbeat(5000, 30000, 60000, 30000, "null") == R"({"extend":true,"leaseExpiresAt":60000,"stopAt":50000,"nextAt":null})");
  CHECK(call(pb_claim, R"({"op":"heartbeat","now":1,"deadline":2,"leaseExpiresAt":3})").out ==
        R"({"error":{"code":"invalid_input","message":"claim: field 'timeoutMs' is required"}})");
}

TEST_CASE("lease: the claim plan reports the smallest claim slack, and the pump sizes its lookahead by it") {
  CHECK(call(pb_claim, R"({"op":"plan","now":0,"deadlineAt":900000,"concurrency":4,"policies":[{"kind":"a","timeoutMs":1000},{"kind":"b","timeoutMs":60000}]})").out ==
        R"({"limit":4,"kinds":["a","b"],"leaseMs":[7000,90000],"versionCutoff":null,"targetOnly":false,"slackMs":4000})");
  CHECK(call(pb_claim, R"({"op":"plan","now":0,"deadlineAt":900000,"concurrency":4,"policies":[{"kind":"b","timeoutMs":60000}]})").out ==
        R"({"limit":4,"kinds":["b"],"leaseMs":[90000],"versionCutoff":null,"targetOnly":false,"slackMs":20000})");
  CHECK(call(pb_claim, R"({"op":"plan","now":0,"deadlineAt":1,"concurrency":4,"policies":[{"kind":"b","timeoutMs":60000}]})").out ==
        R"({"limit":0,"kinds":[],"leaseMs":[],"versionCutoff":null,"targetOnly":false,"slackMs":null})");
  // 1.5 s handlers: 20 s of slack holds four batches ahead (the most), 4 s only two.
  CHECK(call(pb_claim, R"({"op":"pump","concurrency":2,"mayClaim":true,"slowestRecentMs":1500})").out ==
        R"({"action":"claim","claim":10,"waitMs":null})");
  CHECK(call(pb_claim, R"({"op":"pump","concurrency":2,"mayClaim":true,"slowestRecentMs":1500,"slackMs":4000})").out ==
        R"({"action":"claim","claim":6,"waitMs":null})");
}

TEST_CASE("lease: the sweep judges a kind by the lease a whole attempt needs, heartbeats or not") {
  const std::string out = call(pb_sweep, R"({"op":"plan","now":0,"startedAt":0,"policies":[)"
                                         R"({"kind":"long","timeoutMs":600000,"heartbeat":true},{"kind":"edge","timeoutMs":150000},)"
                                         R"({"kind":"over","timeoutMs":150001}]})")
                              .out;
  CAPTURE(out);
  CHECK(out.find(R"({"type":"drain","kinds":["edge"])") != std::string::npos);
  CHECK(out.find(R"({"lane":"default","kinds":["long","over"]})") != std::string::npos);
}
