// Settlement: the next state of a running job, given the attempt's outcome and its policy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "postbox/json_input.h"
#include "postbox/policy.h"

namespace postbox {

constexpr uint32_t kMaxMessageBytes = 2000;
constexpr uint32_t kMaxSettleBatch = 1000;
constexpr int64_t kClaimLateDelayMs = 5000;

enum class OutcomeType { ok, retry, fail, cancel, timeout, crash, claim_late, released, hook_failed, invalid_payload, defer };

struct JobState {
  int64_t attempts = 0;  // charged since the last replay, before this attempt
  int64_t crashes = 0;
  std::optional<std::string_view> streak_code;
  int64_t streak = 0;
  std::optional<int64_t> max_attempts;  // the job's own budget, set at enqueue; else the kind's
  std::optional<std::string_view> error_code;     // only passed through by claim_late
  std::optional<std::string_view> error_message;
};

struct AttemptOutcome {
  OutcomeType type = OutcomeType::ok;
  std::optional<std::string_view> code;  // retry, fail, and optionally the other retryables
  std::optional<std::string_view> reason;  // cancel
  std::optional<int64_t> after;           // retry, defer
  std::optional<std::string_view> message;
};

struct SettleInput {
  int64_t now = 0;
  uint32_t seed = 0;
  Policy policy;                   // the item's own policy, unless it names a shared one
  const Policy* shared = nullptr;  // one of the batch's policies (they outlive the item)
  const Policy& rules() const { return shared != nullptr ? *shared : policy; }
  JobState job;
  AttemptOutcome outcome;
};

// Strings in a Settlement point into the SettleInput (or are literals): write it before the
// input goes away. Views rather than copies keep the wasm small.
struct SettleEvent {
  std::string_view type;  // dead_letter, streak_warning, crash_loop, cancelled
  std::string_view code;
  std::string_view reason;
  int64_t count = 0;  // the streak or the crash count
};

struct Settlement {
  std::string_view status;
  std::optional<int64_t> due_at;
  int64_t attempts = 0;
  int64_t crashes = 0;
  std::optional<std::string_view> streak_code;
  int64_t streak = 0;
  std::optional<std::string_view> error_code;
  std::optional<std::string_view> error_message;
  bool finished = false;
  bool charged = false;
  std::string_view attempt_outcome;
  // The number of the attempt this settles, as handlers and events show it: charged attempts
  // before it plus one (a crash is not charged, so it keeps the crashed attempt's number).
  int64_t attempt = 0;
  std::vector<SettleEvent> events;
};

Settlement settle(const SettleInput& in);
void write_settlement(JsonWriter& out, const Settlement& s);

// The outcome type's wire name, and its inverse (false when unknown).
std::string_view outcome_name(OutcomeType type);
// Whether an attempt that ended so runs its hooks with its settlement (no: it never started).
bool outcome_runs_hooks(OutcomeType type);
bool outcome_from_name(std::string_view name, OutcomeType& type);
// The outcomes whose attempts never started, so they settle without hooks; and the status a
// handler's commit runs on (pb_settle op "hooks").
std::vector<std::string_view> outcomes_without_hooks();
std::string_view commit_status();
// What a handler did instead of naming an outcome (none, thrown, commit_unsupported): the
// outcome it settles as, its code, and its message: written when the input carries none, or
// always (`replaces_message`) when the input's text is not the attempt's story.
struct Unclassified {
  std::string_view name;
  OutcomeType as;
  std::string_view code;
  std::string_view message;
  bool replaces_message;
};
const Unclassified* unclassified_from_name(std::string_view name);

// A code or reason the core accepts from a handler: 1..128 bytes, no control characters.
bool is_outcome_code(std::string_view text);

// A settlement whose write failed (settle_failure.cpp): what the shim saw, and what to do.
constexpr int32_t kMaxSettleTries = 2;
// A schedule's occurrence (its enqueue transaction) is tried this often within one tick.
constexpr int32_t kMaxScheduleTries = 3;

// `schedule`: a schedule occurrence's transaction, judged by the same connection rule.
enum class SettlePart { write, hook, schedule };
// split: the statement's rows were refused for one row's data; write them again in halves.
// sanitize: the one row left was refused; write it again with its error text replaced.
enum class SettleFailureAction { retry_fresh_session, hook_failed, give_up, fail, split, sanitize };

struct SettleFailure {
  SettlePart part = SettlePart::write;      // the settle statement, the user's hook, or a schedule occurrence
  bool session_broken = false;              // the connection reported itself closed or errored
  std::optional<std::string_view> sql_state;  // the server's SQLSTATE, when the error carried one
  int32_t tries = 1;                        // tries of this settlement so far, this one included
  int32_t rows = 1;                         // settlements the failed statement carried
  bool sanitized = false;                   // the row's error text was already replaced
};

// The error text a settlement carries instead of one the database refused.
std::string sanitized_error_message(std::optional<std::string_view> sql_state);

SettleFailureAction decide_settle_failure(const SettleFailure& failure);
std::string_view settle_failure_action_name(SettleFailureAction action);
// {"failure":{…}} in pb_settle: writes {"next":"retry"|"hook_failed"|"give_up"|"fail"|"split"|"sanitize"},
// and with "sanitize" the replacement text as "errorMessage".
Status run_settle_failure(input::od::value& value, const input::Where& parent, JsonWriter& out);

// Cuts text to at most max_bytes without splitting a UTF-8 sequence.
std::string_view truncate_utf8(std::string_view text, uint32_t max_bytes);

}  // namespace postbox
