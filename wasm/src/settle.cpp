// Theory of operation
//
// A job is claimed, runs once, and its attempt ends in one outcome. Settling maps
// (outcome, job counters, policy, now, seed) to the job's next status and counters. It is a
// pure function: the shim persists the result in the same transaction as the attempt record,
// guarded by the claiming attempt, so a late or duplicate settle changes nothing.
//
// Counters: `attempts` counts charged attempts since the last replay; `crashes` counts
// consecutive attempts that died without reporting (isolate death, lease expiry), which are
// not charged; `streak` counts consecutive retryable failures with the same `streakCode`.
// A completed attempt (ok, fail, cancel or a retryable failure) clears `crashes`.
//
// Each outcome type follows one row of kRows below; `Rule` says which branch decides.
//
//   outcome          rule        charged  next status when not exhausted   default code
//   ok               succeed     yes      succeeded (finished)             -
//   cancel           cancel      yes      cancelled (finished)             cancelled (the reason)
//   fail             fail        yes      dead (finished), dead_letter     fail
//   retry            retryable   yes      retrying at now + delay          retry
//   timeout          retryable   yes      retrying                         timeout
//   hook_failed      retryable   yes      retrying                         hook_failed
//   invalid_payload  retryable   yes      retrying                         invalid_payload
//   crash            crash       no       retrying at now + backoff(crashes); dead at maxCrashes
//   claim_late       claim_late  no       retrying (or pending when never charged) at now + 5 s
//   released         release     no       retrying (or pending when never charged), due now
//   defer            defer       no       retrying (or pending when never charged) at now + after
//
// Two inputs name what the handler did rather than an outcome: `none` (it returned no outcome)
// is a retry with code invalid_outcome; `thrown` (it threw and no classify claimed the error)
// is a retry with code unexpected, keeping the error's message.
//
// `released` is a job claimed ahead that never got a slot (the drain stopped first): it goes
// straight back to due, unlike claim_late, whose 5 s keeps a late lane from re-claiming at once.
// `defer` is a handler declining to try yet (a webhook endpoint whose breaker is open): the
// attempt never happened, so the schedule and budget stay where they were; `code` is recorded.
//
// A retryable failure is exhausted when attempts reach the budget (perCode maxAttempts, else
// the policy's) or the streak reaches the code's streak cap; it then ends `dead`, or
// `cancelled` when the code's onExhaustion is "cancel".
#include "postbox/settle.h"

#include "postbox/backoff.h"
#include "postbox/families.h"
#include "postbox/names.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

namespace {

enum class Rule { succeed, cancel, fail, retryable, crash, claim_late, release, defer };

struct Row {
  OutcomeType type;
  std::string_view name;
  Rule rule;
  std::string_view default_code;
  // The attempt's hooks (onTransition, and a success's commit) run with its settlement. An
  // attempt that never started (claimed too late, or released unstarted) has none to run.
  bool runs_hooks;
};

constexpr Row kRows[] = {
    {OutcomeType::ok, "ok", Rule::succeed, "", true},
    {OutcomeType::cancel, "cancel", Rule::cancel, "cancelled", true},
    {OutcomeType::fail, "fail", Rule::fail, "fail", true},
    {OutcomeType::retry, "retry", Rule::retryable, "retry", true},
    {OutcomeType::timeout, "timeout", Rule::retryable, "timeout", true},
    {OutcomeType::hook_failed, "hook_failed", Rule::retryable, "hook_failed", true},
    {OutcomeType::invalid_payload, "invalid_payload", Rule::retryable, "invalid_payload", true},
    {OutcomeType::crash, "crash", Rule::crash, "crash", true},
    {OutcomeType::claim_late, "claim_late", Rule::claim_late, "", false},
    {OutcomeType::released, "released", Rule::release, "", false},
    {OutcomeType::defer, "defer", Rule::defer, "deferred", true},
};

// A handler's commit (ok({ commit })) runs only in the settlement that makes the job this.
constexpr std::string_view kCommitStatus = "succeeded";

// The backoff after the n-th failure: the policy's schedule when it has one, else doubling.
int64_t policy_backoff(const Policy& policy, int64_t n, uint32_t seed) {
  if (!policy.schedule_ms.empty()) return schedule_delay(policy.schedule_ms.data(), policy.schedule_ms.size(), n, seed);
  return backoff_delay(n, policy.base_ms, policy.max_ms, seed);
}

const Row& row_for(OutcomeType type) {
  for (const Row& row : kRows) {
    if (row.type == type) return row;
  }
  return kRows[0];
}

constexpr std::string_view kBadCode =
    "handler outcome's code must be a string of 1 to 128 bytes without control characters";
constexpr std::string_view kBadReason =
    "handler outcome's reason must be a string of 1 to 128 bytes without control characters";
constexpr std::string_view kBadAfter = "handler outcome's after must be a whole number of ms from 0 to 10 years";

// A code or reason is stored, compared for streaks and printed in log lines: 1..128 bytes
// with no control characters (U+0000 among them, which PostgreSQL's text refuses).
bool is_outcome_code(std::string_view text) {
  if (text.empty() || text.size() > kMaxKindBytes) return false;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) return false;
  }
  return true;
}

std::optional<std::string_view> message_of(const AttemptOutcome& outcome) {
  if (!outcome.message) return std::nullopt;
  return truncate_utf8(*outcome.message, kMaxMessageBytes);
}

// Terminal outcomes reported by the handler itself.
void settle_finished(const SettleInput& in, const Row& row, Settlement& s) {
  s.attempts = in.job.attempts + 1;
  s.crashes = 0;
  s.finished = true;
  s.charged = true;
  s.streak_code = (in.job.streak_code);
  s.streak = in.job.streak;
  if (row.rule == Rule::succeed) {
    s.status = "succeeded";
    s.streak_code.reset();
    s.streak = 0;
    return;
  }
  s.error_message = message_of(in.outcome);
  if (row.rule == Rule::cancel) {
    s.status = "cancelled";
    s.error_code = in.outcome.reason.value_or(row.default_code);
    return;
  }
  s.status = "dead";
  s.error_code = in.outcome.code.value_or(row.default_code);
  s.events.push_back(SettleEvent{"dead_letter", *s.error_code, "failed", 0});
}

void settle_retryable(const SettleInput& in, const Row& row, Settlement& s) {
  const Policy& policy = in.rules();
  const std::string_view code = in.outcome.code.value_or(row.default_code);
  s.attempts = in.job.attempts + 1;
  s.crashes = 0;
  s.charged = true;
  s.streak = in.job.streak_code && *in.job.streak_code == code ? in.job.streak + 1 : 1;
  s.streak_code = code;
  s.error_code = code;
  s.error_message = message_of(in.outcome);

  if (policy.warn_at_streak && s.streak == *policy.warn_at_streak) {
    s.events.push_back(SettleEvent{"streak_warning", code, "", s.streak});
  }

  const CodeRule* rule = policy.rule_for(code);
  // A code's own budget rules while it is the failure; else the job's (from enqueue); else the kind's.
  const int64_t budget = rule && rule->max_attempts ? *rule->max_attempts : in.job.max_attempts.value_or(policy.max_attempts);
  std::string_view reason;
  if (s.attempts >= budget) {
    reason = "attempts_exhausted";
  } else if (rule && rule->streak && s.streak >= *rule->streak) {
    reason = "streak_exhausted";
  }
  if (!reason.empty()) {
    s.finished = true;
    const bool cancel = rule && rule->cancel_on_exhaustion;
    s.status = cancel ? "cancelled" : "dead";
    s.events.push_back(SettleEvent{cancel ? "cancelled" : "dead_letter", code, reason, 0});
    return;
  }

  int64_t delay = in.outcome.type == OutcomeType::retry && in.outcome.after
                      ? *in.outcome.after
                      : policy_backoff(policy, s.attempts, in.seed);
  if (rule && rule->max_delay_ms && delay > *rule->max_delay_ms) delay = *rule->max_delay_ms;
  s.status = "retrying";
  s.due_at = in.now + delay;
}

void settle_crash(const SettleInput& in, const Row& row, Settlement& s) {
  const Policy& policy = in.rules();
  s.attempts = in.job.attempts;
  s.crashes = in.job.crashes + 1;
  s.streak_code = (in.job.streak_code);
  s.streak = in.job.streak;
  s.charged = false;
  s.error_message = message_of(in.outcome);
  if (s.crashes >= policy.max_crashes) {
    s.status = "dead";
    s.finished = true;
    s.error_code = "crash_loop";
    s.events.push_back(SettleEvent{"crash_loop", "", "", s.crashes});
    s.events.push_back(SettleEvent{"dead_letter", "crash_loop", "crash_loop", 0});
    return;
  }
  s.status = "retrying";
  s.error_code = row.default_code;
  s.due_at = in.now + policy_backoff(policy, s.crashes, in.seed);
}

// Nothing charged, counters and error kept; back to due after `delay_ms`.
void settle_uncharged(const SettleInput& in, Settlement& s, int64_t delay_ms) {
  s.attempts = in.job.attempts;
  s.crashes = in.job.crashes;
  s.streak_code = (in.job.streak_code);
  s.streak = in.job.streak;
  s.charged = false;
  s.status = in.job.attempts > 0 ? "retrying" : "pending";
  s.due_at = in.now + delay_ms;
  s.error_code = (in.job.error_code);
  s.error_message = (in.job.error_message);
}

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
  // What the handler did when it gave no outcome of its own: returned none, or threw (and no
  // classify claimed the error). Each becomes a retry under a fixed code.
  std::string_view unclassified;
  // The first malformed field of the handler's outcome, if any.
  std::string_view problem;
  Status status = input::for_each_field(obj.value(), inner, [&](std::string_view key, od::value& field) -> Status {
    if (key == "type") {
      Result<std::string_view> s = input::read_string(field, inner, key, 64);
      if (s && (s.value() == "none" || s.value() == "thrown")) {
        unclassified = s.value();
        outcome.type = OutcomeType::retry;
        has_type = true;
        return ok_status();
      }
      // ok({ commit }) on a store that cannot run user code inside its settlement transaction:
      // the commit can never run there, and a retry would only repeat the handler's side effect.
      if (s && s.value() == "commit_unsupported") {
        unclassified = s.value();
        outcome.type = OutcomeType::fail;
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
  if (unclassified == "none") {
    outcome.code = "invalid_outcome";
    if (!outcome.message) outcome.message = "handler returned no outcome: return ok(), retry(), fail() or cancel()";
  } else if (unclassified == "commit_unsupported") {
    outcome.code = "commit_unsupported";
    outcome.message = "the handler returned ok({ commit }), but this store cannot run user code inside its settlement transaction";
  } else if (!unclassified.empty()) {
    outcome.code = "unexpected";
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
  for (const Row& row : kRows) {
    if (!row.runs_hooks) out.string(row.name);
  }
  out.end_array();
  out.field("commitStatus", kCommitStatus);
  out.end_object();
}

}  // namespace

std::string_view outcome_name(OutcomeType type) { return row_for(type).name; }

bool outcome_runs_hooks(OutcomeType type) { return row_for(type).runs_hooks; }

bool outcome_from_name(std::string_view name, OutcomeType& type) {
  for (const Row& row : kRows) {
    if (row.name == name) {
      type = row.type;
      return true;
    }
  }
  return false;
}

std::string_view truncate_utf8(std::string_view text, uint32_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut);
}

Settlement settle(const SettleInput& in) {
  const Row& row = row_for(in.outcome.type);
  Settlement s;
  s.attempt_outcome = row.name;
  s.attempt = in.job.attempts + 1;
  switch (row.rule) {
    case Rule::succeed:
    case Rule::cancel:
    case Rule::fail: settle_finished(in, row, s); break;
    case Rule::retryable: settle_retryable(in, row, s); break;
    case Rule::crash: settle_crash(in, row, s); break;
    case Rule::claim_late: settle_uncharged(in, s, kClaimLateDelayMs); break;
    case Rule::release: settle_uncharged(in, s, 0); break;
    case Rule::defer:
      settle_uncharged(in, s, in.outcome.after.value_or(0));
      s.error_code = in.outcome.code.value_or(row.default_code);
      s.error_message = message_of(in.outcome);
      break;
  }
  return s;
}

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
