// Flow limits: the policy fields that bound a kind's running attempts and starts, and when a
// drain whose claim was throttled asks again. See flow_limits.h.
#include "postbox/flow_limits.h"

#include <algorithm>
#include <vector>

#include "postbox/families.h"
#include "postbox/names.h"
#include "postbox/policy.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

RateSlots rate_slots(int64_t starts, int64_t per_ms, int64_t burst) {
  // Rounded up: a slot held a little longer can only lower the rate, never raise it.
  return RateSlots{burst, (burst * per_ms + starts - 1) / starts};
}

namespace {

Status read_rate_limit(od::value& v, const Where& where, Policy& policy) {
  if (input::take_null(v)) {
    policy.rate_slots.reset();
    policy.rate_hold_ms = 0;
    return ok_status();
  }
  Result<od::object> obj = input::read_object(v, where, "rateLimit");
  if (!obj) return obj.take_error();
  const Where inner = where.nested("rateLimit");
  std::optional<int64_t> starts, per_ms, burst;
  Status status = input::for_each_field(obj.value(), inner, [&](std::string_view key, od::value& field) -> Status {
    if (key != "starts" && key != "perMs" && key != "burst") return field_error(inner, key, "is not a known field");
    Result<int64_t> n = key == "perMs" ? input::read_int(field, inner, key, 1, kMaxRatePeriodMs)
                                       : input::read_int(field, inner, key, 1, kMaxFlowSlots);
    if (!n) return n.take_error();
    (key == "starts" ? starts : key == "perMs" ? per_ms : burst) = n.value();
    return ok_status();
  });
  if (!status) return status;
  if (!starts) return input::missing(inner, "starts");
  if (!per_ms) return input::missing(inner, "perMs");
  // Without a burst, a whole period's starts may come at once, as a window of `starts` allows.
  const RateSlots slots = rate_slots(*starts, *per_ms, burst.value_or(*starts));
  policy.rate_slots = slots.slots;
  policy.rate_hold_ms = slots.hold_ms;
  return ok_status();
}

}  // namespace

bool read_flow_field(std::string_view key, od::value& field, const Where& where, Policy& policy, Status& status) {
  if (key == "concurrency" || key == "tenantConcurrency") {
    Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key, 1, kMaxFlowSlots);
    status = n ? ok_status() : Status(n.take_error());
    if (n) (key == "concurrency" ? policy.concurrency : policy.tenant_concurrency) = n.value();
    return true;
  }
  if (key == "rateLimit") {
    status = read_rate_limit(field, where, policy);
    return true;
  }
  if (key == "rateSlots" || key == "rateHoldMs") {
    Result<int64_t> n = key == "rateSlots" ? input::read_int(field, where, key, 1, kMaxFlowSlots)
                                           : input::read_int(field, where, key, 1, kMaxRatePeriodMs * kMaxFlowSlots);
    status = n ? ok_status() : Status(n.take_error());
    if (n && key == "rateSlots") policy.rate_slots = n.value();
    if (n && key == "rateHoldMs") policy.rate_hold_ms = n.value();
    return true;
  }
  return false;
}

std::string_view throttle_reason(const ThrottledKind& kind) {
  // A tenant's limit first: a retry time then only says its slots were just made (claim again).
  if (kind.tenant) return "tenant_concurrency_limit";
  return kind.retry_at ? "rate_limit" : "concurrency_limit";
}

std::optional<int64_t> throttle_retry_at(int64_t now, int64_t deadline_at, int64_t throttled_since, const ThrottledKind* kinds,
                                         size_t count) {
  const int64_t give_up_at = std::min(throttled_since, now) + kMaxThrottleWaitMs;
  std::optional<int64_t> soonest;
  for (size_t i = 0; i < count; ++i) {
    const ThrottledKind& k = kinds[i];
    const int64_t at = std::max(now, k.retry_at.value_or(now + kThrottlePollMs));
    if (at > give_up_at || at + k.timeout_ms > deadline_at) continue;
    soonest = std::min(soonest.value_or(at), at);
  }
  return soonest;
}

std::optional<int64_t> throttle_resume_after_seconds(int64_t now, const ThrottledKind* kinds, size_t count) {
  std::optional<int64_t> soonest;
  for (size_t i = 0; i < count; ++i) {
    // Only a rate slot frees on a timer; running attempts free theirs by settling, in drains that go on.
    if (kinds[i].tenant || !kinds[i].retry_at) continue;
    soonest = std::min(soonest.value_or(*kinds[i].retry_at), *kinds[i].retry_at);
  }
  if (!soonest) return std::nullopt;
  const int64_t wait_ms = std::max<int64_t>(*soonest - now, 0);
  return std::clamp<int64_t>((wait_ms + 999) / 1000, 1, kMaxResumeDelaySeconds);
}

// claim op "throttle": {now, deadlineAt, throttledSince?, throttled: [{kind, retryAt, timeoutMs, tenant?}]}
// → {retryAt, resumeAfterSeconds, kinds: [{kind, reason}]}: when the drain claims again (null: it
// stops claiming), how long after stopping its lane's drain message should come back (null: none
// needed), and why each kind waits (`rate_limit`, `concurrency_limit` or `tenant_concurrency_limit`).
Status claim_throttle(od::object& root, const Where& where, JsonWriter& out) {
  int64_t now = 0, deadline_at = 0;
  std::optional<int64_t> since;
  bool has_now = false, has_deadline = false, has_throttled = false;
  std::vector<ThrottledKind> kinds;
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "now" || key == "deadlineAt") {
      Result<int64_t> n = input::read_int(field, where, key);
      if (!n) return n.take_error();
      (key == "now" ? now : deadline_at) = n.value();
      (key == "now" ? has_now : has_deadline) = true;
      return ok_status();
    }
    if (key == "throttledSince") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key);
      if (!n) return n.take_error();
      since = n.value();
      return ok_status();
    }
    if (key != "throttled") return ok_status();
    has_throttled = true;
    Result<od::array> arr = input::read_array(field, where, key);
    if (!arr) return arr.take_error();
    return input::for_each_element(arr.value(), where, key, kMaxPolicies, [&](od::value& item, uint32_t index) -> Status {
      const Where iw = where.indexed("throttled", index);
      Result<od::object> obj = input::read_object(item, iw, "throttled");
      if (!obj) return obj.take_error();
      ThrottledKind k;
      bool has_kind = false, has_timeout = false;
      Status inner = input::for_each_field(obj.value(), iw, [&](std::string_view ikey, od::value& ifield) -> Status {
        if (ikey == "kind") {
          Result<std::string_view> s = input::read_string(ifield, iw, ikey, kMaxKindBytes);
          if (!s) return s.take_error();
          k.kind = s.value();
          has_kind = true;
        } else if (ikey == "retryAt") {
          Result<std::optional<int64_t>> n = input::read_nullable_int(ifield, iw, ikey);
          if (!n) return n.take_error();
          k.retry_at = n.value();
        } else if (ikey == "tenant") {
          Result<bool> b = input::read_bool(ifield, iw, ikey);
          if (!b) return b.take_error();
          k.tenant = b.value();
        } else if (ikey == "timeoutMs") {
          Result<int64_t> n = input::read_int(ifield, iw, ikey, 1, kMaxTimeoutMs);
          if (!n) return n.take_error();
          k.timeout_ms = n.value();
          has_timeout = true;
        }
        return ok_status();
      });
      if (!inner) return inner;
      if (!has_kind) return input::missing(iw, "kind");
      if (!has_timeout) return input::missing(iw, "timeoutMs");
      kinds.push_back(k);
      return ok_status();
    });
  });
  if (!status) return status;
  if (!has_now) return input::missing(where, "now");
  if (!has_deadline) return input::missing(where, "deadlineAt");
  if (!has_throttled) return input::missing(where, "throttled");
  out.begin_object();
  const std::optional<int64_t> retry_at = throttle_retry_at(now, deadline_at, since.value_or(now), kinds.data(), kinds.size());
  out.field("retryAt", retry_at);
  out.field("resumeAfterSeconds", retry_at ? std::nullopt : throttle_resume_after_seconds(now, kinds.data(), kinds.size()));
  // Why each kind waits: a known release time is a rate slot's; none, its running attempts'.
  out.key("kinds");
  out.begin_array();
  for (const ThrottledKind& k : kinds) {
    out.begin_object();
    out.field("kind", k.kind);
    out.field("reason", throttle_reason(k));
    out.end_object();
  }
  out.end_array();
  out.end_object();
  return ok_status();
}

// backlog op "throttled": {rows: [{due, running, concurrency, rateSlots, rateHeld, tenantConcurrency?,
// tenants?: [[due, running], …]}]} → {throttled: [n, …]}: of each kind's due jobs, how many its
// limits hold back now. The room is its concurrency less its attempts on a live lease, and its
// rate slots less those held; the smaller (a limit of 0 is none); with a tenant limit, no more
// than fit in their tenants' room (per tenant, its due jobs up to its limit less its running
// ones; `tenantConcurrency` before `tenants`). Inspection's view of what a claim would find.
Status backlog_throttled(od::object& root, const Where& where, JsonWriter& out) {
  std::vector<int64_t> held_back;
  bool has_rows = false;
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key != "rows") return ok_status();
    has_rows = true;
    Result<od::array> arr = input::read_array(field, where, key);
    if (!arr) return arr.take_error();
    return input::for_each_element(arr.value(), where, key, kMaxPolicies, [&](od::value& item, uint32_t index) -> Status {
      const Where iw = where.indexed("rows", index);
      Result<od::object> obj = input::read_object(item, iw, "rows");
      if (!obj) return obj.take_error();
      int64_t due = 0, running = 0, concurrency = 0, rate_slots = 0, rate_held = 0, tenant_concurrency = 0;
      // With a tenant limit: the due jobs that fit in their tenants' room, summed over `tenants`.
      int64_t tenant_fit = 0;
      bool has_tenants = false;
      Status inner = input::for_each_field(obj.value(), iw, [&](std::string_view ikey, od::value& ifield) -> Status {
        if (ikey == "tenants") {
          has_tenants = true;
          Result<od::array> pairs = input::read_array(ifield, iw, ikey);
          if (!pairs) return pairs.take_error();
          return input::for_each_element(pairs.value(), iw, ikey, kMaxBacklogTenants, [&](od::value& pair, uint32_t) -> Status {
            Result<od::array> two = input::read_array(pair, iw, ikey);
            if (!two) return two.take_error();
            int64_t counts[2] = {0, 0};
            uint32_t n = 0;
            Status read = input::for_each_element(two.value(), iw, ikey, 2, [&](od::value& count, uint32_t i) -> Status {
              Result<int64_t> c = input::read_int(count, iw, ikey, 0);
              if (!c) return c.take_error();
              counts[i] = c.value();
              n = i + 1;
              return ok_status();
            });
            if (!read) return read;
            if (n != 2) return field_error(iw, ikey, "must list [due, running] pairs");
            tenant_fit += std::min(counts[0], std::max<int64_t>(0, tenant_concurrency - counts[1]));
            return ok_status();
          });
        }
        int64_t* target = ikey == "due" ? &due : ikey == "running" ? &running : ikey == "concurrency" ? &concurrency
                        : ikey == "rateSlots" ? &rate_slots : ikey == "rateHeld" ? &rate_held
                        : ikey == "tenantConcurrency" ? &tenant_concurrency : nullptr;
        if (target == nullptr) return ok_status();
        if (has_tenants && target == &tenant_concurrency) return field_error(iw, ikey, "must come before tenants");
        Result<int64_t> n = input::read_int(ifield, iw, ikey);
        if (!n) return n.take_error();
        *target = n.value();
        return ok_status();
      });
      if (!inner) return inner;
      int64_t room = due;
      if (concurrency > 0) room = std::min(room, std::max<int64_t>(0, concurrency - running));
      if (rate_slots > 0) room = std::min(room, std::max<int64_t>(0, rate_slots - rate_held));
      if (tenant_concurrency > 0 && has_tenants) room = std::min(room, tenant_fit);
      held_back.push_back(due - room);
      return ok_status();
    });
  });
  if (!status) return status;
  if (!has_rows) return input::missing(where, "rows");
  out.begin_object();
  out.key("throttled");
  out.begin_array();
  for (int64_t n : held_back) out.integer(n);
  out.end_array();
  out.end_object();
  return ok_status();
}

}  // namespace postbox
