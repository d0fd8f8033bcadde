// Job dependencies: the names the API and the stores use (postbox/dependencies.h).
#include "postbox/dependencies.h"

namespace postbox {

std::optional<ParentFailure> parent_failure_named(std::string_view name) {
  if (name == "cancel") return ParentFailure::cancel;
  if (name == "run") return ParentFailure::release;
  return std::nullopt;
}

std::optional<ParentRef::Kind> parent_state_of(std::string_view status) {
  if (status == "succeeded") return ParentRef::Kind::succeeded;
  if (status == "dead") return ParentRef::Kind::dead;
  if (status == "cancelled") return ParentRef::Kind::cancelled;
  if (status == "pending" || status == "running" || status == "retrying" || status == "waiting") return ParentRef::Kind::open;
  return std::nullopt;
}

std::string_view refusal_code(DependencyRefusal r) {
  switch (r) {
    case DependencyRefusal::too_many_parents: return "too_many_parents";
    case DependencyRefusal::dependency_cycle: return "dependency_cycle";
    case DependencyRefusal::unknown_parent: return "unknown_parent";
    case DependencyRefusal::parent_refused: return "parent_refused";
    case DependencyRefusal::none: break;
  }
  return "";
}

}  // namespace postbox
