// How fast a running job takes in a worker: the time from a worker process's start to its
// first completed step in a running async job, for a worker that joins (JoinJob: the chief's
// TF_CONFIG does not name it) against, in the same run, a worker the chief's TF_CONFIG names
// that is killed and started again at its address (the chief probes it back); and the job's
// examples/s before and after the worker joined. Printed; a benchmark, not a test.
//
//   bazel run -c opt //bench:elastic_bench -- [--rounds=3] [--json]
#include <signal.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/host_stats.h"
#include "common/flags.h"
#include "nlohmann/json.hpp"
#include "tests/process.h"
#include "tests/training_cluster.h"

namespace shardps {
namespace bench {
namespace {

using testing::BinaryPath;
using testing::LoopbackAddress;
using testing::MakeTfConfig;
using testing::Process;
using testing::TrainingCluster;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Examples/s of the job over `window`, from the chief's step counts.
absl::StatusOr<double> ExamplesPerSecond(TrainingCluster* c, absl::Duration window,
                                         int batch_size) {
  absl::StatusOr<JobStatus> a = c->Status();
  if (!a.ok()) return a.status();
  const absl::Time start = absl::Now();
  absl::SleepFor(window);
  absl::StatusOr<JobStatus> b = c->Status();
  if (!b.ok()) return b.status();
  return static_cast<double>(b->steps_done() - a->steps_done()) * batch_size /
         absl::ToDoubleSeconds(absl::Now() - start);
}

// From `start` until the worker at status index `slot` (or task index `task`) has done one
// more step than `before`.
absl::StatusOr<double> SecondsToFirstStep(TrainingCluster* c, int task, int64_t before,
                                          absl::Time start) {
  while (absl::Now() - start < absl::Seconds(120)) {
    absl::StatusOr<JobStatus> s = c->Status(absl::Seconds(2));
    if (s.ok()) {
      for (const WorkerInfo& w : s->workers()) {
        if (w.index() == task && w.steps_done() > before) {
          return absl::ToDoubleSeconds(absl::Now() - start);
        }
      }
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return absl::DeadlineExceededError(absl::StrCat("worker ", task, " did no step in 120 s"));
}

int64_t StepsOf(const JobStatus& s, int task) {
  for (const WorkerInfo& w : s.workers()) {
    if (w.index() == task) return w.steps_done();
  }
  return 0;
}

int Run(int rounds, bool json) {
  constexpr int kBatch = 64;
  const std::string job = testing::WriteTempFile(
      "elastic_bench.json",
      R"({"name": "eb", "model": "mlp:128", "batch_size": 64, "mode": "async", "seed": 7,)"
      R"( "backend": "cpu", "optimizer": {"type": "sgd", "learning_rate": 0.05},)"
      R"( "partitioner": "min_size:65536:2", "steps": 100000000})");
  TrainingCluster::Options options;
  options.num_workers = 1;
  options.job_file = job;
  options.worker_flags = {"--threads=1"};
  auto cluster = TrainingCluster::Start(options);
  if (!cluster.ok()) {
    std::cerr << "elastic_bench: " << cluster.status() << "\n";
    return 1;
  }
  TrainingCluster* c = cluster->get();
  if (!c->WaitForStatus([](const JobStatus& s) { return s.steps_done() >= 200; }).ok()) {
    std::cerr << "elastic_bench: the job does not train\n" << c->Logs();
    return 1;
  }
  const double load_before = LoadAverage1m();
  std::vector<double> join_s, restart_s, before_eps, after_eps;
  for (int round = 0; round < rounds; ++round) {
    // A TF_CONFIG worker killed and started again at its address: the chief probes it back.
    {
      (void)c->StopWorker(0, SIGKILL);
      // Its count once it is gone (a reply already on its way may still have counted).
      absl::SleepFor(absl::Milliseconds(50));
      absl::StatusOr<JobStatus> s = c->Status();
      if (!s.ok()) return 1;
      const int64_t before = StepsOf(*s, 0);
      const absl::Time start = absl::Now();
      if (!c->StartWorker(0).ok()) return 1;
      absl::StatusOr<double> t = SecondsToFirstStep(c, 0, before, start);
      if (!t.ok()) {
        std::cerr << "elastic_bench: " << t.status() << "\n" << c->Logs();
        return 1;
      }
      restart_s.push_back(*t);
    }
    absl::StatusOr<double> eps = ExamplesPerSecond(c, absl::Seconds(3), kBatch);
    if (!eps.ok()) return 1;
    before_eps.push_back(*eps);
    // A worker the chief has never heard of.
    const int task = 1 + round;
    std::vector<std::string> workers = c->worker_addresses();
    for (int i = static_cast<int>(workers.size()); i < task; ++i) {
      workers.push_back(absl::StrCat("127.0.0.1:", 1 + i));
    }
    const std::string address = LoopbackAddress();
    workers.push_back(address);
    std::map<std::string, std::vector<std::string>> tf = {
        {"chief", {c->chief_address()}}, {"ps", c->ps_addresses()}, {"worker", workers}};
    const absl::Time start = absl::Now();
    auto extra = Process::Start(BinaryPath("worker/worker"), {"--threads=1", "--backend=cpu"},
                                {{"TF_CONFIG", MakeTfConfig(tf, "worker", task)}},
                                absl::StrCat(testing::TempDir(), "/extra-", task, ".log"));
    if (!extra.ok()) return 1;
    absl::StatusOr<double> t = SecondsToFirstStep(c, task, 0, start);
    if (!t.ok()) {
      std::cerr << "elastic_bench: " << t.status() << "\n" << (*extra)->Log();
      return 1;
    }
    join_s.push_back(*t);
    eps = ExamplesPerSecond(c, absl::Seconds(3), kBatch);
    if (!eps.ok()) return 1;
    after_eps.push_back(*eps);
    (*extra)->Signal(SIGTERM);
    (void)(*extra)->Wait(absl::Seconds(60));
  }
  const double load_after = LoadAverage1m();
  std::cout << absl::StrFormat(
      "elastic_bench: %d rounds, async mlp:128 on 2 ps, 1 TF_CONFIG worker; %d cores, load "
      "%.1f -> %.1f\n",
      rounds, static_cast<int>(std::thread::hardware_concurrency()), load_before, load_after);
  std::cout << absl::StrFormat(
      "  start to first step, joined worker:       median %.3f s (%.3f..%.3f)\n"
      "  start to first step, restarted TF_CONFIG: median %.3f s (%.3f..%.3f)  (baseline)\n"
      "  joined / restarted: %.2f\n"
      "  examples/s, 1 worker: %.0f; with the joined one: %.0f (x%.2f)\n",
      Median(join_s), *std::min_element(join_s.begin(), join_s.end()),
      *std::max_element(join_s.begin(), join_s.end()), Median(restart_s),
      *std::min_element(restart_s.begin(), restart_s.end()),
      *std::max_element(restart_s.begin(), restart_s.end()),
      Median(join_s) / Median(restart_s), Median(before_eps), Median(after_eps),
      Median(after_eps) / Median(before_eps));
  if (json) {
    nlohmann::json out = {{"join_first_step_s", join_s},
                          {"restart_first_step_s", restart_s},
                          {"examples_per_s_before", before_eps},
                          {"examples_per_s_after", after_eps}};
    std::cout << out.dump() << "\n";
  }
  return 0;
}

int Main(int argc, char** argv) {
  int64_t rounds = 3;
  bool json = false;
  FlagParser flags("elastic_bench",
                   "a worker's start to its first step when it joins a running job");
  flags.AddInt("rounds", &rounds, "joins (and restarts) measured");
  flags.AddBool("json", &json, "also print the figures as one JSON line");
  const int rc = HandleParseResult(flags, flags.Parse(argc, argv));
  if (rc >= 0) return rc;
  testing::SetUpRunfilesForBazelRun(argv[0], "worker/worker", "elastic_bench");
  return Run(static_cast<int>(std::max<int64_t>(rounds, 1)), json);
}

}  // namespace
}  // namespace bench
}  // namespace shardps

int main(int argc, char** argv) { return shardps::bench::Main(argc, argv); }
