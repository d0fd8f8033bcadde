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

#define POSTBOX_NAMED_ENTRY(name) {#name, pb_##name},
inline constexpr NamedEntry kEntries[] = {POSTBOX_FAMILIES(POSTBOX_NAMED_ENTRY)};
#undef POSTBOX_NAMED_ENTRY
inline constexpr size_t kEntryCount = sizeof kEntries / sizeof kEntries[0];

}  // namespace postbox
