#include "postbox/json_writer.h"

namespace postbox {

void append_decimal(std::string& out, int64_t number) {
  char digits[24];
  int count = 0;
  // Work in unsigned space so INT64_MIN does not overflow on negation.
  uint64_t magnitude = number < 0 ? 0 - static_cast<uint64_t>(number) : static_cast<uint64_t>(number);
  do {
    digits[count++] = static_cast<char>('0' + magnitude % 10);
    magnitude /= 10;
  } while (magnitude != 0);
  if (number < 0) out.push_back('-');
  while (count > 0) out.push_back(digits[--count]);
}

std::string decimal_string(int64_t number) {
  std::string out;
  append_decimal(out, number);
  return out;
}

void append_json_string(std::string& out, std::string_view text, bool storable) {
  static const char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\0':
        if (storable) {
          out += "\xEF\xBF\xBD";  // U+FFFD
          break;
        }
        out += "\\u0000";
        break;
      default:
        if (byte < 0x20) {
          out += "\\u00";
          out.push_back(kHex[byte >> 4]);
          out.push_back(kHex[byte & 0xF]);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

void JsonWriter::separate() {
  if (need_comma_) out_.push_back(',');
}

void JsonWriter::begin_object() {
  separate();
  out_.push_back('{');
  need_comma_ = false;
}

void JsonWriter::end_object() {
  out_.push_back('}');
  need_comma_ = true;
}

void JsonWriter::begin_array() {
  separate();
  out_.push_back('[');
  need_comma_ = false;
}

void JsonWriter::end_array() {
  out_.push_back(']');
  need_comma_ = true;
}

void JsonWriter::key(std::string_view name) {
  separate();
  append_json_string(out_, name);
  out_.push_back(':');
  need_comma_ = false;
}

void JsonWriter::string(std::string_view text) {
  separate();
  append_json_string(out_, text);
  need_comma_ = true;
}

void JsonWriter::integer(int64_t number) {
  separate();
  append_decimal(out_, number);
  need_comma_ = true;
}

void JsonWriter::boolean(bool flag) {
  separate();
  out_ += flag ? "true" : "false";
  need_comma_ = true;
}

void JsonWriter::null() {
  separate();
  out_ += "null";
  need_comma_ = true;
}

void JsonWriter::field(std::string_view name, const std::optional<int64_t>& number) {
  key(name);
  if (number) integer(*number); else null();
}

void JsonWriter::field(std::string_view name, const std::optional<std::string_view>& text) {
  key(name);
  if (text) string(*text); else null();
}

void JsonWriter::storable_field(std::string_view name, const std::optional<std::string_view>& text) {
  key(name);
  if (!text) {
    null();
    return;
  }
  separate();
  append_json_string(out_, *text, true);
  need_comma_ = true;
}

void JsonWriter::clear() {
  out_.clear();
  need_comma_ = false;
}

}  // namespace postbox
