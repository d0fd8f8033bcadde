#include "postbox/json_input.h"

#include "postbox/json_error.h"
#include "postbox/json_number.h"
#include "postbox/json_writer.h"

namespace postbox::input {

namespace {

simdjson::error_code walk(od::value v, int depth);

std::string_view raw_token(od::value& v) { return v.raw_json_token(); }
// Never an error: a view of the root's bytes.
std::string_view raw_token(od::document& doc) { return doc.raw_json_token().value_unsafe(); }

template <class Scalar>
simdjson::error_code walk_scalar(Scalar& v, od::json_type type, bool root) {
  switch (type) {
    case od::json_type::number: {
      od::number_type kind;
      if (auto e = v.get_number_type().get(kind)) return e;
      // Integers beyond 64 bits are valid JSON; simdjson only declines to convert them. At the
      // root such a number is left unread, so the document is not at its end.
      if (kind == od::number_type::big_integer) return root ? simdjson::TRAILING_CONTENT : simdjson::SUCCESS;
      // What get_number() would answer (json_number.h). At the root it would also consume the
      // number, the document's single token (get_number_type() checked), so nothing trails.
      const std::string_view token = raw_token(v);
      return number_accepted(token.data(), root ? token.size() : kNotRoot) ? simdjson::SUCCESS : simdjson::NUMBER_ERROR;
    }
    case od::json_type::string: {
      // A lone surrogate escape is well-formed JSON that JavaScript writes for a broken string:
      // the fields that hold free text read it as U+FFFD; fields that need a name refuse it.
      std::string_view text;
      return v.get_string(true).get(text);
    }
    case od::json_type::boolean: {
      bool flag;
      return v.get_bool().get(flag);
    }
    case od::json_type::null: {
      bool is_null = false;
      if (auto e = v.is_null().get(is_null)) return e;
      return is_null ? simdjson::SUCCESS : simdjson::N_ATOM_ERROR;
    }
    default:
      return simdjson::TAPE_ERROR;
  }
}

simdjson::error_code walk(od::value v, int depth) {
  if (depth > kMaxDepth) return simdjson::DEPTH_ERROR;
  od::json_type type;
  if (auto e = v.type().get(type)) return e;
  if (type == od::json_type::object) {
    od::object obj;
    if (auto e = v.get_object().get(obj)) return e;
    for (auto item : obj) {
      od::field field;
      if (auto e = std::move(item).get(field)) return e;
      std::string_view key;
      if (auto e = field.unescaped_key(false).get(key)) return e;
      if (auto e = walk(field.value(), depth + 1)) return e;
    }
    return simdjson::SUCCESS;
  }
  if (type == od::json_type::array) {
    od::array arr;
    if (auto e = v.get_array().get(arr)) return e;
    for (auto item : arr) {
      od::value element;
      if (auto e = std::move(item).get(element)) return e;
      if (auto e = walk(element, depth + 1)) return e;
    }
    return simdjson::SUCCESS;
  }
  return walk_scalar(v, type, false);
}

}  // namespace

Where Where::nested(std::string_view field) const {
  return Where{family, path(field), code};
}

Where Where::indexed(std::string_view field, uint32_t index) const {
  return Where{family, path(field) + "[" + decimal_string(index) + "]", code};
}

std::string Where::path(std::string_view field) const {
  if (prefix.empty()) return std::string(field);
  std::string out = prefix;
  out += '.';
  out += field;
  return out;
}

Error field_error(const Where& where, std::string_view field, std::string_view what) {
  std::string message(where.family);
  message += ": field '";
  message += where.path(field);
  message += "' ";
  message += what;
  return Error{where.code, std::move(message)};
}

Error family_error(const Where& where, ErrorCode code, std::string_view what) {
  std::string message(where.family);
  message += ": ";
  if (!where.prefix.empty()) {
    message += where.prefix;
    message += ": ";
  }
  message += what;
  return Error{code, std::move(message)};
}

Error missing(const Where& where, std::string_view field) {
  return field_error(where, field, "is required");
}

Result<bool> read_int_field(IntField* fields, size_t count, std::string_view key, od::value& value, const Where& where, uint32_t& seen) {
  for (size_t i = 0; i < count && i < 32; ++i) {
    if (key != fields[i].name) continue;
    Result<int64_t> n = read_int(value, where, key, fields[i].lo, fields[i].hi);
    if (!n) return n.take_error();
    *fields[i].target = n.value();
    seen |= uint32_t{1} << i;
    return true;
  }
  return false;
}

Status require_int_fields(const IntField* fields, size_t count, uint32_t seen, const Where& where) {
  for (size_t i = 0; i < count && i < 32; ++i) {
    if ((seen & (uint32_t{1} << i)) == 0) return missing(where, fields[i].name);
  }
  return ok_status();
}

Status read_int_fields(od::object& obj, const Where& where, IntField* fields, size_t count) {
  uint32_t seen = 0;
  Status status = for_each_field(obj, where, [&](std::string_view key, od::value& value) -> Status {
    Result<bool> read = read_int_field(fields, count, key, value, where, seen);
    if (!read) return read.take_error();
    return ok_status();
  });
  if (!status) return status;
  return require_int_fields(fields, count, seen, where);
}

std::string quoted(std::string_view value) {
  constexpr size_t kShown = 64;
  std::string out = "'";
  if (value.size() <= kShown) {
    out += value;
  } else {
    // Cut on a UTF-8 boundary so the message stays valid text.
    size_t cut = kShown;
    while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) --cut;
    out += value.substr(0, cut);
    out += "...";
  }
  out += "'";
  return out;
}

Result<int64_t> read_int(od::value& v, const Where& where, std::string_view field, int64_t lo, int64_t hi) {
  // Built only on failure: reading a number must not allocate.
  auto range = [&] { return "must be an integer in [" + decimal_string(lo) + ", " + decimal_string(hi) + "]"; };
  od::json_type type;
  if (v.type().get(type) != simdjson::SUCCESS || type != od::json_type::number) {
    return field_error(where, field, "must be an integer");
  }
  od::number_type kind;
  if (v.get_number_type().get(kind) != simdjson::SUCCESS) return field_error(where, field, range());
  if (kind != od::number_type::signed_integer && kind != od::number_type::unsigned_integer) {
    return field_error(where, field, range());
  }
  int64_t number = 0;
  if (v.get_int64().get(number) != simdjson::SUCCESS || number < lo || number > hi) {
    return field_error(where, field, range());
  }
  return number;
}

Result<std::optional<int64_t>> read_nullable_int(od::value& v, const Where& where, std::string_view field,
                                                 int64_t lo, int64_t hi) {
  if (take_null(v)) return std::optional<int64_t>{};
  Result<int64_t> number = read_int(v, where, field, lo, hi);
  if (!number) return number.take_error();
  return std::optional<int64_t>{number.value()};
}

Result<std::string_view> read_string(od::value& v, const Where& where, std::string_view field,
                                     uint32_t max_bytes) {
  std::string_view text;
  if (v.get_string().get(text) != simdjson::SUCCESS) return field_error(where, field, "must be a string");
  if (text.size() > max_bytes) {
    return field_error(where, field, "must be at most " + decimal_string(max_bytes) + " bytes");
  }
  return text;
}

Result<std::optional<std::string_view>> read_nullable_string(od::value& v, const Where& where,
                                                             std::string_view field, uint32_t max_bytes) {
  if (take_null(v)) return std::optional<std::string_view>{};
  Result<std::string_view> text = read_string(v, where, field, max_bytes);
  if (!text) return text.take_error();
  return std::optional<std::string_view>{text.value()};
}

Result<std::optional<std::string_view>> read_nullable_text(od::value& v, const Where& where, std::string_view field) {
  if (take_null(v)) return std::optional<std::string_view>{};
  std::string_view text;
  if (v.get_string(true).get(text) != simdjson::SUCCESS) return field_error(where, field, "must be a string");
  return std::optional<std::string_view>{text};
}

Result<bool> read_bool(od::value& v, const Where& where, std::string_view field) {
  bool flag = false;
  if (v.get_bool().get(flag) != simdjson::SUCCESS) return field_error(where, field, "must be a boolean");
  return flag;
}

Result<od::object> read_object(od::value& v, const Where& where, std::string_view field) {
  od::object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS) return field_error(where, field, "must be an object");
  return obj;
}

Result<od::array> read_array(od::value& v, const Where& where, std::string_view field) {
  od::array arr;
  if (v.get_array().get(arr) != simdjson::SUCCESS) return field_error(where, field, "must be an array");
  return arr;
}

bool take_null(od::value& v) {
  od::json_type type;
  if (v.type().get(type) != simdjson::SUCCESS || type != od::json_type::null) return false;
  bool is_null = false;
  return v.is_null().get(is_null) == simdjson::SUCCESS && is_null;
}

Status visit_fields(od::object& obj, const Where& where, void* context, FieldVisitor visit) {
  for (auto item : obj) {
    od::field field;
    std::string_view key;
    if (std::move(item).get(field) != simdjson::SUCCESS || field.unescaped_key(false).get(key) != simdjson::SUCCESS) {
      return family_error(where, ErrorCode::invalid_json, "malformed object");
    }
    Status status = visit(context, key, field.value());
    if (!status) return status;
  }
  return ok_status();
}

Status visit_elements(od::array& arr, const Where& where, std::string_view field, uint32_t max_count,
                      void* context, ElementVisitor visit) {
  uint32_t index = 0;
  for (auto item : arr) {
    od::value value;
    if (std::move(item).get(value) != simdjson::SUCCESS) {
      return family_error(where, ErrorCode::invalid_json, "malformed array");
    }
    if (index == max_count) {
      return field_error(where, field, "must have at most " + decimal_string(max_count) + " items");
    }
    Status status = visit(context, value, index);
    if (!status) return status;
    ++index;
  }
  return ok_status();
}

Status validate_document(od::document& doc, std::string_view family) {
  od::json_type type;
  simdjson::error_code e = doc.type().get(type);
  if (!e) {
    if (type == od::json_type::object || type == od::json_type::array) {
      od::value root;
      e = doc.get_value().get(root);
      if (!e) e = walk(root, 1);
    } else {
      e = walk_scalar(doc, type, true);
    }
  }
  // A root number that walk_scalar accepted stands for get_number(), which consumed it.
  if (!e && type != od::json_type::number && !doc.at_end()) e = simdjson::TRAILING_CONTENT;
  if (e) return json_error(family, e);
  doc.rewind();
  return ok_status();
}

Result<od::object> root_object(od::document& doc, const Where& where) {
  od::object obj;
  if (doc.get_object().get(obj) != simdjson::SUCCESS) {
    return family_error(where, ErrorCode::invalid_input, "input must be a JSON object");
  }
  return obj;
}

}  // namespace postbox::input
