// Whether simdjson's get_number() accepts a JSON number, decided without converting it.
// The conversion (Eisel-Lemire tables and the decimal fallback, ~14 KB of wasm) served only
// that yes or no: the core reads integers alone, through get_int64().
#pragma once

#include <cstddef>
#include <cstdint>

namespace postbox::input {

// For a number inside a document, read from the padded input as simdjson reads it.
inline constexpr size_t kNotRoot = SIZE_MAX;

// True when simdjson's get_number() on the number starting at `text` returns a value: the
// same syntax, the same 64-bit integer limits, and a float whose value does not round to
// infinity (judged as its own fast and fallback paths judge it). A root number is read as
// simdjson copies it: its `root_length` bytes, then spaces up to 1083 bytes, then NUL.
bool number_accepted(const char* text, size_t root_length = kNotRoot);

}  // namespace postbox::input
