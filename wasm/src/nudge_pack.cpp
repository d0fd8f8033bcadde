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
// counting ~100 bytes of metadata beside its body. The longest body (100 ids, the longest kind
// and lane) is a few KB of JSON; Workers send it v8-serialised, which is no longer for these
// ASCII-only bodies. So a batch of kMessagesPerBatch messages fits whatever they hold.
constexpr size_t kMessageOverheadBytes = 128;
constexpr size_t kBatchBudgetBytes = 256000;
constexpr size_t kMaxBodyBytes = sizeof R"({"v":1,"t":"jobs","kind":"","lane":"","ids":[]})" +
                                 kMaxIdsPerMessage * sizeof R"("00000000-0000-0000-0000-000000000000",)" +
                                 kMaxKindBytes + kMaxLaneBytes;
constexpr size_t kMessagesPerBatch = kBatchBudgetBytes / (kMaxBodyBytes + kMessageOverheadBytes);
static_assert(kMessagesPerBatch >= 50 && kMessagesPerBatch <= kMaxMessages && kMaxBodyBytes < 128000);

struct Job {
  std::string_view id;
  std::string_view kind;
  std::string_view lane;
  int64_t delay_seconds = 0;
  size_t group = 0;  // index of the group's first job
};

// A message: up to kMaxIdsPerMessage jobs of one group, from `first` on in input order.
struct Message {
  size_t first = 0;
  size_t count = 0;
};

bool same_group(const Job& a, const Job& b) {
  return a.delay_seconds == b.delay_seconds && a.kind == b.kind && a.lane == b.lane;
}

// Writes a message's body: the single-job form for one job, else the multi-job form.
void write_body(JsonWriter& out, const std::vector<Job>& jobs, const Message& m) {
  const Job& head = jobs[m.first];
  if (m.count == 1) {
    write_message(out, Nudge{"job", head.id, head.kind, head.lane});
    return;
  }
  std::vector<std::string_view> ids;
  for (size_t i = m.first; ids.size() < m.count; ++i) {
    if (jobs[i].group == head.group) ids.push_back(jobs[i].id);
  }
  Nudge n{"jobs", {}, head.kind, head.lane};
  n.ids = ids.data();
  n.id_count = ids.size();
  write_message(out, n);
}

// Cuts every group into messages, a lane's groups together (lanes and groups in order of
// first use, jobs in input order).
std::vector<Message> cut_messages(const std::vector<Job>& jobs) {
  std::vector<Message> messages;
  for (size_t g = 0; g < jobs.size(); ++g) {
    if (jobs[g].group != g) continue;
    // The lane's first group leads it; later groups of the lane were cut with it.
    bool led = true;
    for (size_t e = 0; e < g && led; ++e) led = jobs[e].group != e || jobs[e].lane != jobs[g].lane;
    if (!led) continue;
    for (size_t h = g; h < jobs.size(); ++h) {
      if (jobs[h].group != h || jobs[h].lane != jobs[g].lane) continue;
      Message m{h, 0};
      for (size_t i = h; i < jobs.size(); ++i) {
        if (jobs[i].group != h) continue;
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

void write_batch(JsonWriter& out, const std::vector<Job>& jobs, const Message* first, const Message* last) {
  out.begin_object();
  out.field("lane", jobs[first->first].lane);
  out.key("messages");
  out.begin_array();
  for (const Message* m = first; m != last; ++m) {
    out.begin_object();
    out.key("body");
    write_body(out, jobs, *m);
    out.field("delaySeconds", jobs[m->first].delay_seconds);
    out.end_object();
  }
  out.end_array();
  out.end_object();
}

}  // namespace

Status nudge_pack(od::object& root, const Where& where, JsonWriter& out) {
  std::vector<Job> jobs;
  bool has_jobs = false;
  Status status = input::for_each_field(root, where, [&](std::string_view key, od::value& field) -> Status {
    if (key != "jobs") return ok_status();
    has_jobs = true;
    Result<od::array> list = input::read_array(field, where, key);
    if (!list) return list.take_error();
    return input::for_each_element(list.value(), where, key, kMaxPackJobs, [&](od::value& item, uint32_t index) -> Status {
      Nudge n;
      Status read = read_job_nudge(item, where.indexed("jobs", index), true, n);
      if (!read) return read;
      jobs.push_back(Job{n.id, n.kind, n.lane, n.delay_seconds, jobs.size()});
      return ok_status();
    });
  });
  if (!status) return status;
  if (!has_jobs) return input::missing(where, "jobs");
  // A job joins the group of the first earlier job it matches; consecutive jobs nearly always
  // match (an enqueueMany list), so the previous job is tried first.
  for (size_t i = 1; i < jobs.size(); ++i) {
    if (same_group(jobs[i], jobs[i - 1])) {
      jobs[i].group = jobs[i - 1].group;
      continue;
    }
    for (size_t g = 0; g < i; ++g) {
      if (jobs[g].group == g && same_group(jobs[i], jobs[g])) {
        jobs[i].group = g;
        break;
      }
    }
  }

  // A batch ends at a new lane or at kMessagesPerBatch messages.
  const std::vector<Message> messages = cut_messages(jobs);
  out.begin_object();
  out.key("batches");
  out.begin_array();
  size_t start = 0;
  for (size_t i = 1; i <= messages.size(); ++i) {
    if (i == messages.size() || i - start == kMessagesPerBatch || jobs[messages[i].first].lane != jobs[messages[start].first].lane) {
      write_batch(out, jobs, &messages[start], messages.data() + i);
      start = i;
    }
  }
  out.end_array();
  out.end_object();
  return ok_status();
}

}  // namespace postbox
