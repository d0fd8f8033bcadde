// One function per exported decision family. Each reads an already validated document and
// writes its normal result, or returns the Error that becomes the error document.
#pragma once

#include "postbox/json_input.h"
#include "postbox/json_writer.h"
#include "postbox/result.h"

namespace postbox {

// Writes {"error":{"code":…,"message":…}}: the whole result, or one item of a batch.
void write_error(JsonWriter& out, const Error& error);

// Reads a family's "op" field, wherever it sits, and rewinds the object for the operation.
Result<std::string_view> read_op(input::od::object& root, const input::Where& where);
Error unknown_op(const input::Where& where, std::string_view op);

// One operation of a family with several ("op": "plan", "admit", …).
struct Operation {
  std::string_view name;
  Status (*run)(input::od::object& root, const input::Where& where, JsonWriter& out);
};

// Reads the root object and its "op", then runs the named operation (or says it is unknown).
template <size_t N>
Status dispatch_op(input::od::document& doc, JsonWriter& out, std::string_view family, const Operation (&ops)[N]) {
  const input::Where where{family, "", ErrorCode::invalid_input};
  Result<input::od::object> root = input::root_object(doc, where);
  if (!root) return root.take_error();
  Result<std::string_view> op = read_op(root.value(), where);
  if (!op) return op.take_error();
  for (const Operation& candidate : ops) {
    if (candidate.name == op.value()) return candidate.run(root.value(), where, out);
  }
  return unknown_op(where, op.value());
}

Status run_policy(input::od::document& doc, JsonWriter& out);
Status run_settle(input::od::document& doc, JsonWriter& out);
Status run_claim(input::od::document& doc, JsonWriter& out);
Status run_sweep(input::od::document& doc, JsonWriter& out);
Status run_enqueue(input::od::document& doc, JsonWriter& out);
Status run_cron(input::od::document& doc, JsonWriter& out);
Status run_nudge(input::od::document& doc, JsonWriter& out);
Status run_backlog(input::od::document& doc, JsonWriter& out);
Status run_operate(input::od::document& doc, JsonWriter& out);

}  // namespace postbox
