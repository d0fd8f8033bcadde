// Parser for Cloudflare cron expressions. Grammar, informally:
//
//   expression := five fields separated by ASCII whitespace (leading/trailing allowed),
//                 at most 256 bytes:  minute hour day-of-month month day-of-week
//   field      := '*' | '?' (day fields only, whole field) | item (',' item)*
//   item       := base ['/' step]
//   base       := '*' | value ['-' value]            ('a/n' means a through the maximum)
//   value      := decimal digits | a 3-letter name   (JAN-DEC, SUN-SAT, any case)
//   day-of-month items may also be  'L' | 'L-' n | 'LW' | n 'W'      (Quartz)
//   day-of-week items may also be   'L' (= 7, SAT) | value 'L' | value '#' k
//
// Ranges: minute 0-59, hour 0-23, day-of-month 1-31, month 1-12, day-of-week 1-7 (1 = SUN).
// A field is "unrestricted" only when it is exactly '*' or '?'; that decides the
// day-of-month / day-of-week OR rule in cron_days.cpp.
#include <string>
#include <string_view>
#include <utility>

#include "postbox/cron.h"
#include "postbox/json_writer.h"

namespace postbox::cron {

namespace {

enum class Kind { Minute, Hour, Dom, Month, Dow };

struct Spec {
  Kind kind;
  const char* name;
  int lo;
  int hi;
  const char* range_text;  // how the valid range is described in messages
};

constexpr Spec kSpecs[5] = {
    {Kind::Minute, "minute", 0, 59, "0-59"},
    {Kind::Hour, "hour", 0, 23, "0-23"},
    {Kind::Dom, "day-of-month", 1, 31, "1-31"},
    {Kind::Month, "month", 1, 12, "1-12"},
    {Kind::Dow, "day-of-week", 1, 7, "1-7 (1 = SUN)"},
};

constexpr std::string_view kMonthNames[12] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                              "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr std::string_view kDayNames[7] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

// Numbers are clamped here while reading so huge inputs cannot overflow; anything this
// large is out of every field's range anyway.
constexpr int64_t kNumberCap = 1000000000;

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
char upper(char c) { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c; }

bool equals_ci(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (upper(a[i]) != upper(b[i])) return false;
  return true;
}

// Messages end up in JSON and logs: keep them printable ASCII whatever the input bytes.
std::string printable(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string r;
  r.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f) {
      r.push_back(ch);
    } else {
      r += "\\x";
      r.push_back(kHex[c >> 4]);
      r.push_back(kHex[c & 15]);
    }
  }
  return r;
}

bool fail_expr(ParseError& err, std::string_view value, std::string message) {
  err.field = "expression";
  err.value = printable(value);
  err.message = std::move(message);
  return false;
}

bool fail(ParseError& err, const Spec& f, std::string_view value, std::string_view what) {
  err.field = f.name;
  err.value = printable(value);
  err.message = std::string(f.name) + ": '" + err.value + "' " + std::string(what);
  return false;
}

bool fail_char(ParseError& err, const Spec& f, std::string_view item, char c) {
  return fail(err, f, item,
              "has an unexpected character '" + printable(std::string_view(&c, 1)) + "'");
}

// Reads decimal digits at pos (at least one must be there), clamped at kNumberCap.
int64_t read_digits(std::string_view s, std::size_t& pos) {
  int64_t n = 0;
  while (pos < s.size() && is_digit(s[pos])) {
    if (n < kNumberCap) n = n * 10 + (s[pos] - '0');
    ++pos;
  }
  return n;
}

int lookup_name(const Spec& f, std::string_view word) {
  if (f.kind == Kind::Month) {
    for (int i = 0; i < 12; ++i)
      if (equals_ci(word, kMonthNames[i])) return i + 1;
  } else if (f.kind == Kind::Dow) {
    for (int i = 0; i < 7; ++i)
      if (equals_ci(word, kDayNames[i])) return i + 1;
  }
  return 0;
}

// Reads one value (number or name) at pos into v, checked against the field's range.
// A day name directly followed by 'L' ("FRIL") stops before the 'L' so the caller sees
// the suffix, as it would after "6".
bool read_value(const Spec& f, std::string_view item, std::size_t& pos, int& v,
                ParseError& err) {
  const std::size_t start = pos;
  if (pos < item.size() && is_digit(item[pos])) {
    const int64_t n = read_digits(item, pos);
    if (n < f.lo || n > f.hi) {
      return fail(err, f, item.substr(start, pos - start),
                  std::string("is out of range ") + f.range_text);
    }
    v = static_cast<int>(n);
    return true;
  }
  if (pos < item.size() && is_alpha(item[pos])) {
    std::size_t end = pos;
    while (end < item.size() && is_alpha(item[end])) ++end;
    const std::string_view word = item.substr(pos, end - pos);
    if (f.kind == Kind::Month || f.kind == Kind::Dow) {
      const int named = word.size() >= 3 ? lookup_name(f, word.substr(0, 3)) : 0;
      if (named != 0 && word.size() == 3) {
        v = named;
        pos = end;
        return true;
      }
      if (named != 0 && f.kind == Kind::Dow && word.size() == 4 && upper(word[3]) == 'L') {
        v = named;
        pos += 3;
        return true;
      }
      return fail(err, f, word,
                  f.kind == Kind::Month ? "is not a month name (JAN-DEC)"
                                        : "is not a day name (SUN-SAT)");
    }
    if (f.kind == Kind::Dom) return fail(err, f, word, "is not a number, L, LW, L-n or nW");
    return fail(err, f, word, "is not a number");
  }
  if (pos >= item.size()) return fail(err, f, item, "is incomplete (a value is missing)");
  return fail_char(err, f, item, item[pos]);
}

void set_range(const Spec& f, Expr& e, int a, int b, int step) {
  for (int v = a; v <= b; v += step) {
    switch (f.kind) {
      case Kind::Minute: e.minutes |= uint64_t{1} << v; break;
      case Kind::Hour: e.hours |= uint32_t{1} << v; break;
      case Kind::Dom: e.dom |= uint32_t{1} << v; break;
      case Kind::Month: e.months = static_cast<uint16_t>(e.months | (1u << v)); break;
      case Kind::Dow: e.dow = static_cast<uint8_t>(e.dow | (1u << v)); break;
    }
  }
}

// Quartz day-of-month forms that start with L: "L", "LW", "L-n".
bool parse_dom_last(const Spec& f, std::string_view item, Expr& e, ParseError& err) {
  if (item.size() == 1) {
    e.dom_from_last |= 1u;
    return true;
  }
  if (item.size() == 2 && upper(item[1]) == 'W') {
    e.dom_last_weekday = true;
    return true;
  }
  if (item[1] != '-') return fail(err, f, item, "is not a number, L, LW, L-n or nW");
  std::size_t pos = 2;
  if (pos >= item.size() || !is_digit(item[pos]))
    return fail(err, f, item, "is incomplete (L-n needs a number n)");
  const int64_t n = read_digits(item, pos);
  if (pos != item.size()) return fail_char(err, f, item, item[pos]);
  if (n > 30)
    return fail(err, f, item, "has offset out of range 0-30 (L-n is n days before the last day)");
  e.dom_from_last |= 1u << n;
  return true;
}

bool parse_item(const Spec& f, std::string_view item, Expr& e, ParseError& err) {
  const bool day_field = f.kind == Kind::Dom || f.kind == Kind::Dow;
  if (f.kind == Kind::Dom && upper(item[0]) == 'L') return parse_dom_last(f, item, e, err);
  if (f.kind == Kind::Dow && item.size() == 1 && upper(item[0]) == 'L') {
    set_range(f, e, 7, 7, 1);  // Quartz: "L" alone in day-of-week is the last day, SAT
    return true;
  }
  if (item[0] == '?') {
    return fail(err, f, item,
                day_field ? "uses '?', which must be the whole field"
                          : "uses '?', which is only allowed in day-of-month and day-of-week");
  }

  std::size_t pos = 0;
  int a = f.lo;
  int b = f.hi;
  bool single = false;  // a lone value: "a" or "a/n", not "*" or "a-b"
  if (item[0] == '*') {
    pos = 1;
  } else {
    if (!read_value(f, item, pos, a, err)) return false;
    b = a;
    if (pos < item.size() && item[pos] == '-') {
      ++pos;
      if (!read_value(f, item, pos, b, err)) return false;
      if (b < a) return fail(err, f, item, "is a reversed range (start after end)");
    } else {
      single = true;
      const bool last_char = pos + 1 == item.size();
      if (f.kind == Kind::Dom && last_char && upper(item[pos]) == 'W') {
        e.dom_nearest_wd |= 1u << a;
        return true;
      }
      if (f.kind == Kind::Dow && last_char && upper(item[pos]) == 'L') {
        e.dow_last = static_cast<uint8_t>(e.dow_last | (1u << a));
        return true;
      }
      if (f.kind == Kind::Dow && pos < item.size() && item[pos] == '#') {
        ++pos;
        if (pos >= item.size() || !is_digit(item[pos]))
          return fail(err, f, item, "is incomplete (w#k needs an occurrence k)");
        const int64_t k = read_digits(item, pos);
        if (pos != item.size()) return fail_char(err, f, item, item[pos]);
        if (k < 1 || k > 5)
          return fail(err, f, item,
                      "has occurrence out of range 1-5 (w#k is the k-th weekday w of the month)");
        e.dow_nth |= uint64_t{1} << (a * 8 + k);
        return true;
      }
    }
  }

  int step = 1;
  if (pos < item.size() && item[pos] == '/') {
    ++pos;
    if (pos >= item.size() || !is_digit(item[pos]))
      return fail(err, f, item, "is incomplete (a step number must follow '/')");
    const int64_t n = read_digits(item, pos);
    const int span = f.hi - f.lo + 1;
    if (n < 1 || n > span) {
      return fail(err, f, item,
                  "has step " + (n >= kNumberCap ? std::string("too large")
                                                 : decimal_string(n)) +
                      "; the step must be 1-" + decimal_string(span));
    }
    step = static_cast<int>(n);
    if (single) b = f.hi;  // "a/n": from a to the end of the range
  }
  if (pos != item.size()) return fail_char(err, f, item, item[pos]);
  set_range(f, e, a, b, step);
  return true;
}

bool parse_field(const Spec& f, std::string_view text, Expr& e, ParseError& err) {
  const bool day_field = f.kind == Kind::Dom || f.kind == Kind::Dow;
  const bool any = text == "*" || (day_field && text == "?");
  if (f.kind == Kind::Dom) e.dom_any = any;
  if (f.kind == Kind::Dow) e.dow_any = any;
  if (any) {
    set_range(f, e, f.lo, f.hi, 1);
    return true;
  }
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::size_t end = comma == std::string_view::npos ? text.size() : comma;
    if (end == start) return fail(err, f, text, "has an empty list item");
    if (!parse_item(f, text.substr(start, end - start), e, err)) return false;
    if (comma == std::string_view::npos) return true;
    start = comma + 1;
  }
}

}  // namespace

bool parse(std::string_view text, Expr& out, ParseError& err) {
  if (text.size() > kMaxExprBytes) {
    return fail_expr(err, text.substr(0, 32),
                     "expression is " + decimal_string(static_cast<int64_t>(text.size())) +
                         " bytes long; at most " + decimal_string(static_cast<int64_t>(kMaxExprBytes)) +
                         " are allowed");
  }
  std::string_view fields[5];
  std::size_t count = 0;
  std::size_t pos = 0;
  while (true) {
    while (pos < text.size() && is_space(text[pos])) ++pos;
    if (pos >= text.size()) break;
    const std::size_t start = pos;
    while (pos < text.size() && !is_space(text[pos])) ++pos;
    if (count < 5) fields[count] = text.substr(start, pos - start);
    ++count;
  }
  if (count == 0) return fail_expr(err, text, "cron expression is empty");
  if (count != 5)
    return fail_expr(err, text, "expected 5 fields, got " + decimal_string(static_cast<int64_t>(count)));

  Expr e;
  for (int i = 0; i < 5; ++i)
    if (!parse_field(kSpecs[i], fields[i], e, err)) return false;
  out = e;  // untouched on failure
  return true;
}

}  // namespace postbox::cron
