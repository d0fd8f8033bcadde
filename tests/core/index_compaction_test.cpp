#include <doctest/doctest.h>

#include <string>

#include "abi_call.h"

using postbox::test::call;

namespace {

constexpr int64_t kMiB = 1024 * 1024;
const std::string kNow = "1700000000000";

// One compact call at kNow with a deadline 10 min away and nothing held.
std::string compact(const std::string& indexes, const std::string& horizon = "[]", const std::string& extra = "") {
  return call(pb_sweep, R"({"op":"compact","now":)" + kNow + R"(,"deadlineAt":1700000600000,"rebuilt":0,"horizon":)" + horizon +
                            R"(,"indexes":)" + indexes + extra + "}")
      .out;
}

std::string index(const std::string& name, int64_t bytes, const std::string& baseline, const std::string& rebuilt_at = "null",
                  bool valid = true) {
  return R"({"name":")" + name + R"(","valid":)" + (valid ? "true" : "false") + R"(,"bytes":)" + std::to_string(bytes) +
         R"(,"baselineBytes":)" + baseline + R"(,"rebuiltAt":)" + rebuilt_at + "}";
}

}  // namespace

TEST_CASE("compact: an index without a baseline records its size; growth with the data is recorded too") {
  CHECK(compact("[" + index("job_pkey", 16384, "null") + "]") ==
        R"({"held":false,"drop":[],"record":[{"name":"job_pkey","bytes":16384}],"rebuild":null,"analyze":[]})");
  // Under 2x, or under 8 MiB past the baseline: growth, not bloat.
  CHECK(compact("[" + index("job_pkey", 20 * kMiB, std::to_string(11 * kMiB)) + "," + index("job_lease", 7 * kMiB, "16384") + "]") ==
        R"({"held":false,"drop":[],"record":[{"name":"job_pkey","bytes":20971520},{"name":"job_lease","bytes":7340032}],"rebuild":null,"analyze":[]})");
  // A smaller index (vacuum never shrinks one; a rebuild elsewhere may) keeps its baseline.
  CHECK(compact("[" + index("job_pkey", 8 * kMiB, std::to_string(9 * kMiB)) + "]") == R"({"held":false,"drop":[],"record":[],"rebuild":null,"analyze":[]})");
  // Every index the migrations create on job and attempt is the outbox's own (fair share's too).
  for (const char* own : {"job_claimable", "job_fair", "job_tenant", "job_waiting", "attempt_finished"}) {
    CHECK_MESSAGE(compact("[" + index(own, 16384, "null") + "]").find(R"("record":[{"name")") != std::string::npos, own);
  }
}

TEST_CASE("compact: an index at 2x its baseline and 8 MiB past it is rebuilt, the most bloated first") {
  const std::string out = compact("[" + index("job_pkey", 40 * kMiB, std::to_string(4 * kMiB)) + "," +
                                  index("job_created", 90 * kMiB, std::to_string(5 * kMiB)) + "," +
                                  index("attempt_pkey", 12 * kMiB, std::to_string(4 * kMiB)) + "]");
  CHECK(out == R"({"held":false,"drop":[],"record":[],"rebuild":{"name":"job_created","bytes":94371840,"baselineBytes":5242880,"rebuiltAt":1700000000000},"analyze":[]})");
  // Exactly at both thresholds counts; one byte short of either does not.
  CHECK(compact("[" + index("job_lease", 16 * kMiB, std::to_string(8 * kMiB)) + "]").find(R"("rebuild":{"name":"job_lease")") != std::string::npos);
  CHECK(compact("[" + index("job_lease", 16 * kMiB - 1, std::to_string(8 * kMiB)) + "]").find(R"("rebuild":null)") != std::string::npos);
  CHECK(compact("[" + index("job_lease", 9 * kMiB - 1, std::to_string(kMiB)) + "]").find(R"("rebuild":null)") != std::string::npos);
}

TEST_CASE("compact: a held horizon stops every action") {
  const std::string bloated = "[" + index("job_pkey", 40 * kMiB, std::to_string(4 * kMiB)) + "," + index("job_lease", 1, "null") + "," +
                              index("job_pkey_ccnew", 1, "null", "null", false) + "]";
  CHECK(compact(bloated, R"([{"kind":"session","ageMs":30000,"xidAge":12}])") == R"({"held":true,"drop":[],"record":[],"rebuild":null,"analyze":[]})");
  CHECK(compact(bloated, R"([{"kind":"slot","ageMs":null,"xidAge":100000}])") == R"({"held":true,"drop":[],"record":[],"rebuild":null,"analyze":[]})");
  // Younger than 30 s and fewer than 100,000 transactions behind: not held.
  CHECK(compact(bloated, R"([{"kind":"session","ageMs":29999,"xidAge":99999},{"kind":"slot","ageMs":null,"xidAge":5}])") ==
        R"({"held":false,"drop":["job_pkey_ccnew"],"record":[{"name":"job_lease","bytes":1}],"rebuild":{"name":"job_pkey","bytes":41943040,"baselineBytes":4194304,"rebuiltAt":1700000000000},"analyze":[]})");
}

TEST_CASE("compact: leftovers of an interrupted rebuild of ours are dropped; other indexes are left alone") {
  const std::string out = compact("[" + index("job_pkey_ccnew", 1, "null", "null", false) + "," + index("attempt_finished_ccold12", 1, "null", "null", false) + "," +
                                  index("job_pkey_ccnewer", 1, "null", "null", false) + "," + index("mine_ccnew", 1, "null", "null", false) + "," +
                                  index("job_claimable", 1, "null", "null", false) + "," + index("mine", 90 * kMiB, "1") + "]");
  CHECK(out == R"({"held":false,"drop":["job_pkey_ccnew","attempt_finished_ccold12"],"record":[],"rebuild":null,"analyze":[]})");
}

TEST_CASE("compact: the cooldown, the per-sweep count and the room before the deadline") {
  const std::string bloated = index("job_pkey", 40 * kMiB, std::to_string(4 * kMiB), "%");
  auto with = [&](const std::string& rebuilt_at, const std::string& extra = "") {
    std::string i = bloated;
    i.replace(i.find('%'), 1, rebuilt_at);
    return compact("[" + i + "]", "[]", extra);
  };
  CHECK(with("1699978400001").find(R"("rebuild":null)") != std::string::npos);  // 6 h less 1 ms ago
  CHECK(with("1699978400000").find(R"("rebuild":{)") != std::string::npos);     // 6 h ago
  CHECK(with("null", R"(,"rebuilt":4)").find(R"("rebuild":null)") != std::string::npos);
  CHECK(with("null", R"(,"rebuilt":3)").find(R"("rebuild":{)") != std::string::npos);
  // The last key wins: a deadline 59,999 ms away leaves no room, 60,000 ms does.
  CHECK(with("null", R"(,"deadlineAt":1700000059999)").find(R"("rebuild":null)") != std::string::npos);
  CHECK(with("null", R"(,"deadlineAt":1700000060000)").find(R"("rebuild":{)") != std::string::npos);
}

TEST_CASE("compact: invalid inputs") {
  CHECK(call(pb_sweep, R"({"op":"compact","deadlineAt":1,"indexes":[]})").out == R"({"error":{"code":"invalid_input","message":"sweep: field 'now' is required"}})");
  CHECK(call(pb_sweep, R"({"op":"compact","now":1,"indexes":[]})").out == R"({"error":{"code":"invalid_input","message":"sweep: field 'deadlineAt' is required"}})");
  CHECK(call(pb_sweep, R"({"op":"compact","now":1,"deadlineAt":1})").out == R"({"error":{"code":"invalid_input","message":"sweep: field 'indexes' is required"}})");
  CHECK(call(pb_sweep, R"({"op":"compact","now":1,"deadlineAt":1,"indexes":[{"name":"job_pkey"}]})").out ==
        R"({"error":{"code":"invalid_input","message":"sweep: field 'indexes[0].bytes' is required"}})");
  CHECK(call(pb_sweep, R"({"op":"compact","now":1,"deadlineAt":1,"indexes":[3]})").out ==
        R"({"error":{"code":"invalid_input","message":"sweep: indexes[0]: must be an object"}})");
  CHECK(call(pb_sweep, R"({"op":"compact","now":1,"deadlineAt":1,"indexes":[{"name":"job_pkey","bytes":-1}]})").out.find("invalid_input") != std::string::npos);
  CHECK(call(pb_sweep, R"({"op":"compact","now":1,"deadlineAt":1,"indexes":[],"horizon":[{"ageMs":"old"}]})").out.find("invalid_input") != std::string::npos);
  CHECK(call(pb_sweep, R"({"op":"compact","now":1,"deadlineAt":1,"indexes":[{"name":"job_pkey","bytes":1,"valid":1}]})").out.find("invalid_input") != std::string::npos);
}

namespace {

std::string table(const std::string& name, int64_t pages, int64_t rows, int64_t stats_rows, bool has_statistics) {
  return R"({"name":")" + name + R"(","pages":)" + std::to_string(pages) + R"(,"rows":)" + std::to_string(rows) + R"(,"statsRows":)" +
         std::to_string(stats_rows) + R"(,"hasStatistics":)" + (has_statistics ? "true" : "false") + "}";
}

std::string analyze_of(const std::string& tables, const std::string& extra = "") {
  const std::string out = compact("[]", "[]", R"(,"tables":)" + tables + extra);
  const size_t at = out.find(R"("analyze":)");
  return at == std::string::npos ? out : out.substr(at);
}

}  // namespace

TEST_CASE("compact: a churning table planned without statistics of its size is analyzed") {
  // Never analyzed: from 128 pages (1 MiB) on; smaller tables are left to autovacuum.
  CHECK(analyze_of("[" + table("job", 128, 5000, 0, false) + "," + table("attempt", 127, 5000, 0, false) + "]") == R"("analyze":["job"]})");
  // Analyzed: once it holds 4x the live rows its statistics were taken at (an empty table's 0
  // included), and at least 1,000.
  CHECK(analyze_of("[" + table("job", 400, 4000, 1000, true) + "," + table("attempt", 400, 3999, 1000, true) + "]") == R"("analyze":["job"]})");
  CHECK(analyze_of("[" + table("job", 128, 1000, 0, true) + "," + table("attempt", 128, 999, 0, true) + "]") == R"("analyze":["job"]})");
  CHECK(analyze_of("[" + table("job", 1000000, 130000, 129000, true) + "]") == R"("analyze":[]})");
  // Only the outbox's churning tables; one this sweep analyzed already is not named again.
  CHECK(analyze_of("[" + table("webhook_endpoint", 4096, 50000, 0, false) + "," + table("attempt", 4096, 50000, 0, false) + "]",
                   R"(,"analyzedTables":["attempt"])") == R"("analyze":[]})");
  // A held horizon holds rebuilds back, not an ANALYZE.
  CHECK(compact("[]", R"([{"kind":"session","ageMs":60000,"xidAge":12}])", R"(,"tables":[)" + table("job", 4096, 50000, 0, false) + "]") ==
        R"({"held":true,"drop":[],"record":[],"rebuild":null,"analyze":["job"]})");
}

TEST_CASE("compact: a table grown in pages but not in live rows is not analyzed") {
  // A held horizon grows the heap with row versions nobody can remove: 64x the pages, the same
  // jobs. Its statistics still describe it; an ANALYZE would only read the bloat.
  CHECK(analyze_of("[" + table("job", 64000, 130000, 128000, true) + "]") == R"("analyze":[]})");
  // The same table once its live rows have grown 4x is analyzed, whatever its pages.
  CHECK(analyze_of("[" + table("job", 1000, 512000, 128000, true) + "]") == R"("analyze":["job"]})");
}

TEST_CASE("compact: invalid table facts") {
  CHECK(call(pb_sweep, R"({"op":"compact","now":1,"deadlineAt":1,"indexes":[],"tables":[{"name":"job","pages":1,"rows":1,"statsRows":1}]})").out ==
        R"({"error":{"code":"invalid_input","message":"sweep: field 'tables[0].hasStatistics' is required"}})");
  CHECK(call(pb_sweep, R"({"op":"compact","now":1,"deadlineAt":1,"indexes":[],"tables":[{"name":"job","pages":1,"statsRows":1,"hasStatistics":true}]})").out ==
        R"({"error":{"code":"invalid_input","message":"sweep: field 'tables[0].rows' is required"}})");
  CHECK(call(pb_sweep, R"({"op":"compact","now":1,"deadlineAt":1,"indexes":[],"tables":[{"name":"job","pages":-1,"rows":1,"statsRows":1,"hasStatistics":true}]})").out.find("invalid_input") != std::string::npos);
  CHECK(call(pb_sweep, R"({"op":"compact","now":1,"deadlineAt":1,"indexes":[],"tables":[{"name":"job","pages":1,"rows":1,"statsRows":1.5,"hasStatistics":true}]})").out.find("invalid_input") != std::string::npos);
  CHECK(call(pb_sweep, R"({"op":"compact","now":1,"deadlineAt":1,"indexes":[],"analyzedTables":[1]})").out.find("invalid_input") != std::string::npos);
}

TEST_CASE("sweep plan: compaction can be turned off") {
  const std::string base = R"({"op":"plan","now":0,"startedAt":0,"policies":[])";
  CHECK(call(pb_sweep, base + R"(,"compaction":false})").out.find("compact") == std::string::npos);
  CHECK(call(pb_sweep, base + R"(,"compaction":true})").out.find(R"({"type":"compact","deadlineAt":840000})") != std::string::npos);
  CHECK(call(pb_sweep, base + R"(,"compaction":"no"})").out.find("invalid_input") != std::string::npos);
}
