// pb_sweep: how one cron invocation spends its time. Recovery of expired leases comes first
// (bounded by its own budget), then (for a store that keeps dependencies) the check on waiting
// jobs whose parents have all finished, so the drain may run them, then each reserved sweep, then a drain of everything due, then
// kinds this deploy does not register, then retention in batches within its own budget, then
// (unless compaction is off) the rebuilds of indexes a held horizon bloated. A kind whose lease
// is longer than the sweep may hold one is never run here: it is handed to its lane's queue
// consumer instead, which has a whole invocation for it.
#include <algorithm>
#include <iterator>

#include "postbox/small_sort.h"

#include "postbox/families.h"
#include "postbox/index_compaction.h"
#include "postbox/names.h"
#include "postbox/policy.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

namespace {

constexpr uint32_t kMaxReserved = 32;
constexpr int64_t kRecoverLimit = 500;
// Waiting jobs the dependencies step releases per sweep, oldest update first among those whose
// parents have all ended: a settle releases children itself, so this only finds the few a race
// left behind (dependencies.h). Jobs still waiting on open parents never count against it.
constexpr int64_t kWaitingCheckLimit = 1000;
// The largest recovery batch the recover op accepts (the plan asks for kRecoverLimit).
constexpr int64_t kMaxRecoverLimit = 10000;
// Retention deletes in batches of this many jobs (one statement each) by default: a batch holds
// its row locks for one statement only, so a long retention never blocks claims for long.
constexpr int64_t kRetentionBatch = 1000;
constexpr int64_t kMaxRetentionBatch = 10000;
// How long retention may go on batching, from its first batch (capped by the invocation).
constexpr int64_t kRetentionBudgetMs = 60000;
// Jobs handed off per lane per sweep: one listing, at most one nudge message per 100 ids.
constexpr int64_t kHandoffLimit = 100;
// A pending job of a kind this deploy does not register is reported once it has been due this
// long: a newer deploy may own the kind and simply not have reached it yet.
constexpr int64_t kUnregisteredGraceMs = 300000;

struct Reserved {
  std::string_view name;
  std::vector<std::string_view> kinds;
  int64_t max_jobs = 0;
  int64_t deadline_ms = 0;
};

struct SweepInput {
  int64_t now = 0;
  int64_t started_at = 0;
  int64_t invocation_budget_ms = kDefaultInvocationBudgetMs;
  int64_t recovery_budget_ms = kDefaultRecoveryBudgetMs;
  int64_t sweep_lease_budget_ms = 180000;
  // A handed-off job is not nudged again for this long: a consumer busy with a full
  // invocation (15 min at most) may not have reached it yet, and a re-nudge every sweep only
  // piles up messages. A lost nudge is resent after it.
  int64_t handoff_cooldown_ms = 900000;
  std::vector<Reserved> reserved;
  int64_t succeeded_ms = 604800000;  // 7 days
  int64_t dead_ms = 7776000000;      // 90 days
  int64_t retention_batch = kRetentionBatch;
  int64_t retention_budget_ms = kRetentionBudgetMs;
  // Whether the plan ends with a compact step (index rebuilds after a held horizon).
  bool compaction = true;
  bool dependencies = false;
  std::vector<Policy> policies;
};

Status read_reserved_entry(od::value& v, const Where& where, Reserved& r) {
  od::object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS) {
    return input::family_error(where, ErrorCode::invalid_input, "must be an object");
  }
  bool has_name = false, has_kinds = false, has_max = false, has_deadline = false;
  Status status = input::for_each_field(obj, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "name") {
      Result<std::string_view> s = input::read_string(field, where, key, kMaxLaneBytes);
      if (!s) return s.take_error();
      if (!is_lane(s.value())) return field_error(where, key, "must be 1-64 bytes of [A-Za-z0-9._:-]");
      r.name = s.value();
      has_name = true;
    } else if (key == "kinds") {
      Result<od::array> arr = input::read_array(field, where, key);
      if (!arr) return arr.take_error();
      has_kinds = true;
      return input::for_each_element(arr.value(), where, key, kMaxPolicies, [&](od::value& item, uint32_t) -> Status {
        Result<std::string_view> s = input::read_string(item, where, "kinds[]", kMaxKindBytes);
        if (!s) return s.take_error();
        r.kinds.push_back(s.value());
        return ok_status();
      });
    } else if (key == "maxJobs" || key == "deadlineMs") {
      Result<int64_t> n = input::read_int(field, where, key);
      if (!n) return n.take_error();
      (key == "maxJobs" ? r.max_jobs : r.deadline_ms) = n.value();
      (key == "maxJobs" ? has_max : has_deadline) = true;
    }
    return ok_status();
  });
  if (!status) return status;
  if (!has_name) return input::missing(where, "name");
  if (!has_kinds) return input::missing(where, "kinds");
  if (!has_max) return input::missing(where, "maxJobs");
  if (!has_deadline) return input::missing(where, "deadlineMs");
  return ok_status();
}

Status read_retention(od::value& v, const Where& where, SweepInput& in) {
  Result<od::object> obj = input::read_object(v, where, "retention");
  if (!obj) return obj.take_error();
  const Where inner = where.nested("retention");
  return input::for_each_field(obj.value(), inner, [&](std::string_view key, od::value& field) -> Status {
    if (key == "batchSize" || key == "budgetMs") {
      const bool batch = key == "batchSize";
      Result<int64_t> n = batch ? input::read_int(field, inner, key, 1, kMaxRetentionBatch) : input::read_int(field, inner, key, 0, kMaxInvocationBudgetMs);
      if (!n) return n.take_error();
      (batch ? in.retention_batch : in.retention_budget_ms) = n.value();
      return ok_status();
    }
    if (key != "succeededMs" && key != "deadMs") return ok_status();
    Result<int64_t> n = input::read_int(field, inner, key);
    if (!n) return n.take_error();
    (key == "succeededMs" ? in.succeeded_ms : in.dead_ms) = n.value();
    return ok_status();
  });
}

Status read_sweep(od::object& root, const Where& where, SweepInput& in) {
  bool has_now = false, has_started = false, has_policies = false;
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    int64_t* target = key == "now"                  ? &in.now
                      : key == "startedAt"          ? &in.started_at
                      : key == "invocationBudgetMs" ? &in.invocation_budget_ms
                      : key == "recoveryBudgetMs"   ? &in.recovery_budget_ms
                      : key == "sweepLeaseBudgetMs" ? &in.sweep_lease_budget_ms
                      : key == "handoffCooldownMs"  ? &in.handoff_cooldown_ms
                                                    : nullptr;
    if (target != nullptr) {
      const bool budget = key == "invocationBudgetMs";
      Result<int64_t> n = budget ? input::read_int(field, where, key, 1, kMaxInvocationBudgetMs) : input::read_int(field, where, key);
      if (!n) return n.take_error();
      *target = n.value();
      has_now = has_now || key == "now";
      has_started = has_started || key == "startedAt";
    } else if (key == "reserved") {
      Result<od::array> arr = input::read_array(field, where, key);
      if (!arr) return arr.take_error();
      return input::for_each_element(arr.value(), where, key, kMaxReserved, [&](od::value& item, uint32_t index) {
        Reserved r;
        Status read = read_reserved_entry(item, where.indexed("reserved", index), r);
        if (read) in.reserved.push_back(std::move(r));
        return read;
      });
    } else if (key == "retention") {
      return read_retention(field, where, in);
    } else if (key == "compaction" || key == "dependencies") {
      Result<bool> on = input::read_bool(field, where, key);
      if (!on) return on.take_error();
      (key == "compaction" ? in.compaction : in.dependencies) = on.value();
    } else if (key == "policies") {
      has_policies = true;
      return read_policies(field, where, in.policies);
    }
    return ok_status();
  });
  if (!status) return status;
  if (!has_now) return input::missing(where, "now");
  if (!has_started) return input::missing(where, "startedAt");
  if (!has_policies) return input::missing(where, "policies");
  return ok_status();
}

void write_kinds(JsonWriter& out, const std::vector<std::string_view>& kinds) {
  out.key("kinds");
  out.begin_array();
  for (std::string_view kind : kinds) out.string(kind);
  out.end_array();
}

Status sweep_plan(od::object& root, const Where& where, JsonWriter& out) {
  SweepInput in;
  Status status = read_sweep(root, where, in);
  if (!status) return status;

  const int64_t deadline_at = in.started_at + in.invocation_budget_ms;
  // By the lease a whole attempt needs, heartbeats or not: a long job never holds the cron.
  auto runnable = [&](const Policy& p) { return p.attempt_lease_ms() <= in.sweep_lease_budget_ms; };
  auto find = [&](std::string_view kind) -> const Policy* {
    for (const Policy& p : in.policies) {
      if (p.kind == kind) return &p;
    }
    return nullptr;
  };

  std::vector<const Policy*> sorted;
  for (const Policy& p : in.policies) sorted.push_back(&p);
  small_sort(sorted.begin(), sorted.end(), [](const Policy* a, const Policy* b) {
    return a->lane != b->lane ? a->lane < b->lane : a->kind < b->kind;
  });

  out.begin_object();
  out.field("deadlineAt", deadline_at);
  // Recovery's budget is held back from the schedules run before the sweep: they stop starting
  // occurrences at this instant (the next tick catches the rest up).
  out.field("schedulesUntil", std::max(in.started_at, deadline_at - in.recovery_budget_ms));
  out.key("steps");
  out.begin_array();

  // Recovery gets its whole budget from the sweep's start (`now`), whatever ran before it.
  out.begin_object();
  out.field("type", "recover");
  out.field("deadlineAt", std::min(in.now + in.recovery_budget_ms, deadline_at));
  out.field("limit", kRecoverLimit);
  out.end_object();

  if (in.dependencies) {
    out.begin_object();
    out.field("type", "dependencies");
    out.field("limit", kWaitingCheckLimit);
    out.end_object();
  }

  for (const Reserved& r : in.reserved) {
    std::vector<std::string_view> kinds;
    for (std::string_view kind : r.kinds) {
      const Policy* p = find(kind);
      if (p != nullptr && runnable(*p) && std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
        kinds.push_back(kind);
      }
    }
    out.begin_object();
    out.field("type", "reserved");
    out.field("name", r.name);
    write_kinds(out, kinds);
    out.field("maxJobs", r.max_jobs);
    out.field("deadlineAt", std::min(in.now + r.deadline_ms, deadline_at));
    out.end_object();
  }

  std::vector<std::string_view> drain;
  for (const Policy& p : in.policies) {
    if (runnable(p)) drain.push_back(p.kind);
  }
  small_sort(drain.begin(), drain.end());
  out.begin_object();
  out.field("type", "drain");
  write_kinds(out, drain);
  out.field("deadlineAt", deadline_at);
  out.end_object();

  out.begin_object();
  out.field("type", "handoff");
  // Jobs nudged at or after this instant are skipped (`nudge_sent_at`).
  out.field("nudgedBefore", std::max<int64_t>(0, in.now - in.handoff_cooldown_ms));
  out.field("limit", kHandoffLimit);
  out.key("lanes");
  out.begin_array();
  std::string_view open_lane;
  bool open = false;
  for (const Policy* p : sorted) {
    if (runnable(*p)) continue;
    if (!open || p->lane != open_lane) {
      if (open) {
        out.end_array();
        out.end_object();
      }
      out.begin_object();
      out.field("lane", p->lane);
      out.key("kinds");
      out.begin_array();
      open_lane = p->lane;
      open = true;
    }
    out.string(p->kind);
  }
  if (open) {
    out.end_array();
    out.end_object();
  }
  out.end_array();
  out.end_object();

  out.begin_object();
  out.field("type", "unregistered");
  out.field("dueBefore", std::max<int64_t>(0, in.now - kUnregisteredGraceMs));
  // Their expired leases are settled as crashes under the default policy (the kind's own is
  // unknown here): the job goes back to retrying, is reported with the pending ones, and a
  // deploy that registers the kind runs it. Never left running.
  out.field("recoverLimit", kRecoverLimit);
  out.key("policy");
  write_policy(out, default_policy("unregistered"));
  out.end_object();

  out.begin_object();
  out.field("type", "retention");
  out.field("succeededBefore", std::max<int64_t>(0, in.now - in.succeeded_ms));
  out.field("deadBefore", std::max<int64_t>(0, in.now - in.dead_ms));
  out.field("limit", in.retention_batch);
  out.field("budgetMs", in.retention_budget_ms);
  out.field("deadlineAt", deadline_at);
  out.end_object();

  if (in.compaction) {
    out.begin_object();
    out.field("type", "compact");
    out.field("deadlineAt", deadline_at);
    out.end_object();
  }

  out.end_array();
  out.end_object();
  return ok_status();
}

// Whether retention runs another batch: the last one was full (more may be left) and its budget,
// counted from the step's first batch and capped by the invocation's deadline, is not spent.
Status sweep_retention(od::object& root, const Where& where, JsonWriter& out) {
  int64_t now = 0, started_at = 0, deadline_at = 0, budget_ms = 0, limit = 0, deleted = 0;
  input::IntField fields[] = {{"now", &now},
                              {"startedAt", &started_at},
                              {"deadlineAt", &deadline_at},
                              {"budgetMs", &budget_ms, 0, kMaxInvocationBudgetMs},
                              {"limit", &limit, 1, kMaxRetentionBatch},
                              {"deleted", &deleted}};
  if (Status status = input::read_int_fields(root, where, fields, std::size(fields)); !status) return status;
  const int64_t until = std::min(started_at + budget_ms, deadline_at);
  out.begin_object();
  out.field_bool("again", deleted >= limit && now < until);
  out.end_object();
  return ok_status();
}

// Whether recovery lists another batch of expired leases: the last one was full (more may be
// expired) and the recover step's deadline (its own budget from the sweep's start, capped by
// the invocation) has not passed.
Status sweep_recover(od::object& root, const Where& where, JsonWriter& out) {
  int64_t now = 0, deadline_at = 0, limit = 0, found = 0;
  input::IntField fields[] = {{"now", &now}, {"deadlineAt", &deadline_at}, {"limit", &limit, 1, kMaxRecoverLimit}, {"found", &found}};
  if (Status status = input::read_int_fields(root, where, fields, std::size(fields)); !status) return status;
  out.begin_object();
  out.field_bool("again", found >= limit && now < deadline_at);
  out.end_object();
  return ok_status();
}

// Whether the schedules run before a sweep may start another occurrence: only before the plan's
// schedulesUntil, so recovery keeps its budget. An occurrence not started is deferred, not lost:
// it stays unrecorded and the next tick catches it up.
Status sweep_schedule(od::object& root, const Where& where, JsonWriter& out) {
  int64_t now = 0, until = 0;
  input::IntField fields[] = {{"now", &now}, {"until", &until}};
  if (Status status = input::read_int_fields(root, where, fields, std::size(fields)); !status) return status;
  out.begin_object();
  out.field_bool("start", now < until);
  out.end_object();
  return ok_status();
}

}  // namespace

Status run_sweep(od::document& doc, JsonWriter& out) {
  static constexpr Operation kOps[] = {{"plan", sweep_plan}, {"retention", sweep_retention}, {"recover", sweep_recover}, {"schedule", sweep_schedule}, {"compact", sweep_compact}};
  return dispatch_op(doc, out, "sweep", kOps);
}

}  // namespace postbox
