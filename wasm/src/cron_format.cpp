// ISO-8601 UTC timestamps for schedule keys. Same shape as JavaScript's
// Date.prototype.toISOString so keys built in the core and in the shim agree.
#include "postbox/civil_time.h"
#include "postbox/cron.h"

namespace postbox::cron {

namespace {

void append_padded(std::string& out, uint64_t v, int width) {
  char buf[24];
  int n = 0;
  do {
    buf[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (int i = n; i < width; ++i) out.push_back('0');
  while (n > 0) out.push_back(buf[--n]);
}

}  // namespace

std::string format_iso(int64_t epoch_ms) {
  constexpr int64_t kMsPerDay = 86400000;
  const int64_t day = civil::floor_div(epoch_ms, kMsPerDay);
  const int64_t rem = civil::floor_mod(epoch_ms, kMsPerDay);
  const civil::Date c = civil::civil_from_days(day);

  std::string out;
  out.reserve(32);
  if (c.year >= 0 && c.year <= 9999) {
    append_padded(out, static_cast<uint64_t>(c.year), 4);
  } else {
    // Expanded years: sign and at least six digits, as toISOString writes them.
    out.push_back(c.year < 0 ? '-' : '+');
    const uint64_t mag = c.year < 0 ? uint64_t{0} - static_cast<uint64_t>(c.year)
                                    : static_cast<uint64_t>(c.year);
    append_padded(out, mag, 6);
  }
  out.push_back('-');
  append_padded(out, static_cast<uint64_t>(c.month), 2);
  out.push_back('-');
  append_padded(out, static_cast<uint64_t>(c.day), 2);
  out.push_back('T');
  append_padded(out, static_cast<uint64_t>(rem / 3600000), 2);
  out.push_back(':');
  append_padded(out, static_cast<uint64_t>(rem / 60000 % 60), 2);
  out.push_back(':');
  append_padded(out, static_cast<uint64_t>(rem / 1000 % 60), 2);
  out.push_back('.');
  append_padded(out, static_cast<uint64_t>(rem % 1000), 3);
  out.push_back('Z');
  return out;
}

}  // namespace postbox::cron
