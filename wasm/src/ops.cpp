// The "op" field shared by the families with several operations (claim, sweep, nudge, cron,
// enqueue), and the dispatch on it.
#include "postbox/families.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

Result<std::string_view> read_string_anywhere(od::object& root, const Where& where, std::string_view name,
                                              uint32_t max_bytes, std::string_view absent) {
  od::value value;
  std::string_view text = absent;
  if (root.find_field_unordered(name).get(value) == simdjson::SUCCESS) {
    Result<std::string_view> read = input::read_string(value, where, name, max_bytes);
    if (!read) return read.take_error();
    text = read.value();
  } else if (absent.empty()) {
    return input::missing(where, name);
  }
  bool empty = false;
  if (root.reset().get(empty) != simdjson::SUCCESS) {
    return input::family_error(where, ErrorCode::invalid_json, "malformed object");
  }
  return text;
}

Result<std::string_view> read_op(od::object& root, const Where& where, std::string_view absent) {
  return read_string_anywhere(root, where, "op", 64, absent);
}

Status dispatch_ops(od::document& doc, JsonWriter& out, std::string_view family, const Operation* ops, size_t count,
                    std::string_view absent) {
  const Where where{family, "", ErrorCode::invalid_input};
  Result<od::object> root = input::root_object(doc, where);
  if (!root) return root.take_error();
  Result<std::string_view> op = read_op(root.value(), where, absent);
  if (!op) return op.take_error();
  for (size_t i = 0; i < count; ++i) {
    if (ops[i].name == op.value()) return ops[i].run(root.value(), where, out);
  }
  return unknown_op(where, op.value());
}

Error unknown_op(const Where& where, std::string_view op) {
  return input::family_error(where, ErrorCode::unknown_op, "unknown op " + input::quoted(op));
}

}  // namespace postbox
