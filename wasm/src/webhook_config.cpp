// pb_webhook op "config": a webhook job's settings, from what defineWebhookJob was given.
// Every default, bound and derived time of a webhook job is decided here:
//   requestTimeoutMs  one request's limit, 1..590000, default 15000
//   timeoutMs         the job's timeout: the request's plus 5000 (signing, reading secrets)
//   probeMs           a probe that never reported back (its isolate died) is replaced after the
//                     job's timeout plus 30000, when its lease is surely over
//   scheduleMs        the wait after each failed attempt (1..32 entries of 0..7 days), default
//                     5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, 14 h, 14 h, 16 h; attempts = entries + 1
//   maxRetryAfterMs   a longer Retry-After is cut to it, 0..7 days, default 6 h
//   breaker           threshold 1..1000 (default 10) consecutive failures open it; cooldownMs
//                     0..7 days (default 5 min) before a probe; disableAfterMs null or 0..10 years
//                     (default 5 days) of failures disable the endpoint
//   endpointReads     reads of an endpoint's row before giving up (an empty answer: a concurrent
//                     first delivery is creating it), 3
//   recordTries       writes of the breaker's new state, each over the version just read, 5
//   probeTakenMs      a delivery that lost the race to take the probe looks again after this, 1000
#include <array>

#include "postbox/families.h"
#include "postbox/policy.h"
#include "postbox/webhook.h"

namespace postbox::webhook {

namespace od = simdjson::ondemand;
using input::Where;

namespace {

constexpr int64_t kDefaultRequestTimeoutMs = 15000;
constexpr int64_t kMaxRequestTimeoutMs = 590000;
constexpr int64_t kJobTimeoutMarginMs = 5000;
constexpr int64_t kProbeLeaseMarginMs = 30000;
constexpr std::array<int64_t, 10> kDefaultScheduleMs = {5000,     300000,   1800000,  7200000,  18000000,
                                                        36000000, 36000000, 50400000, 50400000, 57600000};
constexpr int64_t kDefaultThreshold = 10;
constexpr int64_t kDefaultCooldownMs = 300000;
constexpr int64_t kDefaultDisableAfterMs = 5 * 86400000LL;
constexpr int64_t kEndpointReads = 3;
constexpr int64_t kRecordTries = 5;
constexpr int64_t kProbeTakenMs = 1000;

struct Config {
  int64_t request_timeout_ms = kDefaultRequestTimeoutMs;
  std::vector<int64_t> schedule_ms;
  bool has_schedule = false;
  int64_t max_retry_after_ms = kDefaultMaxRetryAfterMs;
  int64_t threshold = kDefaultThreshold;
  int64_t cooldown_ms = kDefaultCooldownMs;
  std::optional<int64_t> disable_after_ms = kDefaultDisableAfterMs;
};

Status read_breaker(od::value& v, const Where& where, Config& c) {
  Result<od::object> obj = input::read_object(v, where, "breaker");
  if (!obj) return obj.take_error();
  const Where inner = where.nested("breaker");
  return input::for_each_field(obj.value(), inner, [&](std::string_view key, od::value& field) -> Status {
    if (key == "threshold" || key == "cooldownMs") {
      Result<int64_t> n = key == "threshold" ? input::read_int(field, inner, key, 1, 1000) : input::read_int(field, inner, key, 0, kMaxBackoffMs);
      if (!n) return n.take_error();
      (key == "threshold" ? c.threshold : c.cooldown_ms) = n.value();
    } else if (key == "disableAfterMs") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, inner, key, 0, kMaxDelayMs);
      if (!n) return n.take_error();
      c.disable_after_ms = n.value();
    }
    return ok_status();
  });
}

Status read_config(od::object& root, const Where& where, Config& c) {
  return input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "requestTimeoutMs" || key == "maxRetryAfterMs") {
      Result<int64_t> n = key == "requestTimeoutMs" ? input::read_int(field, where, key, 1, kMaxRequestTimeoutMs)
                                                    : input::read_int(field, where, key, 0, kMaxBackoffMs);
      if (!n) return n.take_error();
      (key == "requestTimeoutMs" ? c.request_timeout_ms : c.max_retry_after_ms) = n.value();
    } else if (key == "scheduleMs") {
      Result<od::array> arr = input::read_array(field, where, key);
      if (!arr) return arr.take_error();
      c.has_schedule = true;
      Status each = input::for_each_element(arr.value(), where, key, kMaxScheduleEntries, [&](od::value& item, uint32_t) -> Status {
        Result<int64_t> n = input::read_int(item, where, key, 0, kMaxBackoffMs);
        if (!n) return n.take_error();
        c.schedule_ms.push_back(n.value());
        return ok_status();
      });
      if (!each) return each;
      if (c.schedule_ms.empty()) return field_error(where, key, "must have at least one entry");
    } else if (key == "breaker") {
      return read_breaker(field, where, c);
    }
    return ok_status();
  });
}

}  // namespace

Status run_config(od::object& root, const Where& where, JsonWriter& out) {
  Config c;
  if (Status read = read_config(root, where, c); !read) return read;
  if (!c.has_schedule) c.schedule_ms.assign(kDefaultScheduleMs.begin(), kDefaultScheduleMs.end());
  const int64_t timeout_ms = c.request_timeout_ms + kJobTimeoutMarginMs;
  out.begin_object();
  out.field("requestTimeoutMs", c.request_timeout_ms);
  out.field("timeoutMs", timeout_ms);
  out.field("probeMs", timeout_ms + kProbeLeaseMarginMs);
  out.key("scheduleMs");
  out.begin_array();
  for (int64_t ms : c.schedule_ms) out.integer(ms);
  out.end_array();
  out.field("maxAttempts", static_cast<int64_t>(c.schedule_ms.size()) + 1);
  out.field("maxRetryAfterMs", c.max_retry_after_ms);
  out.key("breaker");
  out.begin_object();
  out.field("threshold", c.threshold);
  out.field("cooldownMs", c.cooldown_ms);
  out.field("disableAfterMs", c.disable_after_ms);
  out.end_object();
  out.field("endpointReads", kEndpointReads);
  out.field("recordTries", kRecordTries);
  out.field("probeTakenMs", kProbeTakenMs);
  out.end_object();
  return ok_status();
}

}  // namespace postbox::webhook
