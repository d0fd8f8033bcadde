// Job dependencies. A job enqueued with parents waits (status `waiting`) until every parent has
// reached a final status; a parent that succeeds releases it, and one that ends dead or
// cancelled has the effect the child chose at enqueue (`onParentFailure`): cancel it (the
// default, under code parent_failed, and its own waiting children by the same rule), or release
// it as a success would. A released job is due at once (or at its own due time, if later).
//
// A parent is a job already stored (named by id) or an earlier item of the same enqueueMany
// list (named by index). Nothing can name a later item or itself, so the graph has no cycle by
// construction: such a reference is refused as one. The stores apply the effects in the
// statement that settles the parent; the core decides them here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace postbox {

// A job waits on at most this many parents: its link statement and the settle that releases it
// stay bounded.
constexpr std::size_t kMaxParents = 100;

// A batch's completion job (`outbox.batch`) waits on every member: at most this many. Each
// member's settle touches only the completion's row, so the bound is the enqueue's (one lookup,
// one edge insert of this many rows), not the settles'.
constexpr std::size_t kMaxBatchMembers = 100000;

// What a parent that ends dead or cancelled does to a waiting child. Stores keep the effect's
// name with the child (`cancel` or `release`) and apply it.
enum class ParentFailure { cancel, release };

// `onParentFailure` as the API names it: "cancel" (the default) or "run".
std::optional<ParentFailure> parent_failure_named(std::string_view name);

// The effect's stored name.
constexpr std::string_view stored_effect(ParentFailure f) { return f == ParentFailure::cancel ? "cancel" : "release"; }

// The code a child cancelled by its parent's failure records.
constexpr std::string_view kParentFailedCode = "parent_failed";

// One parent reference of an enqueue item, as the shim resolved it before the write: an earlier
// item of the list, or a stored job by its status (not found, unfinished, or the final status it
// ended in).
struct ParentRef {
  enum class Kind { earlier, unknown, open, succeeded, dead, cancelled } kind;
  int64_t index;  // for `earlier`: the list index it names
};

// A stored parent's status as a reference: every status but the final ones is unfinished;
// nothing for a name that is no job status.
std::optional<ParentRef::Kind> parent_state_of(std::string_view status);

// A job's parents counted at its birth: all of them, the unfinished, and those that ended dead or
// cancelled. The stores keep the counts with the child and add each parent's end to them, so a
// child (a batch's completion job above all) learns how its parents ended.
struct ParentTally {
  int64_t total = 0;
  int64_t open = 0;
  int64_t dead = 0;
  int64_t cancelled = 0;
  constexpr bool failed() const { return dead + cancelled > 0; }
};

// What a job with parents is when it is written: waiting for `open` unfinished parents, due at
// once (every parent succeeded, or failed under `release`), or cancelled at birth (a parent
// failed and its effect is `cancel`).
enum class BirthStatus { waiting, pending, cancelled };

constexpr BirthStatus birth_status(int64_t open, bool failed, ParentFailure on_failure) {
  if (failed && on_failure == ParentFailure::cancel) return BirthStatus::cancelled;
  return open > 0 ? BirthStatus::waiting : BirthStatus::pending;
}

constexpr std::string_view birth_status_name(BirthStatus b) {
  return b == BirthStatus::waiting ? "waiting" : b == BirthStatus::pending ? "pending" : "cancelled";
}

// Why an item's parents refuse it (the first that applies, in this order), or nothing.
enum class DependencyRefusal { none, too_many_parents, dependency_cycle, unknown_parent, parent_refused };

std::string_view refusal_code(DependencyRefusal r);

// Checks item `index`'s parents (at most `max_parents`: kMaxParents, or kMaxBatchMembers for a
// batch's completion). `refused_before(i)` says whether earlier item i was refused (its job is
// not written, so nothing may wait on it).
template <typename RefusedBefore>
DependencyRefusal check_parents(int64_t index, const ParentRef* parents, std::size_t count, std::size_t max_parents, RefusedBefore&& refused_before) {
  if (count > max_parents) return DependencyRefusal::too_many_parents;
  for (std::size_t i = 0; i < count; ++i) {
    if (parents[i].kind == ParentRef::Kind::earlier && parents[i].index >= index) return DependencyRefusal::dependency_cycle;
  }
  for (std::size_t i = 0; i < count; ++i) {
    if (parents[i].kind == ParentRef::Kind::unknown) return DependencyRefusal::unknown_parent;
  }
  for (std::size_t i = 0; i < count; ++i) {
    if (parents[i].kind == ParentRef::Kind::earlier && refused_before(parents[i].index)) return DependencyRefusal::parent_refused;
  }
  return DependencyRefusal::none;
}

}  // namespace postbox
