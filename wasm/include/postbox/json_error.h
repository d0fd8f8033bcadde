// How a failure to parse the input reads in the error document.
#pragma once

#include <string_view>

#include "postbox/result.h"
#include "simdjson.h"

namespace postbox {

// "<family>: invalid JSON" (invalid_json) for every syntax fault, nesting past the limit and
// numbers out of range; "<family>: out of memory" (too_large) when the parser cannot allocate.
// The message never names simdjson's error: which fault is found first is the parser's detail,
// not a fact about the input, and an error document must not change when the parser does.
Error json_error(std::string_view family, simdjson::error_code code);

}  // namespace postbox
