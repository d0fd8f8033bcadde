// pb_webhook: what a webhook delivery's response means, and the endpoint's circuit breaker.
//
// Outcome of one delivery (op "outcome"), by HTTP status or transport error:
//
//   response                  job                         endpoint signal
//   2xx                       ok (succeeded)              success
//   408, 5xx                  retry, code http_<status>   failure
//   429                       retry, code http_<status>   neutral (alive, asking us to slow down)
//   410 Gone                  fail (dead), http_410       gone: the endpoint is disabled
//   other 4xx, 3xx, 1xx       fail (dead), http_<status>  neutral (it answered)
//   network error             retry, network_error        failure
//   request timed out         retry, request_timeout      failure
//
// A retry carries the Retry-After delay when the response had a usable one (delta-seconds or
// an IMF-fixdate, read against `now`), cut to maxRetryAfterMs; otherwise the job's schedule
// decides (pb_settle). Redirects are not followed: a subscriber's URL must answer itself.
//
// The breaker (ops "gate" before a delivery, "record" after one) is per endpoint:
//
//   closed ── `threshold` consecutive failures ──► open (event webhook_endpoint_paused)
//   open ── cooldownMs after opening, the next delivery is a probe ──► half_open
//   half_open ── probe succeeds or answers ──► closed (event webhook_endpoint_resumed)
//   half_open ── probe fails ──► open again, the cooldown restarting
//   any ── 410, or failures lasting disableAfterMs ──► disabled (event webhook_endpoint_disabled)
//
// Only one delivery probes: "gate" hands out the probe by returning the half_open state to
// store (the shim stores it only if nobody changed the row meanwhile). The others look again
// every kProbeWatchMs while it is out (so they follow soon after it closes the breaker), and
// one replaces it after probeMs if it never reports back.
// A disabled endpoint stays disabled until an operator enables it again.
#include "postbox/webhook.h"

#include <algorithm>

#include "postbox/civil_time.h"
#include "postbox/families.h"
#include "postbox/policy.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

namespace webhook {

namespace {

constexpr std::string_view kStateNames[] = {"closed", "open", "half_open", "disabled"};
constexpr std::string_view kSignalNames[] = {"success", "failure", "neutral", "gone"};

bool digits(std::string_view s, int64_t& value) {
  if (s.empty()) return false;
  value = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  return true;
}

int month_of(std::string_view name) {
  constexpr std::string_view kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (int i = 0; i < 12; ++i) {
    if (kMonths[i] == name) return i + 1;
  }
  return 0;
}

bool is_day_name(std::string_view name) {
  constexpr std::string_view kDays[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
  for (std::string_view d : kDays) {
    if (d == name) return true;
  }
  return false;
}

// "Sun, 06 Nov 1994 08:49:37 GMT" → epoch ms. The two obsolete forms HTTP also allows are
// rare in Retry-After and are treated as unusable.
std::optional<int64_t> parse_imf_fixdate(std::string_view s) {
  if (s.size() != 29 || s[3] != ',' || s[4] != ' ' || s[7] != ' ' || s[11] != ' ' || s[16] != ' ' || s[19] != ':' ||
      s[22] != ':' || s[25] != ' ' || s.substr(26) != "GMT" || !is_day_name(s.substr(0, 3))) {
    return std::nullopt;
  }
  int64_t day = 0, year = 0, hour = 0, minute = 0, second = 0;
  const int month = month_of(s.substr(8, 3));
  if (!digits(s.substr(5, 2), day) || !digits(s.substr(12, 4), year) || !digits(s.substr(17, 2), hour) ||
      !digits(s.substr(20, 2), minute) || !digits(s.substr(23, 2), second) || month == 0) {
    return std::nullopt;
  }
  if (year < 1970 || day < 1 || day > civil::days_in_month(year, month) || hour > 23 || minute > 59 || second > 60) {
    return std::nullopt;
  }
  const int64_t days = civil::days_from_civil(year, month, static_cast<int>(day));
  return ((days * 24 + hour) * 60 + minute) * 60000 + second * 1000;
}

Outcome retry_or_fail(std::string_view type, int64_t status, Signal signal) {
  Outcome o;
  o.type = type;
  o.status = status;
  o.signal = signal;
  return o;
}

}  // namespace

std::optional<int64_t> parse_retry_after(std::string_view text, int64_t now) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  int64_t seconds = 0;
  // Ten digits is over 300 years: anything longer is nonsense, not a delay to honour.
  if (text.size() <= 10 && digits(text, seconds)) return seconds * 1000;
  const std::optional<int64_t> at = parse_imf_fixdate(text);
  if (!at) return std::nullopt;
  return *at > now ? *at - now : 0;
}

Outcome classify_status(int64_t status, std::optional<std::string_view> retry_after, int64_t now, int64_t max_after_ms) {
  if (status >= 200 && status <= 299) return retry_or_fail("ok", status, Signal::success);
  if (status == 408 || status == 429 || status >= 500) {
    Outcome o = retry_or_fail("retry", status, status == 429 ? Signal::neutral : Signal::failure);
    if (retry_after) {
      o.after = parse_retry_after(*retry_after, now);
      if (o.after && *o.after > max_after_ms) o.after = max_after_ms;
    }
    return o;
  }
  return retry_or_fail("fail", status, status == 410 ? Signal::gone : Signal::neutral);
}

Outcome classify_error(bool timeout) {
  Outcome o;
  o.type = "retry";
  o.code = timeout ? "request_timeout" : "network_error";
  o.signal = Signal::failure;
  return o;
}

Gate gate(const Endpoint& endpoint, int64_t now, int64_t cooldown_ms, int64_t probe_ms) {
  // A probe usually answers within seconds: a delivery waiting on it looks again this soon.
  constexpr int64_t kProbeWatchMs = 1000;
  Gate g;
  switch (endpoint.state) {
    case State::closed:
      g.deliver = true;
      return g;
    case State::disabled:
      g.disabled = true;
      return g;
    case State::open:
    case State::half_open: {
      const int64_t since = endpoint.opened_at.value_or(now);
      const int64_t wait = endpoint.state == State::open ? cooldown_ms : probe_ms;
      if (now < since + wait) {
        g.retry_at = endpoint.state == State::open ? since + wait : std::min(since + wait, now + kProbeWatchMs);
        return g;
      }
      // Cooldown over (or the last probe never reported back): this delivery probes.
      Endpoint next = endpoint;
      next.state = State::half_open;
      next.opened_at = now;
      g.deliver = true;
      g.probe = true;
      g.write = next;
      return g;
    }
  }
  return g;
}

Record record(const Endpoint& endpoint, Signal signal, int64_t now, int64_t threshold,
              std::optional<int64_t> disable_after_ms) {
  Record r;
  r.endpoint = endpoint;
  Endpoint& e = r.endpoint;
  if (e.state == State::disabled) return r;
  const bool was_paused = e.state == State::open || e.state == State::half_open;
  if (signal == Signal::gone) {
    e.state = State::disabled;
    r.changed = true;
    r.event = "webhook_endpoint_disabled";
    r.reason = "gone";
    return r;
  }
  // An answer other than a failure from a probe shows the endpoint is back.
  if (signal == Signal::success || (signal == Signal::neutral && e.state == State::half_open)) {
    r.changed = e.state != State::closed || e.failures != 0 || e.opened_at || e.failing_since;
    e = Endpoint{};
    if (was_paused) r.event = "webhook_endpoint_resumed";
    return r;
  }
  if (signal == Signal::neutral) return r;
  r.changed = true;
  e.failures += 1;
  if (!e.failing_since) e.failing_since = now;
  if (disable_after_ms && now - *e.failing_since >= *disable_after_ms) {
    e.state = State::disabled;
    r.event = "webhook_endpoint_disabled";
    r.reason = "failing";
    return r;
  }
  if (e.state == State::half_open || (e.state == State::closed && e.failures >= threshold)) {
    e.state = State::open;
    e.opened_at = now;
    r.event = "webhook_endpoint_paused";
  }
  return r;
}

std::string_view state_name(State state) { return kStateNames[static_cast<int>(state)]; }

bool state_from_name(std::string_view name, State& state) {
  for (int i = 0; i < 4; ++i) {
    if (kStateNames[i] == name) {
      state = static_cast<State>(i);
      return true;
    }
  }
  return false;
}

std::string_view signal_name(Signal signal) { return kSignalNames[static_cast<int>(signal)]; }

bool signal_from_name(std::string_view name, Signal& signal) {
  for (int i = 0; i < 4; ++i) {
    if (kSignalNames[i] == name) {
      signal = static_cast<Signal>(i);
      return true;
    }
  }
  return false;
}

}  // namespace webhook

namespace webhook {
// A webhook job's settings (wasm/src/webhook_config.cpp).
Status run_config(od::object& root, const Where& where, JsonWriter& out);
}  // namespace webhook

namespace {

using namespace webhook;

// The fields every op reads; each op says which it requires.
struct WebhookInput {
  std::optional<int64_t> now;
  std::optional<int64_t> status;
  std::optional<std::string_view> error;
  std::optional<std::string_view> retry_after;
  int64_t max_retry_after_ms = kDefaultMaxRetryAfterMs;
  std::optional<int64_t> threshold, cooldown_ms, probe_ms, disable_after_ms, tolerance_sec;
  std::optional<Endpoint> endpoint;
  std::optional<Signal> signal;
  std::optional<std::string_view> timestamp;
};

Status read_endpoint(od::value& v, const Where& where, Endpoint& e) {
  Result<od::object> obj = input::read_object(v, where, "endpoint");
  if (!obj) return obj.take_error();
  const Where inner = where.nested("endpoint");
  bool has_state = false;
  Status status = input::for_each_field(obj.value(), inner, [&](std::string_view key, od::value& field) -> Status {
    if (key == "state") {
      Result<std::string_view> s = input::read_string(field, inner, key, 16);
      if (!s || !state_from_name(s.value(), e.state)) {
        return field_error(inner, key, "must be one of closed, open, half_open, disabled");
      }
      has_state = true;
    } else if (key == "failures") {
      Result<int64_t> n = input::read_int(field, inner, key, 0, 1000000000);
      if (!n) return n.take_error();
      e.failures = n.value();
    } else if (key == "openedAt" || key == "failingSince") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, inner, key);
      if (!n) return n.take_error();
      (key == "openedAt" ? e.opened_at : e.failing_since) = n.value();
    }
    return ok_status();
  });
  if (!status) return status;
  if (!has_state) return input::missing(inner, "state");
  return ok_status();
}

// Out of line: the four ops it serves share one copy of the field reader.
[[gnu::noinline]] Status read_webhook(od::object& root, const Where& where, WebhookInput& in) {
  return input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "now") {
      Result<int64_t> n = input::read_int(field, where, key);
      if (!n) return n.take_error();
      in.now = n.value();
    } else if (key == "status") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key, 100, 599);
      if (!n) return n.take_error();
      in.status = n.value();
    } else if (key == "error" || key == "retryAfter" || key == "timestamp") {
      Result<std::optional<std::string_view>> s = input::read_nullable_string(field, where, key, 256);
      if (!s) return s.take_error();
      (key == "error" ? in.error : key == "retryAfter" ? in.retry_after : in.timestamp) = s.value();
    } else if (key == "maxRetryAfterMs") {
      Result<int64_t> n = input::read_int(field, where, key, 0, kMaxBackoffMs);
      if (!n) return n.take_error();
      in.max_retry_after_ms = n.value();
    } else if (key == "threshold") {
      Result<int64_t> n = input::read_int(field, where, key, 1, 1000);
      if (!n) return n.take_error();
      in.threshold = n.value();
    } else if (key == "cooldownMs" || key == "probeMs") {
      Result<int64_t> n = input::read_int(field, where, key, 0, kMaxBackoffMs);
      if (!n) return n.take_error();
      (key == "cooldownMs" ? in.cooldown_ms : in.probe_ms) = n.value();
    } else if (key == "disableAfterMs") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key, 0, kMaxDelayMs);
      if (!n) return n.take_error();
      in.disable_after_ms = n.value();
    } else if (key == "toleranceSec") {
      Result<int64_t> n = input::read_int(field, where, key, 0, 1000000000);
      if (!n) return n.take_error();
      in.tolerance_sec = n.value();
    } else if (key == "endpoint") {
      Endpoint e;
      Status s = read_endpoint(field, where, e);
      if (!s) return s;
      in.endpoint = e;
    } else if (key == "signal") {
      Result<std::string_view> s = input::read_string(field, where, key, 16);
      Signal signal = Signal::neutral;
      if (!s || !signal_from_name(s.value(), signal)) {
        return field_error(where, key, "must be one of success, failure, neutral, gone");
      }
      in.signal = signal;
    }
    return ok_status();
  });
}

void write_endpoint(JsonWriter& out, const Endpoint& e) {
  out.begin_object();
  out.field("state", state_name(e.state));
  out.field("failures", e.failures);
  out.field("openedAt", e.opened_at);
  out.field("failingSince", e.failing_since);
  out.end_object();
}

Status run_outcome(od::object& root, const Where& where, JsonWriter& out) {
  WebhookInput in;
  Status read = read_webhook(root, where, in);
  if (!read) return read;
  if (!in.now) return input::missing(where, "now");
  if (in.status.has_value() == in.error.has_value()) {
    return input::family_error(where, ErrorCode::invalid_input, "give exactly one of 'status' and 'error'");
  }
  if (in.error && *in.error != "network" && *in.error != "timeout") {
    return field_error(where, "error", "must be \"network\" or \"timeout\"");
  }
  const Outcome o = in.status ? classify_status(*in.status, in.retry_after, *in.now, in.max_retry_after_ms)
                              : classify_error(*in.error == "timeout");
  out.begin_object();
  out.field("type", o.type);
  out.key("code");
  if (o.type == "ok") {
    out.null();  // a success carries no error code
  } else if (o.status) {
    out.string("http_" + decimal_string(*o.status));
  } else {
    out.string(o.code);
  }
  out.field("after", o.after);
  out.field("signal", signal_name(o.signal));
  out.end_object();
  return ok_status();
}

Status run_gate(od::object& root, const Where& where, JsonWriter& out) {
  WebhookInput in;
  Status read = read_webhook(root, where, in);
  if (!read) return read;
  if (!in.now) return input::missing(where, "now");
  if (!in.cooldown_ms) return input::missing(where, "cooldownMs");
  if (!in.probe_ms) return input::missing(where, "probeMs");
  if (!in.endpoint) return input::missing(where, "endpoint");
  const Gate g = gate(*in.endpoint, *in.now, *in.cooldown_ms, *in.probe_ms);
  out.begin_object();
  out.field_bool("deliver", g.deliver);
  out.field_bool("probe", g.probe);
  out.field_bool("disabled", g.disabled);
  out.field("retryAt", g.retry_at);
  out.key("endpoint");
  if (g.write) write_endpoint(out, *g.write); else out.null();
  out.end_object();
  return ok_status();
}

Status run_record(od::object& root, const Where& where, JsonWriter& out) {
  WebhookInput in;
  Status read = read_webhook(root, where, in);
  if (!read) return read;
  if (!in.now) return input::missing(where, "now");
  if (!in.threshold) return input::missing(where, "threshold");
  if (!in.endpoint) return input::missing(where, "endpoint");
  if (!in.signal) return input::missing(where, "signal");
  const Record r = record(*in.endpoint, *in.signal, *in.now, *in.threshold, in.disable_after_ms);
  out.begin_object();
  out.key("endpoint");
  write_endpoint(out, r.endpoint);
  out.field_bool("changed", r.changed);
  out.key("event");
  if (r.event.empty()) {
    out.null();
  } else {
    out.begin_object();
    out.field("type", r.event);
    if (!r.reason.empty()) out.field("reason", r.reason);
    out.end_object();
  }
  out.end_object();
  return ok_status();
}

// A receiver's check of webhook-timestamp (whole seconds) against its clock.
Status run_timestamp(od::object& root, const Where& where, JsonWriter& out) {
  WebhookInput in;
  Status read = read_webhook(root, where, in);
  if (!read) return read;
  if (!in.now) return input::missing(where, "now");
  if (!in.tolerance_sec) return input::missing(where, "toleranceSec");
  int64_t seconds = 0;
  std::string_view reason;
  // Twelve digits reach past the year 30000; more is not a timestamp.
  if (!in.timestamp || in.timestamp->size() > 12 || !digits(*in.timestamp, seconds)) {
    reason = "invalid_timestamp";
  } else if (seconds * 1000 < *in.now - *in.tolerance_sec * 1000) {
    reason = "too_old";
  } else if (seconds * 1000 > *in.now + *in.tolerance_sec * 1000) {
    reason = "too_new";
  }
  out.begin_object();
  out.field_bool("ok", reason.empty());
  if (reason.empty()) out.field("timestamp", seconds); else out.field("reason", reason);
  out.end_object();
  return ok_status();
}

constexpr Operation kOps[] = {
    {"config", webhook::run_config},
    {"outcome", run_outcome},
    {"gate", run_gate},
    {"record", run_record},
    {"timestamp", run_timestamp},
};

}  // namespace

Status run_webhook(od::document& doc, JsonWriter& out) { return dispatch_op(doc, out, "webhook", kOps); }

}  // namespace postbox
