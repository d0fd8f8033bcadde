// The error document: the one shape every family returns when it cannot decide.
#include "postbox/families.h"

namespace postbox {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_json: return "invalid_json";
    case ErrorCode::invalid_input: return "invalid_input";
    case ErrorCode::invalid_policy: return "invalid_policy";
    case ErrorCode::invalid_cron: return "invalid_cron";
    case ErrorCode::invalid_message: return "invalid_message";
    case ErrorCode::unknown_op: return "unknown_op";
    case ErrorCode::too_large: return "too_large";
  }
  return "invalid_input";
}

Error::Error(ErrorCode code, std::string message) : detail_(new Detail{code, std::move(message)}) {}

void Error::release(Detail* detail) { delete detail; }

void write_error(JsonWriter& out, const Error& error) {
  out.begin_object();
  out.key("error");
  out.begin_object();
  out.field("code", error_code_name(error.code()));
  out.field("message", error.message());
  out.end_object();
  out.end_object();
}

}  // namespace postbox
