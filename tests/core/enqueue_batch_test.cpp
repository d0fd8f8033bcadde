#include <doctest/doctest.h>

#include <initializer_list>
#include <string>
#include <string_view>

#include "abi_call.h"

using postbox::test::call;
using postbox::test::error_code_of;

namespace {

std::string batch(const std::string& items, const std::string& settings = R"("now":1000,"hasQueue":true)") {
  return call(pb_enqueue, R"({"op":"batch",)" + settings + R"(,"items":[)" + items + "]}").out;
}

// n items of the given JSON text, comma-separated.
std::string repeat(const std::string& item, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += (i ? "," : "") + item;
  return out;
}

}  // namespace

TEST_CASE("enqueue batch: one decision per item, in input order, by the single form's rules") {
  CHECK(batch(R"({"payloadBytes":17},{"delayMs":1500,"payloadBytes":2},{"payloadBytes":300000},{"delayMs":86400001,"payloadBytes":0})") ==
        R"({"results":[)"
        R"({"ok":true,"payloadBytes":17,"dueAt":1000,"nudge":true,"delaySeconds":0},)"
        R"({"ok":true,"payloadBytes":2,"dueAt":2500,"nudge":true,"delaySeconds":2},)"
        R"({"ok":false,"issues":[{"code":"payload_too_large","message":"payload is 300000 bytes; the limit is 262144"}]},)"
        R"({"ok":true,"payloadBytes":0,"dueAt":86401001,"nudge":false,"delaySeconds":null}]})");
  CHECK(batch("") == R"({"results":[]})");
  // Without "op" (or with "op":"one") the document is the single form.
  CHECK(call(pb_enqueue, R"({"op":"one","now":1000,"payload":[1]})").out == call(pb_enqueue, R"({"now":1000,"payload":[1]})").out);
  // Without a queue nothing is nudged; the caps and the clock may follow the items.
  CHECK(call(pb_enqueue, R"({"items":[{"payloadBytes":5}],"maxPayloadBytes":4,"op":"batch","now":7})").out ==
        R"({"results":[{"ok":false,"issues":[{"code":"payload_too_large","message":"payload is 5 bytes; the limit is 4"}]}]})");
}

TEST_CASE("enqueue batch: an item may carry its payload instead of its size") {
  CHECK(batch(R"({"payload":{"a":[1, 2]}},{"payloadBytes":3})") ==
        R"({"results":[{"ok":true,"payloadBytes":12,"dueAt":1000,"nudge":true,"delaySeconds":0},)"
        R"({"ok":true,"payloadBytes":3,"dueAt":1000,"nudge":true,"delaySeconds":0}]})");
  // The single form takes a measured size too.
  CHECK(call(pb_enqueue, R"({"now":5,"payloadBytes":300000})").out ==
        R"({"ok":false,"issues":[{"code":"payload_too_large","message":"payload is 300000 bytes; the limit is 262144"}]})");
}

TEST_CASE("enqueue batch: a bad item fails the whole call, naming the item") {
  CHECK(batch(R"({"payloadBytes":1},{"delayMs":1})") ==
        R"({"error":{"code":"invalid_input","message":"enqueue: field 'items[1].payloadBytes' is required"}})");
  CHECK(batch(R"({"payloadBytes":1},{"payloadBytes":1,"delayMs":-1})") ==
        R"({"error":{"code":"invalid_input","message":"enqueue: field 'items[1].delayMs' must be an integer in [0, 315360000000]"}})");
  CHECK(batch(R"({"payloadBytes":1.5})") ==
        R"({"error":{"code":"invalid_input","message":"enqueue: field 'items[0].payloadBytes' must be an integer in [0, 9007199254740991]"}})");
  CHECK(batch("7") == R"({"error":{"code":"invalid_input","message":"enqueue: items[0]: must be an object"}})");
  CHECK(call(pb_enqueue, R"({"op":"batch","now":1})").out ==
        R"({"error":{"code":"invalid_input","message":"enqueue: field 'items' is required"}})");
  CHECK(call(pb_enqueue, R"({"op":"batch","items":[]})").out ==
        R"({"error":{"code":"invalid_input","message":"enqueue: field 'now' is required"}})");
  CHECK(call(pb_enqueue, R"({"op":"batch","now":1,"items":{}})").out ==
        R"({"error":{"code":"invalid_input","message":"enqueue: field 'items' must be an array"}})");
  CHECK(call(pb_enqueue, R"({"op":"many","now":1,"items":[]})").out ==
        R"({"error":{"code":"unknown_op","message":"enqueue: unknown op 'many'"}})");
}

TEST_CASE("enqueue batch: more than 5000 items, or more than 16 MiB of payloads to write, is too_large") {
  const std::string item = R"({"payloadBytes":1})";
  CHECK(batch(repeat(item, 5000)).find(R"("results":[)") != std::string::npos);
  CHECK(batch(repeat(item, 5001)) ==
        R"({"error":{"code":"too_large","message":"enqueue: field 'items' must have at most 5000 items"}})");
  // 64 × 262144 bytes is exactly 16 MiB; one byte more is refused. Refused items do not count.
  const std::string full = repeat(R"({"payloadBytes":262144})", 64);
  CHECK(batch(full).find(R"("results":[)") != std::string::npos);
  CHECK(batch(full + R"(,{"payloadBytes":300000})").find(R"("results":[)") != std::string::npos);
  CHECK(batch(full + R"(,{"payloadBytes":1})") ==
        R"({"error":{"code":"too_large","message":"enqueue: field 'items' must hold at most 16777216 bytes of payloads"}})");
  CHECK(error_code_of(batch(full + R"(,{"payloadBytes":1})")) == "too_large");
}

TEST_CASE("enqueue: a job's own maxAttempts must be in a policy's range") {
  CHECK(batch(R"({"payloadBytes":1,"maxAttempts":1},{"payloadBytes":1,"maxAttempts":1000})") ==
        R"({"results":[{"ok":true,"payloadBytes":1,"dueAt":1000,"nudge":true,"delaySeconds":0},)"
        R"({"ok":true,"payloadBytes":1,"dueAt":1000,"nudge":true,"delaySeconds":0}]})");
  CHECK(batch(R"({"payloadBytes":1,"maxAttempts":0})") ==
        R"({"error":{"code":"invalid_input","message":"enqueue: field 'items[0].maxAttempts' must be an integer in [1, 1000]"}})");
  CHECK(call(pb_enqueue, R"({"now":1,"payload":{},"maxAttempts":1001})").out ==
        R"({"error":{"code":"invalid_input","message":"enqueue: field 'maxAttempts' must be an integer in [1, 1000]"}})");
}

namespace {
// A dedupe item with every flag true but those named false.
std::string dedupe_item(std::initializer_list<const char*> differing) {
  std::string item = "{";
  bool first = true;
  for (const char* flag : {"sameKind", "samePayload", "sameMaxAttempts", "sameMetadata", "sameCorrelationId", "samePriority", "sameParents", "sameOnParentFailure"}) {
    bool same = true;
    for (const char* d : differing) same = same && std::string_view(d) != flag;
    item += std::string(first ? "" : ",") + "\"" + flag + "\":" + (same ? "true" : "false");
    first = false;
  }
  return item + "}";
}
std::string dedupe(std::initializer_list<std::initializer_list<const char*>> items) {
  std::string input = R"({"op":"dedupe","items":[)";
  bool first = true;
  for (auto differing : items) {
    input += (first ? "" : ",") + dedupe_item(differing);
    first = false;
  }
  return call(pb_enqueue, input + "]}").out;
}
}  // namespace

TEST_CASE("enqueue dedupe: the same request again exists; any differing field conflicts, naming it") {
  CHECK(dedupe({{}}) == R"({"results":[{"status":"exists"}]})");
  CHECK(dedupe({{"sameKind"}, {"samePayload"}, {"sameMaxAttempts"}, {"sameMetadata"}, {"sameCorrelationId"}}) ==
        R"({"results":[{"status":"dedupe_conflict","reason":"kind"},{"status":"dedupe_conflict","reason":"payload"},)"
        R"({"status":"dedupe_conflict","reason":"maxAttempts"},{"status":"dedupe_conflict","reason":"metadata"},)"
        R"({"status":"dedupe_conflict","reason":"correlationId"}]})");
  // What it waits on and how it runs: another priority, other parents, another effect of a parent's failure.
  CHECK(dedupe({{"samePriority"}, {"sameParents"}, {"sameOnParentFailure"}, {"sameOnParentFailure", "sameParents", "samePriority"}}) ==
        R"({"results":[{"status":"dedupe_conflict","reason":"priority"},{"status":"dedupe_conflict","reason":"dependsOn"},)"
        R"({"status":"dedupe_conflict","reason":"onParentFailure"},{"status":"dedupe_conflict","reason":"priority"}]})");
}

TEST_CASE("enqueue dedupe: of several differing fields the first in kind, payload, maxAttempts, metadata, correlationId order is the reason") {
  CHECK(dedupe({{"sameCorrelationId", "sameKind"}, {"sameMetadata", "samePayload"}, {"sameCorrelationId", "sameMaxAttempts"},
                {"sameCorrelationId", "sameMetadata"}, {"sameKind", "samePayload", "sameMaxAttempts", "sameMetadata", "sameCorrelationId"}}) ==
        R"({"results":[{"status":"dedupe_conflict","reason":"kind"},{"status":"dedupe_conflict","reason":"payload"},)"
        R"({"status":"dedupe_conflict","reason":"maxAttempts"},{"status":"dedupe_conflict","reason":"metadata"},)"
        R"({"status":"dedupe_conflict","reason":"kind"}]})");
  // Flag order in the input does not matter.
  CHECK(call(pb_enqueue, R"({"op":"dedupe","items":[{"sameOnParentFailure":true,"sameParents":true,"samePriority":true,"sameCorrelationId":false,"sameMetadata":true,"sameMaxAttempts":true,"samePayload":true,"sameKind":true}]})").out ==
        R"({"results":[{"status":"dedupe_conflict","reason":"correlationId"}]})");
}

TEST_CASE("enqueue dedupe: every flag is required and boolean") {
  CHECK(call(pb_enqueue, R"({"op":"dedupe","items":[]})").out == R"({"results":[]})");
  CHECK(call(pb_enqueue, R"({"op":"dedupe","items":[{"sameKind":true}]})").out ==
        R"({"error":{"code":"invalid_input","message":"enqueue: field 'items[0].samePayload' is required"}})");
  // The two flags of before are no longer enough: a missing flag must not pass as the same.
  CHECK(call(pb_enqueue, R"({"op":"dedupe","items":[{"sameKind":true,"samePayload":true}]})").out ==
        R"({"error":{"code":"invalid_input","message":"enqueue: field 'items[0].sameMaxAttempts' is required"}})");
  CHECK(call(pb_enqueue, R"({"op":"dedupe","items":[{"sameKind":true,"samePayload":true,"sameMaxAttempts":true,"sameMetadata":true}]})").out ==
        R"({"error":{"code":"invalid_input","message":"enqueue: field 'items[0].sameCorrelationId' is required"}})");
  // The flags of before are no longer enough either: parents and priority are the request too.
  CHECK(call(pb_enqueue, R"({"op":"dedupe","items":[{"sameKind":true,"samePayload":true,"sameMaxAttempts":true,"sameMetadata":true,"sameCorrelationId":true}]})").out ==
        R"({"error":{"code":"invalid_input","message":"enqueue: field 'items[0].samePriority' is required"}})");
  CHECK(call(pb_enqueue, R"({"op":"dedupe","items":[{"sameKind":1,"samePayload":true}]})").out ==
        R"({"error":{"code":"invalid_input","message":"enqueue: field 'items[0].sameKind' must be a boolean"}})");
  CHECK(call(pb_enqueue, R"({"op":"dedupe","items":[{"sameKind":true,"samePayload":true,"sameMaxAttempts":true,"sameMetadata":"yes","sameCorrelationId":true,"samePriority":true,"sameParents":true,"sameOnParentFailure":true}]})").out ==
        R"({"error":{"code":"invalid_input","message":"enqueue: field 'items[0].sameMetadata' must be a boolean"}})");
  CHECK(call(pb_enqueue, R"({"op":"dedupe"})").out == R"({"error":{"code":"invalid_input","message":"enqueue: field 'items' is required"}})");
}
