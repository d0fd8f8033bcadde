// pb_backlog ops "window" and "health": the instants the backlog counts are cut at, and the
// grades of the table's own health the dashboard shows. The store counts; this decides.
//
// window: due means due_at <= now; aged means due_at <= now - agedMs (default 5 min); stuck
// means running with lease_expires_at < now; dead letters are counted over the last hour.
//
// health (each "ok", "warn" or "error"):
//   deadTuples    warn when dead >= 1000 and dead >= 20% of live; error when dead >= live
//   autovacuum    warn when deadTuples is not ok and the last autovacuum is unknown or > 1 h ago
//   xminHold      warn when the oldest snapshot is >= 5 min old; error at >= 1 h
//   deadLetters   warn when any job dead-lettered in the last window; error at >= 100
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

Status backlog_health(od::object& root, const Where& where, JsonWriter& out) {
  // Absent facts grade "ok": a scoped operator sees no table statistics.
  std::optional<int64_t> dead, live, autovacuum_age, xmin_hold, dead_letters;
  bool has_autovacuum = false;
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    std::optional<int64_t>* slot = key == "deadTuples"            ? &dead
                                   : key == "liveTuples"          ? &live
                                   : key == "lastAutovacuumAgeMs" ? &autovacuum_age
                                   : key == "xminHoldMs"          ? &xmin_hold
                                   : key == "deadLetters"         ? &dead_letters
                                                                  : nullptr;
    if (slot == nullptr) return ok_status();
    Result<std::optional<int64_t>> n = input::read_nullable_int(field, where, key);
    if (!n) return n.take_error();
    *slot = n.value();
    has_autovacuum = has_autovacuum || key == "lastAutovacuumAgeMs";
    return ok_status();
  });
  if (!status) return status;
  int dead_grade = 0;
  if (dead && live) {
    const int64_t base = *live > 1 ? *live : 1;
    if (*dead >= kDeadTuplesFloor && *dead * 5 >= base) dead_grade = *dead >= base ? 2 : 1;
  }
  // Lagging autovacuum only matters while dead tuples pile up; unknown (null) counts as lagging.
  const bool stale = has_autovacuum && (!autovacuum_age || *autovacuum_age > kAutovacuumStaleMs);
  const int xmin_grade = xmin_hold ? (*xmin_hold >= kXminHoldErrorMs ? 2 : *xmin_hold >= kXminHoldWarnMs ? 1 : 0) : 0;
  const int letters_grade = dead_letters && *dead_letters > 0 ? (*dead_letters >= kDeadLettersError ? 2 : 1) : 0;
  out.begin_object();
  out.field("deadTuples", kGrades[dead_grade]);
  out.field("autovacuum", kGrades[dead_grade > 0 && stale ? 1 : 0]);
  out.field("xminHold", kGrades[xmin_grade]);
  out.field("deadLetters", kGrades[letters_grade]);
  out.end_object();
  return ok_status();
}

}  // namespace postbox
