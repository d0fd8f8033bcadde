#include <doctest/doctest.h>

#include <string>

#include "abi_call.h"
#include "postbox/dependencies.h"

using postbox::test::call;
using postbox::test::error_code_of;

namespace {

std::string batch(const std::string& items) {
  return call(pb_enqueue, R"({"op":"batch","now":1000,"hasQueue":true,"items":[)" + items + "]}").out;
}

bool has(const std::string& out, const std::string& part) { return out.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("dependencies: onParentFailure names the effect a stored child keeps: cancel, or release for run") {
  CHECK(postbox::parent_failure_named("cancel") == postbox::ParentFailure::cancel);
  CHECK(postbox::parent_failure_named("run") == postbox::ParentFailure::release);
  CHECK(!postbox::parent_failure_named("release").has_value());
  CHECK(postbox::stored_effect(postbox::ParentFailure::cancel) == "cancel");
  CHECK(postbox::stored_effect(postbox::ParentFailure::release) == "release");
}

TEST_CASE("dependencies: a job with unfinished parents is written waiting for them, not nudged, keeping its parent-failure effect") {
  const std::string out = batch(R"({"payloadBytes":2},{"payloadBytes":2,"parents":[0,"running","succeeded"]},{"payloadBytes":2,"parents":[1],"onParentFailure":"run"})");
  CHECK(out == R"({"results":[)"
               R"({"ok":true,"payloadBytes":2,"dueAt":1000,"nudge":true,"delaySeconds":0},)"
               R"({"ok":true,"payloadBytes":2,"dueAt":1000,"nudge":false,"delaySeconds":null,"parents":{"status":"waiting","waitingOn":2,"onParentFailure":"cancel","total":3,"dead":0,"cancelled":0,"counted":[2]}},)"
               R"({"ok":true,"payloadBytes":2,"dueAt":1000,"nudge":false,"delaySeconds":null,"parents":{"status":"waiting","waitingOn":1,"onParentFailure":"release","total":1,"dead":0,"cancelled":0}}]})");
  // An empty list is no dependency at all.
  CHECK(batch(R"({"payloadBytes":2,"parents":[]})") == R"({"results":[{"ok":true,"payloadBytes":2,"dueAt":1000,"nudge":true,"delaySeconds":0}]})");
}

TEST_CASE("dependencies: parents all finished: due at once (and nudged), or cancelled at birth by a failed one, and its children with it") {
  const std::string out = batch(R"({"payloadBytes":2,"parents":["succeeded","succeeded"]},)"
                                R"({"payloadBytes":2,"parents":["dead","succeeded","cancelled"],"onParentFailure":"run"},)"
                                R"({"payloadBytes":2,"parents":["cancelled","retrying"]},)"
                                R"({"payloadBytes":2,"parents":[2]},{"payloadBytes":2,"parents":[2,"running"],"onParentFailure":"run"},{"payloadBytes":2,"parents":[0]})");
  CHECK(out == R"({"results":[)"
               R"({"ok":true,"payloadBytes":2,"dueAt":1000,"nudge":true,"delaySeconds":0,"parents":{"status":"pending","waitingOn":0,"onParentFailure":"cancel","total":2,"dead":0,"cancelled":0,"counted":[0,1]}},)"
               R"({"ok":true,"payloadBytes":2,"dueAt":1000,"nudge":true,"delaySeconds":0,"parents":{"status":"pending","waitingOn":0,"onParentFailure":"release","total":3,"dead":1,"cancelled":1,"counted":[0,1,2]}},)"
               R"({"ok":true,"payloadBytes":2,"dueAt":1000,"nudge":false,"delaySeconds":null,"parents":{"status":"cancelled","waitingOn":0,"onParentFailure":"cancel","total":2,"dead":0,"cancelled":1,"counted":[0],"code":"parent_failed"}},)"
               R"({"ok":true,"payloadBytes":2,"dueAt":1000,"nudge":false,"delaySeconds":null,"parents":{"status":"cancelled","waitingOn":0,"onParentFailure":"cancel","total":1,"dead":0,"cancelled":1,"counted":[0],"code":"parent_failed"}},)"
               R"({"ok":true,"payloadBytes":2,"dueAt":1000,"nudge":false,"delaySeconds":null,"parents":{"status":"waiting","waitingOn":1,"onParentFailure":"release","total":2,"dead":0,"cancelled":1,"counted":[0]}},)"
               R"({"ok":true,"payloadBytes":2,"dueAt":1000,"nudge":false,"delaySeconds":null,"parents":{"status":"waiting","waitingOn":1,"onParentFailure":"cancel","total":1,"dead":0,"cancelled":0}}]})");
  CHECK(postbox::birth_status(0, true, postbox::ParentFailure::release) == postbox::BirthStatus::pending);
  CHECK(postbox::birth_status(3, true, postbox::ParentFailure::cancel) == postbox::BirthStatus::cancelled);
  CHECK(postbox::birth_status(3, false, postbox::ParentFailure::cancel) == postbox::BirthStatus::waiting);
}

TEST_CASE("dependencies: the item itself or a later item is a cycle; an id not found is unknown; a refused parent refuses its children") {
  CHECK(has(batch(R"({"payloadBytes":2,"parents":[0]})"), R"("code":"dependency_cycle")"));
  CHECK(has(batch(R"({"payloadBytes":2,"parents":[1]},{"payloadBytes":2})"), R"("code":"dependency_cycle")"));
  CHECK(has(batch(R"({"payloadBytes":2,"parents":["pending",false]})"), R"("code":"unknown_parent")"));
  // Refused by the shim, by its payload's size, or by its own parents: the child is refused too, transitively.
  const std::string out = batch(R"({"payloadBytes":2,"refused":true},{"payloadBytes":2,"parents":[0]},{"payloadBytes":2,"parents":[1]},)"
                                R"({"payloadBytes":999999},{"payloadBytes":2,"parents":[3]},{"payloadBytes":2,"parents":["pending"]})");
  CHECK(has(out, R"({"ok":false,"issues":[{"code":"parent_refused","message":"dependsOn names an earlier item that was refused"}]},)"
                 R"({"ok":false,"issues":[{"code":"parent_refused")"));
  CHECK(has(out, R"("code":"payload_too_large")"));
  CHECK(has(out, R"("parents":{"status":"waiting","waitingOn":1,"onParentFailure":"cancel","total":1,"dead":0,"cancelled":0}}]})"));
  // The cycle is named before the unknown id.
  CHECK(has(batch(R"({"payloadBytes":2,"parents":[false,0]})"), R"("code":"dependency_cycle")"));
}

TEST_CASE("dependencies: at most 100 parents per job, refused per item; a malformed list refuses the document") {
  std::string parents;
  for (int i = 0; i < 101; ++i) parents += (i ? "," : "") + std::string(R"("waiting")");
  CHECK(has(batch(R"({"payloadBytes":2,"parents":[)" + parents + "]}"), R"("code":"too_many_parents")"));
  CHECK(has(batch(R"({"payloadBytes":2,"parents":[)" + parents.substr(10) + "]}"), R"("waitingOn":100)"));
  CHECK(error_code_of(batch(R"({"payloadBytes":2,"parents":["x"]})")) == "invalid_input");
  CHECK(error_code_of(batch(R"({"payloadBytes":2,"parents":["failed"]})")) == "invalid_input");  // a status, not a verdict
  CHECK(error_code_of(batch(R"({"payloadBytes":2,"parents":[true]})")) == "invalid_input");
  CHECK(error_code_of(batch(R"({"payloadBytes":2,"parents":[-1]})")) == "invalid_input");
  CHECK(error_code_of(batch(R"({"payloadBytes":2,"parents":{}})")) == "invalid_input");
  CHECK(error_code_of(batch(R"({"payloadBytes":2,"onParentFailure":"ignore"})")) == "invalid_input");
  CHECK(error_code_of(batch(R"({"payloadBytes":2,"refused":1})")) == "invalid_input");
}

TEST_CASE("dependencies: check_parents names the first refusal in order: too many, cycle, unknown, refused parent") {
  using postbox::DependencyRefusal;
  using postbox::ParentRef;
  const ParentRef mixed[] = {{ParentRef::Kind::unknown, 0}, {ParentRef::Kind::earlier, 0}, {ParentRef::Kind::earlier, 2}};
  static_assert(postbox::birth_status_name(postbox::BirthStatus::cancelled) == "cancelled");
  CHECK(postbox::check_parents(2, mixed, 3, 100, [](int64_t) { return false; }) == DependencyRefusal::dependency_cycle);
  CHECK(postbox::check_parents(3, mixed, 3, 100, [](int64_t) { return true; }) == DependencyRefusal::unknown_parent);
  CHECK(postbox::check_parents(3, mixed + 1, 2, 100, [](int64_t i) { return i == 2; }) == DependencyRefusal::parent_refused);
  CHECK(postbox::check_parents(3, mixed + 1, 2, 100, [](int64_t) { return false; }) == DependencyRefusal::none);
  CHECK(postbox::check_parents(3, mixed + 1, 2, 1, [](int64_t) { return false; }) == DependencyRefusal::too_many_parents);
  CHECK(postbox::refusal_code(DependencyRefusal::too_many_parents) == "too_many_parents");
}

TEST_CASE("dependencies: an operator may cancel a waiting job, and nothing else: only its parents make it due") {
  const std::string cancelled = call(pb_operate, R"({"action":"cancel","now":5,"job":{"status":"waiting"}})").out;
  CHECK(has(cancelled, R"("ok":true)"));
  CHECK(has(cancelled, R"("status":"cancelled")"));
  CHECK(has(cancelled, R"("closeAttempt":null)"));  // a waiting job has no attempt open
  CHECK(has(cancelled, R"("finished":true)"));
  CHECK(call(pb_operate, R"({"action":"retryNow","now":5,"job":{"status":"waiting"}})").out == R"({"ok":false,"reason":"invalid_state"})");
  CHECK(call(pb_operate, R"({"action":"replay","now":5,"job":{"status":"waiting"}})").out == R"({"ok":false,"reason":"invalid_state"})");
  CHECK(call(pb_operate, R"({"op":"actions","job":{"status":"waiting"}})").out == R"({"actions":["cancel"]})");
}

TEST_CASE("dependencies: a sweep over a store that keeps them checks up to 1000 waiting jobs right after recovery, before the drain") {
  const std::string base = R"({"op":"plan","now":1000,"startedAt":1000,"policies":[{"kind":"a","timeoutMs":1000}])";
  const std::string with = call(pb_sweep, base + R"(,"dependencies":true})").out;
  const std::size_t recover = with.find(R"("type":"recover")");
  const std::size_t check = with.find(R"({"type":"dependencies","limit":1000})");
  const std::size_t drain = with.find(R"("type":"drain")");
  CHECK(recover < check);
  CHECK(check != std::string::npos);
  CHECK(check < drain);
  CHECK(call(pb_sweep, base + "}").out.find("dependencies") == std::string::npos);
  CHECK(call(pb_sweep, base + R"(,"dependencies":false})").out.find("dependencies") == std::string::npos);
  CHECK(error_code_of(call(pb_sweep, base + R"(,"dependencies":1})").out) == "invalid_input");
}

TEST_CASE("dependencies: a stored parent is named by its status; every status but the final ones is unfinished") {
  using Kind = postbox::ParentRef::Kind;
  for (const char* open : {"pending", "running", "retrying", "waiting"}) CHECK(postbox::parent_state_of(open) == Kind::open);
  CHECK(postbox::parent_state_of("succeeded") == Kind::succeeded);
  CHECK(postbox::parent_state_of("dead") == Kind::dead);
  CHECK(postbox::parent_state_of("cancelled") == Kind::cancelled);
  CHECK(!postbox::parent_state_of("failed").has_value());
  CHECK(!postbox::parent_state_of("").has_value());
}

TEST_CASE("dependencies: a batch's completion waits on every member (up to 100000), runs however they end, and counts them") {
  // Members are open, one already dead, one cancelled: it waits on the open ones and releases on failure.
  const std::string out = batch(R"({"payloadBytes":2,"completesBatch":true,"parents":["pending","dead","cancelled","succeeded"]})");
  CHECK(out == R"({"results":[{"ok":true,"payloadBytes":2,"dueAt":1000,"nudge":false,"delaySeconds":null,)"
               R"("parents":{"status":"waiting","waitingOn":1,"onParentFailure":"release","total":4,"dead":1,"cancelled":1,"counted":[1,2,3],"batch":true}}]})");
  // A batch that ended before its completion was written (or has no member) is due at once, and nudged.
  CHECK(batch(R"({"payloadBytes":2,"completesBatch":true,"parents":[]})") ==
        R"({"results":[{"ok":true,"payloadBytes":2,"dueAt":1000,"nudge":true,"delaySeconds":0,"parents":{"status":"pending","waitingOn":0,"onParentFailure":"release","total":0,"dead":0,"cancelled":0,"batch":true}}]})");
  // It runs even after a member cancelled at birth: a batch never cancels its completion by itself.
  CHECK(has(batch(R"({"payloadBytes":2,"parents":["dead"]},{"payloadBytes":2,"completesBatch":true,"parents":[0,"succeeded"],"onParentFailure":"cancel"})"),
            R"("parents":{"status":"pending","waitingOn":0,"onParentFailure":"release","total":2,"dead":0,"cancelled":1,"counted":[0,1],"batch":true}}]})"));
  std::string members;
  for (int i = 0; i < 1000; ++i) members += (i ? "," : "") + std::string(R"("waiting")");
  CHECK(has(batch(R"({"payloadBytes":2,"completesBatch":true,"parents":[)" + members + "]}"), R"("waitingOn":1000)"));
  const std::string too_many = call(pb_enqueue, R"({"op":"batch","now":1,"items":[{"payloadBytes":2,"parents":[)" + members + "]}]}").out;
  CHECK(has(too_many, R"({"code":"too_many_parents","message":"a job may depend on at most 100 parents"})"));
  CHECK(postbox::kMaxBatchMembers == 100000);
  CHECK(error_code_of(batch(R"({"payloadBytes":2,"completesBatch":"yes"})")) == "invalid_input");
}
