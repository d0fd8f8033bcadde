// pb_sweep op "compact": which of the outbox's indexes the sweep rebuilds, and when.
//
// Why: while a snapshot pins the xmin horizon (a long report, an idle-in-transaction session,
// a lagging slot), every row version a claim or settle writes stays, and so does its entry in
// every index. Once the horizon moves on, VACUUM empties the heap and truncates it, but a
// B-tree keeps its pages: the file stays at its pinned size for good. A rebuild (REINDEX
// CONCURRENTLY, which blocks no claim or settle) brings it back to what its live rows need.
//
// Each index has a baseline: its size as last seen while nothing held the horizon. The rules:
//   held      a holder whose snapshot is >= 30 s old (or >= 100,000 transactions behind, for a
//             slot) holds the horizon: nothing is recorded, rebuilt or dropped (a concurrent
//             rebuild or drop would wait for it, and a baseline taken now would count its bloat).
//   drop      an invalid leftover of an interrupted rebuild of ours (<index>_ccnew[N],
//             <index>_ccold[N]) is dropped.
//   record    an index with no baseline records its size; one that grew less than both 2x and
//             8 MiB past its baseline records its size too (growth with the data, not bloat).
//   rebuild   an index at >= 2x its baseline and >= 8 MiB past it, whose last rebuild began 6 h
//             ago or more (a failed one counts: no sweep repeats a rebuild that cannot finish),
//             is rebuilt: the one with the most excess bytes, at most 4 per sweep, and only with
//             at least 60 s of the step's deadline left. A finished rebuild clears the baseline,
//             so the next look records what the rebuilt index holds.
// Only the outbox's own indexes are considered: an index a user added is left alone.
//
// The same step names the tables whose planner statistics are stale (table_statistics.cpp):
// `analyze`, whether or not the horizon is held (an ANALYZE waits for no snapshot).
#include <algorithm>
#include <optional>

#include "postbox/families.h"
#include "postbox/index_compaction.h"
#include "postbox/table_statistics.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

namespace {

constexpr int64_t kHeldMs = 30000;
constexpr int64_t kHeldXids = 100000;
constexpr int64_t kBloatMinExcessBytes = 8 * 1024 * 1024;
constexpr int64_t kRebuildCooldownMs = 6 * 3600 * 1000;
constexpr int64_t kRebuildRoomMs = 60000;
constexpr uint32_t kMaxIndexes = 64;
constexpr uint32_t kMaxHolders = 16;
constexpr uint32_t kMaxTables = 16;
constexpr uint32_t kMaxIndexNameBytes = 63;  // PostgreSQL's NAMEDATALEN - 1

// The indexes migrations/ create on the tables that churn: the outbox's own, by name.
constexpr std::string_view kOwnIndexes[] = {
    "job_pkey",    "job_dedupe_key", "job_claimable", "job_fair",     "job_lease",       "job_finished",
    "job_correlation", "job_tenant", "job_created",   "job_waiting", "attempt_pkey", "attempt_finished",
};

bool is_own_index(std::string_view name) {
  return std::find(std::begin(kOwnIndexes), std::end(kOwnIndexes), name) != std::end(kOwnIndexes);
}

// <own index>_ccnew / _ccold, with PostgreSQL's optional digits when the name was taken.
bool is_rebuild_leftover(std::string_view name) {
  for (std::string_view suffix : {std::string_view("_ccnew"), std::string_view("_ccold")}) {
    const size_t at = name.rfind(suffix);
    if (at == std::string_view::npos) continue;
    std::string_view digits = name.substr(at + suffix.size());
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    if (is_own_index(name.substr(0, at))) return true;
  }
  return false;
}

struct IndexFact {
  std::string_view name;
  bool valid = true;
  int64_t bytes = 0;
  std::optional<int64_t> baseline;
  std::optional<int64_t> rebuilt_at;
};

Result<IndexFact> read_index(od::object& obj, const Where& where) {
  IndexFact f;
  bool has_name = false, has_bytes = false;
  Status status = input::for_each_field(obj, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "name") {
      Result<std::string_view> s = input::read_string(field, where, key, kMaxIndexNameBytes);
      if (!s) return s.take_error();
      f.name = s.value();
      has_name = true;
    } else if (key == "valid") {
      Result<bool> b = input::read_bool(field, where, key);
      if (!b) return b.take_error();
      f.valid = b.value();
    } else if (key == "bytes") {
      Result<int64_t> n = input::read_int(field, where, key);
      if (!n) return n.take_error();
      f.bytes = n.value();
      has_bytes = true;
    } else if (key == "baselineBytes" || key == "rebuiltAt") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key);
      if (!n) return n.take_error();
      (key == "baselineBytes" ? f.baseline : f.rebuilt_at) = n.value();
    }
    return ok_status();
  });
  if (!status) return status.take_error();
  if (!has_name) return input::missing(where, "name");
  if (!has_bytes) return input::missing(where, "bytes");
  return f;
}

// Whether one holder of the horizon (as pb_backlog health reads it) holds it for compaction.
Result<bool> holds_horizon(od::object& obj, const Where& where) {
  std::optional<int64_t> age_ms, xid_age;
  Status status = input::for_each_field(obj, where, [&](std::string_view key, od::value& field) -> Status {
    if (key != "ageMs" && key != "xidAge") return ok_status();
    Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key);
    if (!n) return n.take_error();
    (key == "ageMs" ? age_ms : xid_age) = n.value();
    return ok_status();
  });
  if (!status) return status.take_error();
  return (age_ms && *age_ms >= kHeldMs) || (xid_age && *xid_age >= kHeldXids);
}

bool bloated(const IndexFact& f) {
  return f.baseline && f.bytes >= 2 * *f.baseline && f.bytes - *f.baseline >= kBloatMinExcessBytes;
}

}  // namespace

Status sweep_compact(od::object& root, const Where& where, JsonWriter& out) {
  int64_t now = 0, deadline_at = 0, rebuilt = 0;
  bool has_now = false, has_deadline = false, has_indexes = false, held = false;
  std::vector<IndexFact> indexes;
  std::vector<TableFact> tables;
  std::vector<std::string_view> analyzed;  // tables this sweep has analyzed already
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "now" || key == "deadlineAt" || key == "rebuilt") {
      Result<int64_t> n = input::read_int(field, where, key);
      if (!n) return n.take_error();
      if (key == "now") {
        now = n.value();
        has_now = true;
      } else if (key == "deadlineAt") {
        deadline_at = n.value();
        has_deadline = true;
      } else {
        rebuilt = n.value();
      }
      return ok_status();
    }
    if (key == "horizon") {
      return input::for_each_object(field, where, key, kMaxHolders, [&](od::object& h, const Where& w, uint32_t) -> Status {
        Result<bool> holds = holds_horizon(h, w);
        if (!holds) return holds.take_error();
        held = held || holds.value();
        return ok_status();
      });
    }
    if (key == "tables") {
      return input::for_each_object(field, where, key, kMaxTables, [&](od::object& t, const Where& w, uint32_t) -> Status {
        Result<TableFact> f = read_table_fact(t, w);
        if (!f) return f.take_error();
        tables.push_back(f.value());
        return ok_status();
      });
    }
    if (key == "analyzedTables") {
      Result<od::array> list = input::read_array(field, where, key);
      if (!list) return list.take_error();
      return input::for_each_element(list.value(), where, key, kMaxTables, [&](od::value& v, uint32_t) -> Status {
        Result<std::string_view> name = input::read_string(v, where, key, 63);
        if (!name) return name.take_error();
        analyzed.push_back(name.value());
        return ok_status();
      });
    }
    if (key == "indexes") {
      has_indexes = true;
      return input::for_each_object(field, where, key, kMaxIndexes, [&](od::object& i, const Where& w, uint32_t) -> Status {
        Result<IndexFact> f = read_index(i, w);
        if (!f) return f.take_error();
        indexes.push_back(f.value());
        return ok_status();
      });
    }
    return ok_status();
  });
  if (!status) return status;
  if (!has_now) return input::missing(where, "now");
  if (!has_deadline) return input::missing(where, "deadlineAt");
  if (!has_indexes) return input::missing(where, "indexes");

  out.begin_object();
  out.field_bool("held", held);
  out.key("drop");
  out.begin_array();
  if (!held) {
    for (const IndexFact& f : indexes) {
      if (!f.valid && is_rebuild_leftover(f.name)) out.string(f.name);
    }
  }
  out.end_array();
  out.key("record");
  out.begin_array();
  const IndexFact* pick = nullptr;
  if (!held) {
    for (const IndexFact& f : indexes) {
      if (!f.valid || !is_own_index(f.name)) continue;
      if (!f.baseline || (f.bytes > *f.baseline && !bloated(f))) {
        out.begin_object();
        out.field("name", f.name);
        out.field("bytes", f.bytes);
        out.end_object();
      } else if (bloated(f) && (!f.rebuilt_at || now - *f.rebuilt_at >= kRebuildCooldownMs) &&
                 (pick == nullptr || f.bytes - *f.baseline > pick->bytes - *pick->baseline)) {
        pick = &f;
      }
    }
  }
  out.end_array();
  out.key("rebuild");
  if (pick != nullptr && rebuilt < kMaxRebuildsPerSweep && now + kRebuildRoomMs <= deadline_at) {
    out.begin_object();
    out.field("name", pick->name);
    out.field("bytes", pick->bytes);
    out.field("baselineBytes", *pick->baseline);
    out.field("rebuiltAt", now);
    out.end_object();
  } else {
    out.null();
  }
  out.key("analyze");
  out.begin_array();
  for (const TableFact& t : tables) {
    if (needs_analyze(t) && std::find(analyzed.begin(), analyzed.end(), t.name) == analyzed.end()) out.string(t.name);
  }
  out.end_array();
  out.end_object();
  return ok_status();
}

}  // namespace postbox
