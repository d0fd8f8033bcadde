// Several outboxes behind one consumer (createOutboxes: one database each, say). Three
// decisions:
//   pb_claim "fleet"  whether the outboxes fit one invocation's connections, and how many of
//                     them the queue consumer and the cron sweep may run at once: the queue
//                     holds lanes + handlerSessions per outbox, a sweep 1 + handlerSessions
//                     (its one session, then its handlers'), and the outboxes running together
//                     may hold at most the 5 connections one outbox may (Workers allow 6 per
//                     invocation; one stays free for queue sends)
//   pb_claim "share"  how long the next outbox's turn of a queue invocation or cron tick is,
//                     so that one outbox's backlog (or a database that does not answer) cannot
//                     take the invocation from the others; a sweep's recovery budget in proportion
#include <algorithm>
#include <optional>
#include <vector>

#include "postbox/families.h"
#include "postbox/names.h"
#include "postbox/nudge.h"
#include "postbox/policy.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

namespace {

// Connections one invocation may hold for outboxes: Workers' 6, less one for queue sends
// (the same budget as one outbox's lanes + handlerSessions, outbox_config.cpp).
constexpr int64_t kConnectionBudget = 5;

struct Member {
  std::string_view key;
  int64_t lanes = 0;
  int64_t handler_sessions = -1;
};

Status read_member(od::object& obj, const Where& where, Member& m) {
  Status status = input::for_each_field(obj, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "key") {
      Result<std::string_view> s = input::read_string(field, where, key, kMaxOutboxKeyBytes);
      if (!s) return s.take_error();
      if (!is_outbox_key(s.value())) return field_error(where, key, "must be a lowercase letter, then up to 31 lowercase letters, digits or _");
      m.key = s.value();
    } else if (key == "lanes" || key == "handlerSessions") {
      const bool lanes = key == "lanes";
      Result<int64_t> n = input::read_int(field, where, key, lanes ? 1 : 0, kConnectionBudget - 1 + lanes);
      if (!n) return n.take_error();
      (lanes ? m.lanes : m.handler_sessions) = n.value();
    }
    return ok_status();
  });
  if (!status) return status;
  if (m.key.empty()) return input::missing(where, "key");
  if (m.lanes == 0) return input::missing(where, "lanes");
  if (m.handler_sessions < 0) return input::missing(where, "handlerSessions");
  if (m.lanes + m.handler_sessions > kConnectionBudget) return field_error(where, "handlerSessions", "must be at most 5 - lanes");
  return ok_status();
}

// How many outboxes may run at once: the most whose hungriest together fit the budget (at
// least 1: each outbox alone fits, its own options being checked against the same budget).
// `count[c]` is how many outboxes hold c connections (1..5).
int64_t most_at_once(const int64_t (&count)[kConnectionBudget + 1]) {
  int64_t n = 0, held = 0;
  for (int64_t cost = kConnectionBudget; cost >= 1; --cost) {
    for (int64_t i = 0; i < count[cost]; ++i) {
      if (held + cost > kConnectionBudget) return n == 0 ? 1 : n;
      held += cost;
      ++n;
    }
  }
  return n;
}

}  // namespace

Status claim_fleet(od::object& root, const Where& where, JsonWriter& out) {
  Member members[kMaxOutboxes];
  size_t size = 0;
  std::string_view fallback;
  std::optional<int64_t> parallel;
  bool has_outboxes = false;
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "outboxes") {
      has_outboxes = true;
      size = 0;  // a repeated field: the last one counts (and the list stays in bounds)
      Result<od::array> list = input::read_array(field, where, key);
      if (!list) return list.take_error();
      return input::for_each_element(list.value(), where, key, kMaxOutboxes, [&](od::value& item, uint32_t index) -> Status {
        Member& m = members[size];
        Result<od::object> obj = input::read_object(item, where, "outboxes[]");
        if (!obj) return obj.take_error();
        const Where item_where = where.indexed("outboxes", index);
        Status read = read_member(obj.value(), item_where, m);
        if (!read) return read;
        for (size_t i = 0; i < size; ++i) {
          if (members[i].key == m.key) return field_error(item_where, "key", "names an outbox twice");
        }
        ++size;
        return ok_status();
      });
    }
    if (key == "default") {
      Result<std::optional<std::string_view>> s = input::read_nullable_string(field, where, key, kMaxOutboxKeyBytes);
      if (!s) return s.take_error();
      if (s.value()) fallback = *s.value();
      return ok_status();
    }
    if (key == "parallel") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key, 1, kMaxOutboxes);
      if (!n) return n.take_error();
      parallel = n.value();
    }
    return ok_status();
  });
  if (!status) return status;
  if (!has_outboxes) return input::missing(where, "outboxes");
  if (size == 0) return field_error(where, "outboxes", "must have at least 1 item");
  // Messages naming no outbox (sent before there were several) go to the default; with one
  // outbox that is it.
  if (fallback.empty() && size == 1) fallback = members[0].key;
  bool known = fallback.empty();
  int64_t queue_count[kConnectionBudget + 1] = {}, sweep_count[kConnectionBudget + 1] = {};
  for (size_t i = 0; i < size; ++i) {
    known = known || members[i].key == fallback;
    ++queue_count[members[i].lanes + members[i].handler_sessions];
    ++sweep_count[1 + members[i].handler_sessions];
  }
  if (!known) return field_error(where, "default", "must be one of the outboxes' keys");
  const int64_t queue_most = most_at_once(queue_count);
  int64_t queue_parallel = queue_most, sweep_parallel = most_at_once(sweep_count);
  if (parallel) {
    const int64_t n = std::min<int64_t>(*parallel, static_cast<int64_t>(size));
    if (n > queue_most) {
      return field_error(where, "parallel",
                         "must be at most " + decimal_string(queue_most) +
                             ": the outboxes running at once may hold 5 connections together (lanes + handlerSessions each; Workers allow 6, one stays free for queue sends)");
    }
    // A sweep holds no more than a queue drain of the same outbox, so the same number fits.
    queue_parallel = sweep_parallel = n;
  }
  out.begin_object();
  if (fallback.empty()) {
    out.field_null("default");
  } else {
    out.field("default", fallback);
  }
  out.field("queueParallel", queue_parallel);
  out.field("sweepParallel", sweep_parallel);
  out.end_object();
  return ok_status();
}

// The end of the next outbox's turn: what is left of the invocation, split evenly over the
// turns still to come on this slot (`left` outboxes not started, this one included, over
// `parallel` slots). A turn that ends early leaves its time to the later ones. Recovery keeps
// its proportion of the invocation within each turn, so that a turn shorter than the whole
// recovery budget still leaves schedules time to start (pb_sweep plan holds recoveryBudgetMs
// back from them).
Status claim_share(od::object& root, const Where& where, JsonWriter& out) {
  int64_t values[] = {-1, -1, kDefaultInvocationBudgetMs, kDefaultRecoveryBudgetMs, -1, -1};
  static constexpr std::string_view kNames[] = {"now", "startedAt", "invocationBudgetMs", "recoveryBudgetMs", "left", "parallel"};
  static constexpr int64_t kMin[] = {0, 0, 1, 0, 1, 1};
  static constexpr int64_t kMax[] = {input::kMaxSafeInteger, input::kMaxSafeInteger, kMaxInvocationBudgetMs, input::kMaxSafeInteger, kMaxOutboxes, kMaxOutboxes};
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    for (size_t i = 0; i < 6; ++i) {
      if (key != kNames[i]) continue;
      // The two budgets may be null (their defaults); the rest are required.
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key, kMin[i], kMax[i]);
      if (!n) return n.take_error();
      if (n.value()) values[i] = *n.value();
    }
    return ok_status();
  });
  if (!status) return status;
  for (size_t i : {0, 1, 4, 5}) {
    if (values[i] < 0) return input::missing(where, kNames[i]);
  }
  const int64_t now = values[0], invocation = values[2], left = values[4], parallel = values[5];
  const int64_t deadline_at = values[1] + invocation;
  const int64_t turns = (left + parallel - 1) / parallel;
  // A turn never gets more than the whole invocation, even when `now` is before `startedAt` (a
  // clock stepped back, or hostile input); that bound also keeps the products below in range.
  const int64_t budget = now >= deadline_at ? 0 : std::min(invocation, (deadline_at - now) / turns);
  out.begin_object();
  out.field("deadlineAt", deadline_at);
  out.field("budgetMs", budget);
  out.field("recoveryBudgetMs", std::min(budget, std::min(values[3], invocation) * budget / invocation));
  out.end_object();
  return ok_status();
}

}  // namespace postbox
