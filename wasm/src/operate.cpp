// pb_operate: what an operator's action does to a job. Each action lists the statuses it
// applies to; any other status is refused with invalid_state rather than silently ignored.
// The same table answers which actions a status allows (op "actions"), so a dashboard offers
// exactly what the decision would accept.
#include "postbox/dependencies.h"
#include "postbox/families.h"
#include "postbox/settle.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

namespace {

enum class Due { none, now };

struct Action {
  std::string_view name;
  std::string_view from[4];
  std::string_view to;  // empty: the status stays as it is
  Due due;
  bool fresh_budget;  // the retry budget starts again (kFreshBudget)
  bool nudge;         // the job is due now: tell the queue rather than wait for a sweep
};

// What a fresh retry budget starts from: no charged attempts, no crashes, no failure streak (its
// code goes with it). The stores write these numbers, and stamp replayed_at.
struct Budget {
  int64_t attempts, crashes, streak;
};
constexpr Budget kFreshBudget{0, 0, 0};

constexpr Action kActions[] = {
    // A waiting job (dependencies.h) can be cancelled, and is never made due by hand: only its
    // parents release it.
    {"cancel", {"pending", "retrying", "running", "waiting"}, "cancelled", Due::none, false, false},
    {"replay", {"dead", "cancelled", {}, {}}, "pending", Due::now, true, true},
    {"retryNow", {"pending", "retrying", {}, {}}, "", Due::now, false, true},
};

constexpr std::string_view kStatuses[] = {"pending", "running", "retrying", "succeeded", "dead", "cancelled", "waiting"};

bool is_status(std::string_view s) {
  for (std::string_view known : kStatuses) {
    if (s == known) return true;
  }
  return false;
}

bool applies(const Action& action, std::string_view status) {
  bool allowed = false;
  for (std::string_view from : action.from) allowed = allowed || (!from.empty() && from == status);
  return allowed;
}

// What an operator's decision reads of a job. `code` and `parents` matter to a replay only: a
// job its parent's failure cancelled (code parent_failed) answers to its parents again.
struct OperatedJob {
  std::string_view status;
  bool parent_failed = false;
  // Its parents, as the store counted them for this action: failed (dead or cancelled, not
  // replayed by the same action) and open (unfinished, or replayed by the same action).
  std::optional<int64_t> failed_parents, open_parents;
};

// Reads "job":{"status":…, "code"?, "parents"?: {"failed":n, "open":n}}; other job fields are ignored.
Status read_job(od::value& field, const Where& where, std::string_view key, OperatedJob& job) {
  Result<od::object> obj = input::read_object(field, where, key);
  if (!obj) return obj.take_error();
  const Where inner = where.nested("job");
  return input::for_each_field(obj.value(), inner, [&](std::string_view jkey, od::value& jfield) -> Status {
    if (jkey == "code") {
      Result<std::optional<std::string_view>> c = input::read_nullable_text(jfield, inner, jkey);
      if (!c) return c.take_error();
      job.parent_failed = c.value() && *c.value() == kParentFailedCode;
      return ok_status();
    }
    if (jkey == "parents") {
      if (input::take_null(jfield)) return ok_status();
      Result<od::object> parents = input::read_object(jfield, inner, jkey);
      if (!parents) return parents.take_error();
      const Where pw = inner.nested("parents");
      Status read = input::for_each_field(parents.value(), pw, [&](std::string_view pkey, od::value& pfield) -> Status {
        if (pkey != "failed" && pkey != "open") return ok_status();
        Result<int64_t> n = input::read_int(pfield, pw, pkey, 0, static_cast<int64_t>(kMaxBatchMembers));
        if (!n) return n.take_error();
        (pkey == "failed" ? job.failed_parents : job.open_parents) = n.value();
        return ok_status();
      });
      if (!read) return read;
      if (!job.failed_parents) return input::missing(pw, "failed");
      if (!job.open_parents) return input::missing(pw, "open");
      return ok_status();
    }
    if (jkey != "status") return ok_status();
    Result<std::string_view> s = input::read_string(jfield, inner, jkey, 64);
    if (!s) return s.take_error();
    if (!is_status(s.value())) {
      return field_error(inner, jkey, "must be one of pending, running, retrying, succeeded, dead, cancelled, waiting");
    }
    job.status = s.value();
    return ok_status();
  });
}

Status read_job_status(od::value& field, const Where& where, std::string_view key, std::string_view& status) {
  OperatedJob job;
  Status read = read_job(field, where, key, job);
  status = job.status;
  return read;
}

// The actions a job of this status accepts, in the table's order.
Status operate_actions(od::object& root, const Where& where, JsonWriter& out) {
  std::string_view status;
  Status read = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "job") return read_job_status(field, where, key, status);
    return ok_status();
  });
  if (!read) return read;
  if (status.empty()) return input::missing(where.nested("job"), "status");
  out.begin_object();
  out.key("actions");
  out.begin_array();
  for (const Action& a : kActions) {
    if (applies(a, status)) out.string(a.name);
  }
  out.end_array();
  out.end_object();
  return ok_status();
}

// One action's decision for one job (the family's first form, without "op").
Status operate_decide(od::object& root, const Where& where, JsonWriter& out) {
  std::string_view action_name;
  OperatedJob job;
  int64_t now = 0;
  bool has_now = false;
  Status read = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "action") {
      Result<std::string_view> s = input::read_string(field, where, key, 64);
      if (!s) return s.take_error();
      action_name = s.value();
    } else if (key == "now") {
      Result<int64_t> n = input::read_int(field, where, key);
      if (!n) return n.take_error();
      now = n.value();
      has_now = true;
    } else if (key == "job") {
      return read_job(field, where, key, job);
    }
    return ok_status();
  });
  if (!read) return read;
  const std::string_view status = job.status;
  if (action_name.empty()) return input::missing(where, "action");
  const Action* action = nullptr;
  for (const Action& a : kActions) {
    if (a.name == action_name) action = &a;
  }
  if (action == nullptr) {
    return input::family_error(where, ErrorCode::unknown_op, "unknown action " + input::quoted(action_name));
  }
  if (!has_now) return input::missing(where, "now");
  if (status.empty()) return input::missing(where.nested("job"), "status");

  // A job its parent's failure cancelled is replayed into its parents' hands, never past them:
  // refused while a parent is still failed (replaying that parent revives it), waiting while one
  // is open (a parent replayed by the same action counts as open), due now once all succeeded.
  const bool rejoins = action->name == "replay" && status == "cancelled" && job.parent_failed && job.open_parents.has_value();
  const bool allowed = applies(*action, status) && !(rejoins && *job.failed_parents > 0);
  const bool waits = rejoins && *job.open_parents > 0;
  out.begin_object();
  if (!allowed) {
    out.field_bool("ok", false);
    out.field("reason", "invalid_state");
  } else {
    out.field_bool("ok", true);
    out.field("status", waits ? std::string_view("waiting") : action->to.empty() ? status : action->to);
    out.key("dueAt");
    if (action->due == Due::now) out.integer(now); else out.null();
    out.key("budget");
    if (action->fresh_budget) {
      out.begin_object();
      out.field("attempts", kFreshBudget.attempts);
      out.field("crashes", kFreshBudget.crashes);
      out.field("streak", kFreshBudget.streak);
      out.end_object();
    } else {
      out.null();
    }
    out.field_bool("nudge", action->nudge && !waits);
    // A running job's attempt is still open; ending the job ends it too, so the attempt
    // history never shows an attempt running on a finished job.
    out.key("closeAttempt");
    if (status == "running" && action->to == "cancelled") out.string("cancel"); else out.null();
    // A job that ends here is finished now (finished_at); the others are not finished. Only a
    // cancel records the operator's reason as the job's error code.
    const std::string_view next = action->to.empty() ? status : action->to;
    out.field_bool("finished", next == "succeeded" || next == "dead" || next == "cancelled");
    out.field_bool("recordReason", next == "cancelled");
    // It waits on its open parents again: their settles count it down (only then present).
    if (waits) out.field("waitingOn", *job.open_parents);
  }
  out.end_object();
  return ok_status();
}

// op "reason": {reason} → {reason}: an operator's cancel reason is stored as the job's error
// code, so it is held to the rule a handler's code is (is_outcome_code): checked once per action,
// before any job is locked, so a bad one is a typed refusal, never the database's error mid-write.
Status operate_reason(od::object& root, const Where& where, JsonWriter& out) {
  std::optional<std::string_view> reason;
  bool has_reason = false;
  Status read = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key != "reason") return ok_status();
    has_reason = true;
    Result<std::optional<std::string_view>> s = input::read_nullable_text(field, where, key);
    if (!s || !s.value() || !is_outcome_code(*s.value())) {
      return field_error(where, key, "must be a string of 1 to 128 bytes without control characters");
    }
    reason = s.value();
    return ok_status();
  });
  if (!read) return read;
  if (!has_reason) return input::missing(where, "reason");
  out.begin_object();
  out.field("reason", *reason);
  out.end_object();
  return ok_status();
}

}  // namespace

Status run_operate(od::document& doc, JsonWriter& out) {
  static constexpr Operation kOps[] = {{"decide", operate_decide}, {"actions", operate_actions}, {"reason", operate_reason}};
  return dispatch_op(doc, out, "operate", kOps, "decide");
}

}  // namespace postbox
