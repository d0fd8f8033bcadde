// Which strings may name a job kind, a lane, a per-code rule, an outbox or a job id.
#pragma once

#include <cstdint>
#include <string_view>

namespace postbox {

constexpr uint32_t kMaxKindBytes = 128;
constexpr uint32_t kMaxLaneBytes = 64;

// 1..max_bytes bytes of [A-Za-z0-9._:-]: safe in SQL text, queue bodies and log lines.
bool is_name(std::string_view text, uint32_t max_bytes);
inline bool is_kind(std::string_view text) { return is_name(text, kMaxKindBytes); }
inline bool is_lane(std::string_view text) { return is_name(text, kMaxLaneBytes); }

constexpr uint32_t kMaxOutboxKeyBytes = 32;

// An outbox's name in nudges (createOutboxes' key): a lowercase letter, then up to 31 lowercase
// letters, digits or '_', the same rule as a named outbox's (js-shim/src/name.ts).
bool is_outbox_key(std::string_view text);

// 8-4-4-4-12 hex digits; all lowercase or all uppercase hex, as Postgres and crypto.randomUUID print them.
bool is_uuid(std::string_view text);

}  // namespace postbox
