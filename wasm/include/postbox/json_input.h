// Reading helpers over simdjson On-Demand. On-Demand values are consumed once, in document
// order, so every reader walks an object's fields in one pass and dispatches on the key.
// Every failure becomes an Error naming the family and the field, never an exception.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "postbox/json_writer.h"
#include "postbox/result.h"
#include "simdjson.h"

namespace postbox::input {

namespace od = simdjson::ondemand;

// Times and counts are integers in [0, 2^53), so JavaScript numbers hold them exactly.
constexpr int64_t kMaxSafeInteger = (int64_t{1} << 53) - 1;
// Deeper documents are refused before any recursion can exhaust a wasm stack.
constexpr int kMaxDepth = 256;

// Where a field lives, for messages like "settle: field 'job.attempts' must be an integer".
struct Where {
  std::string_view family;
  std::string prefix;  // "" at the top level, "job" or "batch[3].job" when nested
  ErrorCode code = ErrorCode::invalid_input;

  Where nested(std::string_view field) const;
  Where indexed(std::string_view field, uint32_t index) const;
  std::string path(std::string_view field) const;
};

Error field_error(const Where& where, std::string_view field, std::string_view what);
Error family_error(const Where& where, ErrorCode code, std::string_view what);

// Quotes a value for an error message, cut to 64 bytes so hostile input cannot grow output.
std::string quoted(std::string_view value);

Result<int64_t> read_int(od::value& v, const Where& where, std::string_view field,
                         int64_t lo = 0, int64_t hi = kMaxSafeInteger);
Result<std::optional<int64_t>> read_nullable_int(od::value& v, const Where& where, std::string_view field,
                                                 int64_t lo = 0, int64_t hi = kMaxSafeInteger);
Result<std::string_view> read_string(od::value& v, const Where& where, std::string_view field,
                                     uint32_t max_bytes);
Result<std::optional<std::string_view>> read_nullable_string(od::value& v, const Where& where,
                                                             std::string_view field, uint32_t max_bytes);
Result<bool> read_bool(od::value& v, const Where& where, std::string_view field);
Result<od::object> read_object(od::value& v, const Where& where, std::string_view field);
Result<od::array> read_array(od::value& v, const Where& where, std::string_view field);
// True (and consumed) when the value is JSON null.
bool take_null(od::value& v);

// Calls on_field(key, value) for every field of obj, in document order.
template <class OnField>
Status for_each_field(od::object& obj, const Where& where, OnField&& on_field) {
  for (auto item : obj) {
    od::field field;
    std::string_view key;
    if (std::move(item).get(field) != simdjson::SUCCESS || field.unescaped_key(false).get(key) != simdjson::SUCCESS) {
      return family_error(where, ErrorCode::invalid_json, "malformed object");
    }
    Status status = on_field(key, field.value());
    if (!status) return status;
  }
  return ok_status();
}

// Calls on_element(value, index) for every element; more than max_count is an error.
template <class OnElement>
Status for_each_element(od::array& arr, const Where& where, std::string_view field, uint32_t max_count,
                        OnElement&& on_element) {
  uint32_t index = 0;
  for (auto item : arr) {
    od::value value;
    if (std::move(item).get(value) != simdjson::SUCCESS) {
      return family_error(where, ErrorCode::invalid_json, "malformed array");
    }
    if (index == max_count) {
      return field_error(where, field, "must have at most " + decimal_string(max_count) + " items");
    }
    Status status = on_element(value, index);
    if (!status) return status;
    ++index;
  }
  return ok_status();
}

// Checks the whole document is well-formed JSON (every token, depth ≤ kMaxDepth, nothing
// trailing), then rewinds it for reading. On-Demand alone would skip unread values unchecked.
Status validate_document(od::document& doc, std::string_view family);

// The document's top-level object, or invalid_input.
Result<od::object> root_object(od::document& doc, const Where& where);

// A field that must be present: "settle: field 'now' is required".
Error missing(const Where& where, std::string_view field);

}  // namespace postbox::input
