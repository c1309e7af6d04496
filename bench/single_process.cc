// single_process: a job file's model trained in this one process, with no ps, no chief and no
// network (bench/model_trainer.h): the compute limit that the benchmarks hold a cluster to,
// for any built-in model (the MLP, the DLRM click model).
//
//   single_process --job=JOB.json [--threads=1] [--eval_every_steps=N] [--metrics_file=F]
//
// It trains the job's steps (epochs x batches of the job's batch size, the job's seed and
// batches) on --threads CPU threads and every --eval_every_steps steps (default: the job's
// eval_every_steps), and at the end, evaluates the test split with the evaluator's code on one
// thread, its clock paused meanwhile. Each evaluation is one JSON line in --metrics_file, in
// the evaluator's metrics format (evaluator/metrics_file.h), with job_elapsed_s = the training
// clock; the last line of stdout sums the run up. Exit 2 for a bad flag or job file.
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
#include "bench/model_trainer.h"
#include "common/flags.h"
#include "coordinator/job_spec.h"
#include "nlohmann/json.hpp"

namespace shardps {
namespace bench {
namespace {

double UnixNow() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

int Main(int argc, char** argv) {
  std::string job_path, metrics_path;
  int64_t threads = 1, eval_every = 0;
  FlagParser flags("single_process",
                   "A job's model trained in this process (no ps, no network): the limit a "
                   "cluster's benchmark holds it to.");
  flags.AddString("job", &job_path, "the job file (JSON, as shardctl submit takes)");
  flags.AddInt("threads", &threads, "CPU threads of the training compute", IntRange{1, 1024});
  flags.AddInt("eval_every_steps", &eval_every,
               "steps between evaluations (0: the job's eval_every_steps)", IntRange{0, 1 << 30});
  flags.AddString("metrics_file", &metrics_path, "one JSON line per evaluation (optional)");
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
  double clock = 0;  // training seconds, evaluations left out
  ModelTrainer::StepTimes times, sum;
  nlohmann::json last;
  auto evaluate = [&](int64_t step, bool final) -> bool {
    absl::StatusOr<EvalMetrics> m = (*trainer)->Evaluate();
    if (!m.ok()) {
      std::cerr << "single_process: evaluation at step " << step << ": " << m.status() << "\n";
      return false;
    }
    last = {{"job_id", job->name()},      {"step", step},
            {"time", UnixNow()},          {"job_elapsed_s", clock},
            {"loss", m->loss()},          {"accuracy", m->accuracy()},
            {"examples", m->examples()},  {"final", final},
            {"consistent", true}};
    if ((m->auc() > 0)) last["auc"] = m->auc();
    if (metrics.is_open()) metrics << last.dump() << "\n" << std::flush;
    std::fprintf(stderr, "single_process: step %lld, %.1f s: loss %.4f, accuracy %.4f%s\n",
                 static_cast<long long>(step), clock, m->loss(), m->accuracy(),
                 (m->auc() > 0) ? absl::StrFormat(", AUC %.4f", m->auc()).c_str() : "");
    return true;
  };
  const int64_t total = (*trainer)->total_steps();
  if (!evaluate(0, false)) return 1;
  for (int64_t s = 0; s < total; ++s) {
    const absl::Time t0 = absl::Now();
    absl::StatusOr<ModelTrainer::Trained> trained = (*trainer)->Step(s, &times);
    clock += absl::ToDoubleSeconds(absl::Now() - t0);
    if (!trained.ok()) {
      std::cerr << "single_process: step " << s << ": " << trained.status() << "\n";
      return 1;
    }
    sum.batch_s += times.batch_s;
    sum.compute_s += times.compute_s;
    sum.update_s += times.update_s;
    const int64_t done = s + 1;
    if (done < total && done % eval_every == 0 && !evaluate(done, false)) return 1;
  }
  if (!evaluate(total, true)) return 1;
  const int64_t examples = (*trainer)->ExamplesIn(total);
  const double ms = 1000.0 / static_cast<double>(std::max<int64_t>(total, 1));
  std::printf(
      "single process (%lld thread%s): %lld steps, %lld examples in %.2f s of training "
      "(evaluations excluded): %.0f examples/s; per step: batch and reads %.3f ms, compute "
      "%.3f ms, update %.3f ms; final loss %.4f, accuracy %.4f%s\n",
      static_cast<long long>(threads), threads == 1 ? "" : "s", static_cast<long long>(total),
      static_cast<long long>(examples), clock, static_cast<double>(examples) / clock,
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
