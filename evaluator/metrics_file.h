// The evaluator's metrics file: one JSON object per line (JSON Lines), appended as each
// evaluation completes, from either mode of the daemon:
//
//   {"job_id": "fashion-mlp-1a2b", "step": 4200, "version": 4200, "checkpoint_id": 7,
//    "time": 1795412345.500, "loss": 0.331234, "accuracy": 0.881200, "examples": 10000,
//    "consistent": true, "final": false}
//
// "step" is the job's steps done at the evaluated state, "version" the parameters' version on
// the ps (the lowest shard version evaluated), "checkpoint_id" the checkpoint evaluated (0: a
// snapshot of the live ps), "consistent" whether every shard had one version, "final" whether
// it evaluates the job's final model.
//
// The same evaluation as TensorBoard's series (EvalScalars): eval/accuracy, eval/loss and,
// for click models, eval/auc, at step = "step" (the daemon's --tensorboard_dir).
//
// Thread-safety: a MetricsFile is used by one thread.
#ifndef SHARDPS_EVALUATOR_METRICS_FILE_H_
#define SHARDPS_EVALUATOR_METRICS_FILE_H_

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "observability/tfevents_writer.h"
#include "proto/job.pb.h"

namespace shardps {

// One evaluation, as both modes report it.
struct EvalRecord {
  std::string job_id;
  EvalMetrics metrics;  // step (version), steps_done and checkpoint_id set by the mode
  bool consistent = true;
  bool final = false;
};

// The record's line (no newline).
std::string EvalJsonLine(const EvalRecord& record);

// The record's values as TensorBoard's series, named as in its line: eval/accuracy,
// eval/loss, and eval/auc when the line has "auc". Their step: metrics.steps_done().
std::vector<Scalar> EvalScalars(const EvalRecord& record);

class MetricsFile {
 public:
  // Opens `path` for appending, creating it. FAILED_PRECONDITION naming the path otherwise.
  static absl::StatusOr<std::unique_ptr<MetricsFile>> Open(const std::string& path);

  // Appends the record's line and flushes it. UNAVAILABLE naming the path when the write
  // fails (disk full).
  absl::Status Append(const EvalRecord& record);

 private:
  MetricsFile(std::string path, std::ofstream out) : path_(std::move(path)), out_(std::move(out)) {}
  const std::string path_;
  std::ofstream out_;
};

}  // namespace shardps

#endif  // SHARDPS_EVALUATOR_METRICS_FILE_H_
