#include "client/layout_map.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace shardps {

absl::StatusOr<VariableLayout> LayoutMap::Get(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = layouts_.find(name);
  if (it == layouts_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "variable \"", name, "\" is not known to this client (create it or Discover())"));
  }
  return it->second;
}

absl::StatusOr<VariableLayout> LayoutMap::GetDense(const std::string& name, const char* what,
                                                   size_t floats) const {
  absl::StatusOr<VariableLayout> layout = Get(name);
  if (!layout.ok()) return layout;
  const absl::Status size = CheckDenseSize(*layout, what, floats);
  if (!size.ok()) return size;
  return layout;
}

std::vector<std::string> LayoutMap::Names() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  for (const auto& [name, layout] : layouts_) names.push_back(name);
  return names;
}

void LayoutMap::Put(std::vector<VariableLayout> layouts) {
  absl::MutexLock lock(&mu_);
  for (VariableLayout& layout : layouts) layouts_[layout.name] = std::move(layout);
}

void LayoutMap::Forget(const DropShardsRequest& request) {
  absl::MutexLock lock(&mu_);
  if (request.all()) {
    layouts_.clear();
  } else {
    for (const std::string& variable : request.variables()) layouts_.erase(variable);
  }
}

}  // namespace shardps
