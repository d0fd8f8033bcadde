// The Queue messages of pb_nudge (docs/ABI.md), shared by the codec (nudge.cpp) and the
// packer that coalesces job nudges into messages and sendBatch calls (nudge_pack.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "postbox/json_input.h"
#include "postbox/json_writer.h"
#include "postbox/policy.h"
#include "postbox/result.h"

namespace postbox {

// Queues' sendBatch takes at most 100 messages, and a consumer batch holds at most 100.
constexpr uint32_t kMaxMessages = 100;
// Ids one multi-job message names: a claim's largest batch. Small enough that a consumer batch
// of 10 messages (1000 jobs) can finish in one invocation, large enough that Queues' 5000
// messages a second carry 500,000 nudges a second.
constexpr uint32_t kMaxIdsPerMessage = 100;
constexpr int64_t kMaxDelaySeconds = kMaxDelayMs / 1000;
// Outboxes one consumer serves (createOutboxes): one Cron Trigger sweeps them all within one
// invocation, so past a few dozen each gets too little of it; shard the fleet over Workers.
constexpr uint32_t kMaxOutboxes = 64;

struct Nudge {
  std::string_view type;  // "job", "jobs" or "drain"
  std::string_view id;    // "job"
  std::string_view kind;  // "job" and "jobs"
  std::string_view lane;
  std::string_view outbox{};  // the outbox it names; empty: none (a lone outbox's, or an older deploy's)
  const std::string_view* ids = nullptr;  // "jobs"
  size_t id_count = 0;
  int64_t delay_seconds = 0;  // pack input only
};

// Writes the fields after "v" (or "ok"): t, the job's id and kind or the jobs' kind, the
// lane, the outbox when it names one, and a multi-job message's ids.
void write_nudge(JsonWriter& out, const Nudge& n);

// Writes a whole wire message: {"v":1,…}.
void write_message(JsonWriter& out, const Nudge& n);

// Reads the "jobs" array of an encode or pack input (each {id, kind, lane}, and delaySeconds
// when `with_delay`), at most max_count of them; errors name the job.
Status read_jobs(input::od::value& field, const input::Where& where, uint32_t max_count, bool with_delay,
                 std::vector<Nudge>& jobs);

// Reads the "outbox" of a pack input, the sending outbox's key (names.h); absent is none.
Status read_outbox_field(input::od::value& field, const input::Where& where, std::string_view& outbox);

// The "pack" operation (nudge_pack.cpp).
Status nudge_pack(input::od::object& root, const input::Where& where, JsonWriter& out);

}  // namespace postbox
