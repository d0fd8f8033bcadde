// libFuzzer target over every entry of the core (docs/ABI.md). The first byte picks the family
// (modulo the number of entries), the rest is the document. Checked for every input:
//   - the entry returns 0 or 1 and leaves a non-empty result that starts with '{';
//   - the result is well-formed JSON (simdjson DOM);
//   - return 1 exactly when the result is an error document {"error":{"code":<known>,...}};
//   - the same input gives the same bytes a second time (no hidden state between calls).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "postbox/abi.h"
#include "postbox/abi_entries.h"
#include "simdjson.h"

namespace {

using postbox::Entry;
using postbox::kEntries;
using Named = postbox::NamedEntry;
constexpr size_t kFamilies = postbox::kEntryCount;

constexpr const char* kErrorCodes[] = {"invalid_json", "invalid_input",  "invalid_policy", "invalid_cron",
                                       "invalid_message", "unknown_op", "too_large"};

[[noreturn]] void fail(const char* family, const char* what, const std::string& out) {
  std::fprintf(stderr, "fuzz_entries: %s: %s\nresult (%zu bytes): %.*s\n", family, what, out.size(),
               static_cast<int>(out.size() > 4000 ? 4000 : out.size()), out.data());
  std::abort();
}

int32_t call(Entry entry, const uint8_t* data, size_t size, std::string& out) {
  const auto len = static_cast<int32_t>(size);
  char* buffer = static_cast<char*>(pb_alloc(len));
  if (buffer == nullptr) std::abort();
  if (size > 0) std::memcpy(buffer, data, size);
  const int32_t rc = entry(buffer, len);
  out.assign(pb_result_ptr(), static_cast<size_t>(pb_result_len()));
  pb_free(buffer);
  return rc;
}

bool known_error_code(std::string_view code) {
  for (const char* c : kErrorCodes) {
    if (code == c) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Named& family = kEntries[data[0] % kFamilies];
  const uint8_t* doc = data + 1;
  const size_t doc_size = size - 1;

  std::string out;
  const int32_t rc = call(family.entry, doc, doc_size, out);
  if (rc != 0 && rc != 1) fail(family.name, "return code is neither 0 nor 1", out);
  if (out.empty() || out[0] != '{') fail(family.name, "result is not a JSON object", out);

  static simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(out.data(), out.size(), true).get(root) != simdjson::SUCCESS) {
    fail(family.name, "result is not well-formed JSON", out);
  }
  simdjson::dom::object object;
  if (root.get_object().get(object) != simdjson::SUCCESS) fail(family.name, "result is not an object", out);
  simdjson::dom::element error;
  const bool is_error = object.at_key("error").get(error) == simdjson::SUCCESS;
  if (is_error != (rc == 1)) fail(family.name, "return code and error document disagree", out);
  if (is_error) {
    std::string_view code;
    if (error.at_key("code").get_string().get(code) != simdjson::SUCCESS || !known_error_code(code)) {
      fail(family.name, "error document without a documented code", out);
    }
    std::string_view message;
    if (error.at_key("message").get_string().get(message) != simdjson::SUCCESS) {
      fail(family.name, "error document without a message", out);
    }
  }

  std::string again;
  const int32_t rc2 = call(family.entry, doc, doc_size, again);
  if (rc2 != rc || again != out) fail(family.name, "a second identical call gave a different result", again);
  return 0;
}
