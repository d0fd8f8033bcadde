// Reading helpers over simdjson On-Demand. On-Demand values are consumed once, in document
// order, so every reader walks an object's fields in one pass and dispatches on the key.
// Every failure becomes an Error naming the family and the field, never an exception.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

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
// A string of any length from a user's text (an error message, a reason): a lone surrogate
// escape, which no UTF-8 column can hold, becomes U+FFFD instead of failing the document.
Result<std::optional<std::string_view>> read_nullable_text(od::value& v, const Where& where, std::string_view field);
Result<bool> read_bool(od::value& v, const Where& where, std::string_view field);
Result<od::object> read_object(od::value& v, const Where& where, std::string_view field);
Result<od::array> read_array(od::value& v, const Where& where, std::string_view field);
// True (and consumed) when the value is JSON null.
bool take_null(od::value& v);

// Out-of-line iteration (one copy of simdjson's inlined object and array walking in the
// binary, which keeps the .wasm small); the templates below only adapt a lambda to it.
using FieldVisitor = Status (*)(void* context, std::string_view key, od::value& value);
using ElementVisitor = Status (*)(void* context, od::value& value, uint32_t index);
Status visit_fields(od::object& obj, const Where& where, void* context, FieldVisitor visit);
Status visit_elements(od::array& arr, const Where& where, std::string_view field, uint32_t max_count,
                      void* context, ElementVisitor visit);

// Calls on_field(key, value) for every field of obj, in document order.
template <class OnField>
Status for_each_field(od::object& obj, const Where& where, OnField&& on_field) {
  using Fn = std::remove_reference_t<OnField>;
  return visit_fields(obj, where, &on_field, [](void* context, std::string_view key, od::value& value) -> Status {
    return (*static_cast<Fn*>(context))(key, value);
  });
}

// Calls on_element(value, index) for every element; more than max_count is an error.
template <class OnElement>
Status for_each_element(od::array& arr, const Where& where, std::string_view field, uint32_t max_count,
                        OnElement&& on_element) {
  using Fn = std::remove_reference_t<OnElement>;
  return visit_elements(arr, where, field, max_count, &on_element,
                        [](void* context, od::value& value, uint32_t index) -> Status {
                          return (*static_cast<Fn*>(context))(value, index);
                        });
}

// Calls fn(object, where, index) for each object of the array `field` (at most max_count, else
// too_large); an element that is not an object is invalid_input, named by its index.
template <typename Fn>
Status for_each_object(od::value& field, const Where& where, std::string_view key, uint32_t max_count, Fn&& fn) {
  Result<od::array> list = read_array(field, where, key);
  if (!list) return list.take_error();
  Where capped = where;
  capped.code = ErrorCode::too_large;
  return for_each_element(list.value(), capped, key, max_count, [&](od::value& value, uint32_t index) -> Status {
    const Where item_where = where.indexed(key, index);
    od::object obj;
    if (value.get_object().get(obj) != simdjson::SUCCESS) return family_error(item_where, ErrorCode::invalid_input, "must be an object");
    return fn(obj, item_where, index);
  });
}

// Checks the whole document is well-formed JSON (every token, depth ≤ kMaxDepth, nothing
// trailing), then rewinds it for reading. On-Demand alone would skip unread values unchecked.
Status validate_document(od::document& doc, std::string_view family);

// The document's top-level object, or invalid_input.
Result<od::object> root_object(od::document& doc, const Where& where);

// A field that must be present: "settle: field 'now' is required".
Error missing(const Where& where, std::string_view field);

// One required integer of an object read by read_int_fields, with its bounds.
struct IntField {
  std::string_view name;
  int64_t* target;
  int64_t lo = 0;
  int64_t hi = kMaxSafeInteger;
};

// Reads every field named in `fields` (at most 32), each a required integer within its bounds,
// in one pass over obj; other keys are ignored, as every reader here ignores them.
Status read_int_fields(od::object& obj, const Where& where, IntField* fields, size_t count);

// The same, one key at a time, for a reader whose object also holds fields of other types:
// inside its for_each_field pass, read_int_field reads `key` into the field of `fields` it
// names (true) or leaves it (false), marking it in `seen`; after the pass,
// require_int_fields names the first one not seen.
Result<bool> read_int_field(IntField* fields, size_t count, std::string_view key, od::value& value, const Where& where, uint32_t& seen);
Status require_int_fields(const IntField* fields, size_t count, uint32_t seen, const Where& where);

}  // namespace postbox::input
