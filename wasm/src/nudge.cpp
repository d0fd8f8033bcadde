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
        write_message(out, Nudge{"drain", {}, {}, lane.value()});
        return ok_status();
      });
    }
    if (key != "jobs") return ok_status();
    has_jobs = true;
    std::vector<Nudge> jobs;
    Status read = read_jobs(field, where, kMaxMessages, false, jobs);
    for (const Nudge& n : jobs) write_message(out, n);
    return read;
  });
  if (!status) return status;
  if (!has_jobs && !has_drains) return input::missing(where, "jobs");
  out.end_array();
  out.end_object();
  return ok_status();
}

// `lane` empty: the consumer serves every lane (one queue for all), so any lane is taken.
void decode_one(od::value& body, const Where& where, std::string_view lane, JsonWriter& out) {
  out.begin_object();
  od::object obj;
  Nudge n;
  std::vector<std::string_view> ids;
  Status status = body.get_object().get(obj) == simdjson::SUCCESS
                      ? read_nudge_fields(obj, where, true, false, n, ids)
                      : Status(input::family_error(where, ErrorCode::invalid_message, "must be an object"));
  if (!status) {
    out.field_bool("ok", false);
    out.field("code", error_code_name(status.error().code));
    out.field("message", status.error().message);
  } else if (!lane.empty() && n.lane != lane) {
    out.field_bool("ok", false);
    out.field("code", "wrong_lane");
    out.field("message", "message for lane " + input::quoted(n.lane) + " arrived on lane " + input::quoted(lane));
  } else {
    out.field_bool("ok", true);
    write_nudge(out, n);
  }
  out.end_object();
}

Status nudge_decode(od::object& root, const Where& where, JsonWriter& out) {
  // The lane must be known before the messages; it may come after them in the document.
  // Without one, the consumer serves every lane: each message names its own.
  od::value probe;
  const bool has_lane = root.find_field_unordered("lane").get(probe) != simdjson::NO_SUCH_FIELD;
  bool empty = false;
  if (root.reset().get(empty) != simdjson::SUCCESS) return input::family_error(where, ErrorCode::invalid_json, "malformed object");
  Result<std::string_view> lane = has_lane ? read_string_anywhere(root, where, "lane", kMaxLaneBytes) : Result<std::string_view>(std::string_view());
  if (!lane) return lane.take_error();
  if (has_lane && !is_lane(lane.value())) return field_error(where, "lane", "must be 1-64 bytes of [A-Za-z0-9._:-]");

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
      decode_one(item, item_where, lane.value(), out);
      return ok_status();
    });
  });
  if (!status) return status;
  if (!has_messages) return input::missing(where, "messages");
  out.end_array();
  out.end_object();
  return ok_status();
}

}  // namespace

Status run_nudge(od::document& doc, JsonWriter& out) {
  static constexpr Operation kOps[] = {{"encode", nudge_encode}, {"decode", nudge_decode}, {"pack", nudge_pack}};
  return dispatch_op(doc, out, "nudge", kOps);
}

}  // namespace postbox
