// number_accepted must answer as simdjson's get_number() does, inside a document and at its
// root, for every number: the wasm builds no longer carry the conversion to check against.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "postbox/json_number.h"
#include "simdjson.h"

namespace {

namespace od = simdjson::ondemand;

// The core asks number_accepted where it asked get_number(): once get_number_type() has
// found a number that is no big integer. Elsewhere (-1) there is nothing to compare.
int simdjson_inside(const std::string& number, const std::string& after) {
  const simdjson::padded_string json("[" + number + after);
  od::parser parser;
  od::document doc;
  od::array arr;
  if (parser.iterate(json).get(doc) || doc.get_array().get(arr)) return -1;
  for (auto item : arr) {
    od::value v;
    od::number_type kind;
    od::number n;
    if (std::move(item).get(v) || v.get_number_type().get(kind) || kind == od::number_type::big_integer) return -1;
    return v.get_number().get(n) == simdjson::SUCCESS;
  }
  return -1;
}

int ours_inside(const std::string& number, const std::string& after) {
  const simdjson::padded_string json("[" + number + after);
  return postbox::input::number_accepted(json.data() + 1);
}

// At the root, as the whole document: accepted, and so consumed up to the end.
int simdjson_root(const std::string& text) {
  const simdjson::padded_string json(text);
  od::parser parser;
  od::document doc;
  od::number_type kind;
  od::number n;
  if (parser.iterate(json).get(doc) || doc.get_number_type().get(kind) || kind == od::number_type::big_integer) return -1;
  return doc.get_number().get(n) == simdjson::SUCCESS && doc.at_end();
}

int ours_root(const std::string& text) {
  const simdjson::padded_string json(text);
  od::parser parser;
  od::document doc;
  od::number_type kind;
  std::string_view token;
  if (parser.iterate(json).get(doc) || doc.get_number_type().get(kind) || kind == od::number_type::big_integer) return -1;
  if (doc.raw_json_token().get(token)) return -1;
  return postbox::input::number_accepted(token.data(), token.size());
}

// Compares where simdjson got as far as get_number(); counts those comparisons.
int compared = 0;
void compare(int theirs, int ours) {
  if (theirs < 0) return;
  ++compared;
  CHECK(ours == theirs);
}

void check_number(const std::string& number) {
  CAPTURE(number.size() > 120 ? number.substr(0, 60) + "..." + number.substr(number.size() - 60) : number);
  for (const char* after : {"]", ",1]", " ]", "x]", "\"a\"]", ".]", "e]", "-]", ""}) {
    CAPTURE(after);
    compare(simdjson_inside(number, after), ours_inside(number, after));
  }
  for (const char* after : {"", " ", "\n ", " 1", "]"}) {
    CAPTURE(after);
    compare(simdjson_root(number + after), ours_root(number + after));
  }
}

// 2^1024 - 2^970: values from here up round to infinity.
const std::string kBound =
    "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977"
    "587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845"
    "817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559"
    "699508093042880177904174497792";

}  // namespace

TEST_CASE("json_number: syntax and integer limits as simdjson's") {
  for (const char* n : {"0", "-0", "1", "-1", "01", "-01", "00", "-", "--1", "+1", "1.", ".5", "1.e3", "1e", "1e+",
                        "1e-", "1ee3", "1x", "0x1", "1.5", "-1.5e-3", "1E+2", "0.0e0", "9223372036854775807",
                        "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "18446744073709551615",
                        "18446744073709551616", "99999999999999999999", "29999999999999999999", "10000000000000000000",
                        "-10000000000000000000", "123456789012345678901", "1e0000000000000000000000000308"}) {
    check_number(n);
  }
}

TEST_CASE("json_number: floats at the edge of infinity, long and short") {
  for (const char* n : {"1e308", "1e309", "-1e309", "1.7976931348623157e308", "1.7976931348623158e308",
                        "1.7976931348623159e308", "17976931348623158e292", "17976931348623159e292",
                        "0e999999999999999999999", "1e999999999999999999999", "1e-999999999999999999999",
                        "4.9e-324", "2e-324", "1e-400", "0.00000000000000000000000000001e338",
                        "0.00000000000000000000000000001e339", "12345678901234567890.5", "1234567890.123456789"}) {
    check_number(n);
  }
  for (size_t cut = 1; cut <= kBound.size(); cut += 7) {
    for (const char* tail : {"", "1", "9", "00001"}) {
      const std::string digits = kBound.substr(0, cut) + tail;
      check_number(digits.substr(0, 1) + "." + digits.substr(1) + "e" + std::to_string(308));
      check_number(digits + "e" + std::to_string(309 - static_cast<int>(cut)));
      check_number("0." + digits + "e309");
    }
  }
  check_number(kBound);
  check_number(kBound + ".0");
  check_number(kBound.substr(0, 308) + "1");
  check_number(kBound.substr(0, 300) + "." + kBound.substr(300) + "e0");
}

TEST_CASE("json_number: the fallback's exponent stops counting past 0xFFFF") {
  // from_chars reads e700000 as e70000: these come out finite, and the last one infinite.
  check_number("0." + std::string(69800, '0') + std::string(25, '1') + "e700000");
  check_number("0." + std::string(699800, '0') + "17976931348623159e700109");
  check_number("0." + std::string(69800, '0') + "17976931348623159e70109");
  check_number(std::string(70100, '1') + "e-700000");
}

TEST_CASE("json_number: a root number as simdjson copies it (1083 bytes, then NUL)") {
  for (size_t zeros = 1076; zeros <= 1084; ++zeros) {
    check_number("0." + std::string(zeros, '0') + "1");
    check_number("1" + std::string(zeros, '0'));
  }
}

TEST_CASE("json_number: generated numbers") {
  const int before = compared;
  uint64_t state = 6;
  auto next = [&state](uint64_t n) {
    state = state * 6364136223846793005u + 1442695040888963407u;
    return (state >> 33) % n;
  };
  for (int round = 0; round < 20000; ++round) {
    std::string s = next(4) == 0 ? "-" : "";
    const uint64_t int_len = next(6) == 0 ? 300 + next(20) : next(25);
    for (uint64_t j = 0; j < int_len; ++j) s += static_cast<char>('0' + (next(10) == 0 ? 0 : next(10)));
    if (next(2)) {
      s += '.';
      for (uint64_t j = next(30); j > 0; --j) s += static_cast<char>('0' + next(10));
    }
    if (next(2)) {
      s += next(2) ? 'e' : 'E';
      s += next(3) == 0 ? "-" : next(2) ? "+" : "";
      for (uint64_t j = next(4); j > 0; --j) s += static_cast<char>('0' + next(10));
      if (next(3) == 0) s += std::to_string(280 + next(60));
    }
    CAPTURE(s);
    compare(simdjson_inside(s, "]"), ours_inside(s, "]"));
    compare(simdjson_root(s), ours_root(s));
  }
  CHECK(compared - before > 30000);  // most generated numbers reach get_number()
}
