// pb_backlog op "read": the bound on each statement of an operator's read (postbox/inspect, the
// dashboard). `statementTimeoutMs` is optional: default 30000 (30 s, long enough for a count
// over a large outbox, short enough that a dashboard never holds a connection for minutes),
// at most 2147483647 (PostgreSQL's own limit for statement_timeout).
#include "postbox/families.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

namespace {

constexpr int64_t kDefaultStatementTimeoutMs = 30000;
constexpr int64_t kMaxStatementTimeoutMs = 2147483647;

}  // namespace

Status backlog_read(od::object& root, const Where& where, JsonWriter& out) {
  int64_t timeout_ms = kDefaultStatementTimeoutMs;
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key != "statementTimeoutMs") return ok_status();
    Result<int64_t> n = input::read_int(field, where, key, 1, kMaxStatementTimeoutMs);
    if (!n) return n.take_error();
    timeout_ms = n.value();
    return ok_status();
  });
  if (!status) return status;
  out.begin_object();
  out.field("statementTimeoutMs", timeout_ms);
  out.end_object();
  return ok_status();
}

}  // namespace postbox
