// pb_sweep op "compact", its statistics part (wasm/src/table_statistics.cpp): which of the
// outbox's churning tables the sweep re-analyzes because the planner's picture of them is stale.
#pragma once

#include <cstdint>
#include <string_view>

#include "postbox/json_input.h"

namespace postbox {

// A table smaller than this (1 MiB) is never analyzed by the sweep: any plan reads it cheaply.
constexpr int64_t kAnalyzeMinPages = 128;
// A table this many times the size its statistics describe is re-analyzed.
constexpr int64_t kAnalyzeGrowth = 4;

// One churning table as the planner sees it: its size now, and what its statistics say.
struct TableFact {
  std::string_view name;
  int64_t pages = 0;        // its heap's pages now
  int64_t stats_pages = 0;  // the pages its statistics were taken at (pg_class.relpages)
  bool has_statistics = false;  // analyzed at least once (pg_class.reltuples >= 0)
};

Result<TableFact> read_table_fact(input::od::object& obj, const input::Where& where);

// Whether the sweep analyzes the table: one of the outbox's own churning tables, at least
// kAnalyzeMinPages, never analyzed or grown to kAnalyzeGrowth times its statistics' size.
bool needs_analyze(const TableFact& table);

}  // namespace postbox
