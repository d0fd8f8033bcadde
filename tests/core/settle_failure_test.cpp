#include <doctest/doctest.h>

#include <string>

#include "abi_call.h"
#include "postbox/settle.h"

using postbox::SettleFailure;
using postbox::SettleFailureAction;
using postbox::SettlePart;
using postbox::decide_settle_failure;

namespace {

SettleFailure failure(SettlePart part, bool broken, std::optional<std::string_view> state, int32_t tries) {
  SettleFailure f;
  f.part = part;
  f.session_broken = broken;
  f.sql_state = state;
  f.tries = tries;
  return f;
}

}  // namespace

TEST_CASE("settle failure: a hook that throws on a live session is the hook's failure") {
  CHECK(decide_settle_failure(failure(SettlePart::hook, false, std::nullopt, 1)) == SettleFailureAction::hook_failed);
  // A constraint violation or a user error is not the connection.
  CHECK(decide_settle_failure(failure(SettlePart::hook, false, std::string_view("23505"), 1)) == SettleFailureAction::hook_failed);
  CHECK(decide_settle_failure(failure(SettlePart::hook, false, std::string_view("P0001"), 2)) == SettleFailureAction::hook_failed);
}

TEST_CASE("settle failure: a connection lost inside a hook retries the settle on a fresh session") {
  // The backend killed under the hook (pg_terminate_backend: 57P01).
  CHECK(decide_settle_failure(failure(SettlePart::hook, false, std::string_view("57P01"), 1)) == SettleFailureAction::retry_fresh_session);
  CHECK(decide_settle_failure(failure(SettlePart::hook, false, std::string_view("57P02"), 1)) == SettleFailureAction::retry_fresh_session);
  CHECK(decide_settle_failure(failure(SettlePart::hook, false, std::string_view("57P03"), 1)) == SettleFailureAction::retry_fresh_session);
  // Class 08: connection exceptions.
  CHECK(decide_settle_failure(failure(SettlePart::hook, false, std::string_view("08006"), 1)) == SettleFailureAction::retry_fresh_session);
  // No SQLSTATE (the socket closed), but the session says it is broken.
  CHECK(decide_settle_failure(failure(SettlePart::hook, true, std::nullopt, 1)) == SettleFailureAction::retry_fresh_session);
  // 57014 (query cancelled) is not a lost session.
  CHECK(decide_settle_failure(failure(SettlePart::hook, false, std::string_view("57014"), 1)) == SettleFailureAction::hook_failed);
}

TEST_CASE("settle failure: tries are bounded; then the lease decides") {
  CHECK(decide_settle_failure(failure(SettlePart::write, true, std::nullopt, 1)) == SettleFailureAction::retry_fresh_session);
  CHECK(decide_settle_failure(failure(SettlePart::write, false, std::nullopt, 1)) == SettleFailureAction::retry_fresh_session);
  CHECK(decide_settle_failure(failure(SettlePart::write, true, std::nullopt, postbox::kMaxSettleTries)) == SettleFailureAction::give_up);
  CHECK(decide_settle_failure(failure(SettlePart::hook, true, std::nullopt, postbox::kMaxSettleTries)) == SettleFailureAction::give_up);
  // A hook's own failure is settled as hook_failed whatever the count.
  CHECK(decide_settle_failure(failure(SettlePart::hook, false, std::nullopt, 5)) == SettleFailureAction::hook_failed);
}

TEST_CASE("settle failure: through pb_settle") {
  using postbox::test::call;
  auto r = call(pb_settle, R"({"failure":{"part":"hook","sessionBroken":false,"sqlState":"57P01","tries":1}})");
  CHECK(r.rc == 0);
  CHECK(r.out == R"({"next":"retry"})");
  r = call(pb_settle, R"({"failure":{"part":"hook","sessionBroken":false,"sqlState":null,"tries":1}})");
  CHECK(r.out == R"({"next":"hook_failed"})");
  r = call(pb_settle, R"({"failure":{"part":"write","sessionBroken":true,"tries":2}})");
  CHECK(r.out == R"({"next":"give_up"})");
  r = call(pb_settle, R"({"failure":{"part":"commit","tries":1}})");
  CHECK(r.rc == 1);
  CHECK(r.out == R"({"error":{"code":"invalid_input","message":"settle: field 'failure.part' must be \"write\", \"hook\" or \"schedule\""}})");
  r = call(pb_settle, R"({"failure":{"part":"hook"}})");
  CHECK(r.rc == 1);
  CHECK(r.out.find("failure.tries") != std::string::npos);
  r = call(pb_settle, R"({"failure":{"part":"hook","tries":0}})");
  CHECK(r.rc == 1);
}

TEST_CASE("settle failure: a schedule occurrence retries a lost connection, fails anything else") {
  using postbox::test::call;
  // The connection rule is the settle's: class 08, 57P01-57P03, or a broken session.
  CHECK(decide_settle_failure(failure(SettlePart::schedule, false, std::string_view("57P01"), 1)) == SettleFailureAction::retry_fresh_session);
  CHECK(decide_settle_failure(failure(SettlePart::schedule, false, std::string_view("08006"), 2)) == SettleFailureAction::retry_fresh_session);
  CHECK(decide_settle_failure(failure(SettlePart::schedule, true, std::nullopt, 1)) == SettleFailureAction::retry_fresh_session);
  // Bounded: the third lost try leaves the occurrence to the next tick's catch-up.
  CHECK(decide_settle_failure(failure(SettlePart::schedule, true, std::nullopt, postbox::kMaxScheduleTries)) == SettleFailureAction::give_up);
  // The user's own error (a throw from `run`, a constraint, a cancelled query) fails at once.
  CHECK(decide_settle_failure(failure(SettlePart::schedule, false, std::nullopt, 1)) == SettleFailureAction::fail);
  CHECK(decide_settle_failure(failure(SettlePart::schedule, false, std::string_view("23505"), 1)) == SettleFailureAction::fail);
  CHECK(decide_settle_failure(failure(SettlePart::schedule, false, std::string_view("57014"), 1)) == SettleFailureAction::fail);
  CHECK(call(pb_settle, R"({"failure":{"part":"schedule","sessionBroken":false,"sqlState":"57P01","tries":3}})").out == R"({"next":"give_up"})");
  CHECK(call(pb_settle, R"({"failure":{"part":"schedule","sessionBroken":false,"sqlState":null,"tries":1}})").out == R"({"next":"fail"})");
}

namespace {

SettleFailure data_failure(std::string_view state, int32_t rows, bool sanitized) {
  SettleFailure f = failure(SettlePart::write, false, state, 1);
  f.rows = rows;
  f.sanitized = sanitized;
  return f;
}

}  // namespace

TEST_CASE("settle failure: a row the database refuses is split off; its text replaced; the rest settle") {
  // 22021 (U+0000 in text), 22P05 (an escape jsonb refuses), 23514 (an application's CHECK).
  for (std::string_view state : {"22021", "22P05", "22P02", "23514"}) {
    CHECK(decide_settle_failure(data_failure(state, 40, false)) == SettleFailureAction::split);
    CHECK(decide_settle_failure(data_failure(state, 2, false)) == SettleFailureAction::split);
    CHECK(decide_settle_failure(data_failure(state, 1, false)) == SettleFailureAction::sanitize);
    // Refused again with its text replaced: the lease decides, the others stay settled.
    CHECK(decide_settle_failure(data_failure(state, 1, true)) == SettleFailureAction::give_up);
  }
  // Not data: a lock timeout or a lost connection is retried whole, as before.
  CHECK(decide_settle_failure(data_failure("55P03", 40, false)) == SettleFailureAction::retry_fresh_session);
  CHECK(decide_settle_failure(data_failure("08006", 40, false)) == SettleFailureAction::retry_fresh_session);
  SettleFailure broken = data_failure("22021", 40, false);
  broken.session_broken = true;
  CHECK(decide_settle_failure(broken) == SettleFailureAction::retry_fresh_session);
  // A hook's own data error is still the hook's failure.
  CHECK(decide_settle_failure(failure(SettlePart::hook, false, std::string_view("22021"), 1)) == SettleFailureAction::hook_failed);
}

TEST_CASE("settle failure: split and sanitize through pb_settle") {
  using postbox::test::call;
  CHECK(call(pb_settle, R"({"failure":{"part":"write","sessionBroken":false,"sqlState":"22021","tries":1,"rows":41}})").out ==
        R"({"next":"split"})");
  CHECK(call(pb_settle, R"({"failure":{"part":"write","sessionBroken":false,"sqlState":"22021","tries":1,"rows":1}})").out ==
        R"({"next":"sanitize","errorMessage":"the attempt's error text was refused by the database (SQLSTATE 22021) and replaced by this note"})");
  CHECK(call(pb_settle, R"({"failure":{"part":"write","sessionBroken":false,"sqlState":"22021","tries":1,"rows":1,"sanitized":true}})").out ==
        R"({"next":"give_up"})");
  CHECK(call(pb_settle, R"({"failure":{"part":"write","tries":1,"rows":0}})").rc == 1);
}
