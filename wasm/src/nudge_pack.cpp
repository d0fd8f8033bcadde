// pb_nudge "pack": coalesces job nudges into Queue messages and sendBatch calls. Jobs of one
// lane, kind and delay share messages of up to kMaxIdsPerMessage ids (a lone job keeps the
// single-job form every consumer understands); a lane's messages go out in batches that stay
// within Queues' limits.
#include <vector>

#include "postbox/families.h"
#include "postbox/names.h"
#include "postbox/nudge.h"

namespace postbox {

namespace od = simdjson::ondemand;
using input::Where;

namespace {

// One call takes an enqueueMany list's worth of jobs.
constexpr uint32_t kMaxPackJobs = 5000;
// Queues: a message at most 128 KB, a sendBatch at most 100 messages and 256 KB, each message
// counting ~100 bytes of metadata beside its body. The longest body (100 ids, the longest kind,
// lane and outbox name) is a few KB of JSON; Workers send it v8-serialised, which is no longer
// for these ASCII-only bodies. So a batch of kMessagesPerBatch messages fits whatever they hold.
constexpr size_t kMessageOverheadBytes = 128;
constexpr size_t kBatchBudgetBytes = 256000;
// Each literal's size less its terminating NUL; every id counted with a comma.
constexpr size_t kMaxBodyBytes = (sizeof R"({"v":1,"t":"jobs","kind":"","lane":"","outbox":"","ids":[]})" - 1) +
                                 kMaxIdsPerMessage * (sizeof R"("00000000-0000-0000-0000-000000000000",)" - 1) +
                                 kMaxKindBytes + kMaxLaneBytes + kMaxOutboxKeyBytes;
constexpr size_t kMessagesPerBatch = 58;
static_assert(kMessagesPerBatch * (kMaxBodyBytes + kMessageOverheadBytes) <= kBatchBudgetBytes);
static_assert(kMessagesPerBatch <= kMaxMessages && kMaxBodyBytes < 128000);

// A message: up to kMaxIdsPerMessage jobs of one group, from `first` on in input order.
struct Message {
  size_t first = 0;
  size_t count = 0;
};

// The jobs to nudge, and for each the index of the first job of its group (same lane, kind
// and delay).
struct Jobs {
  std::vector<Nudge> list;
  std::vector<size_t> group;
};

bool same_group(const Nudge& a, const Nudge& b) {
  return a.delay_seconds == b.delay_seconds && a.kind == b.kind && a.lane == b.lane;
}

// A job joins the group of the first earlier job it matches; consecutive jobs nearly always
// match (an enqueueMany list), so the previous job is tried first.
void assign_groups(Jobs& jobs) {
  const std::vector<Nudge>& list = jobs.list;
  jobs.group.resize(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    jobs.group[i] = i;
    if (i > 0 && same_group(list[i], list[i - 1])) {
      jobs.group[i] = jobs.group[i - 1];
      continue;
    }
    for (size_t g = 0; g < i; ++g) {
      if (jobs.group[g] == g && same_group(list[i], list[g])) {
        jobs.group[i] = g;
        break;
      }
    }
  }
}

// Writes a message's body: the single-job form for one job, else the multi-job form.
void write_body(JsonWriter& out, const Jobs& jobs, const Message& m) {
  const Nudge& head = jobs.list[m.first];
  if (m.count == 1) {
    write_message(out, head);
    return;
  }
  std::vector<std::string_view> ids;
  for (size_t i = m.first; ids.size() < m.count; ++i) {
    if (jobs.group[i] == jobs.group[m.first]) ids.push_back(jobs.list[i].id);
  }
  Nudge n{"jobs", {}, head.kind, head.lane, head.outbox};
  n.ids = ids.data();
  n.id_count = ids.size();
  write_message(out, n);
}

// Cuts every group into messages, a lane's groups together (lanes and groups in order of
// first use, jobs in input order).
std::vector<Message> cut_messages(const Jobs& jobs) {
  const std::vector<Nudge>& list = jobs.list;
  std::vector<Message> messages;
  for (size_t g = 0; g < list.size(); ++g) {
    if (jobs.group[g] != g) continue;
    // The lane's first group leads it; later groups of the lane were cut with it.
    bool led = true;
    for (size_t e = 0; e < g && led; ++e) led = jobs.group[e] != e || list[e].lane != list[g].lane;
    if (!led) continue;
    for (size_t h = g; h < list.size(); ++h) {
      if (jobs.group[h] != h || list[h].lane != list[g].lane) continue;
      Message m{h, 0};
      for (size_t i = h; i < list.size(); ++i) {
        if (jobs.group[i] != h) continue;
        if (m.count == kMaxIdsPerMessage) {
          messages.push_back(m);
          m = Message{i, 0};
        }
        ++m.count;
      }
      messages.push_back(m);
    }
  }
  return messages;
}

void write_batch(JsonWriter& out, const Jobs& jobs, const Message* first, const Message* last) {
  out.begin_object();
  out.field("lane", jobs.list[first->first].lane);
  out.key("messages");
  out.begin_array();
  for (const Message* m = first; m != last; ++m) {
    out.begin_object();
    out.key("body");
    write_body(out, jobs, *m);
    out.field("delaySeconds", jobs.list[m->first].delay_seconds);
    out.end_object();
  }
  out.end_array();
  out.end_object();
}

}  // namespace

Status nudge_pack(od::object& root, const Where& where, JsonWriter& out) {
  Jobs jobs;
  bool has_jobs = false;
  std::string_view outbox;
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key == "outbox") return read_outbox_field(field, where, outbox);
    if (key != "jobs") return ok_status();
    has_jobs = true;
    return read_jobs(field, where, kMaxPackJobs, true, jobs.list);
  });
  if (!status) return status;
  if (!has_jobs) return input::missing(where, "jobs");
  // One outbox packs its own jobs: every message names it (none for a lone outbox).
  for (Nudge& n : jobs.list) n.outbox = outbox;
  assign_groups(jobs);

  // A batch ends at a new lane or at kMessagesPerBatch messages.
  const std::vector<Message> messages = cut_messages(jobs);
  out.begin_object();
  out.key("batches");
  out.begin_array();
  size_t start = 0;
  for (size_t i = 1; i <= messages.size(); ++i) {
    if (i == messages.size() || i - start == kMessagesPerBatch ||
        jobs.list[messages[i].first].lane != jobs.list[messages[start].first].lane) {
      write_batch(out, jobs, &messages[start], messages.data() + i);
      start = i;
    }
  }
  out.end_array();
  out.end_object();
  return ok_status();
}

}  // namespace postbox
