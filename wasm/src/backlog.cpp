// pb_backlog: grades the queue's health from three counts. Each metric is "error" at or above
// its error threshold, else "warn" at or above its warn threshold; the backlog takes the worst.
#include "postbox/families.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

namespace {

struct Metric {
  std::string_view name;
  int64_t value = 0;
  int64_t warn = 0;
  int64_t error = 0;
  bool counted = false;
};

enum Severity { kOk, kWarn, kError };
constexpr std::string_view kSeverityNames[] = {"ok", "warn", "error"};

Severity grade(const Metric& m) {
  if (m.value >= m.error) return kError;
  if (m.value >= m.warn) return kWarn;
  return kOk;
}

Metric* find_metric(Metric* metrics, std::string_view name) {
  for (int i = 0; i < 3; ++i) {
    if (metrics[i].name == name) return &metrics[i];
  }
  return nullptr;
}

// Grades the counts (the family's first form, without "op").
Status backlog_grade(od::object& root, const Where& where, JsonWriter& out) {
  // Defaults: any due backlog in the hundreds, any job past its age limit, any stuck lease.
  Metric metrics[3] = {{"due", 0, 100, 1000, false}, {"aged", 0, 1, 50, false}, {"stuck", 0, 1, 10, false}};
  bool has_counts = false;
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "counts") {
      has_counts = true;
      Result<od::object> counts = input::read_object(field, where, key);
      if (!counts) return counts.take_error();
      const Where inner = where.nested("counts");
      return input::for_each_field(counts.value(), inner, [&](std::string_view name, od::value& count) -> Status {
        Metric* m = find_metric(metrics, name);
        if (m == nullptr) return ok_status();
        Result<int64_t> n = input::read_int(count, inner, name);
        if (!n) return n.take_error();
        m->value = n.value();
        m->counted = true;
        return ok_status();
      });
    }
    if (key == "thresholds") {
      Result<od::object> thresholds = input::read_object(field, where, key);
      if (!thresholds) return thresholds.take_error();
      const Where inner = where.nested("thresholds");
      return input::for_each_field(thresholds.value(), inner, [&](std::string_view name, od::value& t) -> Status {
        Metric* m = find_metric(metrics, name);
        if (m == nullptr) return ok_status();
        Result<od::object> levels = input::read_object(t, inner, name);
        if (!levels) return levels.take_error();
        const Where level_where = inner.nested(name);
        return input::for_each_field(levels.value(), level_where, [&](std::string_view level, od::value& n) -> Status {
          if (level != "warn" && level != "error") return ok_status();
          Result<int64_t> v = input::read_int(n, level_where, level);
          if (!v) return v.take_error();
          (level == "warn" ? m->warn : m->error) = v.value();
          return ok_status();
        });
      });
    }
    return ok_status();
  });
  if (!status) return status;
  if (!has_counts) return input::missing(where, "counts");
  const Where counts_where = where.nested("counts");
  for (const Metric& m : metrics) {
    if (!m.counted) return input::missing(counts_where, m.name);
    if (m.warn > m.error) {
      return input::family_error(where.nested("thresholds").nested(m.name), ErrorCode::invalid_input,
                                 "warn must not exceed error");
    }
  }
  Severity worst = kOk;
  for (const Metric& m : metrics) {
    if (grade(m) > worst) worst = grade(m);
  }
  out.begin_object();
  out.field("severity", kSeverityNames[worst]);
  out.key("reasons");
  out.begin_array();
  for (const Metric& m : metrics) {
    const Severity s = grade(m);
    if (s == kOk) continue;
    out.begin_object();
    out.field("metric", m.name);
    out.field("severity", kSeverityNames[s]);
    out.field("value", m.value);
    out.end_object();
  }
  out.end_array();
  out.end_object();
  return ok_status();
}

}  // namespace

// health.cpp
Status backlog_window(od::object& root, const Where& where, JsonWriter& out);
Status backlog_health(od::object& root, const Where& where, JsonWriter& out);
Status backlog_read(od::object& root, const Where& where, JsonWriter& out);
// flow_limits.cpp
Status backlog_throttled(od::object& root, const Where& where, JsonWriter& out);

Status run_backlog(od::document& doc, JsonWriter& out) {
  static constexpr Operation kOps[] = {{"grade", backlog_grade}, {"window", backlog_window}, {"health", backlog_health}, {"read", backlog_read}, {"throttled", backlog_throttled}};
  return dispatch_op(doc, out, "backlog", kOps, "grade");
}

}  // namespace postbox
