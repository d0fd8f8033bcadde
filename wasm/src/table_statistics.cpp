// pb_sweep op "compact": which churning tables the sweep analyzes.
//
// Why: a server plans a named statement once per session and keeps the plan. Planned while
// `job` is new and small, before autovacuum has analyzed it, the plan reads the table whole
// (a sequential scan is the cheapest way through a few pages), and it keeps doing so as the
// table grows: each claim and settle then costs time in proportion to the jobs kept, until the
// first autovacuum analyze (a minute or two after a fresh install, longer on a busy server)
// invalidates the plan. An ANALYZE does that at once, for every session. It runs when:
//   - the table is at least kAnalyzeMinPages (smaller ones cost little whatever the plan), and
//   - it has never been analyzed, or it holds kAnalyzeGrowth times the live rows its statistics
//     were taken at (autovacuum, which analyzes after about 10 % of changes, has fallen behind).
// Live rows, not pages: while a snapshot holds the xmin horizon the heap grows with row
// versions nobody can remove, not with jobs; an ANALYZE then reads a bloated table at the worst
// moment and tells the planner nothing new (a 30-minute soak's pinned phase analyzed `job` at
// 4x its pages with its live rows unchanged). After an ANALYZE the statistics match the table,
// so a sweep does not repeat it; the growth factor makes a table that keeps growing fast
// analyzed a few times, geometrically.
#include "postbox/table_statistics.h"

#include <iterator>


namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

namespace {

constexpr uint32_t kMaxTableNameBytes = 63;  // PostgreSQL's NAMEDATALEN - 1
constexpr std::string_view kChurningTables[] = {"job", "attempt"};

}  // namespace

Result<TableFact> read_table_fact(od::object& obj, const Where& where) {
  TableFact t;
  bool has_name = false, has_flag = false;
  input::IntField counts[] = {{"pages", &t.pages}, {"rows", &t.rows}, {"statsRows", &t.stats_rows}};
  uint32_t seen = 0;
  Status status = input::for_each_field(obj, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "name") {
      Result<std::string_view> s = input::read_string(field, where, key, kMaxTableNameBytes);
      if (!s) return s.take_error();
      t.name = s.value();
      has_name = true;
    } else if (key == "hasStatistics") {
      Result<bool> b = input::read_bool(field, where, key);
      if (!b) return b.take_error();
      t.has_statistics = b.value();
      has_flag = true;
    } else if (Result<bool> read = input::read_int_field(counts, std::size(counts), key, field, where, seen); !read) {
      return read.take_error();
    }
    return ok_status();
  });
  if (!status) return status.take_error();
  if (!has_name) return input::missing(where, "name");
  if (Status all = input::require_int_fields(counts, std::size(counts), seen, where); !all) return all.take_error();
  if (!has_flag) return input::missing(where, "hasStatistics");
  return t;
}

bool needs_analyze(const TableFact& table) {
  bool own = false;
  for (std::string_view name : kChurningTables) own = own || name == table.name;
  if (!own || table.pages < kAnalyzeMinPages) return false;
  if (!table.has_statistics) return true;
  return table.rows >= kAnalyzeMinRows && table.rows >= kAnalyzeGrowth * table.stats_rows;
}

}  // namespace postbox
