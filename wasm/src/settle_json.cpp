// pb_settle's JSON face: reads a settlement's input (job, outcome, policy; one or a batch),
// writes the core's decision, and answers op "hooks" from the outcome table. The rules
// themselves are settle.cpp's; a failed write's rule is settle_failure.cpp's.
#include "postbox/families.h"
#include "postbox/names.h"
#include "postbox/settle.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

namespace {

constexpr std::string_view kBadCode =
    "handler outcome's code must be a string of 1 to 128 bytes without control characters";
constexpr std::string_view kBadReason =
    "handler outcome's reason must be a string of 1 to 128 bytes without control characters";
constexpr std::string_view kBadAfter = "handler outcome's after must be a whole number of ms from 0 to 10 years";

Status read_job(od::value& v, const Where& where, JobState& job) {
  Result<od::object> obj = input::read_object(v, where, "job");
  if (!obj) return obj.take_error();
  const Where inner = where.nested("job");
  bool has_status = false;
  bool has_attempts = false;
  Status status = input::for_each_field(obj.value(), inner, [&](std::string_view key, od::value& field) -> Status {
    if (key == "status") {
      Result<std::string_view> s = input::read_string(field, inner, key, 64);
      if (!s) return s.take_error();
      if (s.value() != "running") return input::family_error(where, ErrorCode::invalid_input, "job is not running");
      has_status = true;
    } else if (key == "attempts" || key == "crashes" || key == "streak") {
      Result<int64_t> n = input::read_int(field, inner, key, 0, 1000000);
      if (!n) return n.take_error();
      (key == "attempts" ? job.attempts : key == "crashes" ? job.crashes : job.streak) = n.value();
      has_attempts = has_attempts || key == "attempts";
    } else if (key == "maxAttempts") {
      // null (no budget of its own) or the range a policy's maxAttempts has.
      bool is_null = false;
      if (field.is_null().get(is_null) == simdjson::SUCCESS && is_null) return ok_status();
      Result<int64_t> n = input::read_int(field, inner, key, 1, 1000);
      if (!n) return n.take_error();
      job.max_attempts = n.value();
    } else if (key == "streakCode" || key == "errorCode") {
      Result<std::optional<std::string_view>> s = input::read_nullable_string(field, inner, key, kMaxKindBytes);
      if (!s) return s.take_error();
      (key == "streakCode" ? job.streak_code : job.error_code) = s.value();
    } else if (key == "errorMessage") {
      Result<std::optional<std::string_view>> s = input::read_nullable_text(field, inner, key);
      if (!s) return s.take_error();
      job.error_message = s.value();
      if (job.error_message) job.error_message = truncate_utf8(*job.error_message, kMaxMessageBytes);
    }
    return ok_status();
  });
  if (!status) return status;
  if (!has_status) return input::missing(inner, "status");
  if (!has_attempts) return input::missing(inner, "attempts");
  return ok_status();
}

Status read_outcome(od::value& v, const Where& where, AttemptOutcome& outcome) {
  Result<od::object> obj = input::read_object(v, where, "outcome");
  if (!obj) return obj.take_error();
  const Where inner = where.nested("outcome");
  bool has_type = false;
  // What the handler did when it gave no outcome of its own (the rules' kUnclassified table).
  const Unclassified* unclassified = nullptr;
  // The first malformed field of the handler's outcome, if any.
  std::string_view problem;
  Status status = input::for_each_field(obj.value(), inner, [&](std::string_view key, od::value& field) -> Status {
    if (key == "type") {
      Result<std::string_view> s = input::read_string(field, inner, key, 64);
      if (s && (unclassified = unclassified_from_name(s.value())) != nullptr) {
        outcome.type = unclassified->as;
        has_type = true;
        return ok_status();
      }
      if (!s || !outcome_from_name(s.value(), outcome.type)) {
        return field_error(inner, key,
                           "must be one of ok, retry, fail, cancel, timeout, crash, claim_late, released, "
                           "hook_failed, invalid_payload, defer");
      }
      has_type = true;
    } else if (key == "code" || key == "reason") {
      // The handler's own words: a bad one is the handler's fault, settled as invalid_outcome
      // (below), never a refusal that would fail the jobs settled with it.
      Result<std::optional<std::string_view>> s = input::read_nullable_text(field, inner, key);
      if (!s || (s.value() && !is_outcome_code(*s.value()))) {
        if (problem.empty()) problem = key == "code" ? kBadCode : kBadReason;
        return ok_status();
      }
      (key == "code" ? outcome.code : outcome.reason) = s.value();
    } else if (key == "after") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, inner, key, 0, kMaxDelayMs);
      if (!n) {
        if (problem.empty()) problem = kBadAfter;
        return ok_status();
      }
      outcome.after = n.value();
    } else if (key == "message") {
      Result<std::optional<std::string_view>> s = input::read_nullable_text(field, inner, key);
      if (!s) return s.take_error();
      outcome.message = s.value();
    }
    return ok_status();
  });
  if (!status) return status;
  if (!has_type) return input::missing(inner, "type");
  if (!problem.empty()) {
    outcome = AttemptOutcome{};
    outcome.type = OutcomeType::retry;
    outcome.code = "invalid_outcome";
    outcome.message = problem;
    return ok_status();
  }
  if (unclassified != nullptr) {
    outcome.code = unclassified->code;
    if (!unclassified->message.empty() && (!outcome.message || unclassified->replaces_message)) outcome.message = unclassified->message;
  }
  return ok_status();
}

// `shared`: the batch's policies, which an item may name by index instead of carrying its own
// (a drain settles many jobs of few kinds; parsing each kind once keeps the call cheap).
Result<SettleInput> read_settle(od::object& obj, const Where& where, const std::vector<Policy>* shared) {
  SettleInput in;
  bool has_now = false, has_seed = false, has_policy = false, has_job = false, has_outcome = false;
  Status status = input::for_each_field(obj, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "now") {
      Result<int64_t> n = input::read_int(field, where, key);
      if (!n) return n.take_error();
      in.now = n.value();
      has_now = true;
    } else if (key == "seed") {
      Result<int64_t> n = input::read_int(field, where, key, 0, 0xFFFFFFFFLL);
      if (!n) return n.take_error();
      in.seed = static_cast<uint32_t>(n.value());
      has_seed = true;
    } else if (key == "policy") {
      od::json_type type{};
      if (shared != nullptr && field.type().get(type) == simdjson::SUCCESS && type == od::json_type::number) {
        Result<int64_t> index = input::read_int(field, where, key, 0, static_cast<int64_t>(shared->size()) - 1);
        if (!index) return index.take_error();
        in.shared = &(*shared)[static_cast<size_t>(index.value())];
        has_policy = true;
        return ok_status();
      }
      Result<od::object> p = input::read_object(field, where, key);
      if (!p) return p.take_error();
      Where pw = where.nested("policy");
      pw.code = ErrorCode::invalid_policy;
      Result<Policy> policy = read_policy(p.value(), pw);
      if (!policy) return policy.take_error();
      in.policy = std::move(policy.value());
      has_policy = true;
    } else if (key == "job") {
      has_job = true;
      return read_job(field, where, in.job);
    } else if (key == "outcome") {
      has_outcome = true;
      return read_outcome(field, where, in.outcome);
    }
    return ok_status();
  });
  if (!status) return status.take_error();
  if (!has_now) return input::missing(where, "now");
  if (!has_seed) return input::missing(where, "seed");
  if (!has_policy) return input::missing(where, "policy");
  if (!has_job) return input::missing(where, "job");
  if (!has_outcome) return input::missing(where, "outcome");
  return in;
}

void settle_one(od::object& obj, const Where& where, JsonWriter& out, Status* first_error, const std::vector<Policy>* shared) {
  Result<SettleInput> in = read_settle(obj, where, shared);
  if (!in) {
    if (first_error) {
      *first_error = in.take_error();
    } else {
      write_error(out, in.error());
    }
    return;
  }
  write_settlement(out, settle(in.value()));
}

// op "hooks": which outcomes settle without hooks, and the status a commit runs on. The shim
// asks once and routes each finished attempt by it (docs/ABI.md, pb_settle hooks).
void write_hook_rules(JsonWriter& out) {
  out.begin_object();
  out.key("withoutHooks");
  out.begin_array();
  for (std::string_view name : outcomes_without_hooks()) out.string(name);
  out.end_array();
  out.field("commitStatus", commit_status());
  out.end_object();
}

}  // namespace

void write_settlement(JsonWriter& out, const Settlement& s) {
  out.begin_object();
  out.field("status", s.status);
  out.field("dueAt", s.due_at);
  out.field("attempts", s.attempts);
  out.field("crashes", s.crashes);
  out.storable_field("streakCode", s.streak_code);
  out.field("streak", s.streak);
  out.storable_field("errorCode", s.error_code);
  out.storable_field("errorMessage", s.error_message);
  out.field_bool("finished", s.finished);
  out.field_bool("charged", s.charged);
  out.field("attemptOutcome", s.attempt_outcome);
  out.field("attempt", s.attempt);
  out.key("events");
  out.begin_array();
  for (const SettleEvent& e : s.events) {
    out.begin_object();
    out.field("type", e.type);
    if (e.type == "crash_loop") {
      out.field("crashes", e.count);
    } else if (e.type == "streak_warning") {
      out.storable_field("code", e.code);
      out.field("streak", e.count);
    } else {
      out.storable_field("code", e.code);
      out.storable_field("reason", e.reason);
    }
    out.end_object();
  }
  out.end_array();
  out.end_object();
}

Status run_settle(od::document& doc, JsonWriter& out) {
  const Where where{"settle", "", ErrorCode::invalid_input};
  Result<od::object> root = input::root_object(doc, where);
  if (!root) return root.take_error();
  od::value failure;
  if (root.value().find_field_unordered("failure").get(failure) == simdjson::SUCCESS) {
    return run_settle_failure(failure, where, out);
  }
  bool at_start = false;
  if (root.value().reset().get(at_start) != simdjson::SUCCESS) {
    return input::family_error(where, ErrorCode::invalid_json, "malformed object");
  }
  od::value op;
  if (root.value().find_field_unordered("op").get(op) == simdjson::SUCCESS) {
    std::string_view name;
    if (op.get_string().get(name) != simdjson::SUCCESS || name != "hooks") {
      return input::family_error(where, ErrorCode::unknown_op, "unknown op: settle has hooks (and the batch forms, which take no op)");
    }
    write_hook_rules(out);
    return ok_status();
  }
  bool rewound = false;
  if (root.value().reset().get(rewound) != simdjson::SUCCESS) {
    return input::family_error(where, ErrorCode::invalid_json, "malformed object");
  }
  // The batch's shared policies, if any, are read first: items refer to them by index.
  std::vector<Policy> shared;
  od::value policies;
  const bool has_policies = root.value().find_field_unordered("policies").get(policies) == simdjson::SUCCESS;
  if (has_policies) {
    Where pw = where;
    pw.code = ErrorCode::invalid_policy;
    Status read = read_policies(policies, pw, shared);
    if (!read) return read;
  }
  if (root.value().reset().get(rewound) != simdjson::SUCCESS) {
    return input::family_error(where, ErrorCode::invalid_json, "malformed object");
  }
  od::value batch;
  const simdjson::error_code found = root.value().find_field_unordered("batch").get(batch);
  if (found == simdjson::SUCCESS) {
    Result<od::array> items = input::read_array(batch, where, "batch");
    if (!items) return items.take_error();
    out.begin_object();
    out.key("results");
    out.begin_array();
    Status status = input::for_each_element(items.value(), where, "batch", kMaxSettleBatch,
                                            [&](od::value& item, uint32_t index) -> Status {
      const Where item_where = where.indexed("batch", index);
      od::object obj;
      if (item.get_object().get(obj) != simdjson::SUCCESS) {
        write_error(out, input::family_error(item_where, ErrorCode::invalid_input, "must be an object"));
      } else {
        settle_one(obj, item_where, out, nullptr, has_policies ? &shared : nullptr);
      }
      return ok_status();
    });
    if (!status) return status;
    out.end_array();
    out.end_object();
    return ok_status();
  }
  bool empty = false;
  if (root.value().reset().get(empty) != simdjson::SUCCESS) {
    return input::family_error(where, ErrorCode::invalid_json, "malformed object");
  }
  Status first_error = ok_status();
  settle_one(root.value(), where, out, &first_error, nullptr);
  return first_error;
}

}  // namespace postbox
