// pb_enqueue: checks jobs before they are written inside the caller's transaction. The single
// form sees the payload's JSON itself; its size is the length of that text as sent (the whole
// document was already checked to be well-formed). The batch form ("op":"batch") sees each
// item's delay and payload size as the shim measured it, so thousands of items fit one call.
// A nudge goes to the queue only when the queue can hold the delay.
#include <vector>

#include "postbox/dependencies.h"
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
// kind's), its priority (priority.h) and, in a batch, its parents (dependencies.h), whether it
// is a batch's completion job (which waits on every member and runs however they end), and
// whether the shim refused it already (so items that name it as a parent are refused too).
struct Job {
  int64_t delay_ms = 0;
  int64_t payload_bytes = -1;
  int64_t max_attempts = 0;
  int64_t priority = 0;
  std::vector<ParentRef> parents;
  ParentFailure on_parent_failure = ParentFailure::cancel;
  bool completes_batch = false;
  bool refused = false;

  std::size_t max_parents() const { return completes_batch ? kMaxBatchMembers : kMaxParents; }
  ParentFailure parent_failure() const { return completes_batch ? ParentFailure::release : on_parent_failure; }
};

// A batch item's parent references: an integer names an earlier item; a stored job is named by
// its status as the shim found it in the item's tenant scope, or `false` (not found there).
constexpr uint32_t kMaxParentRefs = static_cast<uint32_t>(kMaxBatchMembers);  // beyond an item's cap, refused per item; beyond this, the document

Status read_parents(od::value& field, const Where& where, std::string_view key, Job& job) {
  Result<od::array> list = input::read_array(field, where, key);
  if (!list) return list.take_error();
  Where capped = where;
  capped.code = ErrorCode::too_large;
  constexpr std::string_view kWhat = "must hold list indexes, job statuses and false (not found) only";
  return input::for_each_element(list.value(), capped, key, kMaxParentRefs, [&](od::value& value, uint32_t) -> Status {
    bool found = true;
    if (value.get_bool().get(found) == simdjson::SUCCESS) {
      if (found) return field_error(where, key, kWhat);
      job.parents.push_back(ParentRef{ParentRef::Kind::unknown, 0});
      return ok_status();
    }
    std::string_view state;
    if (value.get_string().get(state) == simdjson::SUCCESS) {
      const std::optional<ParentRef::Kind> kind = parent_state_of(state);
      if (!kind) return field_error(where, key, kWhat);
      job.parents.push_back(ParentRef{*kind, 0});
      return ok_status();
    }
    Result<int64_t> index = input::read_int(value, where, key, 0, kMaxBatchItems);
    if (!index) return field_error(where, key, kWhat);
    job.parents.push_back(ParentRef{ParentRef::Kind::earlier, index.value()});
    return ok_status();
  });
}

// What an earlier item is to the items after it that name it as a parent.
enum class ItemFate { refused, open, cancelled };

// The batch-only fields of an item: its parents, what their failure does, whether it completes
// a batch, and the shim's refusal.
Status read_item_field(std::string_view key, od::value& field, const Where& where, Job& job, bool& known) {
  known = true;
  if (key == "parents") return read_parents(field, where, key, job);
  if (key == "refused" || key == "completesBatch") {
    Result<bool> b = input::read_bool(field, where, key);
    if (!b) return b.take_error();
    (key == "refused" ? job.refused : job.completes_batch) = b.value();
    return ok_status();
  }
  if (key == "onParentFailure") {
    Result<std::string_view> name = input::read_string(field, where, key, 16);
    if (!name) return name.take_error();
    std::optional<ParentFailure> f = parent_failure_named(name.value());
    if (!f) return field_error(where, key, "must be \"cancel\" or \"run\"");
    job.on_parent_failure = *f;
    return ok_status();
  }
  known = false;
  return ok_status();
}

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
    if (s == nullptr) {
      bool batch_field = false;
      Status item = read_item_field(key, field, where, job, batch_field);
      if (!item || batch_field) return item;
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

void write_refusal(JsonWriter& out, std::string_view code, const std::string& message) {
  out.field_bool("ok", false);
  out.key("issues");
  out.begin_array();
  out.begin_object();
  out.field("code", code);
  out.field("message", message);
  out.end_object();
  out.end_array();
  out.end_object();
}

std::string refusal_message(DependencyRefusal r, const Job& job) {
  switch (r) {
    case DependencyRefusal::too_many_parents:
      return job.completes_batch ? "a batch may have at most " + decimal_string(static_cast<int64_t>(kMaxBatchMembers)) + " members"
                                 : "a job may depend on at most " + decimal_string(static_cast<int64_t>(kMaxParents)) + " parents";
    case DependencyRefusal::dependency_cycle: return "dependsOn may name only earlier items of the list: a later one (or the item itself) would make a cycle";
    case DependencyRefusal::unknown_parent: return "dependsOn names a job that does not exist in this tenant's scope";
    case DependencyRefusal::parent_refused: return "dependsOn names an earlier item that was refused";
    case DependencyRefusal::none: break;
  }
  return "";
}

// A job's parents counted at its birth (an earlier item is unfinished, or cancelled when it was
// cancelled at birth; `fates` says what each earlier item became).
// What parent `p` is at the child's birth: a stored job as found; an earlier item unfinished, or
// cancelled when it was cancelled at birth.
ParentRef::Kind kind_at_birth(const ParentRef& p, const std::vector<ItemFate>& fates) {
  if (p.kind != ParentRef::Kind::earlier) return p.kind;
  return fates[static_cast<std::size_t>(p.index)] == ItemFate::cancelled ? ParentRef::Kind::cancelled : ParentRef::Kind::open;
}

ParentTally count_parents(const Job& job, const std::vector<ItemFate>& fates) {
  ParentTally c;
  for (const ParentRef& p : job.parents) {
    const ParentRef::Kind kind = kind_at_birth(p, fates);
    c.total += 1;
    c.open += kind == ParentRef::Kind::open ? 1 : 0;
    c.dead += kind == ParentRef::Kind::dead ? 1 : 0;
    c.cancelled += kind == ParentRef::Kind::cancelled ? 1 : 0;
  }
  return c;
}

// One job's decision: refused when its payload is over the cap or its parents refuse it
// (`deps`), else when it is due and whether (and after how long) to nudge it. A job with
// parents (`birth`) is written as birth_status says, and the answer names it, how many parents
// it waits for, what a parent's failure does to it and how its parents stand (all, dead,
// cancelled); only one written due is nudged. A batch's completion has parents even when empty.
void write_decision(JsonWriter& out, const Settings& s, const Job& job, DependencyRefusal deps = DependencyRefusal::none,
                    const ParentTally* parents = nullptr, const std::vector<ItemFate>* fates = nullptr) {
  out.begin_object();
  if (job.payload_bytes > s.max_payload) {
    write_refusal(out, "payload_too_large", "payload is " + decimal_string(job.payload_bytes) + " bytes; the limit is " + decimal_string(s.max_payload));
    return;
  }
  if (deps != DependencyRefusal::none) {
    write_refusal(out, refusal_code(deps), refusal_message(deps, job));
    return;
  }
  const bool has_parents = parents != nullptr && (!job.parents.empty() || job.completes_batch);
  const BirthStatus birth = has_parents ? birth_status(parents->open, parents->failed(), job.parent_failure()) : BirthStatus::pending;
  const bool nudge = birth == BirthStatus::pending && s.has_queue && job.delay_ms <= s.max_queue_delay;
  out.field_bool("ok", true);
  out.field("payloadBytes", job.payload_bytes);
  out.field("dueAt", s.now + job.delay_ms);
  // Only for a job with a priority, so decisions without one keep their documented bytes.
  if (job.priority > 0) out.field("boostMs", priority_boost_ms(job.priority));
  out.field_bool("nudge", nudge);
  out.key("delaySeconds");
  if (nudge) out.integer((job.delay_ms + 999) / 1000); else out.null();
  if (has_parents) {
    out.key("parents");
    out.begin_object();
    out.field("status", birth_status_name(birth));
    out.field("waitingOn", birth == BirthStatus::waiting ? parents->open : 0);
    out.field("onParentFailure", stored_effect(job.parent_failure()));
    out.field("total", parents->total);
    out.field("dead", parents->dead);
    out.field("cancelled", parents->cancelled);
    // Which parents (by their place in the list) had ended, so the child counted them at birth:
    // a store that marks each end it counts marks these at once (absent: none had).
    if (fates != nullptr && parents->open < parents->total) {
      out.key("counted");
      out.begin_array();
      for (std::size_t i = 0; i < job.parents.size(); ++i) {
        if (kind_at_birth(job.parents[i], *fates) != ParentRef::Kind::open) out.integer(static_cast<int64_t>(i));
      }
      out.end_array();
    }
    if (birth == BirthStatus::cancelled) out.field("code", kParentFailedCode);
    // A batch's completion is stored as one, so cancelBatch can tell a batch from any child.
    if (job.completes_batch) out.field_bool("batch", true);
    out.end_object();
  }
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
  // What each item became, for the items after it that name it as a parent.
  std::vector<ItemFate> fates;
  out.begin_object();
  out.key("results");
  out.begin_array();
  status = for_each_item(root, where, [&](od::object& obj, const Where& item_where) -> Status {
    Job job;
    Status item = read_fields(obj, item_where, nullptr, job);
    if (!item) return item;
    if (job.payload_bytes < 0) return input::missing(item_where, "payloadBytes");
    if (job.payload_bytes <= s.max_payload) written += job.payload_bytes;
    const int64_t index = static_cast<int64_t>(fates.size());
    const DependencyRefusal deps =
        check_parents(index, job.parents.data(), job.parents.size(), job.max_parents(), [&](int64_t i) { return fates[static_cast<std::size_t>(i)] == ItemFate::refused; });
    const ParentTally parents = deps == DependencyRefusal::none ? count_parents(job, fates) : ParentTally{};
    if (job.refused || job.payload_bytes > s.max_payload || deps != DependencyRefusal::none) {
      fates.push_back(ItemFate::refused);
    } else {
      const bool born_cancelled = !job.parents.empty() && birth_status(parents.open, parents.failed(), job.parent_failure()) == BirthStatus::cancelled;
      fates.push_back(born_cancelled ? ItemFate::cancelled : ItemFate::open);
    }
    write_decision(out, s, job, deps, &parents, &fates);
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
    // What the job waits on and in what order it runs are the request too: a repeat that names
    // other parents (any order of the same ones is the same), another effect of a parent's
    // failure or another priority is not the same request.
    {"samePriority", "priority"},
    {"sameParents", "dependsOn"},
    {"sameOnParentFailure", "onParentFailure"},
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
