// Insertion sort for the short lists the core orders (per-code rules, kinds, lanes).
// std::sort's introsort costs ~18 KB of wasm per instantiation; this costs a few hundred bytes,
// and the lists are bounded (kMaxPolicies), so the quadratic worst case stays small.
#pragma once

#include <cstddef>
#include <utility>

namespace postbox {

template <class It, class Less>
void small_sort(It first, It last, Less less) {
  if (first == last) return;
  for (It i = first + 1; i != last; ++i) {
    auto value = std::move(*i);
    It j = i;
    while (j != first && less(value, *(j - 1))) {
      *j = std::move(*(j - 1));
      --j;
    }
    *j = std::move(value);
  }
}

template <class It>
void small_sort(It first, It last) {
  small_sort(first, last, [](const auto& a, const auto& b) { return a < b; });
}

}  // namespace postbox
