#include <doctest/doctest.h>

#include <initializer_list>

#include "postbox/backoff.h"

using postbox::backoff_cap;
using postbox::backoff_delay;

TEST_CASE("backoff: the ceiling doubles from baseMs and stops at maxMs") {
  const int64_t expected[] = {30000, 60000, 120000, 240000, 480000, 960000, 1920000, 3600000, 3600000};
  for (int64_t n = 1; n <= 9; ++n) {
    CAPTURE(n);
    CHECK(backoff_cap(n, 30000, 3600000) == expected[n - 1]);
  }
  CHECK(backoff_cap(1000, 30000, 3600000) == 3600000);
  CHECK(backoff_cap(1000, 604800000, 604800000) == 604800000);
  CHECK(backoff_cap(0, 30000, 3600000) == 30000);
  CHECK(backoff_cap(5, 0, 3600000) == 0);
}

TEST_CASE("backoff: delays fall in [cap/2, cap] for every seed and attempt") {
  for (uint32_t seed : {0u, 1u, 42u, 0xFFFFFFFFu, 123456789u}) {
    for (int64_t n = 1; n <= 30; ++n) {
      const int64_t cap = backoff_cap(n, 30000, 3600000);
      const int64_t d = backoff_delay(n, 30000, 3600000, seed);
      CAPTURE(seed);
      CAPTURE(n);
      CHECK(d >= cap / 2);
      CHECK(d <= cap);
    }
  }
  CHECK(backoff_delay(3, 0, 0, 7) == 0);
  CHECK(backoff_delay(1, 1, 1, 7) == 0);
}

TEST_CASE("backoff: the same seed gives the same delay, other seeds spread out") {
  CHECK(backoff_delay(3, 30000, 3600000, 42) == backoff_delay(3, 30000, 3600000, 42));
  int distinct = 0;
  const int64_t first = backoff_delay(8, 30000, 3600000, 0);
  for (uint32_t seed = 1; seed < 50; ++seed) {
    if (backoff_delay(8, 30000, 3600000, seed) != first) ++distinct;
  }
  CHECK(distinct >= 45);
  // Pinned values: a change here changes every build's retry schedule.
  CHECK(postbox::splitmix64(0) == 0xE220A8397B1DCDAFULL);
  CHECK(backoff_delay(3, 30000, 3600000, 42) == 60000 + static_cast<int64_t>(postbox::splitmix64((42ULL << 32) ^ 3) % 60001));
}
