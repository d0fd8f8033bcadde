// pb_backlog ops "window" and "health": the instants the backlog counts are cut at, and the
// grades of the outbox's own health (its tables, what holds back cleanup, dead letters). The
// store reports the facts; this decides.
//
// window: due means due_at <= now; aged means due_at <= now - agedMs (default 5 min); stuck
// means running with lease_expires_at < now; dead letters are counted over the last hour.
//
// health (each "ok", "warn" or "error"), per table of "tables" and per holder of "horizon":
//   deadTuples    warn when dead >= 1000 and dead >= 20% of live; error when dead >= live
//   autovacuum    warn when deadTuples is not ok and the last autovacuum is unknown or > 1 h ago
//   xminHold      a holder of the horizon: warn when its snapshot is >= 5 min old or
//                 >= 1,000,000 transactions behind; error at >= 1 h or >= 100,000,000
//   deadLetters   warn when any job dead-lettered in the last window; error at >= 100
// The top-level deadTuples, autovacuum and xminHold are the worst of their lists; severity is
// the worst of everything.
#include "postbox/families.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

namespace {

constexpr int64_t kDefaultAgedMs = 300000;
constexpr int64_t kDeadLetterWindowMs = 3600000;
constexpr int64_t kDeadTuplesFloor = 1000;
constexpr int64_t kAutovacuumStaleMs = 3600000;
constexpr int64_t kXminHoldWarnMs = 300000;
constexpr int64_t kXminHoldErrorMs = 3600000;
// A slot has no age in time, only in transactions. Warn: about five minutes of a busy outbox
// (3,000 transactions a second). Error: half of autovacuum_freeze_max_age's default 200 M, where
// PostgreSQL starts anti-wraparound vacuums that cannot freeze past a held horizon.
constexpr int64_t kXminHoldWarnXids = 1000000;
constexpr int64_t kXminHoldErrorXids = 100000000;
// Bounds on the lists: an outbox has four tables and the store reports one holder per kind.
constexpr uint32_t kMaxTables = 16;
constexpr uint32_t kMaxHolders = 16;
constexpr int64_t kDeadLettersError = 100;

constexpr std::string_view kGrades[] = {"ok", "warn", "error"};

}  // namespace

Status backlog_window(od::object& root, const Where& where, JsonWriter& out) {
  int64_t now = 0;
  int64_t aged_ms = kDefaultAgedMs;
  bool has_now = false;
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "now") {
      Result<int64_t> n = input::read_int(field, where, key);
      if (!n) return n.take_error();
      now = n.value();
      has_now = true;
    } else if (key == "agedMs") {
      Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key);
      if (!n) return n.take_error();
      if (n.value()) aged_ms = *n.value();
    }
    return ok_status();
  });
  if (!status) return status;
  if (!has_now) return input::missing(where, "now");
  out.begin_object();
  out.field("dueBefore", now);
  out.field("agedBefore", now - aged_ms);
  out.field("stuckBefore", now);
  out.field("deadLettersSince", now - kDeadLetterWindowMs);
  out.field("deadLetterWindowMs", kDeadLetterWindowMs);
  out.end_object();
  return ok_status();
}

namespace {

// Reads the nullable integer `field` into `slot` when `key` names it; true when it did.
Result<bool> read_fact(std::string_view key, od::value& field, const Where& where, std::string_view name,
                       std::optional<int64_t>& slot) {
  if (key != name) return false;
  Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key);
  if (!n) return n.take_error();
  slot = n.value();
  return true;
}

struct TableGrades {
  int dead = 0;
  int autovacuum = 0;
};

// One table's statistics: {"deadTuples":n,"liveTuples":n,"lastAutovacuumAgeMs":n|null}.
Result<TableGrades> grade_table(od::object& table, const Where& where) {
  // Absent facts grade "ok"; an absent lastAutovacuumAgeMs is not a lagging autovacuum.
  std::optional<int64_t> dead, live, autovacuum_age;
  bool has_autovacuum = false;
  Status status = input::for_each_field(table, where, [&](std::string_view key, od::value& field) -> Status {
    for (auto [name, slot] : {std::pair<std::string_view, std::optional<int64_t>*>{"deadTuples", &dead},
                              {"liveTuples", &live},
                              {"lastAutovacuumAgeMs", &autovacuum_age}}) {
      Result<bool> read = read_fact(key, field, where, name, *slot);
      if (!read) return read.take_error();
      if (read.value()) {
        has_autovacuum = has_autovacuum || name == "lastAutovacuumAgeMs";
        break;
      }
    }
    return ok_status();
  });
  if (!status) return status.take_error();
  TableGrades g;
  if (dead && live) {
    const int64_t base = *live > 1 ? *live : 1;
    if (*dead >= kDeadTuplesFloor && *dead * 5 >= base) g.dead = *dead >= base ? 2 : 1;
  }
  // Lagging autovacuum only matters while dead tuples pile up; unknown (null) counts as lagging.
  const bool stale = has_autovacuum && (!autovacuum_age || *autovacuum_age > kAutovacuumStaleMs);
  g.autovacuum = g.dead > 0 && stale ? 1 : 0;
  return g;
}

// One holder of the horizon: {"ageMs":n|null,"xidAge":n|null}; either age alone can grade it.
Result<int> grade_holder(od::object& holder, const Where& where) {
  std::optional<int64_t> age_ms, xid_age;
  Status status = input::for_each_field(holder, where, [&](std::string_view key, od::value& field) -> Status {
    Result<bool> read = read_fact(key, field, where, "ageMs", age_ms);
    if (read && !read.value()) read = read_fact(key, field, where, "xidAge", xid_age);
    return read ? ok_status() : Status(read.take_error());
  });
  if (!status) return status.take_error();
  const int by_time = age_ms ? (*age_ms >= kXminHoldErrorMs ? 2 : *age_ms >= kXminHoldWarnMs ? 1 : 0) : 0;
  const int by_xids = xid_age ? (*xid_age >= kXminHoldErrorXids ? 2 : *xid_age >= kXminHoldWarnXids ? 1 : 0) : 0;
  return by_time > by_xids ? by_time : by_xids;
}

}  // namespace

Status backlog_health(od::object& root, const Where& where, JsonWriter& out) {
  // Absent facts grade "ok": a scoped operator sees no table statistics.
  TableGrades tables[kMaxTables];
  int holders[kMaxHolders] = {};
  uint32_t table_count = 0;
  uint32_t holder_count = 0;
  std::optional<int64_t> dead_letters;
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "tables") {
      return input::for_each_object(field, where, key, kMaxTables, [&](od::object& t, const Where& w, uint32_t i) -> Status {
        Result<TableGrades> g = grade_table(t, w);
        if (!g) return g.take_error();
        tables[i] = g.value();
        table_count = i + 1;
        return ok_status();
      });
    }
    if (key == "horizon") {
      return input::for_each_object(field, where, key, kMaxHolders, [&](od::object& h, const Where& w, uint32_t i) -> Status {
        Result<int> g = grade_holder(h, w);
        if (!g) return g.take_error();
        holders[i] = g.value();
        holder_count = i + 1;
        return ok_status();
      });
    }
    Result<bool> read = read_fact(key, field, where, "deadLetters", dead_letters);
    return read ? ok_status() : Status(read.take_error());
  });
  if (!status) return status;
  int worst_dead = 0, worst_autovacuum = 0, worst_xmin = 0;
  for (uint32_t i = 0; i < table_count; ++i) {
    worst_dead = tables[i].dead > worst_dead ? tables[i].dead : worst_dead;
    worst_autovacuum = tables[i].autovacuum > worst_autovacuum ? tables[i].autovacuum : worst_autovacuum;
  }
  for (uint32_t i = 0; i < holder_count; ++i) worst_xmin = holders[i] > worst_xmin ? holders[i] : worst_xmin;
  const int letters = dead_letters && *dead_letters > 0 ? (*dead_letters >= kDeadLettersError ? 2 : 1) : 0;
  int severity = worst_dead;
  for (int g : {worst_autovacuum, worst_xmin, letters}) severity = g > severity ? g : severity;
  out.begin_object();
  out.key("tables");
  out.begin_array();
  for (uint32_t i = 0; i < table_count; ++i) {
    out.begin_object();
    out.field("deadTuples", kGrades[tables[i].dead]);
    out.field("autovacuum", kGrades[tables[i].autovacuum]);
    out.end_object();
  }
  out.end_array();
  out.key("horizon");
  out.begin_array();
  for (uint32_t i = 0; i < holder_count; ++i) out.string(kGrades[holders[i]]);
  out.end_array();
  out.field("deadTuples", kGrades[worst_dead]);
  out.field("autovacuum", kGrades[worst_autovacuum]);
  out.field("xminHold", kGrades[worst_xmin]);
  out.field("deadLetters", kGrades[letters]);
  out.field("severity", kGrades[severity]);
  out.end_object();
  return ok_status();
}

}  // namespace postbox
