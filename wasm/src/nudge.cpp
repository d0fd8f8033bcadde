// pb_nudge: the Queue message codec. A nudge only wakes a consumer (the database stays the
// truth), so decoding is strict and per message: a hostile, stale or oversized body is
// reported and the rest of the batch still decodes.
#include "postbox/nudge.h"

#include <vector>

#include "postbox/families.h"
#include "postbox/names.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

void write_nudge(JsonWriter& out, const Nudge& n) {
  out.field("t", n.type);
  if (n.type == "job") out.field("id", n.id);
  if (n.type != "drain") out.field("kind", n.kind);
  out.field("lane", n.lane);
  if (!n.outbox.empty()) out.field("outbox", n.outbox);
  if (n.type != "jobs") return;
  out.key("ids");
  out.begin_array();
  for (size_t i = 0; i < n.id_count; ++i) out.string(n.ids[i]);
  out.end_array();
}

void write_message(JsonWriter& out, const Nudge& n) {
  out.begin_object();
  out.field("v", int64_t{1});
  write_nudge(out, n);
  out.end_object();
}

namespace {

constexpr std::string_view kOutboxKeyRule = "must be a lowercase letter, then up to 31 lowercase letters, digits or _";
// A message naming an outbox its consumer does not serve comes back after this long, and after
// the queue's retries goes to its dead-letter queue: the likeliest cause is a deploy that knows
// the outbox and one that does not running side by side, and the message stays visible.
constexpr int64_t kUnknownOutboxRetrySeconds = 60;
// A message whose drain failed on the infrastructure (a database down or slow, the invocation's
// deadline) comes back after 5 s, doubling with each delivery up to 5 min (a default cron period,
// after which the sweep has found the jobs anyway): an immediate redelivery would most likely
// fail the same way and spend the queue's retries within seconds.
constexpr int64_t kRedeliverFirstSeconds = 5;
constexpr int64_t kRedeliverMaxSeconds = 300;
constexpr int64_t kMaxDeliveries = 1000000;

Status read_outbox_key(od::value& field, const Where& where, std::string_view key, std::string_view& outbox) {
  Result<std::string_view> s = input::read_string(field, where, key, kMaxOutboxKeyBytes);
  if (!s) return s.take_error();
  if (!is_outbox_key(s.value())) return field_error(where, key, kOutboxKeyRule);
  outbox = s.value();
  return ok_status();
}

// Reads a multi-job message's ids: 1 to kMaxIdsPerMessage UUIDs; more is too_large.
Status read_ids(od::value& field, const Where& where, std::vector<std::string_view>& ids) {
  Result<od::array> list = input::read_array(field, where, "ids");
  if (!list) return list.take_error();
  Where capped = where;
  capped.code = ErrorCode::too_large;
  ids.clear();
  Status status = input::for_each_element(list.value(), capped, "ids", kMaxIdsPerMessage, [&](od::value& item, uint32_t) -> Status {
    Result<std::string_view> id = input::read_string(item, where, "ids", 64);
    if (!id || !is_uuid(id.value())) return field_error(where, "ids", "must hold UUIDs");
    ids.push_back(id.value());
    return ok_status();
  });
  if (!status) return status;
  return ids.empty() ? Status(field_error(where, "ids", "must have at least 1 item")) : ok_status();
}

// Reads id/kind/lane (v, t and ids for wire messages; delaySeconds for pack input) into n;
// errors name the field. A multi-job message's ids land in `ids`.
Status read_nudge_fields(od::object& obj, const Where& where, bool wire, bool with_delay, Nudge& n,
                         std::vector<std::string_view>& ids) {
  bool has_v = false, has_ids = false;
  Status status = input::for_each_field(obj, where, [&](std::string_view key, od::value& field) -> Status {
    if (wire && key == "v") {
      Result<int64_t> v = input::read_int(field, where, key, 1, 1);
      if (!v) return field_error(where, key, "must be 1");
      has_v = true;
    } else if (wire && key == "t") {
      Result<std::string_view> t = input::read_string(field, where, key, 16);
      if (!t || (t.value() != "job" && t.value() != "jobs" && t.value() != "drain")) {
        return field_error(where, key, "must be \"job\", \"jobs\" or \"drain\"");
      }
      n.type = t.value();
    } else if (wire && key == "outbox") {
      return read_outbox_key(field, where, key, n.outbox);
    } else if (wire && key == "ids") {
      has_ids = true;
      return read_ids(field, where, ids);
    } else if (with_delay && key == "delaySeconds") {
      Result<int64_t> s = input::read_int(field, where, key, 0, kMaxDelaySeconds);
      if (!s) return s.take_error();
      n.delay_seconds = s.value();
    } else if (key == "id") {
      Result<std::string_view> s = input::read_string(field, where, key, 64);
      if (!s) return s.take_error();
      if (!is_uuid(s.value())) return field_error(where, key, "must be a UUID");
      n.id = s.value();
    } else if (key == "kind" || key == "lane") {
      Result<std::string_view> s = input::read_string(field, where, key, kMaxKindBytes);
      if (!s) return s.take_error();
      const bool kind = key == "kind";
      if (!(kind ? is_kind(s.value()) : is_lane(s.value()))) {
        return field_error(where, key, kind ? "must be 1-128 bytes of [A-Za-z0-9._:-]" : "must be 1-64 bytes of [A-Za-z0-9._:-]");
      }
      (kind ? n.kind : n.lane) = s.value();
    }
    return ok_status();
  });
  if (!status) return status;
  if (wire && !has_v) return input::missing(where, "v");
  if (wire && n.type.empty()) return input::missing(where, "t");
  if (n.type == "job" && n.id.empty()) return input::missing(where, "id");
  if (n.type != "drain" && n.kind.empty()) return input::missing(where, "kind");
  if (n.type == "jobs" && !has_ids) return input::missing(where, "ids");
  if (n.lane.empty()) return input::missing(where, "lane");
  if (n.type == "jobs") {
    n.ids = ids.data();
    n.id_count = ids.size();
  }
  return ok_status();
}

}  // namespace

Status read_outbox_field(od::value& field, const Where& where, std::string_view& outbox) {
  return read_outbox_key(field, where, "outbox", outbox);
}

Status read_jobs(od::value& field, const Where& where, uint32_t max_count, bool with_delay, std::vector<Nudge>& jobs) {
  Result<od::array> list = input::read_array(field, where, "jobs");
  if (!list) return list.take_error();
  return input::for_each_element(list.value(), where, "jobs", max_count, [&](od::value& item, uint32_t index) -> Status {
    const Where item_where = where.indexed("jobs", index);
    od::object obj;
    if (item.get_object().get(obj) != simdjson::SUCCESS) {
      return input::family_error(item_where, ErrorCode::invalid_input, "must be an object");
    }
    Nudge n{"job", {}, {}, {}};
    std::vector<std::string_view> no_ids;
    Status read = read_nudge_fields(obj, item_where, false, with_delay, n, no_ids);
    if (read) jobs.push_back(n);
    return read;
  });
}

namespace {

// Encodes job nudges ("jobs", one single-job message each) and drain requests ("drains":
// lanes whose backlog outlived a sweep's budget), in the order the two fields come. At most
// kMaxMessages of each. "pack" is the coalescing form for job nudges.
Status nudge_encode(od::object& root, const Where& where, JsonWriter& out) {
  // Every message names the sending outbox; the name may come after the lists in the document.
  // Absent, the reader hands back this very view (a parsed string never points here).
  static constexpr std::string_view kAbsent = "-";
  Result<std::string_view> named = read_string_anywhere(root, where, "outbox", kMaxOutboxKeyBytes, kAbsent);
  if (!named) return named.take_error();
  std::string_view outbox;
  if (named.value().data() != kAbsent.data()) {
    if (!is_outbox_key(named.value())) return field_error(where, "outbox", kOutboxKeyRule);
    outbox = named.value();
  }
  out.begin_object();
  out.key("messages");
  out.begin_array();
  bool has_jobs = false, has_drains = false;
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "drains") {
      has_drains = true;
      Result<od::array> lanes = input::read_array(field, where, key);
      if (!lanes) return lanes.take_error();
      return input::for_each_element(lanes.value(), where, key, kMaxMessages, [&](od::value& item, uint32_t index) -> Status {
        const Where item_where = where.indexed("drains", index);
        Result<std::string_view> lane = input::read_string(item, item_where, "lane", kMaxLaneBytes);
        if (!lane) return lane.take_error();
        if (!is_lane(lane.value())) return field_error(item_where, "lane", "must be 1-64 bytes of [A-Za-z0-9._:-]");
        write_message(out, Nudge{"drain", {}, {}, lane.value(), outbox});
        return ok_status();
      });
    }
    if (key != "jobs") return ok_status();
    has_jobs = true;
    std::vector<Nudge> jobs;
    Status read = read_jobs(field, where, kMaxMessages, false, jobs);
    for (Nudge& n : jobs) {
      n.outbox = outbox;
      write_message(out, n);
    }
    return read;
  });
  if (!status) return status;
  if (!has_jobs && !has_drains) return input::missing(where, "jobs");
  out.end_array();
  out.end_object();
  return ok_status();
}

// Who reads the messages: a lane (empty: every lane, one queue for all) and, for a consumer
// of several outboxes, the outboxes it serves and the one that takes messages naming none.
struct Consumer {
  std::string_view lane;
  bool fleet = false;
  std::string_view outboxes[kMaxOutboxes];
  size_t outbox_count = 0;
  std::string_view fallback;  // "defaultOutbox"; empty: none
};

bool serves(const Consumer& c, std::string_view outbox) {
  for (size_t i = 0; i < c.outbox_count; ++i) {
    if (c.outboxes[i] == outbox) return true;
  }
  return false;
}

void refuse(JsonWriter& out, std::string_view code, const std::string& message) {
  out.field_bool("ok", false);
  out.field("code", code);
  out.field("message", message);
}

void decode_one(od::value& body, const Where& where, const Consumer& c, JsonWriter& out) {
  out.begin_object();
  od::object obj;
  Nudge n;
  std::vector<std::string_view> ids;
  Status status = body.get_object().get(obj) == simdjson::SUCCESS
                      ? read_nudge_fields(obj, where, true, false, n, ids)
                      : Status(input::family_error(where, ErrorCode::invalid_message, "must be an object"));
  if (!status) {
    refuse(out, error_code_name(status.error().code()), status.error().message());
  } else if (!c.lane.empty() && n.lane != c.lane) {
    refuse(out, "wrong_lane", "message for lane " + input::quoted(n.lane) + " arrived on lane " + input::quoted(c.lane));
  } else if (c.fleet && (n.outbox.empty() ? c.fallback.empty() : !serves(c, n.outbox))) {
    // Well formed, but for no outbox here: it goes back to the queue (then to its dead-letter
    // queue) rather than be dropped, since the job waits in a database this consumer cannot name.
    refuse(out, "unknown_outbox",
           n.outbox.empty() ? std::string("message names no outbox, and this consumer has no default outbox")
                            : "message for outbox " + input::quoted(n.outbox) + ", which this consumer does not serve");
    out.field_bool("retry", true);
    out.field("delaySeconds", kUnknownOutboxRetrySeconds);
  } else {
    // An older deploy's message names no outbox: it is the default outbox's.
    if (c.fleet && n.outbox.empty()) n.outbox = c.fallback;
    out.field_bool("ok", true);
    write_nudge(out, n);
  }
  out.end_object();
}

// Reads the consumer: lane, outboxes and defaultOutbox, wherever they sit (the messages are
// decoded against them, and may come first in the document), then rewinds the object.
Status read_consumer(od::object& root, const Where& where, Consumer& c) {
  bool has_default = false;
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "lane") {
      Result<std::string_view> lane = input::read_string(field, where, key, kMaxLaneBytes);
      if (!lane) return lane.take_error();
      if (!is_lane(lane.value())) return field_error(where, key, "must be 1-64 bytes of [A-Za-z0-9._:-]");
      c.lane = lane.value();
    } else if (key == "outboxes") {
      Result<od::array> list = input::read_array(field, where, key);
      if (!list) return list.take_error();
      c.fleet = true;
      c.outbox_count = 0;  // a repeated field: the last one counts (and the list stays in bounds)
      return input::for_each_element(list.value(), where, key, kMaxOutboxes, [&](od::value& item, uint32_t index) -> Status {
        return read_outbox_key(item, where, "outboxes[" + decimal_string(index) + "]", c.outboxes[c.outbox_count++]);
      });
    } else if (key == "defaultOutbox") {
      has_default = true;
      if (input::take_null(field)) return ok_status();
      return read_outbox_key(field, where, key, c.fallback);
    }
    return ok_status();
  });
  if (!status) return status;
  if (c.fleet && c.outbox_count == 0) return field_error(where, "outboxes", "must have at least 1 item");
  if (has_default && !c.fleet) return field_error(where, "defaultOutbox", "needs outboxes");
  if (!c.fallback.empty() && !serves(c, c.fallback)) return field_error(where, "defaultOutbox", "must be one of outboxes");
  bool empty = false;
  if (root.reset().get(empty) != simdjson::SUCCESS) return input::family_error(where, ErrorCode::invalid_json, "malformed object");
  return ok_status();
}

Status nudge_decode(od::object& root, const Where& where, JsonWriter& out) {
  // Without a lane, the consumer serves every lane: each message names its own. Without
  // outboxes, it serves one outbox, and takes a message whatever outbox it names.
  Consumer consumer;
  Status read = read_consumer(root, where, consumer);
  if (!read) return read;

  out.begin_object();
  out.key("messages");
  out.begin_array();
  bool has_messages = false;
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key != "messages") return ok_status();
    has_messages = true;
    Result<od::array> messages = input::read_array(field, where, key);
    if (!messages) return messages.take_error();
    return input::for_each_element(messages.value(), where, key, kMaxMessages, [&](od::value& item, uint32_t index) {
      Where item_where = where.indexed("messages", index);
      item_where.code = ErrorCode::invalid_message;
      decode_one(item, item_where, consumer, out);
      return ok_status();
    });
  });
  if (!status) return status;
  if (!has_messages) return input::missing(where, "messages");
  out.end_array();
  out.end_object();
  return ok_status();
}

// The delay of each message sent back to the queue after an infrastructure failure, from the
// number of times the queue has delivered it (`message.attempts`, 1 on the first delivery).
Status nudge_redeliver(od::object& root, const Where& where, JsonWriter& out) {
  bool has_attempts = false;
  out.begin_object();
  out.key("delaySeconds");
  out.begin_array();
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key != "attempts") return ok_status();
    if (has_attempts) return input::field_error(where, key, "is given twice");
    has_attempts = true;
    Result<od::array> list = input::read_array(field, where, key);
    if (!list) return list.take_error();
    return input::for_each_element(list.value(), where, key, kMaxMessages, [&](od::value& item, uint32_t index) -> Status {
      (void)index;
      Result<int64_t> n = input::read_int(item, where, "attempts", 1, kMaxDeliveries);
      if (!n) return n.take_error();
      int64_t delay = kRedeliverFirstSeconds;
      for (int64_t i = 1; i < n.value() && delay < kRedeliverMaxSeconds; ++i) delay *= 2;
      out.integer(std::min(delay, kRedeliverMaxSeconds));
      return ok_status();
    });
  });
  if (!status) return status;
  if (!has_attempts) return input::missing(where, "attempts");
  out.end_array();
  out.end_object();
  return ok_status();
}

}  // namespace

Status run_nudge(od::document& doc, JsonWriter& out) {
  static constexpr Operation kOps[] = {{"encode", nudge_encode}, {"decode", nudge_decode}, {"pack", nudge_pack}, {"redeliver", nudge_redeliver}};
  return dispatch_op(doc, out, "nudge", kOps);
}

}  // namespace postbox
