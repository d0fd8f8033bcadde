#include "postbox/names.h"

namespace postbox {

namespace {

bool is_name_byte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == ':' || c == '-';
}

}  // namespace

bool is_name(std::string_view text, uint32_t max_bytes) {
  if (text.empty() || text.size() > max_bytes) return false;
  for (char c : text) {
    if (!is_name_byte(c)) return false;
  }
  return true;
}

bool is_outbox_key(std::string_view text) {
  if (text.empty() || text.size() > kMaxOutboxKeyBytes || text[0] < 'a' || text[0] > 'z') return false;
  for (char c : text) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

bool is_uuid(std::string_view text) {
  if (text.size() != 36) return false;
  bool lower = false;
  bool upper = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (c >= '0' && c <= '9') {
      continue;
    } else if (c >= 'a' && c <= 'f') {
      lower = true;
    } else if (c >= 'A' && c <= 'F') {
      upper = true;
    } else {
      return false;
    }
  }
  return !(lower && upper);
}

}  // namespace postbox
