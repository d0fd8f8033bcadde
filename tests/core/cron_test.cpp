// Table tests for the cron core (wasm/src/cron_*.cpp, civil_time.cpp). Times in the tables
// are written as UTC ISO strings and converted with the civil-date code tested first.
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <string>

#include "postbox/civil_time.h"
#include "postbox/cron.h"

namespace {

using postbox::cron::Expr;
using postbox::cron::ParseError;
namespace civil = postbox::civil;
namespace cron = postbox::cron;

int digits(const char* s, int n) {
  int v = 0;
  for (int i = 0; i < n; ++i) v = v * 10 + (s[i] - '0');
  return v;
}

// "YYYY-MM-DDTHH:MM" with optional ":SS" and ".mmm"; test input only, trusted.
int64_t at(const char* s) {
  const std::string t(s);
  int64_t days = civil::days_from_civil(digits(s, 4), digits(s + 5, 2), digits(s + 8, 2));
  int64_t ms = days * 86400000 + digits(s + 11, 2) * 3600000LL + digits(s + 14, 2) * 60000LL;
  if (t.size() >= 19) ms += digits(s + 17, 2) * 1000LL;
  if (t.size() >= 23) ms += digits(s + 20, 3);
  return ms;
}

Expr must_parse(const char* text) {
  Expr e;
  ParseError err;
  const bool ok = cron::parse(text, e, err);
  INFO("expr: '" << text << "' error: " << err.message);
  CHECK(ok);  // CHECK, not REQUIRE: the core builds with -fno-exceptions
  return e;
}

std::string show(std::optional<int64_t> t) { return t ? cron::format_iso(*t) : "none"; }

}  // namespace

TEST_CASE("civil: known day numbers, leap years, month lengths, weekdays") {
  CHECK(civil::days_from_civil(1970, 1, 1) == 0);
  CHECK(civil::days_from_civil(2000, 3, 1) == 11017);
  CHECK(civil::days_from_civil(1969, 12, 31) == -1);
  CHECK(civil::days_from_civil(2026, 11, 30) == 20787);
  CHECK(civil::days_from_civil(0, 3, 1) == -719468);
  CHECK(civil::is_leap(2000));
  CHECK(civil::is_leap(2024));
  CHECK_FALSE(civil::is_leap(1900));
  CHECK_FALSE(civil::is_leap(2100));
  CHECK_FALSE(civil::is_leap(2026));
  CHECK(civil::days_in_month(2024, 2) == 29);
  CHECK(civil::days_in_month(2100, 2) == 28);
  CHECK(civil::days_in_month(2026, 4) == 30);
  CHECK(civil::days_in_month(2026, 12) == 31);
  CHECK(civil::weekday_from_days(0) == 4);  // Thursday
  CHECK(civil::weekday_from_days(-1) == 3);
  CHECK(civil::weekday_from_days(civil::days_from_civil(2026, 11, 30)) == 1);  // Monday
  CHECK(civil::floor_div(-1, 60000) == -1);
  CHECK(civil::floor_mod(-1, 7) == 6);
  CHECK(civil::floor_div(INT64_MIN, 86400000) == -106751991168);
}

TEST_CASE("civil: round trip and continuity over 4400 years") {
  // Every day from 1 March -200 to ~4200: converting back gives the same day, and the
  // calendar advances by exactly one day each time (no gaps, no repeats).
  civil::Date prev = civil::civil_from_days(-800000 - 1);
  int failures = 0;
  for (int64_t d = -800000; d <= 800000; ++d) {
    const civil::Date c = civil::civil_from_days(d);
    const bool next_day = c.day == prev.day + 1 && c.month == prev.month && c.year == prev.year;
    const bool next_month = c.day == 1 && prev.day == civil::days_in_month(prev.year, prev.month) &&
                            ((c.month == prev.month + 1 && c.year == prev.year) ||
                             (c.month == 1 && prev.month == 12 && c.year == prev.year + 1));
    if (civil::days_from_civil(c.year, c.month, c.day) != d || !(next_day || next_month))
      ++failures;
    prev = c;
  }
  CHECK(failures == 0);
}

TEST_CASE("format_iso") {
  struct Row { int64_t ms; const char* iso; };
  const Row rows[] = {
      {0, "1970-01-01T00:00:00.000Z"},
      {1700000000000, "2023-11-14T22:13:20.000Z"},
      {1796029200123, "2026-11-30T09:00:00.123Z"},
      {-1, "1969-12-31T23:59:59.999Z"},
      {951782400000, "2000-02-29T00:00:00.000Z"},
      {253402300799999, "9999-12-31T23:59:59.999Z"},
      {253402300800000, "+010000-01-01T00:00:00.000Z"},
      {8640000000000000, "+275760-09-13T00:00:00.000Z"},
      {-62198755200000, "-000001-01-01T00:00:00.000Z"},
  };
  for (const Row& r : rows) {
    INFO("ms " << r.ms);
    CHECK(cron::format_iso(r.ms) == r.iso);
  }
  CHECK(at("2026-11-30T09:00:00.123") == 1796029200123);
  CHECK(!cron::format_iso(INT64_MIN).empty());
  CHECK(!cron::format_iso(INT64_MAX).empty());
}

TEST_CASE("parse: spellings that mean the same expression") {
  struct Row { const char* a; const char* b; };
  const Row rows[] = {
      {"0 17 * * sun", "0 17 * * 1"},
      {"0 17 * * SUN", "0 17 * * Sun"},
      {"0 9 * * mon-fri", "0 9 * * 2-6"},
      {"0 9 * * MON-FRI", "0 9 * * 2,3,4,5,6"},
      {"0 0 * jan-mar *", "0 0 * 1-3 *"},
      {"0 0 * JAN,jul,Dec *", "0 0 * 1,7,12 *"},
      {"0 0 ? * *", "0 0 * * ?"},
      {"0 0 * * *", "0 0 ? * ?"},
      {"*/15 * * * *", "0,15,30,45 * * * *"},
      {"5/20 * * * *", "5,25,45 * * * *"},
      {"10-30/10 * * * *", "10,20,30 * * * *"},
      {"0 */6 * * *", "0 0,6,12,18 * * *"},
      {"0 0 * * L", "0 0 * * 7"},
      {"0 0 * * l", "0 0 * * SAT"},
      {"0 0 * * FRIL", "0 0 * * 6L"},
      {"0 0 * * fri#3", "0 0 * * 6#3"},
      {"0 0 L * *", "0 0 L-0 * *"},
      {"0 0 lw * *", "0 0 LW * *"},
      {"0 0 15w * *", "0 0 15W * *"},
      {"0 0 * * MON/2", "0 0 * * 2,4,6"},
      {"*/60 * * * *", "0 * * * *"},
      {"  0\t9 *  * MON  ", "0 9 * * 2"},
      {"* * * * *", "0-59 0-23 * 1-12 *"},
  };
  for (const Row& r : rows) {
    INFO(r.a << "  vs  " << r.b);
    CHECK(must_parse(r.a) == must_parse(r.b));
  }
  // Exactly '*' or '?' leaves a day field unrestricted; anything else restricts it.
  CHECK(must_parse("0 0 * * *").dom_any);
  CHECK(must_parse("0 0 ? * 2").dom_any);
  CHECK_FALSE(must_parse("0 0 */1 * 2").dom_any);
  CHECK_FALSE(must_parse("0 0 1-31 * 2").dom_any);
  CHECK_FALSE(must_parse("0 0 * * 1-7").dow_any);
}

TEST_CASE("parse: rejected expressions name the field and the value") {
  struct Row { const char* name; std::string expr; const char* field; const char* value; const char* message; };
  const Row rows[] = {
      {"empty", "", "expression", "", "cron expression is empty"},
      {"only spaces", "   \t ", "expression", "   \\x09 ", "cron expression is empty"},
      {"six fields (Quartz seconds)", "0 0 9 * * MON", "expression", "0 0 9 * * MON", "expected 5 fields, got 6"},
      {"four fields", "0 9 * *", "expression", "0 9 * *", "expected 5 fields, got 4"},
      {"overlong", "0 9 * * " + std::string(250, '1'), "expression", "0 9 * * 111111111111111111111111",
       "expression is 258 bytes long; at most 256 are allowed"},
      {"dow zero", "0 9 * * 0", "day-of-week", "0", "day-of-week: '0' is out of range 1-7 (1 = SUN)"},
      {"dow zero in range", "0 9 * * 0-5", "day-of-week", "0", "day-of-week: '0' is out of range 1-7 (1 = SUN)"},
      {"dow eight", "0 9 * * 8", "day-of-week", "8", "day-of-week: '8' is out of range 1-7 (1 = SUN)"},
      {"minute 60", "60 * * * *", "minute", "60", "minute: '60' is out of range 0-59"},
      {"hour 24", "0 24 * * *", "hour", "24", "hour: '24' is out of range 0-23"},
      {"dom 0", "0 0 0 * *", "day-of-month", "0", "day-of-month: '0' is out of range 1-31"},
      {"dom 32", "0 0 32 * *", "day-of-month", "32", "day-of-month: '32' is out of range 1-31"},
      {"month 13", "0 0 1 13 *", "month", "13", "month: '13' is out of range 1-12"},
      {"month 0", "0 0 1 0 *", "month", "0", "month: '0' is out of range 1-12"},
      {"overflow", "99999999999999999999 * * * *", "minute", "99999999999999999999",
       "minute: '99999999999999999999' is out of range 0-59"},
      {"step 0", "*/0 * * * *", "minute", "*/0", "minute: '*/0' has step 0; the step must be 1-60"},
      {"step too big", "0 */25 * * *", "hour", "*/25", "hour: '*/25' has step 25; the step must be 1-24"},
      {"step overflow", "0 0 1/99999999999 * *", "day-of-month", "1/99999999999",
       "day-of-month: '1/99999999999' has step too large; the step must be 1-31"},
      {"step missing", "*/ * * * *", "minute", "*/", "minute: '*/' is incomplete (a step number must follow '/')"},
      {"reversed range", "5-1 * * * *", "minute", "5-1", "minute: '5-1' is a reversed range (start after end)"},
      {"reversed names", "0 0 * * FRI-MON", "day-of-week", "FRI-MON",
       "day-of-week: 'FRI-MON' is a reversed range (start after end)"},
      {"range missing end", "0 5- * * *", "hour", "5-", "hour: '5-' is incomplete (a value is missing)"},
      {"garbage char", "0 9 * * MON!", "day-of-week", "MON!", "day-of-week: 'MON!' has an unexpected character '!'"},
      {"garbage byte", "0 9 * * 2\xff", "day-of-week", "2\\xff", "day-of-week: '2\\xff' has an unexpected character '\\xff'"},
      {"letters in minute", "abc * * * *", "minute", "abc", "minute: 'abc' is not a number"},
      {"unknown month", "0 0 1 FOO *", "month", "FOO", "month: 'FOO' is not a month name (JAN-DEC)"},
      {"long day name", "0 0 * * FRIDAY", "day-of-week", "FRIDAY", "day-of-week: 'FRIDAY' is not a day name (SUN-SAT)"},
      {"day name in month", "0 0 * MON *", "month", "MON", "month: 'MON' is not a month name (JAN-DEC)"},
      {"empty list item", "1,,2 * * * *", "minute", "1,,2", "minute: '1,,2' has an empty list item"},
      {"trailing comma", "0 0 * * 2,", "day-of-week", "2,", "day-of-week: '2,' has an empty list item"},
      {"? in minute", "? * * * *", "minute", "?", "minute: '?' uses '?', which is only allowed in day-of-month and day-of-week"},
      {"? in a list", "0 0 ?,1 * *", "day-of-month", "?", "day-of-month: '?' uses '?', which must be the whole field"},
      {"L in hour", "0 L * * *", "hour", "L", "hour: 'L' is not a number"},
      {"L-n too far", "0 0 L-31 * *", "day-of-month", "L-31",
       "day-of-month: 'L-31' has offset out of range 0-30 (L-n is n days before the last day)"},
      {"L- without n", "0 0 L- * *", "day-of-month", "L-", "day-of-month: 'L-' is incomplete (L-n needs a number n)"},
      {"L junk", "0 0 LX * *", "day-of-month", "LX", "day-of-month: 'LX' is not a number, L, LW, L-n or nW"},
      {"W alone", "0 0 W * *", "day-of-month", "W", "day-of-month: 'W' is not a number, L, LW, L-n or nW"},
      {"W on a range", "0 0 1-5W * *", "day-of-month", "1-5W", "day-of-month: '1-5W' has an unexpected character 'W'"},
      {"32W", "0 0 32W * *", "day-of-month", "32", "day-of-month: '32' is out of range 1-31"},
      {"L suffix in dom", "0 0 5L * *", "day-of-month", "5L", "day-of-month: '5L' has an unexpected character 'L'"},
      {"W in dow", "0 0 * * 5W", "day-of-week", "5W", "day-of-week: '5W' has an unexpected character 'W'"},
      {"# occurrence 6", "0 0 * * 6#6", "day-of-week", "6#6",
       "day-of-week: '6#6' has occurrence out of range 1-5 (w#k is the k-th weekday w of the month)"},
      {"# occurrence 0", "0 0 * * 6#0", "day-of-week", "6#0",
       "day-of-week: '6#0' has occurrence out of range 1-5 (w#k is the k-th weekday w of the month)"},
      {"# without k", "0 0 * * 6#", "day-of-week", "6#", "day-of-week: '6#' is incomplete (w#k needs an occurrence k)"},
      {"# weekday 0", "0 0 * * 0#1", "day-of-week", "0", "day-of-week: '0' is out of range 1-7 (1 = SUN)"},
      {"# in dom", "0 0 1#2 * *", "day-of-month", "1#2", "day-of-month: '1#2' has an unexpected character '#'"},
      {"negative number", "-5 * * * *", "minute", "-5", "minute: '-5' has an unexpected character '-'"},
      {"double star", "** * * * *", "minute", "**", "minute: '**' has an unexpected character '*'"},
  };
  for (const Row& r : rows) {
    INFO(r.name << ": '" << r.expr << "'");
    Expr e;
    ParseError err;
    const Expr before = e;
    CHECK_FALSE(cron::parse(r.expr, e, err));
    CHECK(err.field == r.field);
    CHECK(err.value == r.value);
    CHECK(err.message == r.message);
    CHECK(e == before);  // output untouched on failure
  }
}

TEST_CASE("matches: named fixtures") {
  struct Row { const char* name; const char* expr; const char* time; bool match; };
  const Row rows[] = {
      {"every minute", "* * * * *", "2026-03-07T13:37", true},
      {"seconds ignored", "0 9 * * *", "2026-03-07T09:00:59.999", true},
      {"next minute is not 9:00", "0 9 * * *", "2026-03-07T09:01", false},
      {"monday 9:00 (Nov 30 2026 is a Monday)", "0 9 * * MON", "2026-11-30T09:00", true},
      {"monday rule on a sunday", "0 9 * * MON", "2026-11-29T09:00", false},
      {"1 = SUN", "0 17 * * 1", "2026-11-29T17:00", true},
      {"1 is not monday", "0 17 * * 1", "2026-11-30T17:00", false},
      {"weekday range on friday", "30 8 * * MON-FRI", "2026-11-27T08:30", true},
      {"weekday range on saturday", "30 8 * * MON-FRI", "2026-11-28T08:30", false},
      {"steps", "*/15 */6 * * *", "2026-01-01T18:45", true},
      {"steps miss", "*/15 */6 * * *", "2026-01-01T17:45", false},
      {"a/n start", "5/20 * * * *", "2026-01-01T00:45", true},
      {"a/n before start", "5/20 * * * *", "2026-01-01T00:00", false},
      {"month name", "0 0 1 JUL *", "2026-07-01T00:00", true},
      {"month name miss", "0 0 1 JUL *", "2026-08-01T00:00", false},
      {"29 Feb leap", "0 0 29 2 *", "2024-02-29T00:00", true},
      {"L in leap February", "0 0 L * *", "2024-02-29T00:00", true},
      {"L not the 28th in leap February", "0 0 L * *", "2024-02-28T00:00", false},
      {"L in common February", "0 0 L * *", "2026-02-28T00:00", true},
      {"L in a 30-day month", "0 0 L * *", "2026-04-30T00:00", true},
      {"L-3 in January", "0 0 L-3 * *", "2026-01-28T00:00", true},
      {"L-3 in February", "0 0 L-3 * *", "2026-02-25T00:00", true},
      {"L-30 needs 31 days", "0 0 L-30 * *", "2026-01-01T00:00", true},
      {"L-30 in February selects nothing", "0 0 L-30 * *", "2026-02-01T00:00", false},
      {"LW: Jan 31 2026 is Saturday -> Fri 30", "0 0 LW * *", "2026-01-30T00:00", true},
      {"LW not the Saturday", "0 0 LW * *", "2026-01-31T00:00", false},
      {"LW: May 31 2026 is Sunday -> Fri 29", "0 0 LW * *", "2026-05-29T00:00", true},
      {"LW on a weekday last day", "0 0 LW * *", "2026-03-31T00:00", true},
      {"15W: Aug 15 2026 is Saturday -> Fri 14", "0 0 15W * *", "2026-08-14T00:00", true},
      {"15W not on the Saturday", "0 0 15W * *", "2026-08-15T00:00", false},
      {"15W: Feb 15 2026 is Sunday -> Mon 16", "0 0 15W * *", "2026-02-16T00:00", true},
      {"15W on a weekday", "0 0 15W * *", "2026-04-15T00:00", true},
      {"1W: Aug 1 2026 is Saturday -> Mon 3 (stays in month)", "0 0 1W * *", "2026-08-03T00:00", true},
      {"1W never the previous month", "0 0 1W * *", "2026-07-31T00:00", false},
      {"31W: May 31 2026 is Sunday -> Fri 29 (stays in month)", "0 0 31W * *", "2026-05-29T00:00", true},
      {"31W in a 30-day month selects nothing", "0 0 31W * *", "2026-04-30T00:00", false},
      {"last Friday (6L)", "0 0 * * 6L", "2026-11-27T00:00", true},
      {"6L not an earlier Friday", "0 0 * * 6L", "2026-11-20T00:00", false},
      {"FRIL", "0 0 * * FRIL", "2026-11-27T00:00", true},
      {"last Monday is the 30th", "0 0 * * 2L", "2026-11-30T00:00", true},
      {"L alone in dow is Saturday", "0 0 * * L", "2026-11-28T00:00", true},
      {"third Friday (6#3)", "0 0 * * 6#3", "2026-11-20T00:00", true},
      {"6#3 not the second", "0 0 * * 6#3", "2026-11-13T00:00", false},
      {"fifth Monday exists in Nov 2026", "0 0 * * 2#5", "2026-11-30T00:00", true},
      {"first Sunday", "0 0 * * SUN#1", "2026-11-01T00:00", true},
      {"dom and dow both restricted: the 13th", "0 0 13 * FRI", "2026-04-13T00:00", true},
      {"dom and dow both restricted: a Friday", "0 0 13 * FRI", "2026-04-03T00:00", true},
      {"dom and dow both restricted: neither", "0 0 13 * FRI", "2026-04-04T00:00", false},
      {"dow * leaves only dom", "0 0 13 * *", "2026-04-03T00:00", false},
      {"dom ? leaves only dow", "0 0 ? * FRI", "2026-04-03T00:00", true},
      {"dom step restricts: OR with dow", "0 0 */10 * MON", "2026-11-02T00:00", true},
      {"dom step restricts: OR with dow (dom side)", "0 0 */10 * MON", "2026-11-11T00:00", true},
      {"L and list", "0 0 1,L * *", "2026-06-30T00:00", true},
      {"before 1970", "* * * * *", "1969-07-20T20:17", true},
      {"31st only in 31-day months", "0 0 31 * *", "2026-04-30T00:00", false},
  };
  for (const Row& r : rows) {
    INFO(r.name << ": '" << r.expr << "' at " << r.time);
    CHECK(cron::matches(must_parse(r.expr), at(r.time)) == r.match);
  }
}

TEST_CASE("next_after / prev_before: named fixtures") {
  // nullptr means no match within the five-year search window.
  struct Row { const char* name; const char* expr; const char* from; const char* next; const char* prev; };
  const Row rows[] = {
      {"every minute", "* * * * *", "2026-03-07T13:37", "2026-03-07T13:38", "2026-03-07T13:36"},
      {"every minute, mid-minute", "* * * * *", "2026-03-07T13:37:30", "2026-03-07T13:38", "2026-03-07T13:37"},
      {"strictly after the match", "0 9 * * *", "2026-03-07T09:00", "2026-03-08T09:00", "2026-03-06T09:00"},
      {"just before", "0 9 * * *", "2026-03-07T08:59:59.999", "2026-03-07T09:00", "2026-03-06T09:00"},
      {"1 ms after", "0 9 * * *", "2026-03-07T09:00:00.001", "2026-03-08T09:00", "2026-03-07T09:00"},
      {"weekly monday", "0 9 * * MON", "2026-11-25T12:00", "2026-11-30T09:00", "2026-11-23T09:00"},
      {"weekdays over a weekend", "30 8 * * MON-FRI", "2026-11-27T09:00", "2026-11-30T08:30", "2026-11-27T08:30"},
      {"hour and minute lists", "15,45 9,17 * * *", "2026-01-01T09:50", "2026-01-01T17:15", "2026-01-01T09:45"},
      {"last minute of day", "59 23 * * *", "2026-12-31T23:59", "2027-01-01T23:59", "2026-12-30T23:59"},
      {"new year", "0 0 1 1 *", "2026-06-01T00:00", "2027-01-01T00:00", "2026-01-01T00:00"},
      {"29 Feb from 2025", "0 0 29 2 *", "2025-03-01T00:00", "2028-02-29T00:00", "2024-02-29T00:00"},
      {"29 Feb: 2100 is not leap", "0 0 29 2 *", "2097-03-01T00:00", nullptr, "2096-02-29T00:00"},
      {"30 Feb never", "0 0 30 2 *", "2026-01-01T00:00", nullptr, nullptr},
      {"31 Apr never", "0 0 31 4 *", "2026-01-01T00:00", nullptr, nullptr},
      {"31st skips 30-day months", "0 0 31 * *", "2026-04-01T00:00", "2026-05-31T00:00", "2026-03-31T00:00"},
      {"L across February", "0 12 L * *", "2024-02-10T00:00", "2024-02-29T12:00", "2024-01-31T12:00"},
      {"LW", "0 0 LW * *", "2026-05-01T00:00", "2026-05-29T00:00", "2026-04-30T00:00"},
      {"15W", "0 0 15W * *", "2026-08-01T00:00", "2026-08-14T00:00", "2026-07-15T00:00"},
      {"last Friday", "0 18 * * 6L", "2026-11-28T00:00", "2026-12-25T18:00", "2026-11-27T18:00"},
      {"third Friday", "0 0 * * 6#3", "2026-11-21T00:00", "2026-12-18T00:00", "2026-11-20T00:00"},
      {"fifth Monday is rare", "0 0 * * 2#5", "2026-12-01T00:00", "2027-03-29T00:00", "2026-11-30T00:00"},
      {"Friday the 13th or any 13th or any Friday", "0 0 13 * 6", "2026-04-04T00:00", "2026-04-10T00:00", "2026-04-03T00:00"},
      {"dom+dow on the 13th", "0 0 13 * 6", "2026-04-11T00:00", "2026-04-13T00:00", "2026-04-10T00:00"},
      {"quarterly", "0 6 1 JAN,APR,JUL,OCT *", "2026-04-01T06:00", "2026-07-01T06:00", "2026-01-01T06:00"},
      {"from epoch 0", "* * * * *", "1970-01-01T00:00", "1970-01-01T00:01", "1969-12-31T23:59"},
      {"hourly steps across midnight", "0 */6 * * *", "2026-12-31T19:00", "2027-01-01T00:00", "2026-12-31T18:00"},
      {"minute steps across hour", "*/20 * * * *", "2026-12-31T23:41", "2027-01-01T00:00", "2026-12-31T23:40"},
  };
  for (const Row& r : rows) {
    INFO(r.name << ": '" << r.expr << "' from " << r.from);
    const Expr e = must_parse(r.expr);
    const int64_t from = at(r.from);
    const std::optional<int64_t> want_next =
        r.next ? std::optional<int64_t>(at(r.next)) : std::nullopt;
    const std::optional<int64_t> want_prev =
        r.prev ? std::optional<int64_t>(at(r.prev)) : std::nullopt;
    CHECK(show(cron::next_after(e, from)) == show(want_next));
    CHECK(show(cron::prev_before(e, from)) == show(want_prev));
  }
}

TEST_CASE("search window is five years (1827 days) in each direction") {
  const Expr e = must_parse("0 0 29 2 *");
  // From 2096-03-01 the next leap day is 2104-02-29 (2100 is not a leap year).
  CHECK_FALSE(cron::next_after(e, at("2096-03-01T00:00")).has_value());
  CHECK_FALSE(cron::prev_before(e, at("2104-02-28T00:00")).has_value());
  // The window edge is inclusive: exactly 1827 days away is found, one minute more is not.
  // Leap days around 2100 are eight years apart, so only one is ever in reach.
  const int64_t day_ms = 86400000;
  const int64_t leap_2104 = at("2104-02-29T00:00");
  const int64_t leap_2096 = at("2096-02-29T00:00");
  CHECK(cron::next_after(e, leap_2104 - 1827 * day_ms) == leap_2104);
  CHECK(cron::next_after(e, leap_2104 - 1827 * day_ms - 60000) == std::nullopt);
  CHECK(cron::prev_before(e, leap_2096 + 1827 * day_ms) == leap_2096);
  CHECK(cron::prev_before(e, leap_2096 + 1827 * day_ms + 60000) == std::nullopt);
  const Expr daily = must_parse("0 0 * * *");
  // Absurd inputs give up instead of overflowing.
  CHECK_FALSE(cron::next_after(daily, INT64_MAX).has_value());
  CHECK_FALSE(cron::prev_before(daily, INT64_MIN).has_value());
  CHECK(cron::matches(must_parse("* * * * *"), INT64_MIN));
}

TEST_CASE("next/prev agree with a minute-by-minute scan") {
  // Cross-check the month/bit-scan search against the plain matcher on dense schedules.
  const char* exprs[] = {"* * * * *",        "*/7 3-5 * * *",     "0 0 L * *",
                         "0 12 LW * *",      "30 9 1W,15W * *",   "0 0 * * 6L",
                         "0 0 * * 2#1,6#3",  "0 0 13 * 6",         "59 23 L-1 * 1",
                         "0 0 1,15 * MON",   "5 4 * * SAT,SUN",    "0 */5 29 2 *"};
  const int64_t starts[] = {at("2026-01-30T23:59:30"), at("2026-02-27T11:00"),
                            at("2024-02-28T23:59"), at("2026-12-31T23:59:59.999")};
  int mismatches = 0;
  for (const char* text : exprs) {
    const Expr e = must_parse(text);
    for (int64_t t : starts) {
      const std::optional<int64_t> n = cron::next_after(e, t);
      const std::optional<int64_t> p = cron::prev_before(e, t);
      // Scan 70 days each way minute by minute.
      std::optional<int64_t> scan_next, scan_prev;
      const int64_t base = civil::floor_div(t, 60000) * 60000;
      for (int64_t m = base + 60000; m <= base + 70LL * 86400000; m += 60000)
        if (cron::matches(e, m)) { scan_next = m; break; }
      for (int64_t m = (t % 60000 == 0 ? base - 60000 : base); m >= base - 70LL * 86400000; m -= 60000)
        if (cron::matches(e, m)) { scan_prev = m; break; }
      if (scan_next && n != scan_next) ++mismatches;
      if (scan_prev && p != scan_prev) ++mismatches;
      if (!scan_next && n && *n <= base + 70LL * 86400000) ++mismatches;
      if (!scan_prev && p && *p >= base - 70LL * 86400000) ++mismatches;
      if (n) CHECK(cron::matches(e, *n));
      if (p) CHECK(cron::matches(e, *p));
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("never-matching expressions fail fast") {
  // 1000 full five-year searches in each direction; a minute-by-minute search would take
  // ~2.6 million steps each. This only guards against an accidental slow path.
  const Expr e = must_parse("0 0 30 2 *");
  int found = 0;
  for (int i = 0; i < 1000; ++i) {
    const int64_t t = at("2026-01-01T00:00") + i * 3600000LL;
    if (cron::next_after(e, t)) ++found;
    if (cron::prev_before(e, t)) ++found;
  }
  CHECK(found == 0);
}
