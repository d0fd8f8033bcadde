// Civil-date conversions after Howard Hinnant's public-domain "chrono-compatible low-level
// date algorithms", restated here. The trick: count years from 1 March so the leap day is
// the last day of the (shifted) year, and split time into 400-year eras of 146097 days,
// inside which the month/day arithmetic is identical for every era.
#include "postbox/civil_time.h"

namespace postbox::civil {

namespace {
constexpr int64_t kDaysPerEra = 146097;      // 400 Gregorian years
constexpr int64_t kEpochShift = 719468;      // days from 0000-03-01 to 1970-01-01
}  // namespace

// C++ division truncates toward zero; adjust for negative a. Written without a
// multiplication so it cannot overflow even for INT64_MIN.
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b < 0) --q;
  return q;
}

int64_t floor_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r < 0) r += b;
  return r;
}

bool is_leap(int64_t year) {
  return (year % 4 == 0) && (year % 100 != 0 || year % 400 == 0);
}

int days_in_month(int64_t year, int month) {
  static constexpr int kDays[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month == 2 && is_leap(year)) return 29;
  return kDays[month];
}

int64_t days_from_civil(int64_t year, int month, int day) {
  // Shift January and February to the end of the previous year.
  const int64_t y = month <= 2 ? year - 1 : year;
  const int64_t era = floor_div(y, 400);
  const int64_t yoe = y - era * 400;                                  // [0, 399]
  const int64_t mp = month > 2 ? month - 3 : month + 9;               // March = 0
  const int64_t doy = (153 * mp + 2) / 5 + day - 1;                   // [0, 365]
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;          // [0, 146096]
  return era * kDaysPerEra + doe - kEpochShift;
}

Date civil_from_days(int64_t days) {
  const int64_t z = days + kEpochShift;
  const int64_t era = floor_div(z, kDaysPerEra);
  const int64_t doe = z - era * kDaysPerEra;                                  // [0, 146096]
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;  // [0, 399]
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);                // [0, 365]
  const int64_t mp = (5 * doy + 2) / 153;                                     // [0, 11]
  const int day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  const int month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  const int64_t year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  return Date{year, month, day};
}

int weekday_from_days(int64_t days) {
  // 1970-01-01 was a Thursday (4).
  return static_cast<int>(floor_mod(days + 4, 7));
}

}  // namespace postbox::civil
