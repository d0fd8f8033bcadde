// The schedule, in words: after the n-th charged attempt fails, the next one waits between half
// and all of a ceiling that doubles with each attempt, starting at baseMs and never above
// maxMs. With the defaults (30 s, 1 h) the ceilings are 30 s, 1 min, 2 min, 4 min, 8 min,
// 16 min, 32 min, then 1 h for every later attempt, so attempt 2 waits 15–30 s and attempt 20
// waits 30–60 min. Where in that half-open band a delay lands comes from the shim's seed: the
// same (attempt, baseMs, maxMs, seed) always gives the same delay, on every build. Equal
// jitter (half fixed, half random) keeps a retry from firing immediately while still spreading
// a burst of failures apart.
//
// A policy may name its delays instead (backoff.scheduleMs, e.g. webhooks: seconds, then
// minutes, then hours). Delay n is then entry n, the last entry repeating, and lands between
// nine tenths and all of it: close enough to keep the schedule's promise, spread enough that
// a thousand deliveries failing together do not all come back in the same second.
#include "postbox/backoff.h"

namespace postbox {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

int64_t backoff_cap(int64_t attempt, int64_t base_ms, int64_t max_ms) {
  if (attempt < 1) attempt = 1;
  int64_t cap = base_ms;
  // Doubling stops as soon as the cap is reached, so no product can overflow.
  for (int64_t i = 1; i < attempt && cap < max_ms; ++i) cap *= 2;
  return cap < max_ms ? cap : max_ms;
}

int64_t backoff_delay(int64_t attempt, int64_t base_ms, int64_t max_ms, uint32_t seed) {
  const int64_t half = backoff_cap(attempt, base_ms, max_ms) / 2;
  // Seed in the high word, attempt in the low word: each attempt of a job draws independently.
  const uint64_t draw = splitmix64((uint64_t{seed} << 32) ^ static_cast<uint64_t>(attempt));
  const int64_t jitter = static_cast<int64_t>(draw % static_cast<uint64_t>(half + 1));
  return half + jitter;
}

int64_t schedule_delay(const int64_t* schedule, size_t count, int64_t attempt, uint32_t seed) {
  if (count == 0) return 0;
  if (attempt < 1) attempt = 1;
  const size_t index = static_cast<uint64_t>(attempt) > count ? count - 1 : static_cast<size_t>(attempt - 1);
  const int64_t entry = schedule[index];
  const int64_t tenth = entry / 10;
  const uint64_t draw = splitmix64((uint64_t{seed} << 32) ^ static_cast<uint64_t>(attempt));
  return entry - tenth + static_cast<int64_t>(draw % static_cast<uint64_t>(tenth + 1));
}

}  // namespace postbox
