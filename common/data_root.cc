#include "common/data_root.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace shardps {
namespace {

// realpath(3), or "" when `path` does not exist (or cannot be resolved).
std::string RealPath(const std::string& path) {
  std::unique_ptr<char, decltype(&free)> resolved(realpath(path.c_str(), nullptr), &free);
  return resolved == nullptr ? std::string() : std::string(resolved.get());
}

bool Within(const std::string& path, const std::string& root) {
  return path == root || (absl::StartsWith(path, root) &&
                          (root == "/" || path.size() > root.size() && path[root.size()] == '/'));
}

}  // namespace

absl::StatusOr<DataRoot> DataRoot::Open(const std::string& path, absl::string_view flag) {
  DataRoot root;
  if (path.empty()) return root;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", path, ": not an existing directory"));
  }
  root.root_ = RealPath(path);
  if (root.root_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", path, ": cannot resolve it"));
  }
  return root;
}

absl::StatusOr<std::string> DataRoot::Resolve(absl::string_view path,
                                              absl::string_view what) const {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": the path is empty"));
  if (!confined()) return std::string(path);
  auto refuse = [&](const std::string& why) {
    return absl::PermissionDeniedError(absl::StrCat(what, " \"", path, "\" ", why,
                                                    " the data root ", root_, " (--data_root)"));
  };
  std::vector<absl::string_view> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  for (absl::string_view part : parts) {
    if (part == "..") return refuse("has a \"..\" component: paths must stay inside");
  }
  const std::string absolute =
      path.front() == '/' ? std::string(path) : absl::StrCat(root_, "/", path);
  // The deepest existing ancestor (the path itself when it exists), symlinks resolved.
  std::string existing = absolute;
  std::string real = RealPath(existing);
  while (real.empty()) {
    const size_t slash = existing.rfind('/');
    if (slash == std::string::npos || slash == 0) {
      existing = "/";
      real = "/";
      break;
    }
    existing.resize(slash);
    real = RealPath(existing);
  }
  if (!Within(real, root_)) {
    return refuse(real == existing ? std::string("is outside")
                                   : absl::StrCat("resolves (through ", existing, " -> ", real,
                                                  ") outside"));
  }
  // Rebuild it on the resolved ancestor, so that what is used is what was checked.
  return absl::StrCat(real, absolute.substr(existing.size()));
}

}  // namespace shardps
