// The "op" field shared by the families with several operations (claim, sweep, nudge, cron).
#include "postbox/families.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

// Reads "op" wherever it sits, then rewinds so the operation reads the object from the start.
Result<std::string_view> read_op(od::object& root, const Where& where) {
  od::value op;
  if (root.find_field_unordered("op").get(op) != simdjson::SUCCESS) return input::missing(where, "op");
  Result<std::string_view> name = input::read_string(op, where, "op", 64);
  if (!name) return name.take_error();
  bool empty = false;
  if (root.reset().get(empty) != simdjson::SUCCESS) {
    return input::family_error(where, ErrorCode::invalid_json, "malformed object");
  }
  return name;
}

Error unknown_op(const Where& where, std::string_view op) {
  return input::family_error(where, ErrorCode::unknown_op, "unknown op " + input::quoted(op));
}

}  // namespace postbox
