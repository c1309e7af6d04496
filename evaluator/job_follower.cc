#include "evaluator/job_follower.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/error_detail.h"
#include "common/status_macros.h"
#include "evaluator/evaluator.h"
#include "evaluator/ps_snapshot.h"

namespace shardps {
namespace {

// Doubling waits after consecutive failures.
class Backoff {
 public:
  Backoff(absl::Duration min, absl::Duration max) : min_(min), max_(max), next_(min) {}
  absl::Duration Next() {
    const absl::Duration wait = next_;
    next_ = std::min(next_ * 2, max_);
    return wait;
  }
  void Reset() { next_ = min_; }

 private:
  const absl::Duration min_, max_;
  absl::Duration next_;
};

// The model compiled into the evaluator, on the live ps.
class ModelLiveEvaluator : public LiveEvaluator {
 public:
  explicit ModelLiveEvaluator(std::unique_ptr<Evaluator> evaluator)
      : evaluator_(std::move(evaluator)), values_(evaluator_->NewValues()) {}

  absl::Status Check(PsClient* ps) override { return CheckVariablesOnPs(ps, *evaluator_); }

  absl::StatusOr<EvalMetrics> Evaluate(PsClient* ps, const JobStatus& /*status*/, bool /*final*/,
                                       int max_pull_attempts, bool* consistent) override {
    ASSIGN_OR_RETURN(PullVersions versions,
                     PullSnapshot(ps, *evaluator_, max_pull_attempts, &values_, consistent));
    ASSIGN_OR_RETURN(EvalMetrics metrics, evaluator_->Evaluate(values_));
    metrics.set_step(versions.min_version);
    return metrics;
  }

 private:
  const std::unique_ptr<Evaluator> evaluator_;
  std::vector<std::vector<float>> values_;
};

absl::StatusOr<std::unique_ptr<LiveEvaluator>> NewModelLiveEvaluator(
    const JobSpec& job, const ComputeDevice* device, const DataRoot& data_root) {
  if (device == nullptr) return absl::InternalError("evaluator: no compute device");
  ASSIGN_OR_RETURN(std::unique_ptr<Evaluator> evaluator,
                   Evaluator::Create(job, *device, data_root));
  return std::make_unique<ModelLiveEvaluator>(std::move(evaluator));
}

class Follower {
 public:
  Follower(const JobFollowerOptions& options, const EvalLoopHooks& hooks)
      : options_(options),
        hooks_(hooks),
        chief_backoff_(options.min_backoff, options.max_backoff),
        eval_backoff_(options.min_backoff, options.max_backoff) {}

  EvalOutcome Run() {
    while (true) {
      absl::Duration wait = options_.poll_interval;
      absl::StatusOr<JobStatus> status = options_.chief->GetStatus();
      if (!status.ok()) {
        ChiefDown(status.status());
        wait = chief_backoff_.Next();
      } else {
        ChiefUp();
        if (hooks_.on_contact) hooks_.on_contact();
        if (std::optional<EvalOutcome> outcome = Handle(*status, &wait)) return *outcome;
      }
      if (hooks_.sleep(wait)) return EvalOutcome::kStopped;
    }
  }

 private:
  // One status of the chief. Returns the outcome when the loop ends; sets *wait otherwise.
  std::optional<EvalOutcome> Handle(const JobStatus& status, absl::Duration* wait) {
    if (status.job_id() != job_id_ || status.job_id().empty()) {
      const bool ended = status.state() == JobStatus::SUCCEEDED ||
                         status.state() == JobStatus::FAILED ||
                         status.state() == JobStatus::CANCELLED;
      // An evaluator of one job (not long-lived) that first sees the chief with its job
      // already ended (it started late; the job failed at once) follows that job to its end
      // instead of waiting for a next one that never comes: a succeeded job still gets its
      // final evaluation (the chief waits for it), a failed one ends the evaluator.
      if (status.state() != JobStatus::RUNNING && !(ended && !options_.long_lived)) {
        Waiting(status);
        return std::nullopt;
      }
      Follow(status);
    }
    if (ended_) return std::nullopt;  // long-lived: waiting for the next job
    switch (status.state()) {
      case JobStatus::RUNNING:
        Running(status, wait);
        if (final_reported_ && !options_.long_lived) return EvalOutcome::kSucceeded;
        if (final_reported_) ended_ = true;
        return std::nullopt;
      case JobStatus::SUCCEEDED:
        if (!final_done_) {
          // Once: the ps may have been stopped with the job.
          absl::Status final = EvaluateAndReport(status, /*final=*/true);
          if (!final.ok()) {
            Log(absl::StrCat("final evaluation of job ", job_id_,
                             " failed (the job succeeded): ", final.ToString()));
          }
        }
        Log(absl::StrCat("job ", job_id_, " succeeded"));
        if (!options_.long_lived) return EvalOutcome::kSucceeded;
        ended_ = true;
        return std::nullopt;
      case JobStatus::FAILED:
      case JobStatus::CANCELLED:
        Log(absl::StrCat("job ", job_id_, " ended ", JobStatus::State_Name(status.state()),
                         status.error().empty() ? "" : absl::StrCat(": ", status.error()),
                         "; no final evaluation"));
        if (!options_.long_lived) return EvalOutcome::kJobFailed;
        ended_ = true;
        return std::nullopt;
      default:
        return std::nullopt;
    }
  }

  void Follow(const JobStatus& status) {
    Log(absl::StrCat(job_id_.empty() ? "following job "
                                     : absl::StrCat("job ", job_id_, " is gone; following job "),
                     status.job_id(), " (model ", status.job().model(), ")"));
    job_id_ = status.job_id();
    evaluator_.reset();
    ps_.reset();
    last_eval_steps_ = -1;
    final_done_ = false;
    final_reported_ = false;
    ended_ = false;
    phase_.clear();
    waiting_for_.clear();
    last_problem_.clear();
    eval_backoff_.Reset();
  }

  void Running(const JobStatus& status, absl::Duration* wait) {
    if (!status.phase().empty()) {
      // Logged once per kind of pause ("paused", "recovering": the text before the first
      // ':'; the rest counts seconds), and not for routine checkpoints.
      const std::string kind(absl::string_view(status.phase()).substr(0, status.phase().find(':')));
      if (kind != phase_ && kind != "checkpointing") {
        Log(absl::StrCat("job ", job_id_, " is not advancing (", status.phase(), "); waiting"));
      }
      phase_ = kind;
      return;
    }
    if (!phase_.empty() && phase_ != "checkpointing") {
      Log(absl::StrCat("job ", job_id_, " advances again"));
    }
    phase_.clear();
    const bool final = status.training_done();
    if (final && final_done_) {
      // Evaluated; the report did not reach the chief yet.
      absl::Status reported = Report(final_record_);
      if (reported.ok()) final_reported_ = true;
      return;
    }
    if (!final && !DueForEvaluation(status)) return;
    absl::Status evaluated = EvaluateAndReport(status, final);
    if (!evaluated.ok()) {
      Problem(absl::StrCat("evaluation of job ", job_id_, " failed: ", evaluated.ToString(),
                           " (retrying)"));
      *wait = eval_backoff_.Next();
      return;
    }
    eval_backoff_.Reset();
    last_problem_.clear();
  }

  bool DueForEvaluation(const JobStatus& status) const {
    if (last_eval_steps_ < 0) return true;
    // Fewer steps than at the last evaluation: the job was rolled back, its state is new.
    if (status.steps_done() < last_eval_steps_) return true;
    const int64_t every = std::max<int64_t>(1, status.job().eval_every_steps());
    return status.steps_done() - last_eval_steps_ >= every;
  }

  // Evaluates a snapshot of the ps, records it and reports it to the chief. Errors are the
  // evaluation's (the report's are logged).
  absl::Status EvaluateAndReport(const JobStatus& status, bool final) {
    if (evaluator_ == nullptr) {
      if (options_.new_evaluator) {
        ASSIGN_OR_RETURN(evaluator_, options_.new_evaluator(status.job()));
      } else {
        ASSIGN_OR_RETURN(evaluator_, NewModelLiveEvaluator(status.job(), options_.device, options_.data_root));
      }
    }
    std::vector<std::string> addresses;
    for (const PsInfo& p : status.ps()) addresses.push_back(p.address());
    if (ps_ != nullptr && addresses != ps_addresses_) {
      Log(absl::StrCat("job ", job_id_, " now runs on ", addresses.size(), " ps (layout version ",
                       status.layout_version(), "); reconnecting"));
      ps_.reset();
    }
    if (ps_ == nullptr) {
      absl::StatusOr<std::unique_ptr<PsClient>> ps = options_.connect_ps(addresses);
      if (!ps.ok()) return Annotate(ps.status(), "connecting to the ps tasks");
      absl::Status checked = evaluator_->Check(ps->get());
      if (!checked.ok()) return checked;
      ps_ = *std::move(ps);
      ps_addresses_ = addresses;
    }
    bool consistent = false;
    // The job's time as the snapshot is read (`status` was fetched just before).
    const double job_elapsed_s = status.elapsed_s();
    absl::StatusOr<EvalMetrics> evaluated = evaluator_->Evaluate(
        ps_.get(), status, final, options_.max_pull_attempts, &consistent);
    if (!evaluated.ok()) {
      ps_.reset();  // the next attempt re-discovers the layout
      return evaluated.status();
    }
    EvalMetrics metrics = *std::move(evaluated);
    metrics.set_steps_done(status.steps_done());
    metrics.set_job_elapsed_s(job_elapsed_s);
    EvalRecord record{job_id_, metrics, consistent, final};
    if (hooks_.on_eval) hooks_.on_eval(record);
    last_eval_steps_ = status.steps_done();
    if (final) {
      final_done_ = true;
      final_record_ = record;
      Log(absl::StrCat("final test accuracy ", metrics.accuracy(), " loss ", metrics.loss(),
                       " at version ", metrics.step(), " (job ", job_id_, ")"));
    }
    if (Report(record).ok() && final) final_reported_ = true;
    return absl::OkStatus();
  }

  absl::Status Report(const EvalRecord& record) {
    ReportEvalRequest request;
    request.set_job_id(record.job_id);
    *request.mutable_result() = record.metrics;
    request.set_final(record.final);
    absl::Status reported = options_.chief->ReportEval(request);
    if (!reported.ok()) Problem(absl::StrCat("report to the chief failed: ", reported.ToString()));
    return reported;
  }

  void Waiting(const JobStatus& status) {
    const std::string what =
        status.job_id().empty()
            ? std::string("no job")
            : absl::StrCat("job ", status.job_id(), " ", JobStatus::State_Name(status.state()));
    if (what != waiting_for_) {
      Log(absl::StrCat("the chief has ", what, "; waiting for a running job"));
      waiting_for_ = what;
    }
  }

  void ChiefDown(const absl::Status& status) {
    if (chief_down_since_ != absl::InfiniteFuture()) return;
    chief_down_since_ = absl::Now();
    Log(absl::StrCat("chief unreachable (", status.ToString(),
                     "); waiting for it (a restarted chief resumes the job)"));
  }

  void ChiefUp() {
    chief_backoff_.Reset();
    if (chief_down_since_ == absl::InfiniteFuture()) return;
    Log(absl::StrCat("chief reachable again after ",
                     absl::FormatDuration(
                         absl::Trunc(absl::Now() - chief_down_since_, absl::Milliseconds(100)))));
    chief_down_since_ = absl::InfiniteFuture();
  }

  // Logs a problem unless it is the one logged last.
  void Problem(const std::string& what) {
    if (what == last_problem_) return;
    last_problem_ = what;
    Log(what);
  }

  void Log(const std::string& line) const { hooks_.Log(absl::StrCat("evaluator: ", line)); }

  const JobFollowerOptions& options_;
  const EvalLoopHooks& hooks_;
  Backoff chief_backoff_;
  Backoff eval_backoff_;
  absl::Time chief_down_since_ = absl::InfiniteFuture();

  std::string job_id_;  // the job followed ("" before the first)
  std::unique_ptr<LiveEvaluator> evaluator_;
  std::unique_ptr<PsClient> ps_;
  std::vector<std::string> ps_addresses_;  // ps_'s
  int64_t last_eval_steps_ = -1;
  bool final_done_ = false;      // the final evaluation was made (final_record_)
  bool final_reported_ = false;  // ... and the chief has it
  bool ended_ = false;           // long-lived: the job ended; waiting for the next
  EvalRecord final_record_;
  std::string phase_;        // the kind of phase last seen, while the job does not advance
  std::string waiting_for_;  // what the chief had when we last logged waiting
  std::string last_problem_;
};

}  // namespace

EvalOutcome FollowChiefJobs(const JobFollowerOptions& options, const EvalLoopHooks& hooks) {
  return Follower(options, hooks).Run();
}

}  // namespace shardps
