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
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/synchronization/mutex.h"
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

int Main(int argc, char** argv) {
  std::string job_path, metrics_path, eval_mode = "concurrent";
  int64_t threads = 1, eval_every = 0;
  FlagParser flags("single_process",
                   "A job's model trained in this process (no ps, no network): the limit a "
                   "cluster's benchmark holds it to.");
  flags.AddString("job", &job_path, "the job file (JSON, as shardctl submit takes)");
  flags.AddInt("threads", &threads, "CPU threads of the training compute", IntRange{1, 1024});
  flags.AddInt("eval_every_steps", &eval_every,
               "steps between evaluations (0: the job's eval_every_steps)", IntRange{0, 1 << 30});
  flags.AddString("metrics_file", &metrics_path, "one JSON line per evaluation (optional)");
  flags.AddChoice("eval", &eval_mode,
                  "concurrent: beside the training, stamped when the values were copied (a "
                  "cluster's rule); paused: the clock stops for each evaluation",
                  {"concurrent", "paused"});
  const int rc = HandleParseResult(flags, flags.Parse(argc, argv));
  if (rc >= 0) return rc;
  if (job_path.empty()) {
    std::cerr << "single_process: --job is required\n";
    return 2;
  }
  std::ifstream in(job_path);
  if (!in) {
    std::cerr << "single_process: cannot read --job \"" << job_path << "\"\n";
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<JobSpec> job = ParseJobSpec(text.str(), /*num_workers=*/1);
  if (!job.ok()) {
    std::cerr << "single_process: " << job_path << ": " << job.status().message() << "\n";
    return 2;
  }
  if (eval_every == 0) eval_every = job->eval_every_steps() > 0 ? job->eval_every_steps() : 100;
  absl::StatusOr<std::unique_ptr<ModelTrainer>> trainer =
      ModelTrainer::Create(*job, static_cast<int>(threads));
  if (!trainer.ok()) {
    std::cerr << "single_process: " << trainer.status() << "\n";
    return absl::IsInvalidArgument(trainer.status()) ? 2 : 1;
  }
  std::ofstream metrics;
  if (!metrics_path.empty()) {
    metrics.open(metrics_path, std::ios::trunc);
    if (!metrics) {
      std::cerr << "single_process: cannot write --metrics_file \"" << metrics_path << "\"\n";
      return 2;
    }
  }
  const bool concurrent = eval_mode == "concurrent";
  // The training clock: wall time since the start, less (paused) the evaluations.
  const absl::Time start = absl::Now();
  absl::Duration paused;
  auto clock_now = [&] { return absl::ToDoubleSeconds(absl::Now() - start - paused); };
  ModelTrainer::StepTimes times, sum;
  absl::Mutex mu;  // the metrics file, `last` and `failed`, written by the evaluation thread
  nlohmann::json last;
  absl::Status failed;
  // Evaluates the copy taken at `clock` after `step` steps; one line in the metrics file.
  auto evaluate_copy = [&](int64_t step, double clock, bool final) {
    absl::StatusOr<EvalMetrics> m = (*trainer)->EvaluateCopy();
    absl::MutexLock lock(&mu);
    if (!m.ok()) {
      failed = absl::Status(m.status().code(), absl::StrCat("evaluation at step ", step, ": ",
                                                            m.status().message()));
      return;
    }
    last = {{"job_id", job->name()},      {"step", step},
            {"time", UnixNow()},          {"job_elapsed_s", clock},
            {"loss", m->loss()},          {"accuracy", m->accuracy()},
            {"examples", m->examples()},  {"final", final},
            {"consistent", true}};
    if (m->auc() > 0) last["auc"] = m->auc();
    if (metrics.is_open()) metrics << last.dump() << "\n" << std::flush;
    std::fprintf(stderr, "single_process: step %lld, %.1f s: loss %.4f, accuracy %.4f%s\n",
                 static_cast<long long>(step), clock, m->loss(), m->accuracy(),
                 m->auc() > 0 ? absl::StrFormat(", AUC %.4f", m->auc()).c_str() : "");
  };
  BackgroundRunner runner;
  // An evaluation after `step` steps: beside the training (skipped while the last one runs),
  // or on a paused clock; the final one always waits.
  auto evaluate = [&](int64_t step, bool final) -> absl::Status {
    if (concurrent && !final && runner.busy()) return absl::OkStatus();
    // The final evaluation is stamped with the training's end, before any wait for the last
    // one beside it; paused, the clock stops before the copy.
    const double before = clock_now();
    if (concurrent || final) runner.Wait();
    const absl::Time t0 = absl::Now();
    RETURN_IF_ERROR((*trainer)->CopyForEvaluation());
    const double at = concurrent && !final ? clock_now() : before;
    if (concurrent && !final) {
      runner.TryStart([&evaluate_copy, step, at] { evaluate_copy(step, at, false); });
    } else {
      evaluate_copy(step, at, final);
      if (!concurrent) paused += absl::Now() - t0;
    }
    absl::MutexLock lock(&mu);
    return failed;
  };
  const int64_t total = (*trainer)->total_steps();
  absl::Status status = evaluate(0, false);
  for (int64_t s = 0; s < total && status.ok(); ++s) {
    absl::StatusOr<ModelTrainer::Trained> trained = (*trainer)->Step(s, &times);
    if (!trained.ok()) {
      status = absl::Status(trained.status().code(),
                            absl::StrCat("step ", s, ": ", trained.status().message()));
      break;
    }
    sum.batch_s += times.batch_s;
    sum.compute_s += times.compute_s;
    sum.update_s += times.update_s;
    const int64_t done = s + 1;
    if (done < total && done % eval_every == 0) status = evaluate(done, false);
  }
  const double clock = clock_now();  // the training's end
  if (status.ok()) status = evaluate(total, true);
  runner.Wait();
  if (!status.ok()) {
    std::cerr << "single_process: " << status << "\n";
    return 1;
  }
  const int64_t examples = (*trainer)->ExamplesIn(total);
  const double ms = 1000.0 / static_cast<double>(std::max<int64_t>(total, 1));
  std::printf(
      "single process (%lld thread%s): %lld steps, %lld examples in %.2f s of training "
      "(evaluations %s): %.0f examples/s; per step: batch and reads %.3f ms, compute "
      "%.3f ms, update %.3f ms; final loss %.4f, accuracy %.4f%s\n",
      static_cast<long long>(threads), threads == 1 ? "" : "s", static_cast<long long>(total),
      static_cast<long long>(examples), clock,
      concurrent ? "beside it, on the clock" : "excluded", static_cast<double>(examples) / clock,
      sum.batch_s * ms, sum.compute_s * ms, sum.update_s * ms, last["loss"].get<double>(),
      last["accuracy"].get<double>(),
      last.contains("auc") ? absl::StrFormat(", AUC %.4f", last["auc"].get<double>()).c_str()
                           : "");
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace shardps

int main(int argc, char** argv) { return shardps::bench::Main(argc, argv); }
