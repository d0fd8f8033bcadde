#pragma once
// Cloudflare Cron Triggers: parse, match, and search (next/previous firing minute), UTC.
// Pure functions: no clock, no I/O, no exceptions.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace postbox::cron {

// `field` is "minute", "hour", "day-of-month", "month", "day-of-week", or "expression" for
// errors about the whole text (empty, too long, wrong field count). `value` is the offending
// text with bytes outside printable ASCII written as \xNN (so it is safe to embed anywhere).
// `message` is complete on its own, e.g. "day-of-week: '0' is out of range 1-7 (1 = SUN)".
struct ParseError {
  std::string field;
  std::string value;
  std::string message;
};

inline constexpr std::size_t kMaxExprBytes = 256;
// Searches look this far from the given time: five years including two leap days.
inline constexpr int64_t kSearchDays = 5 * 365 + 2;

struct Expr {
  uint64_t minutes = 0;            // bit m set: minute m (0-59) fires
  uint32_t hours = 0;              // bit h: hour h (0-23)
  uint32_t dom = 0;                // bit d: day of month d (1-31)
  uint16_t months = 0;             // bit m: month m (1-12)
  uint8_t dow = 0;                 // bit w: weekday w (1-7, 1 = SUN)
  bool dom_any = true;             // day-of-month was exactly * or ?
  bool dow_any = true;             // day-of-week was exactly * or ?
  uint32_t dom_from_last = 0;      // bit n: `L-n` (n days before the last; `L` is n = 0)
  bool dom_last_weekday = false;   // `LW`
  uint32_t dom_nearest_wd = 0;     // bit n: `nW` (weekday nearest to day n, same month)
  uint8_t dow_last = 0;            // bit w: `wL` (last weekday-w of the month)
  uint64_t dow_nth = 0;            // bit w*8+k: `w#k` (k-th weekday-w of the month, k 1-5)

  bool operator==(const Expr&) const = default;
};

bool parse(std::string_view text, Expr& out, ParseError& err);  // false + err on failure
bool matches(const Expr& e, int64_t epoch_ms);                     // seconds/ms ignored
// First matching minute strictly after epoch_ms; nullopt if none within kSearchDays.
std::optional<int64_t> next_after(const Expr& e, int64_t epoch_ms);
// Last matching minute strictly before epoch_ms; nullopt if none within kSearchDays.
std::optional<int64_t> prev_before(const Expr& e, int64_t epoch_ms);
// "2026-11-30T09:00:00.000Z" (ms kept); years outside 0-9999 as +YYYYYY / -YYYYYY like
// JavaScript's Date.prototype.toISOString.
std::string format_iso(int64_t epoch_ms);

// Days of the given month (bit d = day d, 1-31) on which the day-of-month/day-of-week/month
// fields match; hours and minutes are not considered.
uint32_t month_days(const Expr& e, int64_t year, int month);

}  // namespace postbox::cron
