// One function per exported decision family. Each reads an already validated document and
// writes its normal result, or returns the Error that becomes the error document.
#pragma once

#include "postbox/family_list.h"
#include "postbox/json_input.h"
#include "postbox/json_writer.h"
#include "postbox/result.h"

namespace postbox {

// Writes {"error":{"code":…,"message":…}}: the whole result, or one item of a batch.
void write_error(JsonWriter& out, const Error& error);

// Reads a string field wherever it sits in the object (a field the rest of the reading depends
// on), then rewinds the object. A missing field reads as `absent`, or is an error when that is
// empty. Out of line: simdjson's unordered lookup is large.
Result<std::string_view> read_string_anywhere(input::od::object& root, const input::Where& where, std::string_view name,
                                              uint32_t max_bytes, std::string_view absent = {});

// Reads a family's "op" field, wherever it sits, and rewinds the object for the operation.
// A family whose first form had no "op" names that form `absent`.
Result<std::string_view> read_op(input::od::object& root, const input::Where& where, std::string_view absent = {});
Error unknown_op(const input::Where& where, std::string_view op);

// One operation of a family with several ("op": "plan", "admit", …).
struct Operation {
  std::string_view name;
  Status (*run)(input::od::object& root, const input::Where& where, JsonWriter& out);
};

// Reads the root object and its "op", then runs the named operation (or says it is unknown).
// Out of line, so the families share one copy of it in the binary.
Status dispatch_ops(input::od::document& doc, JsonWriter& out, std::string_view family, const Operation* ops,
                    size_t count, std::string_view absent);

template <size_t N>
Status dispatch_op(input::od::document& doc, JsonWriter& out, std::string_view family, const Operation (&ops)[N],
                   std::string_view absent = {}) {
  return dispatch_ops(doc, out, family, ops, N, absent);
}

// run_policy, run_settle, …: one per family of family_list.h.
#define POSTBOX_DECLARE_RUNNER(name) Status run_##name(input::od::document& doc, JsonWriter& out);
POSTBOX_FAMILIES(POSTBOX_DECLARE_RUNNER)
#undef POSTBOX_DECLARE_RUNNER

}  // namespace postbox
