// LayoutMap: the layouts of the variables a PsClient knows (made by CreateVariables, rebuilt
// by Discover, forgotten by DropShardsAll), by name. Data calls read a copy of one layout, so
// a layout may change while calls made with the old one run.
//
// Thread-safety: thread-safe.
#ifndef SHARDPS_CLIENT_LAYOUT_MAP_H_
#define SHARDPS_CLIENT_LAYOUT_MAP_H_

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/variable_layout.h"
#include "proto/ps.pb.h"

namespace shardps {

class LayoutMap {
 public:
  // NOT_FOUND naming the variable when it is not known.
  absl::StatusOr<VariableLayout> Get(const std::string& name) const;
  // The layout of a variable for a whole-variable `what` (pull, push, assign) of `floats`
  // values: NOT_FOUND for an unknown variable, INVALID_ARGUMENT as CheckDenseSize.
  absl::StatusOr<VariableLayout> GetDense(const std::string& name, const char* what,
                                          size_t floats) const;
  // The names of every variable known, in order.
  std::vector<std::string> Names() const;

  // Sets the layout of each variable (by layout.name), replacing one known before.
  void Put(std::vector<VariableLayout> layouts);
  // Forgets the variables a DropShards request drops (every one with request.all()).
  void Forget(const DropShardsRequest& request);

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, VariableLayout> layouts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardps

#endif  // SHARDPS_CLIENT_LAYOUT_MAP_H_
