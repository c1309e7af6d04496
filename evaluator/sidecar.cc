#include "evaluator/sidecar.h"

#include <sys/stat.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_reader.h"
#include "common/error_detail.h"
#include "common/status_macros.h"
#include "coordinator/job_spec.h"
#include "evaluator/checkpoint_params.h"
#include "evaluator/evaluator.h"

namespace shardps {
namespace {

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

class Sidecar {
 public:
  Sidecar(const SidecarOptions& options, const EvalLoopHooks& hooks)
      : options_(options), hooks_(hooks) {}

  EvalOutcome Run() {
    Log(absl::StrCat("watching checkpoint directory ", options_.checkpoint_dir));
    while (true) {
      // The chief first, the directory second: a job's final checkpoint is committed before
      // the chief says the job ended, so a listing made after that answer holds it.
      std::optional<JobStatus> chief_status = AskChief();
      const bool final_evaluated = Poll();
      if (!options_.long_lived) {
        if (final_evaluated) return EvalOutcome::kSucceeded;
        if (chief_status.has_value() && OurJob(*chief_status)) {
          switch (chief_status->state()) {
            case JobStatus::FAILED:
            case JobStatus::CANCELLED:
              Log(absl::StrCat(
                  "job ", chief_status->job_id(), " ended ",
                  JobStatus::State_Name(chief_status->state()),
                  chief_status->error().empty() ? "" : absl::StrCat(": ", chief_status->error())));
              return EvalOutcome::kJobFailed;
            case JobStatus::SUCCEEDED:
              Log(absl::StrCat("job ", chief_status->job_id(),
                               " succeeded without a final checkpoint to evaluate"));
              return EvalOutcome::kSucceeded;
            default:
              break;
          }
        }
      }
      if (hooks_.sleep(options_.poll_interval)) return EvalOutcome::kStopped;
    }
  }

 private:
  std::optional<JobStatus> AskChief() {
    if (options_.chief == nullptr) return std::nullopt;
    absl::StatusOr<JobStatus> status = options_.chief->GetStatus();
    if (!status.ok()) {
      if (!chief_down_) Log(absl::StrCat("chief unreachable (", status.status().ToString(), ")"));
      chief_down_ = true;
      return std::nullopt;
    }
    if (chief_down_) Log("chief reachable again");
    chief_down_ = false;
    if (hooks_.on_contact) hooks_.on_contact();
    return *std::move(status);
  }

  // Whether the chief's job is the one whose checkpoints are in the directory.
  bool OurJob(const JobStatus& status) const {
    if (status.job_id().empty()) return false;
    return status.job_id() == job_id_ || status.job().checkpoint().dir() == options_.checkpoint_dir;
  }

  // Evaluates each committed checkpoint not tried yet, oldest first. Returns whether one of
  // them was a final one, evaluated.
  bool Poll() {
    absl::StatusOr<CheckpointDir> dir = CheckpointDir::OpenReadOnly(options_.checkpoint_dir);
    if (!dir.ok()) {
      Problem(absl::StrCat("waiting for the checkpoint directory: ", dir.status().ToString()));
      return false;
    }
    std::vector<std::string> skipped;
    absl::StatusOr<std::vector<CommittedCheckpoint>> list = dir->List(&skipped);
    if (!list.ok()) {
      Problem(absl::StrCat("cannot list the checkpoint directory: ", list.status().ToString()));
      return false;
    }
    last_problem_.clear();
    for (const std::string& why : skipped) {
      if (skipped_logged_.insert(why).second) Log(absl::StrCat("skipping a checkpoint: ", why));
    }
    std::sort(
        list->begin(), list->end(),
        [](const CommittedCheckpoint& a, const CommittedCheckpoint& b) { return a.id < b.id; });
    bool final = false;
    for (const CommittedCheckpoint& checkpoint : *list) {
      if (!tried_.insert({checkpoint.manifest.job_id, checkpoint.id}).second) continue;
      if (hooks_.on_contact) hooks_.on_contact();  // a new checkpoint: the job lives
      job_id_ = checkpoint.manifest.job_id;
      absl::StatusOr<EvalRecord> record = Evaluate(checkpoint);
      if (!record.ok()) {
        if (!PathExists(checkpoint.manifest_path)) {
          Log(absl::StrCat("checkpoint ", checkpoint.id, " (", checkpoint.path,
                           ") was pruned while it was read; skipped"));
        } else {
          Log(absl::StrCat("checkpoint ", checkpoint.id, " (", checkpoint.path,
                           ") skipped: ", record.status().ToString()));
        }
        continue;
      }
      const EvalMetrics& m = record->metrics;
      Log(absl::StrCat("checkpoint ", checkpoint.id, " (job ", record->job_id, ", ", m.steps_done(),
                       " steps", record->final ? ", final" : "", "): test accuracy ", m.accuracy(),
                       " loss ", m.loss()));
      if (hooks_.on_eval) hooks_.on_eval(*record);
      Report(*record);
      if (record->final) final = true;
    }
    return final;
  }

  absl::StatusOr<EvalRecord> Evaluate(const CommittedCheckpoint& checkpoint) {
    if (options_.before_read) options_.before_read(checkpoint);
    ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader,
                     CheckpointReader::Open(checkpoint.manifest_path));
    const Manifest& manifest = reader->manifest();
    if (evaluator_ == nullptr || manifest.job_json != evaluator_job_json_) {
      evaluator_.reset();
      // The job file as the chief ran it, every field stated (a sync job's num_replicas may
      // be above 1, which a count of 1 worker would refuse).
      absl::StatusOr<JobSpec> job = ParseJobSpec(manifest.job_json, kStoredJobWorkers);
      if (!job.ok()) {
        return Annotate(job.status(), absl::StrCat(reader->manifest_path(), ": \"job\""));
      }
      job->set_job_id(manifest.job_id);
      ASSIGN_OR_RETURN(evaluator_, Evaluator::Create(*job, *options_.device, options_.data_root));
      evaluator_job_json_ = manifest.job_json;
    }
    std::vector<std::vector<float>> values = evaluator_->NewValues();
    int64_t version = 0;
    RETURN_IF_ERROR(ReadCheckpointParams(reader.get(), *evaluator_, &values, &version));
    ASSIGN_OR_RETURN(EvalMetrics metrics, evaluator_->Evaluate(values));
    metrics.set_step(version);
    metrics.set_checkpoint_id(manifest.checkpoint_id);
    metrics.set_steps_done(manifest.progress.steps_done);
    return EvalRecord{manifest.job_id, metrics, /*consistent=*/true, manifest.final};
  }

  void Report(const EvalRecord& record) {
    if (options_.chief == nullptr) return;
    ReportEvalRequest request;
    request.set_job_id(record.job_id);
    *request.mutable_result() = record.metrics;
    request.set_final(record.final);
    absl::Status reported = options_.chief->ReportEval(request);
    if (!reported.ok()) {
      Problem(absl::StrCat("report of checkpoint ", record.metrics.checkpoint_id(),
                           " to the chief failed: ", reported.ToString()));
    }
  }

  // Logs a problem unless it is the one logged last.
  void Problem(const std::string& what) {
    if (what == last_problem_) return;
    last_problem_ = what;
    Log(what);
  }

  void Log(const std::string& line) const { hooks_.Log(absl::StrCat("evaluator: ", line)); }

  const SidecarOptions& options_;
  const EvalLoopHooks& hooks_;
  // Checkpoints tried, evaluated or not: (job id, checkpoint id). A job started afresh in the
  // same directory numbers its checkpoints from 1 again, under a new job id.
  std::set<std::pair<std::string, int64_t>> tried_;
  std::set<std::string> skipped_logged_;
  std::string job_id_;  // of the newest checkpoint tried
  std::unique_ptr<Evaluator> evaluator_;
  std::string evaluator_job_json_;
  bool chief_down_ = false;
  std::string last_problem_;
};

}  // namespace

EvalOutcome RunSidecar(const SidecarOptions& options, const EvalLoopHooks& hooks) {
  return Sidecar(options, hooks).Run();
}

}  // namespace shardps
