#pragma once
// Proleptic Gregorian calendar arithmetic on day numbers (days since 1970-01-01, UTC).
// Integer-only so that every build (native, wasi, Emscripten) gives identical results.
#include <cstdint>

namespace postbox::civil {

struct Date {
  int64_t year;  // astronomical numbering: year 0 exists, -1 is 2 BC
  int month;     // 1-12
  int day;       // 1-31
};

// Division rounding toward negative infinity; b must be > 0.
int64_t floor_div(int64_t a, int64_t b);
// The matching non-negative remainder, in [0, b).
int64_t floor_mod(int64_t a, int64_t b);

bool is_leap(int64_t year);
int days_in_month(int64_t year, int month);  // month 1-12

// Days since 1970-01-01 for a civil date (month 1-12, day 1-31; not range-checked).
int64_t days_from_civil(int64_t year, int month, int day);
Date civil_from_days(int64_t days);

// 0 = Sunday ... 6 = Saturday.
int weekday_from_days(int64_t days);

}  // namespace postbox::civil
