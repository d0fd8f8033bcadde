// What to do when writing a settlement failed. The shim reports what it saw (which part failed,
// whether the session is broken, the server's SQLSTATE, how many tries so far); this decides.
//
// A lost connection is infrastructure, never the job's fault: the settlement (hook included)
// is tried again on a fresh session and nothing is charged. Only a hook that failed on a live
// session is the user's failure (`hook_failed`, charged like a retry). After kMaxSettleTries
// tries the shim gives up and the lease decides: the sweep recovers the attempt as a crash.
//
// A schedule occurrence uses the same rule for "lost": a lost connection is tried again on a
// fresh session up to kMaxScheduleTries, then left to the next tick's catch-up (`give_up`,
// nothing recorded); any other error is the occurrence's own failure (`fail`: reported, and
// passed over, since trying the same code again in the same tick would fail the same way).
#include "postbox/settle.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

namespace {

// SQLSTATEs that mean the session itself is gone: class 08 (connection exception) and the
// operator interventions that end a backend (57P01 admin shutdown, 57P02 crash shutdown,
// 57P03 cannot connect now).
bool is_connection_state(std::string_view state) {
  if (state.size() != 5) return false;
  if (state.substr(0, 2) == "08") return true;
  return state == "57P01" || state == "57P02" || state == "57P03";
}

// Class 22 (data exception: U+0000 in text, a bad escape in jsonb) and class 23 (a constraint,
// such as a CHECK the application added): the server refused a row's data, not the session.
bool is_data_state(std::string_view state) {
  if (state.size() != 5) return false;
  return state.substr(0, 2) == "22" || state.substr(0, 2) == "23";
}

}  // namespace

std::string sanitized_error_message(std::optional<std::string_view> sql_state) {
  std::string text = "the attempt's error text was refused by the database";
  if (sql_state) {
    text += " (SQLSTATE ";
    text += *sql_state;
    text += ")";
  }
  text += " and replaced by this note";
  return text;
}

SettleFailureAction decide_settle_failure(const SettleFailure& failure) {
  const bool lost = failure.session_broken || (failure.sql_state && is_connection_state(*failure.sql_state));
  // One row's data must not fail the rows written with it: halve the statement until the row
  // is alone, then write that row with its error text replaced; if even that is refused, the
  // lease decides (the sweep recovers it as a crash) while the others stay settled.
  if (failure.part == SettlePart::write && !lost && failure.sql_state && is_data_state(*failure.sql_state)) {
    if (failure.rows > 1) return SettleFailureAction::split;
    return failure.sanitized ? SettleFailureAction::give_up : SettleFailureAction::sanitize;
  }
  if (failure.part == SettlePart::schedule) {
    if (!lost) return SettleFailureAction::fail;
    return failure.tries < kMaxScheduleTries ? SettleFailureAction::retry_fresh_session : SettleFailureAction::give_up;
  }
  if (failure.part == SettlePart::hook && !lost) return SettleFailureAction::hook_failed;
  // A write that failed on a live session (a timeout, a lock) is retried the same way: the
  // statement is idempotent under the attempt fence.
  return failure.tries < kMaxSettleTries ? SettleFailureAction::retry_fresh_session : SettleFailureAction::give_up;
}

std::string_view settle_failure_action_name(SettleFailureAction action) {
  switch (action) {
    case SettleFailureAction::retry_fresh_session: return "retry";
    case SettleFailureAction::hook_failed: return "hook_failed";
    case SettleFailureAction::give_up: return "give_up";
    case SettleFailureAction::fail: return "fail";
    case SettleFailureAction::split: return "split";
    case SettleFailureAction::sanitize: return "sanitize";
  }
  return "give_up";
}

Status run_settle_failure(od::value& value, const Where& parent, JsonWriter& out) {
  const Where where = parent.nested("failure");
  Result<od::object> obj = input::read_object(value, parent, "failure");
  if (!obj) return obj.take_error();
  SettleFailure failure;
  bool has_part = false;
  bool has_tries = false;
  Status status = input::for_each_field(obj.value(), where, [&](std::string_view key, od::value& v) -> Status {
    if (key == "part") {
      Result<std::string_view> part = input::read_string(v, where, "part", 16);
      if (!part) return part.take_error();
      if (part.value() == "write") failure.part = SettlePart::write;
      else if (part.value() == "hook") failure.part = SettlePart::hook;
      else if (part.value() == "schedule") failure.part = SettlePart::schedule;
      else return input::field_error(where, "part", "must be \"write\", \"hook\" or \"schedule\"");
      has_part = true;
    } else if (key == "sessionBroken") {
      Result<bool> broken = input::read_bool(v, where, "sessionBroken");
      if (!broken) return broken.take_error();
      failure.session_broken = broken.value();
    } else if (key == "sqlState") {
      Result<std::optional<std::string_view>> state = input::read_nullable_string(v, where, "sqlState", 5);
      if (!state) return state.take_error();
      failure.sql_state = state.value();
    } else if (key == "tries") {
      Result<int64_t> tries = input::read_int(v, where, "tries", 1, 1000);
      if (!tries) return tries.take_error();
      failure.tries = static_cast<int32_t>(tries.value());
      has_tries = true;
    } else if (key == "rows") {
      Result<int64_t> rows = input::read_int(v, where, "rows", 1, 100000);
      if (!rows) return rows.take_error();
      failure.rows = static_cast<int32_t>(rows.value());
    } else if (key == "sanitized") {
      Result<bool> sanitized = input::read_bool(v, where, "sanitized");
      if (!sanitized) return sanitized.take_error();
      failure.sanitized = sanitized.value();
    }
    return ok_status();
  });
  if (!status) return status;
  if (!has_part) return input::missing(where, "part");
  if (!has_tries) return input::missing(where, "tries");
  const SettleFailureAction action = decide_settle_failure(failure);
  out.begin_object();
  out.field("next", settle_failure_action_name(action));
  if (action == SettleFailureAction::sanitize) out.field("errorMessage", sanitized_error_message(failure.sql_state));
  out.end_object();
  return ok_status();
}

}  // namespace postbox
