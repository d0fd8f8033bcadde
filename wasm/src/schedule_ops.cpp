// pb_cron: the JSON face of the cron core (postbox/cron.h). Parsing and matching live there;
// this file only reads the operation, calls it and writes the answer.
#include "postbox/families.h"
#include "postbox/names.h"

#if POSTBOX_HAVE_CRON
#include "postbox/cron.h"
#endif

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

#if POSTBOX_HAVE_CRON

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

}  // namespace

Status run_cron(od::document& doc, JsonWriter& out) {
  const Where where{"cron", "", ErrorCode::invalid_input};
  Result<od::object> root = input::root_object(doc, where);
  if (!root) return root.take_error();
  Result<std::string_view> op_result = read_op(root.value(), where);
  if (!op_result) return op_result.take_error();
  const std::string_view op = op_result.value();
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
    out.field("key", "schedule:" + std::string(in.name) + ":" + cron::format_iso(*in.at));
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

#else

Status run_cron(od::document&, JsonWriter&) {
  return input::family_error(Where{"cron", "", ErrorCode::unknown_op}, ErrorCode::unknown_op,
                             "cron is not built into this core");
}

#endif

}  // namespace postbox
