#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "abi_call.h"

using postbox::test::call;

namespace {

// A distinct canonical UUID per index.
std::string id(int i) {
  char tail[13];
  std::snprintf(tail, sizeof tail, "%012d", i);
  return std::string("0190a5b2-0000-7000-8000-") + tail;
}

std::string job(int i, const std::string& kind = "k", const std::string& lane = "default", int delay = -1) {
  std::string out = R"({"id":")" + id(i) + R"(","kind":")" + kind + R"(","lane":")" + lane + "\"";
  if (delay >= 0) out += R"(,"delaySeconds":)" + std::to_string(delay);
  return out + "}";
}

std::string pack(const std::string& jobs) { return call(pb_nudge, R"({"op":"pack","jobs":[)" + jobs + "]}").out; }

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("nudge pack: a lone job keeps the single-job message; jobs of one kind share one") {
  CHECK(pack(job(1)) == R"({"batches":[{"lane":"default","messages":[{"body":{"v":1,"t":"job","id":")" + id(1) +
                            R"(","kind":"k","lane":"default"},"delaySeconds":0}]}]})");
  CHECK(pack(job(1) + "," + job(2) + "," + job(3)) ==
        R"({"batches":[{"lane":"default","messages":[{"body":{"v":1,"t":"jobs","kind":"k","lane":"default","ids":[")" + id(1) +
            R"(",")" + id(2) + R"(",")" + id(3) + R"("]},"delaySeconds":0}]}]})");
  CHECK(pack("") == R"({"batches":[]})");
}

TEST_CASE("nudge pack: jobs group by lane, kind and delay; lanes never share a batch") {
  // default/a, bulk/b, default/a delayed, default/c, default/a: lane default first (a, a+60s, c), then bulk.
  const std::string out = pack(job(1, "a") + "," + job(2, "b", "bulk") + "," + job(3, "a", "default", 60) + "," + job(4, "c") + "," + job(5, "a"));
  CHECK(out ==
        R"({"batches":[{"lane":"default","messages":[)"
        R"({"body":{"v":1,"t":"jobs","kind":"a","lane":"default","ids":[")" + id(1) + R"(",")" + id(5) + R"("]},"delaySeconds":0},)"
        R"({"body":{"v":1,"t":"job","id":")" + id(3) + R"(","kind":"a","lane":"default"},"delaySeconds":60},)"
        R"({"body":{"v":1,"t":"job","id":")" + id(4) + R"(","kind":"c","lane":"default"},"delaySeconds":0}]},)"
        R"({"lane":"bulk","messages":[{"body":{"v":1,"t":"job","id":")" + id(2) + R"(","kind":"b","lane":"bulk"},"delaySeconds":0}]}]})");
}

TEST_CASE("nudge pack: at most 100 ids a message and 58 messages a batch, within Queues' limits") {
  std::string jobs;
  for (int i = 0; i < 250; ++i) jobs += (i ? "," : "") + job(i);
  std::string out = pack(jobs);
  CHECK(count(out, R"("lane":"default","messages")") == 1);
  CHECK(count(out, R"("t":"jobs")") == 3);
  CHECK(count(out, "0190a5b2") == 250);
  CHECK(out.find(id(99) + R"("]})") != std::string::npos);   // the first message ends at the 100th id
  CHECK(out.find(R"("ids":[")" + id(100)) != std::string::npos);
  // 5000 jobs of 5000 delays: 5000 single-job messages in batches of 58.
  jobs.clear();
  for (int i = 0; i < 5000; ++i) jobs += (i ? "," : "") + job(i, "k", "default", i);
  out = pack(jobs);
  CHECK(count(out, R"("lane":"default","messages")") == 87);  // ceil(5000 / 58)
  CHECK(count(out, R"("t":"job")") == 5000);
  // 5000 jobs of one kind: 50 full messages in one batch.
  jobs.clear();
  for (int i = 0; i < 5000; ++i) jobs += (i ? "," : "") + job(i, std::string(128, 'k'), std::string(64, 'l'));
  out = pack(jobs);
  CHECK(count(out, R"("messages")") == 1);
  CHECK(count(out, R"("t":"jobs")") == 50);
  // The largest batch's text stays under 256,000 bytes with 128 bytes a message for metadata.
  CHECK(out.size() + 50 * 128 < 256000);
}

TEST_CASE("nudge pack: bad jobs are errors naming the job; more than 5000 is too many") {
  CHECK(pack(job(1) + R"(,{"id":"x","kind":"k","lane":"default"})") ==
        R"({"error":{"code":"invalid_input","message":"nudge: field 'jobs[1].id' must be a UUID"}})");
  CHECK(pack(R"({"id":")" + id(1) + R"(","kind":"k","lane":"default","delaySeconds":-1})") ==
        R"({"error":{"code":"invalid_input","message":"nudge: field 'jobs[0].delaySeconds' must be an integer in [0, 315360000]"}})");
  CHECK(pack(R"({"id":")" + id(1) + R"(","kind":"k"})") ==
        R"({"error":{"code":"invalid_input","message":"nudge: field 'jobs[0].lane' is required"}})");
  CHECK(call(pb_nudge, R"({"op":"pack"})").out == R"({"error":{"code":"invalid_input","message":"nudge: field 'jobs' is required"}})");
  std::string jobs;
  for (int i = 0; i < 5001; ++i) jobs += (i ? "," : "") + job(i);
  CHECK(pack(jobs) == R"({"error":{"code":"invalid_input","message":"nudge: field 'jobs' must have at most 5000 items"}})");
}

TEST_CASE("nudge pack: every packed body decodes back to its jobs") {
  const std::string out = pack(job(1) + "," + job(2) + "," + job(3, "other"));
  const size_t first = out.find(R"({"v":1)");
  const size_t second = out.find(R"({"v":1)", first + 1);
  const std::string multi = out.substr(first, out.find("},\"delaySeconds\"", first) + 1 - first);
  const std::string single = out.substr(second, out.find("},\"delaySeconds\"", second) + 1 - second);
  CHECK(call(pb_nudge, R"({"op":"decode","lane":"default","messages":[)" + multi + "," + single + "]}").out ==
        R"({"messages":[{"ok":true,"t":"jobs","kind":"k","lane":"default","ids":[")" + id(1) + R"(",")" + id(2) +
            R"("]},{"ok":true,"t":"job","id":")" + id(3) + R"(","kind":"other","lane":"default"}]})");
}

TEST_CASE("nudge pack: an outbox's packed messages name it, and the largest still fit 58 a batch") {
  const std::string out = call(pb_nudge, R"({"op":"pack","outbox":"eu","jobs":[)" + job(1) + "," + job(2) + "," + job(3, "other") + "]}").out;
  CHECK(out == R"({"batches":[{"lane":"default","messages":[{"body":{"v":1,"t":"jobs","kind":"k","lane":"default","outbox":"eu","ids":[")" + id(1) + R"(",")" +
                   id(2) + R"("]},"delaySeconds":0},{"body":{"v":1,"t":"job","id":")" + id(3) + R"(","kind":"other","lane":"default","outbox":"eu"},"delaySeconds":0}]}]})");
  CHECK(call(pb_nudge, R"({"jobs":[)" + job(1) + R"(],"op":"pack"})").out.find("outbox") == std::string::npos);
  CHECK(call(pb_nudge, R"({"jobs":[)" + job(1) + R"(],"outbox":null,"op":"pack"})").out.find("'outbox' must be a string") != std::string::npos);
  CHECK(call(pb_nudge, R"({"op":"pack","outbox":"Eu","jobs":[]})").out ==
        R"({"error":{"code":"invalid_input","message":"nudge: field 'outbox' must be a lowercase letter, then up to 31 lowercase letters, digits or _"}})");
  // 5000 jobs of the longest kind, lane and outbox name: 50 full messages in one batch, under
  // 256,000 bytes with 128 bytes a message for metadata.
  std::string jobs;
  for (int i = 0; i < 5000; ++i) jobs += (i ? "," : "") + job(i, std::string(128, 'k'), std::string(64, 'l'));
  const std::string big = call(pb_nudge, R"({"op":"pack","outbox":")" + std::string(32, 'o') + R"(","jobs":[)" + jobs + "]}").out;
  CHECK(count(big, R"("t":"jobs")") == 50);
  CHECK(big.size() + 50 * 128 < 256000);
}
