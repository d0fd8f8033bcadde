// pb_claim op idle: how long a long-lived consumer (runConsumer) waits before its next drain.
// After a drain that claimed something, none: more may be due. After one that found nothing, the
// consumer's idle wait. After a drain that failed (the database down or refusing), the idle wait
// doubles with each failure in a row, so a database that is down for minutes is asked about
// every 30 s, not every second, and the consumer's infra_error events thin out with it.
#include <algorithm>
#include <iterator>

#include "postbox/families.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

namespace {

constexpr int64_t kDefaultIdleMs = 1000;
constexpr int64_t kMaxIdleMs = 3600000;
// The first wait after a failure, and the longest that failures alone lead to.
constexpr int64_t kFailureFirstMs = 1000;
constexpr int64_t kFailureMaxMs = 30000;
constexpr int64_t kMaxFailures = 1000000;

}  // namespace

Status claim_idle(od::object& root, const Where& where, JsonWriter& out) {
  int64_t idle = kDefaultIdleMs, claimed = -1, failures = -1;
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "idleMs") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key, 0, kMaxIdleMs);
      if (!n) return n.take_error();
      if (n.value()) idle = *n.value();
    } else if (key == "claimed" || key == "failures") {
      Result<int64_t> n = input::read_int(field, where, key, 0, key == "claimed" ? input::kMaxSafeInteger : kMaxFailures);
      if (!n) return n.take_error();
      (key == "claimed" ? claimed : failures) = n.value();
    }
    return ok_status();
  });
  if (!status) return status;
  if (claimed < 0) return input::missing(where, "claimed");
  if (failures < 0) return input::missing(where, "failures");
  int64_t wait = 0;
  if (failures > 0) {
    const int64_t cap = std::max(idle, kFailureMaxMs);
    wait = std::max(idle, kFailureFirstMs);
    for (int64_t i = 1; i < failures && wait < cap; ++i) wait *= 2;
    wait = std::min(wait, cap);
  } else if (claimed == 0) {
    wait = idle;
  }
  out.begin_object();
  out.field("waitMs", wait);
  out.end_object();
  return ok_status();
}

}  // namespace postbox
