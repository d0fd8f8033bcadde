#include <doctest/doctest.h>

#include <string>

#include "abi_call.h"

using postbox::test::call;

namespace {

const char* kId = "123e4567-e89b-12d3-a456-426614174000";

std::string decode(const std::string& messages) {
  auto r = call(pb_nudge, R"({"op":"decode","lane":"default","messages":[)" + messages + "]}");
  CHECK(r.rc == 0);
  return r.out;
}

}  // namespace

TEST_CASE("nudge encode: one wire message per job") {
  CHECK(call(pb_nudge, std::string(R"({"op":"encode","jobs":[{"id":")") + kId + R"(","kind":"email.welcome","lane":"default"}]})").out ==
        std::string(R"({"messages":[{"v":1,"t":"job","id":")") + kId + R"(","kind":"email.welcome","lane":"default"}]})");
  CHECK(call(pb_nudge, R"({"op":"encode","jobs":[]})").out == R"({"messages":[]})");
  CHECK(call(pb_nudge, R"({"op":"encode","jobs":[{"id":"x","kind":"k","lane":"default"}]})").out ==
        R"({"error":{"code":"invalid_input","message":"nudge: field 'jobs[0].id' must be a UUID"}})");
  CHECK(call(pb_nudge, std::string(R"({"op":"encode","jobs":[{"id":")") + kId + R"(","lane":"default"}]})").out ==
        R"({"error":{"code":"invalid_input","message":"nudge: field 'jobs[0].kind' is required"}})");
}

TEST_CASE("nudge decode: valid job and drain messages round-trip") {
  const std::string job = std::string(R"({"v":1,"t":"job","id":")") + kId + R"(","kind":"k.1","lane":"default"})";
  CHECK(decode(job + R"(,{"lane":"default","t":"drain","v":1})") ==
        std::string(R"({"messages":[{"ok":true,"t":"job","id":")") + kId +
            R"(","kind":"k.1","lane":"default"},{"ok":true,"t":"drain","lane":"default"}]})");
  // Uppercase UUIDs are canonical too; mixed case is not.
  CHECK(decode(R"({"v":1,"t":"job","id":"123E4567-E89B-12D3-A456-426614174000","kind":"k","lane":"default"})").find(R"("ok":true)") !=
        std::string::npos);
  CHECK(decode(R"({"v":1,"t":"job","id":"123E4567-e89b-12d3-a456-426614174000","kind":"k","lane":"default"})") ==
        R"({"messages":[{"ok":false,"code":"invalid_message","message":"nudge: field 'messages[0].id' must be a UUID"}]})");
}

TEST_CASE("nudge decode: hostile messages are reported one by one") {
  struct Row {
    std::string body;
    std::string message;
  };
  const std::string giant(100000, 'k');
  const Row rows[] = {
      {"7", "nudge: messages[0]: must be an object"},
      {"\"{\\\"v\\\":1}\"", "nudge: messages[0]: must be an object"},
      {"null", "nudge: messages[0]: must be an object"},
      {"[]", "nudge: messages[0]: must be an object"},
      {R"({})", "nudge: field 'messages[0].v' is required"},
      {R"({"v":2,"t":"drain","lane":"default"})", "nudge: field 'messages[0].v' must be 1"},
      {R"({"v":"1","t":"drain","lane":"default"})", "nudge: field 'messages[0].v' must be 1"},
      {R"({"v":1.0,"t":"drain","lane":"default"})", "nudge: field 'messages[0].v' must be 1"},
      {R"({"v":1,"t":"wake","lane":"default"})", "nudge: field 'messages[0].t' must be \\\"job\\\", \\\"jobs\\\" or \\\"drain\\\""},
      {R"({"v":1,"t":"job","id":"not-a-uuid","kind":"k","lane":"default"})", "nudge: field 'messages[0].id' must be a UUID"},
      {R"({"v":1,"t":"job","id":")" + std::string(kId) + R"(","kind":")" + giant + R"(","lane":"default"})",
       "nudge: field 'messages[0].kind' must be at most 128 bytes"},
      {R"({"v":1,"t":"job","id":")" + std::string(kId) + R"(","kind":"a b","lane":"default"})",
       "nudge: field 'messages[0].kind' must be 1-128 bytes of [A-Za-z0-9._:-]"},
      {R"({"v":1,"t":"job","id":")" + std::string(kId) + R"(","lane":"default"})", "nudge: field 'messages[0].kind' is required"},
      {R"({"v":1,"t":"drain"})", "nudge: field 'messages[0].lane' is required"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.body.substr(0, 100));
    CHECK(decode(row.body) == R"({"messages":[{"ok":false,"code":"invalid_message","message":")" + row.message + "\"}]}");
  }
}

TEST_CASE("nudge decode: a message for another lane is wrong_lane") {
  CHECK(decode(R"({"v":1,"t":"drain","lane":"bulk"})") ==
        R"({"messages":[{"ok":false,"code":"wrong_lane","message":"message for lane 'bulk' arrived on lane 'default'"}]})");
  // Without a lane, the consumer serves every lane: each message names its own.
  CHECK(call(pb_nudge, R"({"op":"decode","messages":[{"v":1,"t":"drain","lane":"bulk"},{"v":1,"t":"drain","lane":"default"}]})").out ==
        R"({"messages":[{"ok":true,"t":"drain","lane":"bulk"},{"ok":true,"t":"drain","lane":"default"}]})");
  CHECK(call(pb_nudge, R"({"op":"decode","lane":"","messages":[]})").out.find("invalid_input") != std::string::npos);
  CHECK(call(pb_nudge, R"({"op":"decode","lane":null,"messages":[]})").out.find("invalid_input") != std::string::npos);
  // The lane may come after the messages in the document.
  CHECK(call(pb_nudge, R"({"messages":[{"v":1,"t":"drain","lane":"bulk"}],"op":"decode","lane":"bulk"})").out ==
        R"({"messages":[{"ok":true,"t":"drain","lane":"bulk"}]})");
}

TEST_CASE("nudge decode: at most 100 messages, messages are required, lane is optional") {
  std::string many;
  for (int i = 0; i < 100; ++i) many += (i ? "," : "") + std::string("1");
  CHECK(call(pb_nudge, R"({"op":"decode","lane":"default","messages":[)" + many + "]}").rc == 0);
  auto over = call(pb_nudge, R"({"op":"decode","lane":"default","messages":[)" + many + ",1]}");
  CHECK(over.rc == 1);
  CHECK(over.out == R"({"error":{"code":"invalid_input","message":"nudge: field 'messages' must have at most 100 items"}})");
  // Without a lane: every lane's messages are taken.
  CHECK(call(pb_nudge, R"({"op":"decode","messages":[]})").out == R"({"messages":[]})");
  CHECK(call(pb_nudge, R"({"op":"decode","lane":"default"})").out ==
        R"({"error":{"code":"invalid_input","message":"nudge: field 'messages' is required"}})");
  CHECK(call(pb_nudge, R"({"op":"peek"})").out == R"({"error":{"code":"unknown_op","message":"nudge: unknown op 'peek'"}})");
}

TEST_CASE("nudge encode: drain requests name a lane, and decode back as drains of that lane") {
  CHECK(call(pb_nudge, R"({"op":"encode","drains":["bulk","default"]})").out ==
        R"({"messages":[{"v":1,"t":"drain","lane":"bulk"},{"v":1,"t":"drain","lane":"default"}]})");
  CHECK(call(pb_nudge, R"({"op":"encode","jobs":[],"drains":["bulk"]})").out ==
        R"({"messages":[{"v":1,"t":"drain","lane":"bulk"}]})");
  CHECK(call(pb_nudge, R"({"op":"decode","lane":"bulk","messages":[{"v":1,"t":"drain","lane":"bulk"}]})").out ==
        R"({"messages":[{"ok":true,"t":"drain","lane":"bulk"}]})");
  CHECK(call(pb_nudge, R"({"op":"encode","drains":["no spaces"]})").rc == 1);
  CHECK(call(pb_nudge, R"({"op":"encode","drains":[7]})").rc == 1);
  CHECK(call(pb_nudge, R"({"op":"encode"})").rc == 1);
}

TEST_CASE("nudge decode: a multi-job message names 1 to 100 jobs of one kind") {
  const std::string id2 = "123e4567-e89b-12d3-a456-426614174001";
  CHECK(decode(std::string(R"({"v":1,"t":"jobs","kind":"k","lane":"default","ids":[")") + kId + R"(",")" + id2 + R"("]})") ==
        std::string(R"({"messages":[{"ok":true,"t":"jobs","kind":"k","lane":"default","ids":[")") + kId + R"(",")" + id2 + R"("]}]})");
  std::string hundred, more;
  for (int i = 0; i < 100; ++i) hundred += std::string(i ? "," : "") + "\"" + kId + "\"";
  more = hundred + ",\"" + kId + "\"";
  CHECK(decode(R"({"v":1,"t":"jobs","kind":"k","lane":"default","ids":[)" + hundred + "]}").find(R"("ok":true)") != std::string::npos);
  // Oversized: too_large, reported like any other hostile message.
  CHECK(decode(R"({"v":1,"t":"jobs","kind":"k","lane":"default","ids":[)" + more + "]}") ==
        R"({"messages":[{"ok":false,"code":"too_large","message":"nudge: field 'messages[0].ids' must have at most 100 items"}]})");
}

TEST_CASE("nudge decode: hostile multi-job messages are reported one by one") {
  struct Row {
    std::string body;
    std::string message;
  };
  const std::string k = std::string("\"") + kId + "\"";
  const Row rows[] = {
      {R"({"v":1,"t":"jobs","kind":"k","lane":"default","ids":[]})", "nudge: field 'messages[0].ids' must have at least 1 item"},
      {R"({"v":1,"t":"jobs","kind":"k","lane":"default"})", "nudge: field 'messages[0].ids' is required"},
      {R"({"v":1,"t":"jobs","kind":"k","lane":"default","ids":")" + std::string(kId) + "\"}", "nudge: field 'messages[0].ids' must be an array"},
      {R"({"v":1,"t":"jobs","kind":"k","lane":"default","ids":[)" + k + R"(,"x'; DROP TABLE outbox.job"]})", "nudge: field 'messages[0].ids' must hold UUIDs"},
      {R"({"v":1,"t":"jobs","kind":"k","lane":"default","ids":[)" + k + R"(,7]})", "nudge: field 'messages[0].ids' must hold UUIDs"},
      {R"({"v":1,"t":"jobs","kind":"k","lane":"default","ids":[[)" + k + R"(]]})", "nudge: field 'messages[0].ids' must hold UUIDs"},
      {R"({"v":1,"t":"jobs","lane":"default","ids":[)" + k + "]}", "nudge: field 'messages[0].kind' is required"},
      {R"({"v":1,"t":"jobs","kind":"a b","lane":"default","ids":[)" + k + "]}", "nudge: field 'messages[0].kind' must be 1-128 bytes of [A-Za-z0-9._:-]"},
      {R"({"v":2,"t":"jobs","kind":"k","lane":"default","ids":[)" + k + "]}", "nudge: field 'messages[0].v' must be 1"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.body);
    CHECK(decode(row.body) == R"({"messages":[{"ok":false,"code":"invalid_message","message":")" + row.message + "\"}]}");
  }
  CHECK(decode(R"({"v":1,"t":"jobs","kind":"k","lane":"bulk","ids":[)" + k + "]}") ==
        R"({"messages":[{"ok":false,"code":"wrong_lane","message":"message for lane 'bulk' arrived on lane 'default'"}]})");
  // A multi-job message ignores "id" and a single-job one "ids", but either must be well-formed
  // wherever it comes (the type may follow it).
  CHECK(decode(R"({"v":1,"t":"jobs","id":)" + k + R"(,"kind":"k","lane":"default","ids":[)" + k + "]}") ==
        R"({"messages":[{"ok":true,"t":"jobs","kind":"k","lane":"default","ids":[)" + k + "]}]}");
  CHECK(decode(std::string(R"({"v":1,"t":"job","id":")") + kId + R"(","kind":"k","lane":"default","ids":7})").find(R"("ok":false)") !=
        std::string::npos);
}

TEST_CASE("nudge encode: an outbox's messages name it; a lone outbox's name none") {
  CHECK(call(pb_nudge, std::string(R"({"op":"encode","outbox":"eu","jobs":[{"id":")") + kId + R"(","kind":"k","lane":"default"}],"drains":["bulk"]})").out ==
        std::string(R"({"messages":[{"v":1,"t":"job","id":")") + kId +
            R"(","kind":"k","lane":"default","outbox":"eu"},{"v":1,"t":"drain","lane":"bulk","outbox":"eu"}]})");
  // The name may come after the lists; without it, none.
  CHECK(call(pb_nudge, R"({"drains":["bulk"],"op":"encode","outbox":"us_2"})").out == R"({"messages":[{"v":1,"t":"drain","lane":"bulk","outbox":"us_2"}]})");
  for (const char* bad : {R"("EU")", R"("")", R"("1eu")", R"("e-u")", R"("-")", R"(7)", R"(null)", R"("abcdefghijklmnopqrstuvwxyz0123456")"}) {
    CAPTURE(bad);
    CHECK(call(pb_nudge, std::string(R"({"op":"encode","drains":["bulk"],"outbox":)") + bad + "}").rc == 1);
  }
  CHECK(call(pb_nudge, R"({"op":"encode","drains":["bulk"],"outbox":"EU"})").out ==
        R"({"error":{"code":"invalid_input","message":"nudge: field 'outbox' must be a lowercase letter, then up to 31 lowercase letters, digits or _"}})");
}

TEST_CASE("nudge decode: a consumer of several outboxes routes each message to the outbox it names") {
  const std::string job = std::string(R"({"v":1,"t":"job","id":")") + kId + R"(","kind":"k","lane":"default")";
  auto fleet = [](const std::string& consumer, const std::string& messages) {
    return call(pb_nudge, R"({"op":"decode",)" + consumer + R"(,"messages":[)" + messages + "]}").out;
  };
  const std::string eu_us = R"("outboxes":["eu","us"],"defaultOutbox":"eu")";
  CHECK(fleet(eu_us, job + R"(,"outbox":"us"})") ==
        std::string(R"({"messages":[{"ok":true,"t":"job","id":")") + kId + R"(","kind":"k","lane":"default","outbox":"us"}]})");
  // A message from before there were several outboxes names none: the default outbox's.
  CHECK(fleet(eu_us, job + "}") == std::string(R"({"messages":[{"ok":true,"t":"job","id":")") + kId + R"(","kind":"k","lane":"default","outbox":"eu"}]})");
  // An outbox this consumer does not serve: unknown_outbox, back to the queue in 60 s (then dead-lettered).
  CHECK(fleet(eu_us, job + R"(,"outbox":"ap"})") ==
        R"({"messages":[{"ok":false,"code":"unknown_outbox","message":"message for outbox 'ap', which this consumer does not serve","retry":true,"delaySeconds":60}]})");
  CHECK(fleet(R"("outboxes":["eu","us"])", job + "}") ==
        R"({"messages":[{"ok":false,"code":"unknown_outbox","message":"message names no outbox, and this consumer has no default outbox","retry":true,"delaySeconds":60}]})");
  CHECK(fleet(R"("outboxes":["eu","us"],"defaultOutbox":null)", R"({"v":1,"t":"drain","lane":"default"})").find("unknown_outbox") != std::string::npos);
  // A malformed name is a hostile message like any other: invalid_message, acked.
  CHECK(fleet(eu_us, job + R"(,"outbox":"EU"})") ==
        R"({"messages":[{"ok":false,"code":"invalid_message","message":"nudge: field 'messages[0].outbox' must be a lowercase letter, then up to 31 lowercase letters, digits or _"}]})");
  CHECK(fleet(eu_us, job + R"(,"outbox":null})").find("invalid_message") != std::string::npos);
  CHECK(fleet(eu_us, job + R"(,"outbox":")" + std::string(5000, 'a') + R"("})") ==
        R"({"messages":[{"ok":false,"code":"invalid_message","message":"nudge: field 'messages[0].outbox' must be at most 32 bytes"}]})");
  // The lane is checked first; the consumer may come after the messages.
  CHECK(call(pb_nudge, R"({"op":"decode","messages":[{"v":1,"t":"drain","lane":"bulk","outbox":"ap"}],"lane":"default","outboxes":["eu"]})").out.find("wrong_lane") !=
        std::string::npos);
  CHECK(call(pb_nudge, R"({"messages":[{"v":1,"t":"drain","lane":"bulk","outbox":"eu"}],"op":"decode","outboxes":["eu"]})").out ==
        R"({"messages":[{"ok":true,"t":"drain","lane":"bulk","outbox":"eu"}]})");
  // A consumer of one outbox takes a message whatever it names, as consumers always did.
  CHECK(decode(job + R"(,"outbox":"ap"})") == std::string(R"({"messages":[{"ok":true,"t":"job","id":")") + kId + R"(","kind":"k","lane":"default","outbox":"ap"}]})");
}

TEST_CASE("nudge decode: the consumer's outboxes are checked") {
  auto consumer = [](const std::string& fields) { return call(pb_nudge, R"({"op":"decode",)" + fields + R"(,"messages":[]})").out; };
  CHECK(consumer(R"("outboxes":[])") == R"({"error":{"code":"invalid_input","message":"nudge: field 'outboxes' must have at least 1 item"}})");
  CHECK(consumer(R"("outboxes":["eu"],"defaultOutbox":"us")") ==
        R"({"error":{"code":"invalid_input","message":"nudge: field 'defaultOutbox' must be one of outboxes"}})");
  CHECK(consumer(R"("defaultOutbox":"eu")") == R"({"error":{"code":"invalid_input","message":"nudge: field 'defaultOutbox' needs outboxes"}})");
  CHECK(consumer(R"("outboxes":["eu","E"])") ==
        R"({"error":{"code":"invalid_input","message":"nudge: field 'outboxes[1]' must be a lowercase letter, then up to 31 lowercase letters, digits or _"}})");
  CHECK(consumer(R"("outboxes":"eu")").find("invalid_input") != std::string::npos);
  std::string many;
  for (int i = 0; i < 65; ++i) many += std::string(i ? "," : "") + "\"o" + std::to_string(i) + "\"";
  CHECK(consumer(R"("outboxes":[)" + many + "]") == R"({"error":{"code":"invalid_input","message":"nudge: field 'outboxes' must have at most 64 items"}})");
  // A repeated list: the last one counts (each list within the bound).
  std::string full;
  for (int i = 0; i < 64; ++i) full += std::string(i ? "," : "") + "\"o" + std::to_string(i) + "\"";
  CHECK(call(pb_nudge, R"({"op":"decode","outboxes":[)" + full + R"(],"outboxes":[)" + full + R"(],"messages":[{"v":1,"t":"drain","lane":"a","outbox":"o63"}]})").out ==
        R"({"messages":[{"ok":true,"t":"drain","lane":"a","outbox":"o63"}]})");
  CHECK(call(pb_nudge, R"({"op":"decode","outboxes":[)" + full + R"(],"outboxes":["eu"],"messages":[{"v":1,"t":"drain","lane":"a","outbox":"o1"}]})").out.find("unknown_outbox") !=
        std::string::npos);
}

TEST_CASE("nudge redeliver: a message sent back after an infrastructure failure waits 5 s, doubling per delivery, at most 5 min") {
  CHECK(call(pb_nudge, R"({"op":"redeliver","attempts":[1,2,3,4,5,6,7]})").out == R"({"delaySeconds":[5,10,20,40,80,160,300]})");
  CHECK(call(pb_nudge, R"({"op":"redeliver","attempts":[1000000,1]})").out == R"({"delaySeconds":[300,5]})");
  CHECK(call(pb_nudge, R"({"op":"redeliver","attempts":[]})").out == R"({"delaySeconds":[]})");
  CHECK(call(pb_nudge, R"({"op":"redeliver","attempts":[0]})").out ==
        R"({"error":{"code":"invalid_input","message":"nudge: field 'attempts' must be an integer in [1, 1000000]"}})");
  CHECK(call(pb_nudge, R"({"op":"redeliver","attempts":[1.5]})").out.find("invalid_input") != std::string::npos);
  CHECK(call(pb_nudge, R"({"op":"redeliver"})").out == R"({"error":{"code":"invalid_input","message":"nudge: field 'attempts' is required"}})");
  CHECK(call(pb_nudge, R"({"op":"redeliver","attempts":[1],"attempts":[2]})").out.find("given twice") != std::string::npos);
  std::string many;
  for (int i = 0; i < 101; ++i) many += std::string(i ? "," : "") + "1";
  CHECK(call(pb_nudge, R"({"op":"redeliver","attempts":[)" + many + "]}").out.find("at most 100") != std::string::npos);
}
