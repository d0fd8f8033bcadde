// pb_sweep op "compact" (wasm/src/index_compaction.cpp): the rebuilds of bloated indexes.
#pragma once

#include <cstdint>

#include "postbox/json_input.h"
#include "postbox/json_writer.h"

namespace postbox {

// A sweep's compact step rebuilds at most this many indexes (the plan says so to the shim).
constexpr int64_t kMaxRebuildsPerSweep = 4;

Status sweep_compact(input::od::object& root, const input::Where& where, JsonWriter& out);

}  // namespace postbox
