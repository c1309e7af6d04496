// Test helpers of the evaluator's tests (testonly): in-process ps tasks holding a softmax
// model, a scripted chief, loop hooks that record instead of sleeping and logging, softmax
// parameters trained on the real Fashion-MNIST, and checkpoints written with the checkpoint
// library the way the chief and the ps write them.
//
// Thread-safety: used from the test's thread; FakeChief is thread-safe.
#ifndef SHARDPS_EVALUATOR_TEST_UTIL_H_
#define SHARDPS_EVALUATOR_TEST_UTIL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/ps_client.h"
#include "evaluator/chief_link.h"
#include "evaluator/eval_loop.h"
#include "proto/job.pb.h"
#include "ps_server/shard_store.h"

namespace shardps {
namespace testing {

// The softmax job "fm" of job id `job_id` on the default Fashion-MNIST directory.
JobSpec SoftmaxJob(const std::string& job_id, const std::string& checkpoint_dir = "");

// Softmax parameters (kernel [784,10], bias [10]) after `steps` SGD steps (batch 64, lr 0.1,
// from zeros) on the Fashion-MNIST training set, with the MLP's CPU compute.
std::vector<std::vector<float>> TrainSoftmax(int steps);

// Two in-process ps tasks.
class LocalPs {
 public:
  LocalPs();
  ~LocalPs();
  // A new client to both tasks.
  absl::StatusOr<std::unique_ptr<PsClient>> Connect();
  // Creates job `name`'s softmax variables (the kernel split in two, round robin) and assigns
  // `values` (kernel, bias).
  absl::Status CreateSoftmax(const std::string& name,
                             const std::vector<std::vector<float>>& values);

 private:
  std::vector<std::unique_ptr<ShardStore>> stores_;
};

// A chief whose answers are scripted: GetStatus returns the next scripted answer, and the
// last one again once the script is used up. ReportEval records and succeeds (or returns
// report_error when set).
class FakeChief : public ChiefLink {
 public:
  void Then(absl::StatusOr<JobStatus> answer);
  absl::StatusOr<JobStatus> GetStatus() override;
  absl::Status ReportEval(const ReportEvalRequest& request) override;
  std::vector<ReportEvalRequest> reports();
  int status_calls();
  void set_report_error(absl::Status error);

 private:
  absl::Mutex mu_;
  std::deque<absl::StatusOr<JobStatus>> script_ ABSL_GUARDED_BY(mu_);
  std::vector<ReportEvalRequest> reports_ ABSL_GUARDED_BY(mu_);
  int status_calls_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status report_error_ ABSL_GUARDED_BY(mu_);
};

// A JobStatus of `job` in `state` with `steps_done`.
JobStatus Status(const JobSpec& job, JobStatus::State state, int64_t steps_done,
                 bool training_done = false, const std::string& phase = "");

// Hooks that never wait: sleep records its timeout, calls `on_sleep` (with the count of
// sleeps so far), and says "stopping" once `max_sleeps` sleeps were made (so that a loop that
// would run forever ends with kStopped).
struct RecordingHooks {
  explicit RecordingHooks(int max_sleeps = 1000);
  EvalLoopHooks hooks;
  std::vector<absl::Duration> sleeps;
  std::vector<EvalRecord> evals;
  std::vector<std::string> logs;
  int contacts = 0;
  std::function<void(int sleeps)> on_sleep;
  // Log lines containing `text`.
  int LogsWith(const std::string& text) const;
  std::string AllLogs() const;
};

// Writes checkpoint `id` of `job` into `dir` (created when missing) with the chief's
// checkpoint library: the softmax `values` as two ps files (the kernel split 392 + 392 rows
// across them, the bias on ps 1), then the manifest (the commit point).
absl::Status WriteSoftmaxCheckpoint(const std::string& dir, const JobSpec& job, int64_t id,
                                    const std::vector<std::vector<float>>& values,
                                    int64_t steps_done, bool final);

// Writes checkpoint `id` of any model: variable k, names[k] of shape shapes[k], holds
// values[k]; one of two dimensions is split in halves of its rows across two ps files, any
// other is whole in the second (steps_done 1, not final).
absl::Status WriteModelCheckpoint(const std::string& dir, const JobSpec& job, int64_t id,
                                  const std::vector<std::string>& names,
                                  const std::vector<std::vector<int64_t>>& shapes,
                                  const std::vector<std::vector<float>>& values);

// Writes the data files of checkpoint `id` but no manifest: an interrupted checkpoint.
absl::Status WriteSoftmaxCheckpointWithoutManifest(const std::string& dir, const JobSpec& job,
                                                   int64_t id,
                                                   const std::vector<std::vector<float>>& values);

// A fresh directory under the test's temporary directory.
std::string NewTempDir(const std::string& prefix);

}  // namespace testing
}  // namespace shardps

#endif  // SHARDPS_EVALUATOR_TEST_UTIL_H_
