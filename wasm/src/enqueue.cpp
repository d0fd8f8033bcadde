// pb_enqueue: checks a job before it is written inside the caller's transaction. The payload's
// size is the length of its JSON text as sent (the whole document was already checked to be
// well-formed), and a nudge goes to the queue only when the queue can hold the delay.
#include "postbox/families.h"
#include "postbox/policy.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

namespace {

// The largest payload cap a caller may set; kMaxInputBytes leaves room for it.
constexpr int64_t kMaxPayloadCapBytes = 1024 * 1024;

std::string_view trim_trailing_space(std::string_view text) {
  while (!text.empty()) {
    const char c = text.back();
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
    text.remove_suffix(1);
  }
  return text;
}

}  // namespace

Status run_enqueue(od::document& doc, JsonWriter& out) {
  const Where where{"enqueue", "", ErrorCode::invalid_input};
  Result<od::object> root = input::root_object(doc, where);
  if (!root) return root.take_error();
  int64_t now = 0, delay_ms = 0, max_payload = 262144, max_queue_delay = 86400000;
  bool has_now = false, has_queue = false, has_payload = false;
  int64_t payload_bytes = 0;
  Status status = input::for_each_field(root.value(), where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "now" || key == "delayMs" || key == "maxQueueDelayMs" || key == "maxPayloadBytes") {
      const int64_t hi = key == "now" ? input::kMaxSafeInteger : key == "maxPayloadBytes" ? kMaxPayloadCapBytes : kMaxDelayMs;
      Result<int64_t> n = input::read_int(field, where, key, 0, hi);
      if (!n) return n.take_error();
      int64_t* target = key == "now" ? &now : key == "delayMs" ? &delay_ms : key == "maxQueueDelayMs" ? &max_queue_delay : &max_payload;
      *target = n.value();
      has_now = has_now || key == "now";
    } else if (key == "hasQueue") {
      Result<bool> b = input::read_bool(field, where, key);
      if (!b) return b.take_error();
      has_queue = b.value();
    } else if (key == "payload") {
      std::string_view raw;
      if (field.raw_json().get(raw) != simdjson::SUCCESS) {
        return input::family_error(where, ErrorCode::invalid_json, "payload is not well-formed JSON");
      }
      payload_bytes = static_cast<int64_t>(trim_trailing_space(raw).size());
      has_payload = true;
    }
    return ok_status();
  });
  if (!status) return status;
  if (!has_now) return input::missing(where, "now");
  if (!has_payload) return input::missing(where, "payload");

  out.begin_object();
  if (payload_bytes > max_payload) {
    out.field_bool("ok", false);
    out.key("issues");
    out.begin_array();
    out.begin_object();
    out.field("code", "payload_too_large");
    out.field("message", "payload is " + decimal_string(payload_bytes) + " bytes; the limit is " + decimal_string(max_payload));
    out.end_object();
    out.end_array();
    out.end_object();
    return ok_status();
  }
  const bool nudge = has_queue && delay_ms <= max_queue_delay;
  out.field_bool("ok", true);
  out.field("payloadBytes", payload_bytes);
  out.field("dueAt", now + delay_ms);
  out.field_bool("nudge", nudge);
  out.key("delaySeconds");
  if (nudge) out.integer((delay_ms + 999) / 1000); else out.null();
  out.end_object();
  return ok_status();
}

}  // namespace postbox
