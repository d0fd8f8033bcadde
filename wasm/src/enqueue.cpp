// pb_enqueue: checks jobs before they are written inside the caller's transaction. The single
// form sees the payload's JSON itself; its size is the length of that text as sent (the whole
// document was already checked to be well-formed). The batch form ("op":"batch") sees each
// item's delay and payload size as the shim measured it, so thousands of items fit one call.
// A nudge goes to the queue only when the queue can hold the delay.
#include "postbox/families.h"
#include "postbox/policy.h"
#include "postbox/priority.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

namespace {

// The largest payload cap a caller may set; kMaxInputBytes leaves room for it.
constexpr int64_t kMaxPayloadCapBytes = 1024 * 1024;
// One batch is one INSERT statement. 5000 items keep it near 100 ms on a local server; 16 MiB
// of payloads keeps the statement's text and its copies well inside a Worker's 128 MB (and far
// below PostgreSQL's 256 MB jsonb and 1 GB message limits).
constexpr uint32_t kMaxBatchItems = 5000;
constexpr int64_t kMaxBatchPayloadBytes = 16 * 1024 * 1024;  // named in the error below

// What both forms share: the clock, the caps and whether there is a queue.
struct Settings {
  int64_t now = 0;
  int64_t max_payload = 262144;
  int64_t max_queue_delay = 86400000;
  bool has_now = false;
  bool has_queue = false;
};

// One job: its delay, its payload's size (-1 until given), its own retry budget (0: the
// kind's) and its priority (priority.h).
struct Job {
  int64_t delay_ms = 0;
  int64_t payload_bytes = -1;
  int64_t max_attempts = 0;
  int64_t priority = 0;
};

std::string_view trim_trailing_space(std::string_view text) {
  while (!text.empty()) {
    const char c = text.back();
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
    text.remove_suffix(1);
  }
  return text;
}

// Reads a job's fields (delayMs, and payload or payloadBytes) and, given `s`, the settings.
// The single form's root, a batch's root and a batch's items all go through here.
Status read_fields(od::object& obj, const Where& where, Settings* s, Job& job) {
  return input::for_each_field(obj, where, [&](std::string_view key, od::value& field) -> Status {
    if (s != nullptr && key == "hasQueue") {
      Result<bool> b = input::read_bool(field, where, key);
      if (!b) return b.take_error();
      s->has_queue = b.value();
      return ok_status();
    }
    if (key == "payload") {
      std::string_view raw;
      if (field.raw_json().get(raw) != simdjson::SUCCESS) {
        return input::family_error(where, ErrorCode::invalid_json, "payload is not well-formed JSON");
      }
      job.payload_bytes = static_cast<int64_t>(trim_trailing_space(raw).size());
      return ok_status();
    }
    int64_t* target = key == "delayMs" ? &job.delay_ms : key == "payloadBytes" ? &job.payload_bytes : key == "maxAttempts" ? &job.max_attempts
                    : key == "priority" ? &job.priority : nullptr;
    if (s != nullptr && target == nullptr) {
      target = key == "now" ? &s->now : key == "maxPayloadBytes" ? &s->max_payload : key == "maxQueueDelayMs" ? &s->max_queue_delay : nullptr;
    }
    if (target == nullptr) return ok_status();
    const int64_t hi = key == "now" || key == "payloadBytes" ? input::kMaxSafeInteger
                       : key == "maxPayloadBytes"            ? kMaxPayloadCapBytes
                       : key == "maxAttempts"                ? 1000  // a policy's maxAttempts range
                       : key == "priority"                   ? kMaxPriority
                                                             : kMaxDelayMs;
    Result<int64_t> n = input::read_int(field, where, key, key == "maxAttempts" ? 1 : 0, hi);
    if (!n) return n.take_error();
    *target = n.value();
    if (key == "now") s->has_now = true;
    return ok_status();
  });
}

// One job's decision: refused when its payload is over the cap, else when it is due and
// whether (and after how long) to nudge it.
void write_decision(JsonWriter& out, const Settings& s, const Job& job) {
  out.begin_object();
  if (job.payload_bytes > s.max_payload) {
    out.field_bool("ok", false);
    out.key("issues");
    out.begin_array();
    out.begin_object();
    out.field("code", "payload_too_large");
    out.field("message", "payload is " + decimal_string(job.payload_bytes) + " bytes; the limit is " + decimal_string(s.max_payload));
    out.end_object();
    out.end_array();
    out.end_object();
    return;
  }
  const bool nudge = s.has_queue && job.delay_ms <= s.max_queue_delay;
  out.field_bool("ok", true);
  out.field("payloadBytes", job.payload_bytes);
  out.field("dueAt", s.now + job.delay_ms);
  // Only for a job with a priority, so decisions without one keep their documented bytes.
  if (job.priority > 0) out.field("boostMs", priority_boost_ms(job.priority));
  out.field_bool("nudge", nudge);
  out.key("delaySeconds");
  if (nudge) out.integer((job.delay_ms + 999) / 1000); else out.null();
  out.end_object();
}

// Reads the settings (and the top level's job fields); `now` is required.
Status read_settings(od::object& root, const Where& where, Settings& s, Job& job) {
  Status status = read_fields(root, where, &s, job);
  if (!status) return status;
  return s.has_now ? ok_status() : Status(input::missing(where, "now"));
}

Status enqueue_one(od::object& root, const Where& where, JsonWriter& out) {
  Settings s;
  Job job;
  Status status = read_settings(root, where, s, job);
  if (!status) return status;
  if (job.payload_bytes < 0) return input::missing(where, "payload");
  write_decision(out, s, job);
  return ok_status();
}

// Calls `fn(item, item_where)` for each object of the root's "items" array (at most
// kMaxBatchItems, else too_large); an element that is not an object is invalid_input, named.
template <typename Fn>
Status for_each_item(od::object& root, const Where& where, Fn&& fn) {
  bool has_items = false;
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key != "items") return ok_status();
    has_items = true;
    Result<od::array> list = input::read_array(field, where, key);
    if (!list) return list.take_error();
    Where capped = where;
    capped.code = ErrorCode::too_large;
    return input::for_each_element(list.value(), capped, key, kMaxBatchItems, [&](od::value& value, uint32_t index) -> Status {
      const Where item_where = where.indexed("items", index);
      od::object obj;
      if (value.get_object().get(obj) != simdjson::SUCCESS) return input::family_error(item_where, ErrorCode::invalid_input, "must be an object");
      return fn(obj, item_where);
    });
  });
  if (!status) return status;
  return has_items ? ok_status() : Status(input::missing(where, "items"));
}

// Every item of an enqueueMany list in one call: {"results":[<one decision>,…]} in input order.
// Over kMaxBatchItems items, or over kMaxBatchPayloadBytes of payloads to write, the whole
// batch is refused (too_large), so nothing of it is written. The settings are read first (they
// may follow the items); decisions are written as the items are read.
Status enqueue_batch(od::object& root, const Where& where, JsonWriter& out) {
  Settings s;
  Job ignored;
  Status status = read_settings(root, where, s, ignored);
  if (!status) return status;
  bool empty = false;
  if (root.reset().get(empty) != simdjson::SUCCESS) return input::family_error(where, ErrorCode::invalid_json, "malformed object");
  int64_t written = 0;
  out.begin_object();
  out.key("results");
  out.begin_array();
  status = for_each_item(root, where, [&](od::object& obj, const Where& item_where) -> Status {
    Job job;
    Status item = read_fields(obj, item_where, nullptr, job);
    if (!item) return item;
    if (job.payload_bytes < 0) return input::missing(item_where, "payloadBytes");
    if (job.payload_bytes <= s.max_payload) written += job.payload_bytes;
    write_decision(out, s, job);
    return ok_status();
  });
  if (!status) return status;
  if (written > kMaxBatchPayloadBytes) {
    return Error{ErrorCode::too_large, "enqueue: field 'items' must hold at most 16777216 bytes of payloads"};
  }
  out.end_array();
  out.end_object();
  return ok_status();
}

// What an item becomes when its dedupe key was already held (by a committed job, or by an
// earlier item of the same list): the same request again is `exists`; a holder that differs in
// any compared field is a conflict, so a caller reusing a key for a different request hears
// about it instead of silently getting the old job. The reason is the first differing field in
// kDedupeFields' order (kind first: another kind's payload means nothing to this one).
// {"op":"dedupe","items":[{"sameKind":true,"samePayload":false,…},…]} → {"results":[…]}.
struct DedupeField {
  std::string_view flag;
  std::string_view reason;
};
constexpr DedupeField kDedupeFields[] = {
    {"sameKind", "kind"},
    {"samePayload", "payload"},
    {"sameMaxAttempts", "maxAttempts"},
    {"sameMetadata", "metadata"},
    {"sameCorrelationId", "correlationId"},
};
constexpr std::size_t kDedupeFieldCount = sizeof(kDedupeFields) / sizeof(kDedupeFields[0]);

Status enqueue_dedupe(od::object& root, const Where& where, JsonWriter& out) {
  out.begin_object();
  out.key("results");
  out.begin_array();
  Status status = for_each_item(root, where, [&](od::object& obj, const Where& item_where) -> Status {
    bool seen[kDedupeFieldCount] = {};
    bool same[kDedupeFieldCount] = {};
    Status item = input::for_each_field(obj, item_where, [&](std::string_view name, od::value& flag) -> Status {
      for (std::size_t i = 0; i < kDedupeFieldCount; ++i) {
        if (name != kDedupeFields[i].flag) continue;
        Result<bool> b = input::read_bool(flag, item_where, name);
        if (!b) return b.take_error();
        same[i] = b.value();
        seen[i] = true;
      }
      return ok_status();
    });
    if (!item) return item;
    // Every flag is required: a flag the caller forgot must not pass as "the same".
    for (std::size_t i = 0; i < kDedupeFieldCount; ++i) {
      if (!seen[i]) return input::missing(item_where, kDedupeFields[i].flag);
    }
    out.begin_object();
    std::size_t differing = 0;
    while (differing < kDedupeFieldCount && same[differing]) ++differing;
    if (differing == kDedupeFieldCount) {
      out.field("status", "exists");
    } else {
      out.field("status", "dedupe_conflict");
      out.field("reason", kDedupeFields[differing].reason);
    }
    out.end_object();
    return ok_status();
  });
  if (!status) return status;
  out.end_array();
  out.end_object();
  return ok_status();
}

}  // namespace

Status run_enqueue(od::document& doc, JsonWriter& out) {
  // Without an "op" the document is the single form, as ABI 1 first shipped it.
  static constexpr Operation kOps[] = {{"one", enqueue_one}, {"batch", enqueue_batch}, {"dedupe", enqueue_dedupe}};
  return dispatch_op(doc, out, "enqueue", kOps, "one");
}

}  // namespace postbox
