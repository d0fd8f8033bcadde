// pb_claim: how many jobs of which kinds one invocation may claim, and whether a claimed job
// may still start. A job starts only when its attempt can finish inside both the invocation
// and its lease, so a live attempt never overlaps a recovery of the same job.
#include <algorithm>
#include <cstdint>

#include "postbox/admit.h"
#include "postbox/claim_pump.h"
#include "postbox/fair_share.h"
#include "postbox/small_sort.h"

#include "postbox/families.h"
#include "postbox/names.h"
#include "postbox/policy.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

namespace {

constexpr int64_t kMaxConcurrency = 10000;

struct Target {
  std::string_view id;
  std::string_view kind;
};

struct ClaimPlanInput {
  int64_t now = 0;
  int64_t deadline_at = 0;
  std::string_view lane = "default";
  int64_t concurrency = 0;
  int64_t max_batch = 0;
  std::vector<Policy> policies;
  std::optional<int64_t> version_cutoff;
  std::optional<Target> target;
  // The drain's facts for the backlog decision: kinds of its first plan, last claim full.
  std::optional<int64_t> first_kinds;
  bool last_claim_full = false;
  // The outbox's `fairShare`: claims interleave tenants (fair_share.h).
  bool fair_share = false;
};

Status read_target(od::value& v, const Where& where, std::optional<Target>& target) {
  if (input::take_null(v)) return ok_status();
  Result<od::object> obj = input::read_object(v, where, "target");
  if (!obj) return obj.take_error();
  const Where inner = where.nested("target");
  Target t;
  bool has_id = false, has_kind = false;
  Status status = input::for_each_field(obj.value(), inner, [&](std::string_view key, od::value& field) -> Status {
    if (key == "id" || key == "kind") {
      Result<std::string_view> s = input::read_string(field, inner, key, kMaxKindBytes);
      if (!s) return s.take_error();
      if (key == "id") {
        if (!is_uuid(s.value())) return field_error(inner, key, "must be a UUID");
        t.id = s.value();
        has_id = true;
      } else {
        t.kind = s.value();
        has_kind = true;
      }
    }
    return ok_status();
  });
  if (!status) return status;
  if (!has_id) return input::missing(inner, "id");
  if (!has_kind) return input::missing(inner, "kind");
  target = t;
  return ok_status();
}

Status read_version(od::value& v, const Where& where, std::optional<int64_t>& cutoff) {
  if (input::take_null(v)) return ok_status();
  Result<od::object> obj = input::read_object(v, where, "version");
  if (!obj) return obj.take_error();
  const Where inner = where.nested("version");
  Status status = input::for_each_field(obj.value(), inner, [&](std::string_view key, od::value& field) -> Status {
    if (key != "timestamp") return ok_status();
    Result<int64_t> n = input::read_int(field, inner, key);
    if (!n) return n.take_error();
    cutoff = n.value();
    return ok_status();
  });
  if (!status) return status;
  if (!cutoff) return input::missing(inner, "timestamp");
  return ok_status();
}

void write_limits(JsonWriter& out, const std::vector<const Policy*>& fit, bool fair_share) {
  auto list = [&](std::string_view key, auto value) {
    out.key(key);
    out.begin_array();
    for (const Policy* p : fit) {
      if (p->limited()) value(*p);
    }
    out.end_array();
  };
  out.key("limits");
  out.begin_object();
  list("kinds", [&](const Policy& p) { out.string(p.kind); });
  list("concurrency", [&](const Policy& p) { out.integer(p.concurrency.value_or(0)); });
  list("rateSlots", [&](const Policy& p) { out.integer(p.rate_slots.value_or(0)); });
  list("rateHoldMs", [&](const Policy& p) { out.integer(p.rate_hold_ms); });
  list("tenantConcurrency", [&](const Policy& p) { out.integer(p.tenant_concurrency.value_or(0)); });
  // A kind limited per tenant is claimed tenant by tenant, as a fair claim visits them; with
  // fair share, every limited kind is.
  if (fair_share || std::any_of(fit.begin(), fit.end(), [](const Policy* p) { return p->tenant_concurrency.has_value(); })) {
    out.field("tenantVisits", kFairTenantsPerClaim);
  }
  out.end_object();
}

}  // namespace

namespace {

Status claim_plan(od::object& root, const Where& where, JsonWriter& out) {
  ClaimPlanInput in;
  bool has_now = false, has_deadline = false, has_concurrency = false, has_policies = false;
  in.max_batch = 100;
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "now" || key == "deadlineAt") {
      Result<int64_t> n = input::read_int(field, where, key);
      if (!n) return n.take_error();
      (key == "now" ? in.now : in.deadline_at) = n.value();
      (key == "now" ? has_now : has_deadline) = true;
    } else if (key == "concurrency" || key == "maxBatch") {
      Result<int64_t> n = input::read_int(field, where, key, 0, kMaxConcurrency);
      if (!n) return n.take_error();
      (key == "concurrency" ? in.concurrency : in.max_batch) = n.value();
      has_concurrency = has_concurrency || key == "concurrency";
    } else if (key == "lane") {
      Result<std::string_view> s = input::read_string(field, where, key, kMaxLaneBytes);
      if (!s) return s.take_error();
      if (!is_lane(s.value())) return field_error(where, key, "must be 1-64 bytes of [A-Za-z0-9._:-]");
      in.lane = s.value();
    } else if (key == "policies") {
      has_policies = true;
      return read_policies(field, where, in.policies);
    } else if (key == "version") {
      return read_version(field, where, in.version_cutoff);
    } else if (key == "target") {
      return read_target(field, where, in.target);
    } else if (key == "firstKinds") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key, 0, kMaxConcurrency);
      if (!n) return n.take_error();
      in.first_kinds = n.value();
    } else if (key == "lastClaimFull") {
      Result<bool> b = input::read_bool(field, where, key);
      if (!b) return b.take_error();
      in.last_claim_full = b.value();
    } else if (key == "fairShare") {
      Result<bool> b = input::read_bool(field, where, key);
      if (!b) return b.take_error();
      in.fair_share = b.value();
    }
    return ok_status();
  });
  if (!status) return status;
  if (!has_now) return input::missing(where, "now");
  if (!has_deadline) return input::missing(where, "deadlineAt");
  if (!has_concurrency) return input::missing(where, "concurrency");
  if (!has_policies) return input::missing(where, "policies");

  std::vector<const Policy*> fit;
  for (const Policy& p : in.policies) {
    if (p.lane != in.lane) continue;
    if (in.now + p.timeout_ms > in.deadline_at) continue;  // the attempt could not finish in time
    if (in.target && p.kind != in.target->kind) continue;
    fit.push_back(&p);
  }
  small_sort(fit.begin(), fit.end(), [](const Policy* a, const Policy* b) { return a->kind < b->kind; });
  int64_t limit = 0;
  if (!fit.empty()) limit = in.target ? 1 : std::min(in.concurrency, in.max_batch);
  if (limit == 0) fit.clear();

  out.begin_object();
  out.field("limit", limit);
  out.key("kinds");
  out.begin_array();
  for (const Policy* p : fit) out.string(p->kind);
  out.end_array();
  out.key("leaseMs");
  out.begin_array();
  for (const Policy* p : fit) out.integer(p->lease_ms);
  out.end_array();
  out.field("versionCutoff", in.version_cutoff);
  out.field_bool("targetOnly", in.target.has_value());
  // The pump's lookahead must let every claimed kind start inside its own claim slack.
  std::optional<int64_t> slack;
  for (const Policy* p : fit) slack = std::min(slack.value_or(INT64_MAX), claim_slack_ms(p->span_ms()));
  out.field("slackMs", slack);
  // Limited kinds, as parallel arrays; absent when none is (the claim keeps its plain
  // statement). A kind without a concurrency limit has 0 concurrency slots; without a rate, 0.
  if (std::any_of(fit.begin(), fit.end(), [](const Policy* p) { return p->limited(); })) write_limits(out, fit, in.fair_share && !in.target);
  // How many tenants a fair claim visits; absent when fair share is off or the claim is of
  // nudged jobs (those are named, not picked), so the claim keeps its plain statement.
  if (in.fair_share && !in.target && limit > 0) out.field("fairTenants", kFairTenantsPerClaim);
  // A drain that filled its last claim and now sees kinds dropped (their attempts no longer fit
  // before the deadline) leaves due work behind: its lane's queue must be told (a drain message).
  if (in.first_kinds) {
    out.field_bool("backlog", in.last_claim_full && !in.target && static_cast<int64_t>(fit.size()) < *in.first_kinds);
  }
  out.end_object();
  return ok_status();
}

Status read_lease(od::object& root, const Where& where, std::string_view deadline_key, LeaseInput& in) {
  bool seen[4] = {false, false, false, false};
  const std::string_view names[4] = {"now", deadline_key, "leaseExpiresAt", "timeoutMs"};
  int64_t* const slots[4] = {&in.now, deadline_key == "deadline" ? &in.deadline : &in.deadline_at, &in.lease_expires_at, &in.timeout_ms};
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "heartbeatMs") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key, kMinHeartbeatMs, kMaxTimeoutMs);
      if (!n) return n.take_error();
      in.heartbeat_ms = n.value();
      return ok_status();
    }
    if (key == "attempts") {
      Result<int64_t> n = input::read_int(field, where, key);
      if (!n) return n.take_error();
      in.attempts = n.value();
      return ok_status();
    }
    for (int i = 0; i < 4; ++i) {
      if (key != names[i]) continue;
      Result<int64_t> n = i == 3 ? input::read_int(field, where, key, 1, kMaxTimeoutMs) : input::read_int(field, where, key);
      if (!n) return n.take_error();
      *slots[i] = n.value();
      seen[i] = true;
    }
    return ok_status();
  });
  if (!status) return status;
  for (int i = 0; i < 4; ++i) {
    if (!seen[i]) return input::missing(where, names[i]);
  }
  return ok_status();
}

Status claim_admit(od::object& root, const Where& where, JsonWriter& out) {
  LeaseInput in;
  Status status = read_lease(root, where, "deadlineAt", in);
  if (!status) return status;
  const AdmitDecision d = decide_admit(in);
  out.begin_object();
  out.field_bool("start", d.start);
  if (!d.start) {
    out.field("reason", d.reason);
  } else {
    out.field("deadline", d.deadline);
    out.field("timerMs", d.timer_ms);
    if (d.attempt) out.field("attempt", *d.attempt);
    if (d.heartbeats) {
      out.field("stopAt", d.stop_at);
      out.field("heartbeatAt", d.heartbeat_at);
    }
  }
  out.end_object();
  return ok_status();
}

// A heartbeat of a running attempt: the lease it may write, fenced in SQL by the attempt.
// Refused once the lease it holds has expired (a recovery may be taking the job). Otherwise the
// lease becomes max(lease, min(now + span, deadline) + reserve): never shorter, never past what
// the attempt can use. The attempt stops at the new lease minus the reserve unless beaten again;
// the next beat is due one interval on while the lease does not cover the deadline yet.
Status claim_heartbeat(od::object& root, const Where& where, JsonWriter& out) {
  LeaseInput in;
  Status status = read_lease(root, where, "deadline", in);
  if (!status) return status;
  out.begin_object();
  if (in.now >= in.lease_expires_at) {
    out.field_bool("extend", false);
    out.field("reason", "lease_expired");
    out.end_object();
    return ok_status();
  }
  const int64_t span = lease_span_ms(in.timeout_ms, in.heartbeat_ms);
  const int64_t reserve = settle_reserve_ms(span);
  const int64_t lease = std::max(in.lease_expires_at, std::min(in.now + span, in.deadline) + reserve);
  const bool covered = in.lease_expires_at >= in.deadline + reserve;
  out.field_bool("extend", true);
  out.field("leaseExpiresAt", lease);
  out.field("stopAt", lease - reserve);
  out.field("nextAt", in.heartbeat_ms && !covered ? std::optional<int64_t>(in.now + *in.heartbeat_ms) : std::nullopt);
  out.end_object();
  return ok_status();
}

// When an invocation must be done: its start plus its budget (default 14 min, at most the
// platform's 15). Every claim and admit of the invocation is planned against it.
Status claim_deadline(od::object& root, const Where& where, JsonWriter& out) {
  int64_t started_at = 0;
  int64_t budget = kDefaultInvocationBudgetMs;
  bool has_start = false;
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "startedAt") {
      Result<int64_t> n = input::read_int(field, where, key);
      if (!n) return n.take_error();
      started_at = n.value();
      has_start = true;
    } else if (key == "invocationBudgetMs") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key, 1, kMaxInvocationBudgetMs);
      if (!n) return n.take_error();
      if (n.value()) budget = *n.value();
    }
    return ok_status();
  });
  if (!status) return status;
  if (!has_start) return input::missing(where, "startedAt");
  out.begin_object();
  out.field("deadlineAt", started_at + budget);
  out.end_object();
  return ok_status();
}

}  // namespace

// outbox_config.cpp
Status claim_outbox(od::object& root, const Where& where, JsonWriter& out);
// fleet.cpp
Status claim_fleet(od::object& root, const Where& where, JsonWriter& out);
Status claim_share(od::object& root, const Where& where, JsonWriter& out);
// flow_limits.cpp
Status claim_throttle(od::object& root, const Where& where, JsonWriter& out);
// consumer_idle.cpp
Status claim_idle(od::object& root, const Where& where, JsonWriter& out);

// Start only if the attempt ends before the invocation does, and the lease covers the attempt's
// first span (the timeout, or the heartbeat window) plus the settle reserve. A claim that took
// longer than its claim slack to arrive never starts.
AdmitDecision decide_admit(const LeaseInput& in) {
  const int64_t span = lease_span_ms(in.timeout_ms, in.heartbeat_ms);
  const int64_t stop_at = in.lease_expires_at - settle_reserve_ms(span);
  const bool lease_ok = in.now + span <= stop_at;
  AdmitDecision d;
  if (!lease_ok || in.now + in.timeout_ms > in.deadline_at) {
    // Too late for its lease: claim_late (due again shortly). Only the invocation's deadline
    // is in the way: released (the lane stops before this job's turn; due again at once).
    d.reason = lease_ok ? "released" : "claim_late";
    return d;
  }
  d.start = true;
  d.deadline = in.now + in.timeout_ms;
  // The handler's timer runs this long in real time, whatever the outbox's clock says.
  d.timer_ms = in.timeout_ms;
  // The number handlers and events show: charged attempts plus this one. A crash is not
  // charged, so the attempt after a crash shows the crashed one's number again.
  if (in.attempts) d.attempt = *in.attempts + 1;
  if (in.heartbeat_ms) {
    // The attempt stops at stopAt unless a beat extends its lease; the first beat is due one
    // interval in, unless the lease already covers the whole attempt.
    const bool covered = in.lease_expires_at >= in.now + in.timeout_ms + settle_reserve_ms(span);
    d.heartbeats = true;
    d.stop_at = stop_at;
    if (!covered) d.heartbeat_at = in.now + *in.heartbeat_ms;
  }
  return d;
}

Status run_claim(od::document& doc, JsonWriter& out) {
  static constexpr Operation kOps[] = {
      {"plan", claim_plan}, {"admit", claim_admit}, {"deadline", claim_deadline}, {"pump", claim_pump}, {"heartbeat", claim_heartbeat},
      {"outbox", claim_outbox}, {"fleet", claim_fleet}, {"share", claim_share}, {"idle", claim_idle}, {"throttle", claim_throttle}};
  return dispatch_op(doc, out, "claim", kOps);
}

}  // namespace postbox
