// Calls an exported entry the way the shim does: pb_alloc, copy, call, read the result.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "postbox/abi.h"

namespace postbox::test {

using Entry = int32_t (*)(const char*, int32_t);

struct Reply {
  int32_t rc = -1;
  std::string out;
};

inline Reply call(Entry entry, std::string_view input) {
  const auto len = static_cast<int32_t>(input.size());
  char* buffer = static_cast<char*>(pb_alloc(len));
  if (!input.empty()) std::memcpy(buffer, input.data(), input.size());
  Reply reply;
  reply.rc = entry(buffer, len);
  reply.out.assign(pb_result_ptr(), static_cast<size_t>(pb_result_len()));
  pb_free(buffer);
  return reply;
}

// The output of a call that must succeed; an error document is returned as-is to show in the failure.
inline std::string ok(Entry entry, std::string_view input) { return call(entry, input).out; }

inline std::string error_code_of(const std::string& out) {
  const std::string marker = "{\"error\":{\"code\":\"";
  if (out.rfind(marker, 0) != 0) return "";
  const size_t end = out.find('"', marker.size());
  return out.substr(marker.size(), end - marker.size());
}

}  // namespace postbox::test
