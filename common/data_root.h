// A daemon's data root (--data_root): the one directory tree its files may be read from and
// written to on behalf of a request, a job file or a manifest. A path given to it is refused
// (PERMISSION_DENIED naming the path, what it was for and the root) when it has a ".."
// component, or when it or its deepest existing ancestor, with every symlink resolved, lies
// outside the root. A relative path is taken as relative to the root.
//
// An unconfined DataRoot (no --data_root) lets every path through: the daemons log so at
// start, and the launchers and the manifests always give one.
//
// The check is made when the path is given; a directory swapped for a symlink afterwards by
// someone who can write inside the root is outside what it guards (that user can already
// write the daemon's files).
//
// Thread-safety: immutable after Open; safe to share.
#ifndef SHARDPS_COMMON_DATA_ROOT_H_
#define SHARDPS_COMMON_DATA_ROOT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardps {

class DataRoot {
 public:
  // Unconfined.
  DataRoot() = default;

  // The root at `path`, which must be an existing directory (INVALID_ARGUMENT naming `flag`
  // otherwise). Empty `path`: unconfined.
  static absl::StatusOr<DataRoot> Open(const std::string& path, absl::string_view flag);

  bool confined() const { return !root_.empty(); }
  // The root with symlinks resolved ("" when unconfined).
  const std::string& path() const { return root_; }

  // `path` as the file to use (absolute), or PERMISSION_DENIED naming it, `what` it is for
  // ("snapshot 7's file", "the job's checkpoint dir") and the root; INVALID_ARGUMENT when it
  // is empty. Unconfined: `path` itself.
  absl::StatusOr<std::string> Resolve(absl::string_view path, absl::string_view what) const;

 private:
  std::string root_;
};

}  // namespace shardps

#endif  // SHARDPS_COMMON_DATA_ROOT_H_
