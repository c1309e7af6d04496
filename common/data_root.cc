#include "common/data_root.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

absl::Status DataRoot::AddDatasetRoots(absl::string_view dataset_roots, absl::string_view flag,
                                       bool required) {
  if (!confined()) return absl::OkStatus();
  for (absl::string_view dir : absl::StrSplit(dataset_roots, ',', absl::SkipWhitespace())) {
    const std::string path(absl::StripAsciiWhitespace(dir));
    struct stat st;
    const std::string real = RealPath(path);
    if (real.empty() || ::stat(real.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      if (!required) continue;
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": ", path, " is not an existing directory"));
    }
    if (real == "/") {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": ", path, " is the whole file system"));
    }
    dataset_roots_.push_back(real);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> DataRoot::Resolve(absl::string_view path,
                                              absl::string_view what) const {
  return ResolveIn(path, what, {root_}, absl::StrCat("the data root ", root_, " (--data_root)"));
}

absl::StatusOr<std::string> DataRoot::ResolveInput(absl::string_view path,
                                                   absl::string_view what) const {
  std::vector<std::string> roots = {root_};
  roots.insert(roots.end(), dataset_roots_.begin(), dataset_roots_.end());
  return ResolveIn(path, what, roots,
                   absl::StrCat("the data root ", root_, " (--data_root) and the dataset roots [",
                                absl::StrJoin(dataset_roots_, ", "), "] (--dataset_roots)"));
}

absl::StatusOr<std::string> DataRoot::ResolveIn(absl::string_view path, absl::string_view what,
                                                const std::vector<std::string>& roots,
                                                absl::string_view roots_name) const {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": the path is empty"));
  if (!confined()) return std::string(path);
  auto refuse = [&](const std::string& why) {
    return absl::PermissionDeniedError(absl::StrCat(what, " \"", path, "\" ", why, " ",
                                                    roots_name));
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
  const bool inside = std::any_of(roots.begin(), roots.end(),
                                  [&](const std::string& root) { return Within(real, root); });
  if (!inside) {
    return refuse(real == existing ? std::string("is outside")
                                   : absl::StrCat("resolves (through ", existing, " -> ", real,
                                                  ") outside"));
  }
  // Rebuild it on the resolved ancestor, so that what is used is what was checked.
  return absl::StrCat(real, absolute.substr(existing.size()));
}

}  // namespace shardps
