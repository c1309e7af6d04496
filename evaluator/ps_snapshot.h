// Reading a model's parameters from the live ps tasks for the evaluator's ps mode: every
// shard of every variable at one version (a consistent snapshot), retried while updates land
// between the shards.
//
// Thread-safety: functions; `ps` is used as PsClient allows (thread-safe).
#ifndef SHARDPS_EVALUATOR_PS_SNAPSHOT_H_
#define SHARDPS_EVALUATOR_PS_SNAPSHOT_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/ps_client.h"
#include "evaluator/evaluator.h"

namespace shardps {

// Discovers the ps tasks' layout and checks that they hold every parameter of `evaluator`'s
// model with its shape: FAILED_PRECONDITION naming the variable otherwise (the chief has not
// created it yet, or another job's model uses the name); Discover's error as it is.
absl::Status CheckVariablesOnPs(PsClient* ps, const Evaluator& evaluator);

// Pulls dense `targets` whole and `row_targets` at their ids, all in flight at once, again (up
// to `max_attempts` pulls, 5 ms apart) until every shard read has the same version. Returns
// the range of versions of the last pull; `consistent` says whether it was one version. The
// pull's error, naming the variable and ps, otherwise. The Python package's evaluator reads
// the user's variables with it.
absl::StatusOr<PullVersions> PullConsistent(PsClient* ps, const std::vector<PullTarget>& targets,
                                            const std::vector<RowsPullTarget>& row_targets,
                                            int max_attempts, bool* consistent);

// Pulls every parameter of `evaluator`'s model into `values` (from evaluator.NewValues()):
// dense variables whole, tables at the rows of Evaluator::row_keys, all in flight at once,
// again (up to `max_attempts` pulls, 5 ms apart) until every shard has the same version.
// Returns the range of versions of the last pull; `consistent` says whether it was one
// version. The pull's error, naming the variable and ps, otherwise.
absl::StatusOr<PullVersions> PullSnapshot(PsClient* ps, const Evaluator& evaluator,
                                          int max_attempts, std::vector<std::vector<float>>* values,
                                          bool* consistent);

}  // namespace shardps

#endif  // SHARDPS_EVALUATOR_PS_SNAPSHOT_H_
