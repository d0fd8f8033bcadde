// pb_policy: validates a job definition and fills in every default, so later decisions read
// one explicit shape. See docs/ABI.md, "pb_policy".
#include "postbox/policy.h"
#include "postbox/flow_limits.h"
#include "postbox/priority.h"

#include <algorithm>

#include "postbox/small_sort.h"

#include "postbox/families.h"
#include "postbox/names.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

namespace {

// Defaults that a user's perCode entry for the same code replaces.
std::vector<CodeRule> default_rules() {
  CodeRule invalid_payload{"invalid_payload", 3, std::nullopt, std::nullopt, false};
  CodeRule timeout{"timeout", 5, std::nullopt, std::nullopt, false};
  return {invalid_payload, timeout};
}

Status read_rule(od::value& v, const Where& where, std::string_view code, CodeRule& rule) {
  rule = CodeRule{std::string(code), std::nullopt, std::nullopt, std::nullopt, false};
  od::json_type type;
  if (v.type().get(type) == simdjson::SUCCESS && type == od::json_type::number) {
    Result<int64_t> streak = input::read_int(v, where, code, 1, 1000);
    if (!streak) return streak.take_error();
    rule.streak = streak.value();
    return ok_status();
  }
  Result<od::object> obj = input::read_object(v, where, code);
  if (!obj) return field_error(where, code, "must be a number (a streak) or an object");
  const Where inner = where.nested(code);
  return input::for_each_field(obj.value(), inner, [&](std::string_view key, od::value& field) -> Status {
    if (key == "streak" || key == "maxAttempts") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, inner, key, 1, 1000);
      if (!n) return n.take_error();
      (key == "streak" ? rule.streak : rule.max_attempts) = n.value();
    } else if (key == "maxDelayMs") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, inner, key, 0, kMaxBackoffMs);
      if (!n) return n.take_error();
      rule.max_delay_ms = n.value();
    } else if (key == "onExhaustion") {
      Result<std::string_view> s = input::read_string(field, inner, key, 16);
      if (!s || (s.value() != "dead" && s.value() != "cancel")) {
        return field_error(inner, key, "must be \"dead\" or \"cancel\"");
      }
      rule.cancel_on_exhaustion = s.value() == "cancel";
    } else {
      return field_error(inner, key, "is not a known field");
    }
    return ok_status();
  });
}

Status read_per_code(od::value& v, const Where& where, std::vector<CodeRule>& rules) {
  Result<od::object> obj = input::read_object(v, where, "perCode");
  if (!obj) return obj.take_error();
  const Where inner = where.nested("perCode");
  std::vector<CodeRule> given;
  Status status = input::for_each_field(obj.value(), inner, [&](std::string_view code, od::value& field) -> Status {
    if (!is_name(code, kMaxLaneBytes)) {
      return input::family_error(inner, inner.code, "code " + input::quoted(code) + " must be 1-64 bytes of [A-Za-z0-9._:-]");
    }
    if (given.size() == kMaxPerCodeRules) {
      return field_error(where, "perCode", "must have at most " + decimal_string(kMaxPerCodeRules) + " codes");
    }
    CodeRule rule;
    Status read = read_rule(field, inner, code, rule);
    if (!read) return read;
    // A repeated code: the last entry wins, as in JSON.parse.
    auto same = std::find_if(given.begin(), given.end(), [&](const CodeRule& r) { return r.code == code; });
    if (same != given.end()) *same = std::move(rule); else given.push_back(std::move(rule));
    return ok_status();
  });
  if (!status) return status;
  for (CodeRule& rule : given) {
    auto same = std::find_if(rules.begin(), rules.end(), [&](const CodeRule& r) { return r.code == rule.code; });
    if (same != rules.end()) *same = std::move(rule); else rules.push_back(std::move(rule));
  }
  return ok_status();
}

// An explicit schedule: 1-32 delays in ms, each within the backoff cap.
Status read_schedule(od::value& v, const Where& where, Policy& policy) {
  Result<od::array> arr = input::read_array(v, where, "scheduleMs");
  if (!arr) return arr.take_error();
  policy.schedule_ms.clear();
  Status status = input::for_each_element(arr.value(), where, "scheduleMs", kMaxScheduleEntries,
                                          [&](od::value& item, uint32_t) -> Status {
    Result<int64_t> n = input::read_int(item, where, "scheduleMs", 0, kMaxBackoffMs);
    if (!n) return n.take_error();
    policy.schedule_ms.push_back(n.value());
    return ok_status();
  });
  if (!status) return status;
  if (policy.schedule_ms.empty()) return field_error(where, "scheduleMs", "must have at least one entry");
  return ok_status();
}

Status read_backoff(od::value& v, const Where& where, Policy& policy) {
  Result<od::object> obj = input::read_object(v, where, "backoff");
  if (!obj) return obj.take_error();
  const Where inner = where.nested("backoff");
  return input::for_each_field(obj.value(), inner, [&](std::string_view key, od::value& field) -> Status {
    if (key == "scheduleMs") return read_schedule(field, inner, policy);
    if (key != "baseMs" && key != "maxMs") return field_error(inner, key, "is not a known field");
    Result<int64_t> n = input::read_int(field, inner, key, 0, kMaxBackoffMs);
    if (!n) return n.take_error();
    (key == "baseMs" ? policy.base_ms : policy.max_ms) = n.value();
    return ok_status();
  });
}

// `heartbeat` (definition): true, false, null or {"everyMs": n}; `heartbeatMs` (normalised):
// n or null. The interval is kMinHeartbeatMs..kMaxTimeoutMs.
Status read_heartbeat(od::value& v, const Where& where, std::string_view key, Policy& policy, bool& use_default) {
  policy.heartbeat_ms.reset();
  use_default = false;
  if (input::take_null(v)) return ok_status();
  od::json_type type;
  if (v.type().get(type) != simdjson::SUCCESS) return field_error(where, key, "must be true, false, null or an object");
  if (key == "heartbeat" && type == od::json_type::boolean) {
    Result<bool> on = input::read_bool(v, where, key);
    if (!on) return on.take_error();
    use_default = on.value();
    return ok_status();
  }
  if (key == "heartbeatMs") {
    Result<int64_t> n = input::read_int(v, where, key, kMinHeartbeatMs, kMaxTimeoutMs);
    if (!n) return n.take_error();
    policy.heartbeat_ms = n.value();
    return ok_status();
  }
  Result<od::object> obj = input::read_object(v, where, key);
  if (!obj) return field_error(where, key, "must be true, false, null or an object");
  const Where inner = where.nested(key);
  use_default = true;
  return input::for_each_field(obj.value(), inner, [&](std::string_view k, od::value& field) -> Status {
    if (k != "everyMs") return field_error(inner, k, "is not a known field");
    Result<int64_t> n = input::read_int(field, inner, k, kMinHeartbeatMs, kMaxTimeoutMs);
    if (!n) return n.take_error();
    policy.heartbeat_ms = n.value();
    use_default = false;
    return ok_status();
  });
}

// Fields that appear both in retry{} of a definition and at the top of a normalised policy.
bool read_retry_field(std::string_view key, od::value& field, const Where& where, Policy& policy,
                      std::vector<CodeRule>& rules, Status& status) {
  if (key == "maxAttempts" || key == "maxCrashes") {
    Result<int64_t> n = input::read_int(field, where, key, 1, key == "maxAttempts" ? 1000 : 100);
    status = n ? ok_status() : Status(n.take_error());
    if (n) (key == "maxAttempts" ? policy.max_attempts : policy.max_crashes) = n.value();
    return true;
  }
  if (key == "perCode") {
    status = read_per_code(field, where, rules);
    return true;
  }
  return false;
}

}  // namespace

const CodeRule* Policy::rule_for(std::string_view code) const {
  for (const CodeRule& rule : per_code) {
    if (rule.code == code) return &rule;
  }
  return nullptr;
}

Result<Policy> read_policy(od::object& obj, const Where& where) {
  Policy policy;
  std::vector<CodeRule> rules = default_rules();
  bool has_kind = false;
  bool has_timeout = false;
  bool heartbeat_default = false;  // `heartbeat: true`: the interval follows from the timeout
  Status status = input::for_each_field(obj, where, [&](std::string_view key, od::value& field) -> Status {
    Status inner = ok_status();
    if (key == "kind" || key == "lane") {
      Result<std::string_view> s = input::read_string(field, where, key, 4096);
      if (!s) return s.take_error();
      const bool is_kind_field = key == "kind";
      if (!is_name(s.value(), is_kind_field ? kMaxKindBytes : kMaxLaneBytes)) {
        return field_error(where, key, is_kind_field ? "must be 1-128 bytes of [A-Za-z0-9._:-]"
                                                     : "must be 1-64 bytes of [A-Za-z0-9._:-]");
      }
      (is_kind_field ? policy.kind : policy.lane) = std::string(s.value());
      has_kind = has_kind || is_kind_field;
    } else if (key == "timeoutMs") {
      Result<int64_t> n = input::read_int(field, where, key, 1, kMaxTimeoutMs);
      if (!n) return n.take_error();
      policy.timeout_ms = n.value();
      has_timeout = true;
    } else if (key == "leaseMs") {
      // Derived from timeoutMs; a normalised policy carries it only for the shim's benefit.
    } else if (key == "heartbeat" || key == "heartbeatMs") {
      Status read = read_heartbeat(field, where, key, policy, heartbeat_default);
      if (!read) return read;
    } else if (key == "warnAtStreak") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key, 2, 1000);
      if (!n) return n.take_error();
      policy.warn_at_streak = n.value();
    } else if (key == "baseMs" || key == "maxMs") {
      Result<int64_t> n = input::read_int(field, where, key, 0, kMaxBackoffMs);
      if (!n) return n.take_error();
      (key == "baseMs" ? policy.base_ms : policy.max_ms) = n.value();
    } else if (key == "scheduleMs") {
      // A normalised policy carries the schedule at the top, beside baseMs and maxMs.
      if (input::take_null(field)) {
        policy.schedule_ms.clear();
      } else {
        Status read = read_schedule(field, where, policy);
        if (!read) return read;
      }
    } else if (key == "retry") {
      Result<od::object> retry = input::read_object(field, where, key);
      if (!retry) return retry.take_error();
      const Where rw = where.nested("retry");
      return input::for_each_field(retry.value(), rw, [&](std::string_view rkey, od::value& rfield) -> Status {
        Status rs = ok_status();
        if (read_retry_field(rkey, rfield, rw, policy, rules, rs)) return rs;
        if (rkey == "backoff") return read_backoff(rfield, rw, policy);
        return field_error(rw, rkey, "is not a known field");
      });
    } else if (key == "priority") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key, 0, kMaxPriority);
      if (!n) return n.take_error();
      policy.priority = n.value();
    } else if (read_flow_field(key, field, where, policy, inner)) {
      return inner;
    } else if (!read_retry_field(key, field, where, policy, rules, inner)) {
      return field_error(where, key, "is not a known field");
    }
    return inner;
  });
  if (!status) return status.take_error();
  if (!has_kind) return input::missing(where, "kind");
  if (!has_timeout) return input::missing(where, "timeoutMs");
  if (policy.base_ms > policy.max_ms) {
    return input::family_error(where, where.code, "baseMs (" + decimal_string(policy.base_ms) +
                                                     ") must not exceed maxMs (" + decimal_string(policy.max_ms) + ")");
  }
  if (policy.tenant_concurrency && policy.concurrency && *policy.tenant_concurrency > *policy.concurrency) {
    return input::family_error(where, where.code, "tenantConcurrency (" + decimal_string(*policy.tenant_concurrency) +
                                                     ") must not exceed concurrency (" + decimal_string(*policy.concurrency) + ")");
  }
  if (heartbeat_default) {
    policy.heartbeat_ms = std::clamp<int64_t>(policy.timeout_ms / 10, kMinHeartbeatMs, kDefaultHeartbeatMaxMs);
  }
  policy.lease_ms = policy.span_ms() + settle_margin_ms(policy.span_ms());
  small_sort(rules.begin(), rules.end(), [](const CodeRule& a, const CodeRule& b) { return a.code < b.code; });
  policy.per_code = std::move(rules);
  return policy;
}

Policy default_policy(std::string_view kind) {
  Policy policy;
  policy.kind = std::string(kind);
  policy.timeout_ms = kMaxTimeoutMs;
  policy.lease_ms = policy.span_ms() + settle_margin_ms(policy.span_ms());
  policy.per_code = default_rules();  // already in byte order: invalid_payload, timeout
  return policy;
}

Status read_policies(od::value& v, const Where& where, std::vector<Policy>& policies) {
  Result<od::array> arr = input::read_array(v, where, "policies");
  if (!arr) return arr.take_error();
  return input::for_each_element(arr.value(), where, "policies", kMaxPolicies,
                                 [&](od::value& item, uint32_t index) -> Status {
    Where pw = where.indexed("policies", index);
    pw.code = ErrorCode::invalid_policy;
    od::object obj;
    if (item.get_object().get(obj) != simdjson::SUCCESS) {
      return input::family_error(pw, ErrorCode::invalid_policy, "must be an object");
    }
    Result<Policy> policy = read_policy(obj, pw);
    if (!policy) return policy.take_error();
    for (const Policy& seen : policies) {
      if (seen.kind == policy.value().kind) {
        return input::family_error(pw, ErrorCode::invalid_policy, "kind " + input::quoted(seen.kind) + " is listed twice");
      }
    }
    policies.push_back(std::move(policy.value()));
    return ok_status();
  });
}

void write_policy(JsonWriter& out, const Policy& policy) {
  out.begin_object();
  out.field("kind", policy.kind);
  out.field("lane", policy.lane);
  out.field("timeoutMs", policy.timeout_ms);
  out.field("leaseMs", policy.lease_ms);
  out.field("maxAttempts", policy.max_attempts);
  out.field("baseMs", policy.base_ms);
  out.field("maxMs", policy.max_ms);
  out.field("maxCrashes", policy.max_crashes);
  out.field("warnAtStreak", policy.warn_at_streak);
  // Only when set, so policies without one keep their documented bytes.
  if (policy.heartbeat_ms) out.field("heartbeatMs", *policy.heartbeat_ms);
  if (policy.priority) out.field("priority", *policy.priority);
  if (policy.concurrency) out.field("concurrency", *policy.concurrency);
  if (policy.tenant_concurrency) out.field("tenantConcurrency", *policy.tenant_concurrency);
  if (policy.rate_slots) {
    out.field("rateSlots", *policy.rate_slots);
    out.field("rateHoldMs", policy.rate_hold_ms);
  }
  if (!policy.schedule_ms.empty()) {
    out.key("scheduleMs");
    out.begin_array();
    for (int64_t ms : policy.schedule_ms) out.integer(ms);
    out.end_array();
  }
  out.key("perCode");
  out.begin_object();
  for (const CodeRule& rule : policy.per_code) {
    out.key(rule.code);
    out.begin_object();
    out.field("streak", rule.streak);
    out.field("maxAttempts", rule.max_attempts);
    out.field("maxDelayMs", rule.max_delay_ms);
    out.field("onExhaustion", rule.cancel_on_exhaustion ? "cancel" : "dead");
    out.end_object();
  }
  out.end_object();
  out.end_object();
}

Status run_policy(od::document& doc, JsonWriter& out) {
  Where where{"policy", "", ErrorCode::invalid_input};
  Result<od::object> root = input::root_object(doc, where);
  if (!root) return root.take_error();
  where.code = ErrorCode::invalid_policy;
  Result<Policy> policy = read_policy(root.value(), where);
  if (!policy) return policy.take_error();
  write_policy(out, policy.value());
  return ok_status();
}

}  // namespace postbox
