// single_process: a job file's model trained in this one process, with no ps, no chief and no
// network (bench/model_trainer.h): the compute limit that the benchmarks hold a cluster to,
// for any built-in model (the MLP, the DLRM click model).
//
//   single_process --job=JOB.json [--threads=1] [--eval_every_steps=N] [--metrics_file=F]
//                  [--eval=concurrent|paused]
//
// It trains the job's steps (epochs x batches of the job's batch size, the job's seed and
// batches) on --threads CPU threads, and evaluates the test split with the evaluator's code on
// one thread every --eval_every_steps steps (default: the job's eval_every_steps) and at the
// end. --eval=concurrent (the default) is a cluster's rule: the values the test split reads
// are copied between two steps (on the clock) and evaluated on a thread of their own while
// training goes on, an evaluation offered while the last still runs being skipped, as the
// evaluator daemon skips versions; each is stamped with the clock when its copy was taken, as
// the evaluator stamps job_elapsed_s when it read the ps. --eval=paused stops the clock for
// each instead. Each evaluation is one JSON line in --metrics_file, in the evaluator's
// metrics format (evaluator/metrics_file.h), with job_elapsed_s; the last line of stdout sums
// the run up. Exit 2 for a bad flag or job file.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/background_runner.h"
#include "bench/model_trainer.h"
#include "common/flags.h"
#include "common/status_macros.h"
#include "coordinator/job_spec.h"
#include "nlohmann/json.hpp"

namespace shardps {
namespace bench {
namespace {

double UnixNow() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

struct Args {
  std::string job_path, metrics_path, eval_mode = "concurrent";
  int64_t threads = 1, eval_every = 0;
};

// The command line and the job file; -1 to go on, else the exit code.
int ParseArgs(int argc, char** argv, Args* args, JobSpec* job) {
  FlagParser flags("single_process",
                   "A job's model trained in this process (no ps, no network): the limit a "
                   "cluster's benchmark holds it to.");
  flags.AddString("job", &args->job_path, "the job file (JSON, as shardctl submit takes)");
  flags.AddInt("threads", &args->threads, "CPU threads of the training compute",
               IntRange{1, 1024});
  flags.AddInt("eval_every_steps", &args->eval_every,
               "steps between evaluations (0: the job's eval_every_steps)", IntRange{0, 1 << 30});
  flags.AddString("metrics_file", &args->metrics_path, "one JSON line per evaluation (optional)");
  flags.AddChoice("eval", &args->eval_mode,
                  "concurrent: beside the training, stamped when the values were copied (a "
                  "cluster's rule); paused: the clock stops for each evaluation",
                  {"concurrent", "paused"});
  const int rc = HandleParseResult(flags, flags.Parse(argc, argv));
  if (rc >= 0) return rc;
  if (args->job_path.empty()) {
    std::cerr << "single_process: --job is required\n";
    return 2;
  }
  std::ifstream in(args->job_path);
  if (!in) {
    std::cerr << "single_process: cannot read --job \"" << args->job_path << "\"\n";
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<JobSpec> parsed = ParseJobSpec(text.str(), /*num_workers=*/1);
  if (!parsed.ok()) {
    std::cerr << "single_process: " << args->job_path << ": " << parsed.status().message()
              << "\n";
    return 2;
  }
  *job = *std::move(parsed);
  if (args->eval_every == 0) {
    args->eval_every = job->eval_every_steps() > 0 ? job->eval_every_steps() : 100;
  }
  return -1;
}

// One training run with its evaluations, on a clock that runs from its start (less the
// evaluations, when they pause it).
class Run {
 public:
  Run(const Args& args, const JobSpec& job, ModelTrainer& trainer, std::ofstream& metrics)
      : args_(args), job_(job), trainer_(trainer), metrics_(metrics),
        concurrent_(args.eval_mode == "concurrent") {}

  // Trains every step, evaluating as the flags say; the training's clock at its end.
  absl::StatusOr<double> Train() {
    const int64_t total = trainer_.total_steps();
    RETURN_IF_ERROR(Evaluate(0, false));
    for (int64_t s = 0; s < total; ++s) {
      ModelTrainer::StepTimes times;
      absl::StatusOr<ModelTrainer::Trained> trained = trainer_.Step(s, &times);
      if (!trained.ok()) {
        return absl::Status(trained.status().code(),
                            absl::StrCat("step ", s, ": ", trained.status().message()));
      }
      sum_.batch_s += times.batch_s;
      sum_.compute_s += times.compute_s;
      sum_.update_s += times.update_s;
      const int64_t done = s + 1;
      if (done < total && done % args_.eval_every == 0) RETURN_IF_ERROR(Evaluate(done, false));
    }
    const double end = Clock();
    RETURN_IF_ERROR(Evaluate(total, true));
    runner_.Wait();
    return end;
  }

  const ModelTrainer::StepTimes& sum() const { return sum_; }
  // The last evaluation's metrics line.
  nlohmann::json last() const {
    absl::MutexLock lock(&mu_);
    return last_;
  }

 private:
  double Clock() const { return absl::ToDoubleSeconds(absl::Now() - start_ - paused_); }

  // An evaluation after `step` steps: beside the training (skipped while the last one runs),
  // or on a paused clock; the final one waits for the last and is stamped with the
  // training's end; paused, the clock stops before the copy.
  absl::Status Evaluate(int64_t step, bool final) {
    if (concurrent_ && !final && runner_.busy()) return absl::OkStatus();
    const double before = Clock();
    if (concurrent_ || final) runner_.Wait();
    const absl::Time t0 = absl::Now();
    RETURN_IF_ERROR(trainer_.CopyForEvaluation());
    const double at = concurrent_ && !final ? Clock() : before;
    if (concurrent_ && !final) {
      runner_.TryStart([this, step, at] { EvaluateCopy(step, at, false); });
    } else {
      EvaluateCopy(step, at, final);
      if (!concurrent_) paused_ += absl::Now() - t0;
    }
    absl::MutexLock lock(&mu_);
    return failed_;
  }

  // Evaluates the copy taken at `clock` after `step` steps; one line in the metrics file.
  void EvaluateCopy(int64_t step, double clock, bool final) {
    absl::StatusOr<EvalMetrics> m = trainer_.EvaluateCopy();
    absl::MutexLock lock(&mu_);
    if (!m.ok()) {
      failed_ = absl::Status(m.status().code(), absl::StrCat("evaluation at step ", step, ": ",
                                                             m.status().message()));
      return;
    }
    last_ = {{"job_id", job_.name()},     {"step", step},
             {"time", UnixNow()},         {"job_elapsed_s", clock},
             {"loss", m->loss()},         {"accuracy", m->accuracy()},
             {"examples", m->examples()}, {"final", final},
             {"consistent", true}};
    if (m->auc() > 0) last_["auc"] = m->auc();
    if (metrics_.is_open()) metrics_ << last_.dump() << "\n" << std::flush;
    std::fprintf(stderr, "single_process: step %lld, %.1f s: loss %.4f, accuracy %.4f%s\n",
                 static_cast<long long>(step), clock, m->loss(), m->accuracy(),
                 m->auc() > 0 ? absl::StrFormat(", AUC %.4f", m->auc()).c_str() : "");
  }

  const Args& args_;
  const JobSpec& job_;
  ModelTrainer& trainer_;
  std::ofstream& metrics_;
  const bool concurrent_;
  const absl::Time start_ = absl::Now();
  absl::Duration paused_;  // evaluations, when they stop the clock
  ModelTrainer::StepTimes sum_;
  mutable absl::Mutex mu_;  // what the evaluation thread writes
  nlohmann::json last_ ABSL_GUARDED_BY(mu_);
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  BackgroundRunner runner_;  // last: it ends (waiting for its work) before the rest
};

int Main(int argc, char** argv) {
  Args args;
  JobSpec job;
  if (const int rc = ParseArgs(argc, argv, &args, &job); rc >= 0) return rc;
  absl::StatusOr<std::unique_ptr<ModelTrainer>> trainer =
      ModelTrainer::Create(job, static_cast<int>(args.threads));
  if (!trainer.ok()) {
    std::cerr << "single_process: " << trainer.status() << "\n";
    return absl::IsInvalidArgument(trainer.status()) ? 2 : 1;
  }
  std::ofstream metrics;
  if (!args.metrics_path.empty()) {
    metrics.open(args.metrics_path, std::ios::trunc);
    if (!metrics) {
      std::cerr << "single_process: cannot write --metrics_file \"" << args.metrics_path << "\"\n";
      return 2;
    }
  }
  Run run(args, job, **trainer, metrics);
  absl::StatusOr<double> clock = run.Train();
  if (!clock.ok()) {
    std::cerr << "single_process: " << clock.status() << "\n";
    return 1;
  }
  const int64_t total = (*trainer)->total_steps();
  const int64_t examples = (*trainer)->ExamplesIn(total);
  const double ms = 1000.0 / static_cast<double>(std::max<int64_t>(total, 1));
  const nlohmann::json last = run.last();
  std::printf(
      "single process (%lld thread%s): %lld steps, %lld examples in %.2f s of training "
      "(evaluations %s): %.0f examples/s; per step: batch and reads %.3f ms, compute "
      "%.3f ms, update %.3f ms; final loss %.4f, accuracy %.4f%s\n",
      static_cast<long long>(args.threads), args.threads == 1 ? "" : "s",
      static_cast<long long>(total), static_cast<long long>(examples), *clock,
      args.eval_mode == "concurrent" ? "beside it, on the clock" : "excluded",
      static_cast<double>(examples) / *clock, run.sum().batch_s * ms, run.sum().compute_s * ms,
      run.sum().update_s * ms, last["loss"].get<double>(), last["accuracy"].get<double>(),
      last.contains("auc") ? absl::StrFormat(", AUC %.4f", last["auc"].get<double>()).c_str()
                           : "");
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace shardps

int main(int argc, char** argv) { return shardps::bench::Main(argc, argv); }
