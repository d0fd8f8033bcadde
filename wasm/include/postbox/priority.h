// Priorities with aging. A job's priority (0-10, higher first; 0 by default) moves it ahead of
// work that fell due up to priority × kPriorityAgingMs after it: claims take due jobs in order
// of due time less that boost. So each minute a job waits counts as one level, and a job of
// priority p never waits behind work of any priority that fell due more than (10 − p) minutes
// after it: no priority starves another.
#pragma once

#include <cstdint>

namespace postbox {

constexpr int64_t kMaxPriority = 10;
constexpr int64_t kPriorityAgingMs = 60000;

// How far ahead of its due time a job of `priority` is claimed, in ms.
constexpr int64_t priority_boost_ms(int64_t priority) { return priority * kPriorityAgingMs; }

}  // namespace postbox
