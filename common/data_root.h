// A daemon's data root (--data_root): the one directory tree its files may be read from and
// written to on behalf of a request, a job file or a manifest. A path given to it is refused
// (PERMISSION_DENIED naming the path, what it was for and the root) when it has a ".."
// component, or when it or its deepest existing ancestor, with every symlink resolved, lies
// outside the root. A relative path is taken as relative to the root.
//
// Datasets are inputs that live in shared, read-only places (/usr/share/datasets, a cache
// volume): a job's data_dir may also lie inside one of the dataset roots (--dataset_roots),
// checked the same way by ResolveInput. Nothing is ever written there.
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
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardps {

// The dataset roots without --dataset_roots (those that exist).
inline constexpr absl::string_view kDefaultDatasetRoots = "/usr/share/datasets";

class DataRoot {
 public:
  // Unconfined.
  DataRoot() = default;

  // The root at `path`, which must be an existing directory (INVALID_ARGUMENT naming `flag`
  // otherwise). Empty `path`: unconfined.
  static absl::StatusOr<DataRoot> Open(const std::string& path, absl::string_view flag);

  // Also `dataset_roots` (comma-separated directories) as roots of inputs read only. One that
  // does not exist is an error when `required` (given by the operator), skipped otherwise
  // (a default). Unconfined: ignored.
  absl::Status AddDatasetRoots(absl::string_view dataset_roots, absl::string_view flag,
                               bool required);

  bool confined() const { return !root_.empty(); }
  // The root with symlinks resolved ("" when unconfined).
  const std::string& path() const { return root_; }

  // `path` as the file to use (absolute), or PERMISSION_DENIED naming it, `what` it is for
  // ("snapshot 7's file", "the job's checkpoint dir") and the root; INVALID_ARGUMENT when it
  // is empty. Unconfined: `path` itself.
  absl::StatusOr<std::string> Resolve(absl::string_view path, absl::string_view what) const;

  // As Resolve, for an input read only (a dataset): inside the root or a dataset root.
  absl::StatusOr<std::string> ResolveInput(absl::string_view path, absl::string_view what) const;

  // The dataset roots, symlinks resolved.
  const std::vector<std::string>& dataset_roots() const { return dataset_roots_; }

 private:
  // `path` resolved as Resolve does, or PERMISSION_DENIED when it is inside none of `roots`.
  absl::StatusOr<std::string> ResolveIn(absl::string_view path, absl::string_view what,
                                        const std::vector<std::string>& roots,
                                        absl::string_view roots_name) const;

  std::string root_;
  std::vector<std::string> dataset_roots_;
};

}  // namespace shardps

#endif  // SHARDPS_COMMON_DATA_ROOT_H_
