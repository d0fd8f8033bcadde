// The one JSON writer of the core: compact output, keys in call order, integers only, so
// that the native, wasi and Emscripten builds emit identical bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace postbox {

class JsonWriter {
 public:
  void begin_object();
  void end_object();
  void begin_array();
  void end_array();
  void key(std::string_view name);

  void string(std::string_view text);
  void integer(int64_t number);
  void boolean(bool flag);
  void null();

  // Shorthands for `key(name)` followed by a value.
  void field(std::string_view name, std::string_view text) { key(name); string(text); }
  void field(std::string_view name, const char* text) { key(name); string(text); }
  void field(std::string_view name, const std::string& text) { key(name); string(text); }
  void field(std::string_view name, int64_t number) { key(name); integer(number); }
  void field_bool(std::string_view name, bool flag) { key(name); boolean(flag); }
  void field_null(std::string_view name) { key(name); null(); }
  void field(std::string_view name, const std::optional<int64_t>& number);
  void field(std::string_view name, const std::optional<std::string_view>& text);
  // Text a database column will hold: U+0000, which PostgreSQL's text and jsonb refuse,
  // is written as U+FFFD, so one handler's error text never fails the statement it rides on.
  void storable_field(std::string_view name, const std::optional<std::string_view>& text);

  const std::string& text() const { return out_; }
  std::string take() { return std::move(out_); }
  void clear();

 private:
  void separate();
  std::string out_;
  bool need_comma_ = false;
};

// Appends `text` as a quoted JSON string: quote, backslash and control characters escaped
// (\n, \t, ... and \u00XX); other bytes copied as they are (input was UTF-8 validated).
void append_json_string(std::string& out, std::string_view text, bool storable = false);

void append_decimal(std::string& out, int64_t number);
std::string decimal_string(int64_t number);

}  // namespace postbox
