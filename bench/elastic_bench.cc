// How fast a running job takes in a worker: the time from a worker process's start to its
// first completed step in a running async job, for a worker that joins (JoinJob: the chief's
// TF_CONFIG does not name it) against, in the same run, a worker the chief's TF_CONFIG names
// that is killed and started again at its address (the chief probes it back); and the job's
// examples/s before and after the worker joined. Then ps scale-out and back (shardctl
// scale-ps, docs/elastic.md) in a sync job on 2 of TF_CONFIG's 3 ps: each scale's pause (no
// step done, as the chief reports it and as seen from outside) against the parameter and slot
// bytes it moved, and, in the same run, what the disk under the checkpoint directory takes to
// write those bytes and read them back (bench/disk_baseline: the pause's floor through a
// checkpoint); and the job's examples/s on 2 and on 3 ps. Printed; a benchmark, not a test.
//
//   bazel run -c opt //bench:elastic_bench -- [--rounds=3] [--ps_rounds=2] [--json]
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/disk_baseline.h"
#include "bench/host_stats.h"
#include "client/grpc_chief_interface.h"
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

// Starts a cluster of `options` and waits until its job has done `min_steps`: null (the
// reason printed) when it does not.
std::unique_ptr<TrainingCluster> StartTraining(const TrainingCluster::Options& options,
                                               int64_t min_steps) {
  auto cluster = TrainingCluster::Start(options);
  if (!cluster.ok()) {
    std::cerr << "elastic_bench: " << cluster.status() << "\n";
    return nullptr;
  }
  if (!(*cluster)
           ->WaitForStatus([min_steps](const JobStatus& s) { return s.steps_done() >= min_steps; })
           .ok()) {
    std::cerr << "elastic_bench: the job does not train\n" << (*cluster)->Logs();
    return nullptr;
  }
  return *std::move(cluster);
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
  const std::unique_ptr<TrainingCluster> cluster = StartTraining(options, 200);
  if (cluster == nullptr) return 1;
  TrainingCluster* c = cluster.get();
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

// The longest time, from `from` for `window`, that the job's step count stood still (polled
// every 2 ms): the pause a scale caused, seen from outside.
double LongestStall(TrainingCluster* c, absl::Time until) {
  int64_t last = -1;
  absl::Time since = absl::Now();
  double longest = 0;
  while (absl::Now() < until) {
    absl::StatusOr<JobStatus> s = c->Status(absl::Seconds(2));
    if (s.ok()) {
      const absl::Time now = absl::Now();
      if (s->steps_done() != last) {
        last = s->steps_done();
        since = now;
      }
      longest = std::max(longest, absl::ToDoubleSeconds(now - since));
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
  return longest;
}

int RunPsScaling(int rounds, bool json) {
  constexpr int kBatch = 64;
  const std::string dir = testing::FreshTempDir("elastic_bench_ps");
  // About 22 MB of Adam parameters and slots: a move a disk takes measurable time for.
  const std::string job = testing::WriteTempFile(
      "elastic_bench_ps.json",
      absl::StrCat(R"({"name": "ebp", "model": "mlp:1024,1024", "batch_size": 64,)",
                   R"( "mode": "sync", "seed": 7, "backend": "cpu", "num_ps": 2,)",
                   R"( "optimizer": {"type": "adam", "learning_rate": 0.001},)",
                   R"( "partitioner": "min_size:65536:ps", "steps": 100000000,)",
                   R"( "checkpoint": {"dir": ")", dir, R"(", "every_seconds": 100000}})"));
  TrainingCluster::Options options;
  options.num_ps = 3;
  options.num_workers = 2;
  options.job_file = job;
  options.worker_flags = {"--threads=1"};
  const std::unique_ptr<TrainingCluster> cluster = StartTraining(options, 100);
  if (cluster == nullptr) return 1;
  TrainingCluster* c = cluster.get();
  const std::unique_ptr<ChiefInterface> chief = NewGrpcChiefInterface(c->chief_address());
  std::vector<double> pause_s, stall_s, bytes, write_s, read_s, on2_eps, on3_eps;
  for (int round = 0; round < 2 * rounds; ++round) {
    const int to = round % 2 == 0 ? 3 : 2;
    absl::StatusOr<double> eps = ExamplesPerSecond(c, absl::Seconds(3), kBatch);
    if (!eps.ok()) return 1;
    (to == 3 ? on2_eps : on3_eps).push_back(*eps);
    ScalePsRequest request;
    request.set_num_ps(to);
    absl::StatusOr<ScalePsResponse> scaled;
    std::thread scaler([&] { scaled = chief->ScalePs(request, absl::Minutes(10)); });
    const double stall = LongestStall(c, absl::Now() + absl::Seconds(1));
    scaler.join();
    if (!scaled.ok()) {
      std::cerr << "elastic_bench: scale-ps " << to << ": " << scaled.status() << "\n"
                << c->Logs();
      return 1;
    }
    if (to == 2) {
      // The removed ps exited 0; start it again, empty, as its StatefulSet would.
      if (c->ps(2) != nullptr) (void)c->ps(2)->Wait(absl::Seconds(30));
      if (absl::Status s = c->RestartPs(2); !s.ok()) {
        std::cerr << "elastic_bench: restarting ps 2: " << s << "\n";
        return 1;
      }
    }
    // The stall may outlast the poll window: finish it.
    const double rest = LongestStall(c, absl::Now() + absl::Milliseconds(300));
    if (to == 3) {
      pause_s.push_back(scaled->pause_s());
      stall_s.push_back(std::max(stall, rest));
      bytes.push_back(static_cast<double>(scaled->bytes_moved()));
      // The disk's floor for these bytes, written by 2 writers (the old ps) and read by 3.
      std::vector<FileToWrite> files;
      std::vector<std::string> paths;
      for (int k = 0; k < 2; ++k) {
        files.push_back({absl::StrCat(dir, "/baseline-", k), scaled->bytes_moved() / 2});
        paths.push_back(files.back().path);
      }
      absl::StatusOr<IoTiming> w = TimeWriteFiles(files);
      absl::StatusOr<IoTiming> r = TimeReadFiles(paths, /*parallel=*/true);
      if (!w.ok() || !r.ok()) {
        std::cerr << "elastic_bench: disk baseline: " << w.status() << " " << r.status() << "\n";
        return 1;
      }
      for (const std::string& p : paths) std::remove(p.c_str());
      write_s.push_back(w->seconds);
      read_s.push_back(r->seconds);
    }
  }
  const double floor = Median(write_s) + Median(read_s);
  std::cout << absl::StrFormat(
      "ps scale-out: %d rounds of 2 -> 3 -> 2 ps, sync mlp:1024,1024 (Adam), 2 workers\n"
      "  bytes moved: %.1f MB (parameters and slots, through a checkpoint)\n"
      "  pause (chief: drain to resume): median %.3f s (%.3f..%.3f)\n"
      "  pause (no step seen done, polled): median %.3f s\n"
      "  disk baseline, same bytes: write %.3f s + read %.3f s = %.3f s (page cache warm)\n"
      "  aim: pause <= disk + 1 s = %.3f s: %s\n"
      "  examples/s on 2 ps: %.0f; on 3 ps: %.0f (x%.2f)\n",
      rounds, Median(bytes) / 1e6, Median(pause_s),
      *std::min_element(pause_s.begin(), pause_s.end()),
      *std::max_element(pause_s.begin(), pause_s.end()), Median(stall_s), Median(write_s),
      Median(read_s), floor, floor + 1, Median(pause_s) <= floor + 1 ? "met" : "MISSED",
      Median(on2_eps), Median(on3_eps), Median(on3_eps) / Median(on2_eps));
  if (json) {
    nlohmann::json out = {{"scale_pause_s", pause_s}, {"scale_stall_s", stall_s},
                          {"bytes_moved", bytes},     {"disk_write_s", write_s},
                          {"disk_read_s", read_s},    {"examples_per_s_2ps", on2_eps},
                          {"examples_per_s_3ps", on3_eps}};
    std::cout << out.dump() << "\n";
  }
  return 0;
}

int Main(int argc, char** argv) {
  int64_t rounds = 3;
  int64_t ps_rounds = 2;
  bool json = false;
  FlagParser flags("elastic_bench",
                   "a worker's start to its first step when it joins a running job");
  flags.AddInt("rounds", &rounds, "joins (and restarts) measured");
  flags.AddInt("ps_rounds", &ps_rounds, "scale-outs (2 -> 3 -> 2 ps) measured; 0: none");
  flags.AddBool("json", &json, "also print the figures as one JSON line");
  const int rc = HandleParseResult(flags, flags.Parse(argc, argv));
  if (rc >= 0) return rc;
  testing::SetUpRunfilesForBazelRun(argv[0], "worker/worker", "elastic_bench");
  if (rounds > 0) {
    if (const int rc = Run(static_cast<int>(rounds), json); rc != 0) return rc;
  }
  if (ps_rounds > 0) return RunPsScaling(static_cast<int>(ps_rounds), json);
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace shardps

int main(int argc, char** argv) { return shardps::bench::Main(argc, argv); }
