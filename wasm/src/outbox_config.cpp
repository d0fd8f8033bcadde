// pb_claim op "outbox": the bounds and defaults of an outbox's own options, checked once when
// it is created. Every number here limits what one invocation may hold or spend:
//   concurrency          1..100, default 1: handlers one lane runs at once (and claims per statement)
//   lanes                1..5, default 1: Workers allow 6 connections per invocation; one stays
//                        free for queue sends and the application
//   handlerSessions      0..4, default min(5 - lanes, lanes * concurrency): connections an
//                        invocation may open for handlers' ctx.db, apart from the lanes' (whose
//                        statements and heartbeats must not wait behind a handler's transaction);
//                        lanes + handlerSessions may be at most 5 (the same budget); 0 puts
//                        ctx.db on the lane's own session
//   operationTimeoutMs   1..2147483647 (PostgreSQL's statement_timeout is an int of ms), default 60 s:
//                        one operator action's connect, SQL and close together
//   maxPayloadBytes      1..1 MiB (the cap enqueue accepts), default 256 KiB
//   maxQueueDelayMs      86400000: the longest delay Queues accept on a message (24 h); a job due
//                        later is not nudged, the sweep finds it
//   maxKeyChars          1024: the longest dedupeKey, tenantKey or correlationId an enqueue takes
//   fairWeights          {tenantKey: 1..100}, at most 1000 tenants (fair_share.h): checked only
// A missing or null field takes its default; anything else out of range is an error naming it.
#include <algorithm>
#include <optional>

#include "postbox/fair_share.h"
#include "postbox/families.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

namespace {

struct Bound {
  std::string_view name;
  int64_t min;
  int64_t max;
  int64_t fallback;
};

constexpr Bound kBounds[] = {
    {"concurrency", 1, 100, 1},
    {"lanes", 1, 5, 1},
    {"operationTimeoutMs", 1, 2147483647, 60000},
    {"maxPayloadBytes", 1, 1048576, 262144},
};
constexpr size_t kBoundCount = sizeof(kBounds) / sizeof(kBounds[0]);
// Connections one invocation may hold for the outbox: Workers' 6, less one for queue sends.
constexpr int64_t kConnectionBudget = 5;
constexpr int64_t kMaxHandlerSessions = kConnectionBudget - 1;
constexpr int64_t kMaxQueueDelayMs = 86400000;
constexpr int64_t kMaxKeyChars = 1024;

// `fairShare.weights`: an object of tenant keys, each an integer weight in 1..kMaxFairWeight, at
// most kMaxFairWeights of them (null: none).
Status check_fair_weights(od::value& field, const Where& where) {
  bool is_null = false;
  if (field.is_null().get(is_null) == simdjson::SUCCESS && is_null) return ok_status();
  od::object weights;
  if (field.get_object().get(weights) != simdjson::SUCCESS) return input::field_error(where, "fairWeights", "must be an object of tenant keys and weights");
  int64_t count = 0;
  const Where inner = where.nested("fairWeights");
  return input::for_each_field(weights, inner, [&](std::string_view tenant, od::value& weight) -> Status {
    if (++count > kMaxFairWeights) return input::field_error(where, "fairWeights", "must weigh at most " + decimal_string(kMaxFairWeights) + " tenants");
    if (tenant.empty()) return input::field_error(where, "fairWeights", "must name tenants by non-empty keys");
    Result<int64_t> w = input::read_int(weight, inner, tenant, 1, kMaxFairWeight);
    if (!w) return w.take_error();
    return ok_status();
  });
}

}  // namespace

Status claim_outbox(od::object& root, const Where& claim, JsonWriter& out) {
  // Refusals name the option as its user wrote it ("options: field 'lanes' …"): the shim passes
  // the message on as it is.
  const Where where{"options", claim.prefix, claim.code};
  int64_t values[kBoundCount];
  for (size_t i = 0; i < kBoundCount; ++i) values[i] = kBounds[i].fallback;
  std::optional<int64_t> handler_sessions;
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "fairWeights") return check_fair_weights(field, where);
    if (key == "handlerSessions") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key, 0, kMaxHandlerSessions);
      if (!n) return n.take_error();
      handler_sessions = n.value();
      return ok_status();
    }
    for (size_t i = 0; i < kBoundCount; ++i) {
      if (key != kBounds[i].name) continue;
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key, kBounds[i].min, kBounds[i].max);
      if (!n) return n.take_error();
      if (n.value()) values[i] = *n.value();
    }
    return ok_status();
  });
  if (!status) return status;
  const int64_t concurrency = values[0];
  const int64_t lanes = values[1];
  const int64_t spare = kConnectionBudget - lanes;
  if (handler_sessions && *handler_sessions > spare) {
    return input::field_error(where, "handlerSessions",
                              "must be at most " + decimal_string(spare) + " with lanes " + decimal_string(lanes) +
                           ": lanes + handlerSessions may hold at most " + decimal_string(kConnectionBudget) +
                           " connections (Workers allow 6 per invocation; one stays free for queue sends)");
  }
  // More sessions than handlers that can run at once would never be used.
  const int64_t sessions = handler_sessions ? *handler_sessions : std::min(spare, lanes * concurrency);
  out.begin_object();
  for (size_t i = 0; i < kBoundCount; ++i) out.field(kBounds[i].name, values[i]);
  out.field("handlerSessions", sessions);
  out.field("maxQueueDelayMs", kMaxQueueDelayMs);
  out.field("maxKeyChars", kMaxKeyChars);
  out.end_object();
  return ok_status();
}

}  // namespace postbox
