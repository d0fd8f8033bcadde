// pb_cron: the JSON face of the cron core (postbox/cron.h). Parsing and matching live there;
// this file only reads the operation, calls it and writes the answer.
#include <algorithm>

#include "postbox/families.h"
#include "postbox/names.h"

#include "postbox/cron.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

namespace {

struct CronInput {
  std::string_view expr;
  std::string_view name;
  std::optional<int64_t> at;  // "at", "after", "before" or "scheduledAt", by op
};

Status read_cron_input(od::object& root, const Where& where, std::string_view time_field, CronInput& in) {
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "expr" || key == "name") {
      Result<std::string_view> s = input::read_string(field, where, key, key == "expr" ? 4096 : kMaxKindBytes);
      if (!s) return s.take_error();
      (key == "expr" ? in.expr : in.name) = s.value();
    } else if (!time_field.empty() && key == time_field) {
      Result<int64_t> n = input::read_int(field, where, key);
      if (!n) return n.take_error();
      in.at = n.value();
    }
    return ok_status();
  });
  if (!status) return status;
  if (!time_field.empty() && !in.at) return input::missing(where, time_field);
  return ok_status();
}

Result<cron::Expr> parse_expr(const CronInput& in, const Where& where) {
  cron::Expr expr;
  cron::ParseError err;
  if (!cron::parse(in.expr, expr, err)) {
    return input::family_error(where, ErrorCode::invalid_cron, err.message);
  }
  return expr;
}

// Catch-up bound of `due`: occurrences at most this old, and at most this many per schedule.
constexpr int64_t kCatchUpWindowMs = 24 * 60 * 60 * 1000;
constexpr int kMaxCatchUp = 24;
constexpr int64_t kMinuteMs = 60 * 1000;

void write_key(JsonWriter& out, std::string_view name, int64_t at) {
  out.field("key", "schedule:" + std::string(name) + ":" + cron::format_iso(at));
}

// One schedule of `due`: the occurrences in (from, at], newest kept, written oldest first.
// `lastAt` is the latest occurrence already handled; without one (the first run) only the
// tick's own minute counts, and `baseline` tells the shim what to record before enqueueing,
// so an occurrence that fails on the first run is still caught up by the next tick.
Status run_due_one(od::value& value, const Where& where, int64_t at, JsonWriter& out) {
  od::object obj;
  if (value.get_object().get(obj) != simdjson::SUCCESS) return input::family_error(where, ErrorCode::invalid_input, "must be an object");
  CronInput in;
  std::optional<int64_t> last_at;
  Status status = input::for_each_field(obj, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "lastAt") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key);
      if (!n) return n.take_error();
      last_at = n.value();
      return ok_status();
    }
    if (key != "expr" && key != "name") return ok_status();
    Result<std::string_view> s = input::read_string(field, where, key, key == "expr" ? 4096 : kMaxKindBytes);
    if (!s) return s.take_error();
    (key == "expr" ? in.expr : in.name) = s.value();
    return ok_status();
  });
  if (!status) return status;
  if (!is_kind(in.name)) return field_error(where, "name", "must be 1-128 bytes of [A-Za-z0-9._:-]");
  Result<cron::Expr> expr = parse_expr(in, where);
  if (!expr) return expr.take_error();

  const int64_t handled = last_at ? *last_at : at - at % kMinuteMs - 1;
  const int64_t from = last_at ? std::max(handled, at - kCatchUpWindowMs) : handled;
  int64_t found[kMaxCatchUp];
  int count = 0;
  std::optional<int64_t> o = cron::prev_before(expr.value(), at + 1);
  for (; o && *o > from && count < kMaxCatchUp; o = cron::prev_before(expr.value(), *o)) found[count++] = *o;

  out.begin_object();
  out.field("name", in.name);
  out.field("baseline", last_at ? std::nullopt : std::optional<int64_t>(handled));
  out.key("occurrences");
  out.begin_array();
  for (int i = count - 1; i >= 0; --i) {
    out.begin_object();
    out.field("at", found[i]);
    write_key(out, in.name, found[i]);
    out.end_object();
  }
  out.end_array();
  // An unhandled occurrence older than the window, or beyond the count, is left behind.
  out.field_bool("skipped", o && *o > handled);
  out.end_object();
  return ok_status();
}

Status run_due(od::object& root, const Where& where, JsonWriter& out) {
  std::optional<int64_t> at;
  bool has_schedules = false;
  // `at` must be known before the list is read: fields are read once, in order, so the
  // list is walked in a second pass.
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "at") {
      Result<int64_t> n = input::read_int(field, where, key);
      if (!n) return n.take_error();
      at = n.value();
    } else if (key == "schedules") {
      has_schedules = true;
    }
    return ok_status();
  });
  if (!status) return status;
  if (!at) return input::missing(where, "at");
  if (!has_schedules) return input::missing(where, "schedules");
  bool empty = false;
  if (root.reset().get(empty) != simdjson::SUCCESS) return input::family_error(where, ErrorCode::invalid_json, "malformed object");
  out.begin_object();
  out.key("schedules");
  out.begin_array();
  status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key != "schedules") return ok_status();
    Result<od::array> list = input::read_array(field, where, key);
    if (!list) return list.take_error();
    return input::for_each_element(list.value(), where, key, 1000, [&](od::value& item, uint32_t index) -> Status {
      return run_due_one(item, where.indexed("schedules", index), *at, out);
    });
  });
  if (!status) return status;
  out.end_array();
  out.end_object();
  return ok_status();
}

}  // namespace

Status run_cron(od::document& doc, JsonWriter& out) {
  const Where where{"cron", "", ErrorCode::invalid_input};
  Result<od::object> root = input::root_object(doc, where);
  if (!root) return root.take_error();
  Result<std::string_view> op_result = read_op(root.value(), where);
  if (!op_result) return op_result.take_error();
  const std::string_view op = op_result.value();
  if (op == "due") return run_due(root.value(), where, out);
  const std::string_view time_field = op == "match" ? "at" : op == "next" ? "after" : op == "prev" ? "before"
                                      : op == "key" ? "scheduledAt" : "";
  if (op != "parse" && time_field.empty()) return unknown_op(where, op);

  CronInput in;
  Status read = read_cron_input(root.value(), where, time_field, in);
  if (!read) return read;

  out.begin_object();
  if (op == "key") {
    if (in.name.empty()) return input::missing(where, "name");
    if (!is_kind(in.name)) return field_error(where, "name", "must be 1-128 bytes of [A-Za-z0-9._:-]");
    write_key(out, in.name, *in.at);
    out.end_object();
    return ok_status();
  }
  Result<cron::Expr> expr = parse_expr(in, where);
  if (!expr) return expr.take_error();
  if (op == "parse") {
    out.field_bool("ok", true);
  } else if (op == "match") {
    out.field_bool("match", cron::matches(expr.value(), *in.at));
  } else {
    std::optional<int64_t> at =
        op == "next" ? cron::next_after(expr.value(), *in.at) : cron::prev_before(expr.value(), *in.at);
    // Times are in [0, 2^53) (docs/ABI.md): a match before the epoch or past 2^53 - 1 is no match.
    if (at && (*at < 0 || *at > input::kMaxSafeInteger)) at = std::nullopt;
    out.field("at", at);
  }
  out.end_object();
  return ok_status();
}

}  // namespace postbox
