// The decision entries by family name, for native tools (the corpus CLI, the fuzz target)
// that pick an entry at run time. The wasm builds do not use it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "postbox/abi.h"

namespace postbox {

using Entry = int32_t (*)(const char*, int32_t);

struct NamedEntry {
  const char* name;
  Entry entry;
};

inline constexpr NamedEntry kEntries[] = {
    {"policy", pb_policy},   {"settle", pb_settle}, {"claim", pb_claim}, {"sweep", pb_sweep},
    {"enqueue", pb_enqueue}, {"cron", pb_cron},     {"nudge", pb_nudge}, {"backlog", pb_backlog},
    {"operate", pb_operate}, {"webhook", pb_webhook},
};
inline constexpr size_t kEntryCount = sizeof kEntries / sizeof kEntries[0];

}  // namespace postbox
