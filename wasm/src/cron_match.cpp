// Matching and searching. A search walks month by month using the month's day mask
// (cron_days.cpp) and bit scans over the hour/minute masks, so a five-year search costs at
// most ~61 month masks, never a minute-by-minute loop.
#include <bit>

#include "postbox/civil_time.h"
#include "postbox/cron.h"

namespace postbox::cron {

namespace {

constexpr int64_t kMsPerMinute = 60000;
constexpr int64_t kMinutesPerDay = 1440;
constexpr int64_t kSearchMs = kSearchDays * kMinutesPerDay * kMsPerMinute;
// Beyond this (about 36 million years) searches give up rather than risk int64 overflow.
constexpr int64_t kMaxAbsMs = int64_t{1} << 60;

int low_bit(uint64_t x) { return std::countr_zero(x); }
int high_bit(uint64_t x) { return 63 - std::countl_zero(x); }

// Earliest firing minute-of-day >= lb, or -1.
int first_time_from(const Expr& e, int lb) {
  const int h0 = lb / 60;
  const int m0 = lb % 60;
  uint32_t hs = e.hours & (~0u << h0);
  while (hs != 0) {
    const int h = low_bit(hs);
    const uint64_t ms = h == h0 ? e.minutes & (~uint64_t{0} << m0) : e.minutes;
    if (ms != 0) return h * 60 + low_bit(ms);
    hs &= hs - 1;
  }
  return -1;
}

// Latest firing minute-of-day <= ub, or -1.
int last_time_until(const Expr& e, int ub) {
  const int h0 = ub / 60;
  const int m0 = ub % 60;
  uint32_t hs = e.hours & ((2u << h0) - 1u);
  while (hs != 0) {
    const int h = high_bit(hs);
    const uint64_t ms = h == h0 ? e.minutes & ((uint64_t{2} << m0) - 1u) : e.minutes;
    if (ms != 0) return h * 60 + high_bit(ms);
    hs &= ~(1u << h);
  }
  return -1;
}

// Bits 0..d set (days 1..d once bit 0 is ignored); d is 1-31.
uint32_t days_up_to(int d) { return d >= 31 ? 0xffffffffu : (2u << d) - 1u; }

}  // namespace

bool matches(const Expr& e, int64_t epoch_ms) {
  const int64_t minute = civil::floor_div(epoch_ms, kMsPerMinute);
  const int64_t day = civil::floor_div(minute, kMinutesPerDay);
  const int mod = static_cast<int>(civil::floor_mod(minute, kMinutesPerDay));
  if (!(e.hours >> (mod / 60) & 1u) || !(e.minutes >> (mod % 60) & 1u)) return false;
  const civil::Date c = civil::civil_from_days(day);
  return (month_days(e, c.year, c.month) >> c.day & 1u) != 0;
}

std::optional<int64_t> next_after(const Expr& e, int64_t epoch_ms) {
  if (epoch_ms > kMaxAbsMs || epoch_ms < -kMaxAbsMs) return std::nullopt;
  const int64_t first_min = civil::floor_div(epoch_ms, kMsPerMinute) + 1;
  const int64_t last_min = civil::floor_div(epoch_ms + kSearchMs, kMsPerMinute);
  const int64_t first_day = civil::floor_div(first_min, kMinutesPerDay);
  const int64_t last_day = civil::floor_div(last_min, kMinutesPerDay);
  const int first_tod = static_cast<int>(first_min - first_day * kMinutesPerDay);

  civil::Date c = civil::civil_from_days(first_day);
  int64_t year = c.year;
  int month = c.month;
  int from_day = c.day;
  while (true) {
    const int64_t month_start = civil::days_from_civil(year, month, 1);
    if (month_start > last_day) return std::nullopt;
    uint32_t mask = month_days(e, year, month) & ~days_up_to(from_day - 1);
    while (mask != 0) {
      const int64_t day = month_start + low_bit(mask) - 1;
      if (day > last_day) return std::nullopt;
      const int tod = first_time_from(e, day == first_day ? first_tod : 0);
      if (tod >= 0) {
        const int64_t minute = day * kMinutesPerDay + tod;
        if (minute > last_min) return std::nullopt;
        return minute * kMsPerMinute;
      }
      mask &= mask - 1;
    }
    from_day = 1;
    if (++month > 12) {
      month = 1;
      ++year;
    }
  }
}

std::optional<int64_t> prev_before(const Expr& e, int64_t epoch_ms) {
  if (epoch_ms > kMaxAbsMs || epoch_ms < -kMaxAbsMs) return std::nullopt;
  // The latest minute starting strictly before epoch_ms, and the earliest one in range.
  const int64_t last_min = civil::floor_div(epoch_ms - 1, kMsPerMinute);
  const int64_t first_min = -civil::floor_div(-(epoch_ms - kSearchMs), kMsPerMinute);
  const int64_t last_day = civil::floor_div(last_min, kMinutesPerDay);
  const int64_t first_day = civil::floor_div(first_min, kMinutesPerDay);
  const int last_tod = static_cast<int>(last_min - last_day * kMinutesPerDay);

  civil::Date c = civil::civil_from_days(last_day);
  int64_t year = c.year;
  int month = c.month;
  int to_day = c.day;
  while (true) {
    const int64_t month_start = civil::days_from_civil(year, month, 1);
    if (month_start + civil::days_in_month(year, month) - 1 < first_day) return std::nullopt;
    uint32_t mask = month_days(e, year, month) & days_up_to(to_day);
    while (mask != 0) {
      const int d = high_bit(mask);
      const int64_t day = month_start + d - 1;
      if (day < first_day) return std::nullopt;
      const int tod = last_time_until(e, day == last_day ? last_tod : 1439);
      if (tod >= 0) {
        const int64_t minute = day * kMinutesPerDay + tod;
        if (minute < first_min) return std::nullopt;
        return minute * kMsPerMinute;
      }
      mask &= ~(1u << d);
    }
    to_day = 31;
    if (--month < 1) {
      month = 12;
      --year;
    }
  }
}

}  // namespace postbox::cron
