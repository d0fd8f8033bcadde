#include "postbox/json_error.h"

#include <string>

namespace postbox {

Error json_error(std::string_view family, simdjson::error_code code) {
  std::string message(family);
  if (code == simdjson::MEMALLOC) return Error{ErrorCode::too_large, message + ": out of memory"};
  return Error{ErrorCode::invalid_json, message + ": invalid JSON"};
}

}  // namespace postbox
