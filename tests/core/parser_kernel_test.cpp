// Every build parses with the same simdjson kernel: the portable one, the only one wasm has.
#include <doctest/doctest.h>

#include "simdjson.h"

TEST_CASE("parser kernel: simdjson has one kernel, the portable one the wasm builds use") {
  // With a single kernel simdjson skips run-time selection, so SIMDJSON_FORCE_IMPLEMENTATION is
  // never read (scripts/test.sh runs the corpus natively with it set to "" and to "bogus").
  CHECK(simdjson::get_available_implementations().size() == 1);
  CHECK(simdjson::get_active_implementation()->name() == "fallback");
  CHECK(simdjson::builtin_implementation()->name() == "fallback");
}
