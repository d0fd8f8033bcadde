// simdjson's number judgement (numberparsing.h parse_number and write_float, from_chars.cpp),
// kept step for step so every build accepts and refuses exactly the numbers it did, without
// its float conversion. The decimal value is compared with the least one that rounds to
// infinity; where simdjson takes its fallback path, with that path's exponent reading.
#include "postbox/json_number.h"

#include "simdjson.h"

namespace postbox::input {

namespace {

// simdjson copies a root number into 1074 + 8 + 1 bytes padded with spaces, then a NUL.
constexpr size_t kRootCopyBytes = 1074 + 8 + 1;

// 2^1024 - 2^970, halfway between DBL_MAX and 2^1024: the least value that rounds to infinity
// (a tie goes to the even 2^1024). All 309 digits; the value is 0.<these> x 10^309.
constexpr char kInfinityDigits[] =
    "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977"
    "587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845"
    "817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559"
    "699508093042880177904174497792";
constexpr int64_t kInfinityPoint = 309;

// A written exponent this large already puts any value far outside the doubles; counting on
// would only risk overflow (simdjson saturates at 999999999999999999 instead).
constexpr int64_t kExponentCap = 1000000000000000;

struct Reader {
  const char* text;
  size_t root_length;
  unsigned char operator[](size_t i) const {
    if (i < root_length) return static_cast<unsigned char>(text[i]);
    return i < kRootCopyBytes ? ' ' : '\0';
  }
};

bool is_digit(unsigned char c) { return static_cast<unsigned char>(c - '0') <= 9; }

// Whether 0.D x 10^point is at least kInfinityDigits' value, where D is the digits from
// `first` (a non-zero digit) to `end`, skipping the decimal point.
bool rounds_to_infinity(const Reader& at, size_t first, size_t end, int64_t point) {
  if (point != kInfinityPoint) return point > kInfinityPoint;
  size_t q = first;
  for (size_t k = 0; k + 1 < sizeof kInfinityDigits; ++k) {
    if (q < end && at[q] == '.') ++q;
    // Out of digits: the rest of the bound (it ends in 2) is larger than the zeros that follow.
    if (q >= end) return false;
    const unsigned char want = static_cast<unsigned char>(kInfinityDigits[k]);
    if (at[q] != want) return at[q] > want;
    ++q;
  }
  return true;
}

}  // namespace

bool number_accepted(const char* text, size_t root_length) {
  const Reader at{text, root_length};
  const bool negative = at[0] == '-';
  const size_t int_start = negative ? 1 : 0;
  size_t p = int_start;
  uint64_t i = 0;  // every digit, wrapping as simdjson's accumulator does
  while (is_digit(at[p])) i = 10 * i + (at[p++] - '0');
  const size_t int_digits = p - int_start;
  if (int_digits == 0 || (at[int_start] == '0' && int_digits > 1)) return false;

  bool is_float = false;
  size_t digit_count = int_digits;  // with a fraction, counts its '.' (simdjson's count)
  size_t frac_start = p;
  int64_t frac_digits = 0;
  if (at[p] == '.') {
    is_float = true;
    frac_start = ++p;
    while (is_digit(at[p])) i = 10 * i + (at[p++] - '0');
    frac_digits = static_cast<int64_t>(p - frac_start);
    if (frac_digits == 0) return false;
    digit_count = p - int_start;
  }
  const size_t digits_end = p;

  int64_t written = 0;   // the exponent, saturated (parse_exponent)
  int64_t fallback = 0;  // the exponent as from_chars reads it: digits stop counting past 0xFFFF
  if (at[p] == 'e' || at[p] == 'E') {
    is_float = true;
    ++p;
    const bool negative_exponent = at[p] == '-';
    if (negative_exponent || at[p] == '+') ++p;
    const size_t exponent_start = p;
    while (is_digit(at[p])) {
      const int digit = at[p++] - '0';
      if (written < kExponentCap) written = 10 * written + digit;
      if (fallback < 0x10000) fallback = 10 * fallback + digit;
    }
    if (p == exponent_start) return false;
    if (negative_exponent) {
      written = -written;
      fallback = -fallback;
    }
  }
  // A number must end at whitespace or a structural character (both paths refuse it after).
  if (!simdjson::internal::structural_or_whitespace[at[p]]) return false;

  if (!is_float) {
    // 64-bit integers only; longer ones are big integers, refused here (BIGINT_ERROR).
    const size_t longest = negative ? 19 : 20;
    if (int_digits > longest) return false;
    if (int_digits == longest) {
      if (negative) return i <= uint64_t{INT64_MAX} + 1;
      return at[0] == '1' && i > uint64_t{INT64_MAX};
    }
    return true;
  }

  // The first significant digit; simdjson skips zeros and the '.' alike.
  size_t first = int_start;
  while (at[first] == '0' || at[first] == '.') ++first;
  const size_t significant = digit_count - (first - int_start);
  // Where the decimal point falls before the first significant digit, as from_chars counts it.
  const int64_t point = at[int_start] == '0' ? -static_cast<int64_t>(first - frac_start) : static_cast<int64_t>(int_digits);

  // More than 19 digits: simdjson hands the text to from_chars alone.
  if (digit_count > 19 && significant > 19) return !rounds_to_infinity(at, first, digits_end, point + fallback);
  // Otherwise `i` holds the digits exactly and the value is i x 10^exponent.
  const int64_t exponent = written - frac_digits;
  if (exponent < -342 || i == 0) return true;  // zero
  if (exponent > 308) return false;            // infinite for sure
  // Eisel-Lemire rounds correctly; when it finds infinity, from_chars has the last word.
  if (!rounds_to_infinity(at, first, digits_end, point + written)) return true;
  return !rounds_to_infinity(at, first, digits_end, point + fallback);
}

}  // namespace postbox::input
