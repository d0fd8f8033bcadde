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
