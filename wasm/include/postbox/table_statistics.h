// pb_sweep op "compact", its statistics part (wasm/src/table_statistics.cpp): which of the
// outbox's churning tables the sweep re-analyzes because the planner's picture of them is stale.
#pragma once

#include <cstdint>
#include <string_view>

#include "postbox/json_input.h"

namespace postbox {

// A table smaller than this (1 MiB) is never analyzed by the sweep: any plan reads it cheaply.
constexpr int64_t kAnalyzeMinPages = 128;
// A table holding this many times the live rows its statistics describe is re-analyzed...
constexpr int64_t kAnalyzeGrowth = 4;
// ...once it holds at least this many (fewer cost little whatever the plan).
constexpr int64_t kAnalyzeMinRows = 1000;

// One churning table as the planner sees it: its size and live rows now, and what its
// statistics say.
struct TableFact {
  std::string_view name;
  int64_t pages = 0;       // its heap's pages now
  int64_t rows = 0;        // its live rows now (the server's running count, pg_stat n_live_tup)
  int64_t stats_rows = 0;  // the rows its statistics were taken at (pg_class.reltuples)
  bool has_statistics = false;  // analyzed at least once (pg_class.reltuples >= 0)
};

Result<TableFact> read_table_fact(input::od::object& obj, const input::Where& where);

// Whether the sweep analyzes the table: one of the outbox's own churning tables, at least
// kAnalyzeMinPages, and never analyzed, or holding kAnalyzeGrowth times the live rows its
// statistics were taken at (and at least kAnalyzeMinRows).
bool needs_analyze(const TableFact& table);

}  // namespace postbox
