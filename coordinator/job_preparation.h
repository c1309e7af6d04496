// Preparing a submitted job before the chief runs it: sizing it from its dataset's
// description, its model's variables, its checkpoint directory (JobStore: identity, state,
// --fresh), and the ps tasks' state, which decides how it starts: from the ps tasks' live
// state when every ps still holds this generation's (no work lost), rolled back to the newest
// usable checkpoint, or fresh (warm-started when the job says so). The variables are created
// (placed) on the ps and the start is recorded in the directory; a job the directory says
// had finished is reported as such and not trained.
//
// Thread-safety: functions; PrepareJob blocks on the data, the disk and the ps, and the chief
// calls it holding no lock.
#ifndef SHARDPS_COORDINATOR_JOB_PREPARATION_H_
#define SHARDPS_COORDINATOR_JOB_PREPARATION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/ps_client.h"
#include "coordinator/job_store.h"
#include "coordinator/scheduler.h"
#include "model/model.h"
#include "proto/coordinator.pb.h"
#include "proto/job.pb.h"
#include "proto/ps.pb.h"

namespace shardps {

// A job ready to run, or one that had finished (response.already_finished()).
struct PreparedJob {
  JobSpec job;  // its job_id set (the stored one when the directory knows the job)
  int64_t steps_per_epoch = 0;
  // The step queue, restored to where the job resumes; null for a finished job.
  std::unique_ptr<Scheduler> scheduler;
  std::vector<VariableDef> defs;
  std::unique_ptr<JobStore> store;  // null: the job has no durable state
  JobStore::State state;            // as recorded now
  std::string checkpoint_error;     // why the job has no durable state when it should
  int64_t generation = 0;
  std::vector<uint64_t> incarnations;  // of every ps, as the job starts
  // The job's layout: the ps its shards are on (the client's set once prepared) and its
  // version (JobStore::State).
  std::vector<std::string> ps_addresses;
  int64_t layout_version = 1;
  int dense_ps = 0;  // the dense variables are on the first dense_ps of them (0: all)
  SubmitJobResponse response;
};

struct PrepareOptions {
  PsClient* ps = nullptr;  // not owned
  // The ps `ps` reaches now, and the chief's TF_CONFIG ps job (empty: current_ps). A job runs
  // on the layout its journal records (a restarted chief follows a scale-ps) or, started
  // fresh, on the first JobSpec.num_ps of cluster_ps; use_ps moves `ps` onto that set when
  // it is another (unset: such a job is refused).
  std::vector<std::string> current_ps;
  std::vector<std::string> cluster_ps;
  std::function<absl::Status(const std::vector<std::string>&)> use_ps;
  // How long a ps that does not answer a Health call is retried.
  absl::Duration ps_unreachable_after = absl::Seconds(3);
};

// Prepares `job` (parsed, with its checkpoint defaults applied). INVALID_ARGUMENT naming the
// job file's field at fault (data_dir, model, warm_start, a model too large for the ps, a
// directory that holds another job, num_ps past TF_CONFIG's ps); FAILED_PRECONDITION when a
// scaled job's journal names a ps TF_CONFIG lacks (but not all of them), or when `resume` is
// RESUME and there is nothing to resume from; the ps's errors otherwise.
absl::StatusOr<PreparedJob> PrepareJob(JobSpec job, SubmitJobRequest::Resume resume,
                                       const PrepareOptions& options);

// The variables of the job's model, as the chief creates them on the ps: named
// "{job}/{variable}", with the job's optimizer (its embedding optimizer for row variables),
// the update of its mode, and dynamic tables' settings.
std::vector<VariableDef> JobVariables(const JobSpec& job, const Model& model);

// The bytes of parameters and optimizer slots `defs` take on the ps (a dynamic table: at its
// row budget).
int64_t JobBytes(const std::vector<VariableDef>& defs);

// Whether `defs` fit in what the ps tasks (`health`, one per ps) can still allocate:
// INVALID_ARGUMENT naming both sizes when not. A ps without a memory budget fits anything.
absl::Status CheckModelFits(const std::vector<VariableDef>& defs,
                            const std::vector<HealthResponse>& health);

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_JOB_PREPARATION_H_
