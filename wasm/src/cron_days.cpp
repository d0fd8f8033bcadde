// Which days of one month a cron expression selects: the month field, day-of-month
// (numbers, L, L-n, LW, nW), day-of-week (weekdays, wL, w#k), and the classic-cron rule
// that when both day fields are restricted a day matches if either does.
#include "postbox/civil_time.h"
#include "postbox/cron.h"

namespace postbox::cron {

namespace {

// Weekday (0 = SUN) of day d given the weekday of day 1.
int weekday_of(int first_wd, int d) { return (first_wd + d - 1) % 7; }

// Quartz nW: the Mon-Fri day nearest to day n without leaving the month.
int nearest_weekday(int n, int dim, int first_wd) {
  const int wd = weekday_of(first_wd, n);
  if (wd == 6) return n == 1 ? 3 : n - 1;    // Saturday: Friday, or Monday the 3rd
  if (wd == 0) return n == dim ? n - 2 : n + 1;  // Sunday: Monday, or Friday before the end
  return n;
}

uint32_t dom_days(const Expr& e, int dim, int first_wd) {
  uint32_t days = e.dom;
  for (int n = 0; n <= 30; ++n) {
    if ((e.dom_from_last >> n & 1u) && dim - n >= 1) days |= 1u << (dim - n);
  }
  if (e.dom_last_weekday) {
    const int wd = weekday_of(first_wd, dim);
    const int d = wd == 6 ? dim - 1 : wd == 0 ? dim - 2 : dim;
    days |= 1u << d;
  }
  for (int n = 1; n <= 31; ++n) {
    // A day that does not exist this month (31W in April) selects nothing, like plain 31.
    if ((e.dom_nearest_wd >> n & 1u) && n <= dim) days |= 1u << nearest_weekday(n, dim, first_wd);
  }
  return days;
}

uint32_t dow_days(const Expr& e, int dim, int first_wd) {
  uint32_t days = 0;
  for (int w = 1; w <= 7; ++w) {
    const int first = 1 + (w - 1 - first_wd + 7) % 7;  // first day of the month on weekday w
    if (e.dow >> w & 1u) {
      for (int d = first; d <= dim; d += 7) days |= 1u << d;
    }
    if (e.dow_last >> w & 1u) days |= 1u << (first + (dim - first) / 7 * 7);
    for (int k = 1; k <= 5; ++k) {
      const int d = first + 7 * (k - 1);
      if ((e.dow_nth >> (w * 8 + k) & 1u) && d <= dim) days |= 1u << d;
    }
  }
  return days;
}

}  // namespace

uint32_t month_days(const Expr& e, int64_t year, int month) {
  if (month < 1 || month > 12 || !(e.months >> month & 1u)) return 0;
  const int dim = civil::days_in_month(year, month);
  const uint32_t valid = (dim == 31 ? 0xffffffffu : (1u << (dim + 1)) - 1u) & ~1u;
  const int first_wd = civil::weekday_from_days(civil::days_from_civil(year, month, 1));
  if (e.dom_any && e.dow_any) return valid;
  if (e.dom_any) return dow_days(e, dim, first_wd) & valid;
  if (e.dow_any) return dom_days(e, dim, first_wd) & valid;
  return (dom_days(e, dim, first_wd) | dow_days(e, dim, first_wd)) & valid;
}

}  // namespace postbox::cron
