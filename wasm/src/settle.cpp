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
// Three inputs name what the handler did rather than an outcome (kUnclassified): `none` (it
// returned no outcome) is a retry with code invalid_outcome; `thrown` (it threw and no classify
// claimed the error) a retry with code unexpected, keeping the error's message;
// `commit_unsupported` (a commit its store cannot run) a fail under that code.
//
// `released` is a job claimed ahead that never got a slot (the drain stopped first): it goes
// straight back to due, unlike claim_late, whose 5 s keeps a late lane from re-claiming at once.
// `defer` is a handler declining to try yet (a webhook endpoint whose breaker is open): the
// attempt never happened, so the schedule and budget stay where they were; `code` is recorded.
//
// A retryable failure is exhausted when attempts reach the budget (perCode maxAttempts, else
// the policy's) or the streak reaches the code's streak cap; it then ends `dead`, or
// `cancelled` when the code's onExhaustion is "cancel".
//
// This file holds the rules alone; settle_json.cpp reads their input and writes their answer.
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

// What a handler did instead of naming an outcome, each settled as one, under a fixed code:
// it returned nothing; it threw and no classify claimed the error (the error's message is
// kept); or it returned ok({ commit }) to a store that cannot run user code inside its
// settlement transaction, where the commit can never run and a retry would only repeat the
// handler's side effect.
constexpr Unclassified kUnclassified[] = {
    {"none", OutcomeType::retry, "invalid_outcome", "handler returned no outcome: return ok(), retry(), fail() or cancel()", false},
    {"thrown", OutcomeType::retry, "unexpected", "", false},
    {"commit_unsupported", OutcomeType::fail, "commit_unsupported",
     "the handler returned ok({ commit }), but this store cannot run user code inside its settlement transaction", true},
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

}  // namespace

std::string_view outcome_name(OutcomeType type) { return row_for(type).name; }

bool outcome_runs_hooks(OutcomeType type) { return row_for(type).runs_hooks; }

std::string_view commit_status() { return kCommitStatus; }

const Unclassified* unclassified_from_name(std::string_view name) {
  for (const Unclassified& u : kUnclassified) {
    if (u.name == name) return &u;
  }
  return nullptr;
}

std::vector<std::string_view> outcomes_without_hooks() {
  std::vector<std::string_view> names;
  for (const Row& row : kRows) {
    if (!row.runs_hooks) names.push_back(row.name);
  }
  return names;
}

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

}  // namespace postbox
