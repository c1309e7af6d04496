// training_bench: the training throughput of local shardps clusters against one process that
// trains the same model on the same batches with no network, measured in one run.
//
//   bazel run //bench:training_bench -- [--json] [--steps N]
//
// The job: Fashion-MNIST, MLP 784-256-128-10, Adam (learning rate 0.001), batch 256 per
// worker, CPU backend, seed 42. One job file drives both sides: the single process takes its
// optimizer, initializer and seed from ParseJobSpec, with the defaults the chief fills in.
//
// (a) Single process (bench/single_trainer.h): LoadFashionMnist, Batcher + GatherBatch,
//     MlpCompute (CPU) on 1 and on 2 threads, and Adam applied in-process by the ps' own
//     Optimizer (ApplyDense) on the step's thread. No network, no chief, no partitioning.
// (b) Local clusters (tests/training_cluster.h: a chief, 2 ps and the workers as real
//     processes on localhost ports): 1 and 2 workers, async and sync. Each worker computes on
//     1 thread (the harness starts workers with --threads=1); the ps and the chief share the
//     machine's cores with them. The job file's text is submitted to the (long-lived) chief
//     once it answers, as `shardctl submit` would; no evaluator runs.
//
// Every figure is examples/s over steps [warmup, steps) of a run. The single process times
// its own loop; on 1 thread it runs twice, before the clusters and right after the 1-worker
// async cluster, and its figure is the mean of the two (this shared VM's speed drifts by
// +-15% within a minute, which a single baseline run turned into ratio noise). A cluster's rate comes from the chief's steps_done, sampled every 50 ms while
// the job runs, so start-up (processes, data loading, variable creation) and the first steps
// are left out; the whole-run rate (over the chief's elapsed_s) is shown beside it. A
// cluster is compared with the single process at the same compute threads per worker (1),
// and at the cluster's total compute threads (workers x 1).
//
// Where the time goes: the CPU time the workers, the ps and the chief used per measured
// step (from /proc), and "other", the cores that processes outside the benchmark used
// meanwhile on this shared machine (figures taken while it is well above 0 are low). Each
// run's host line (bench/host_stats.h) says the same over the whole run, with the load, and
// flags a run in which others used more than 10% of the cores.
//
// The table goes to stdout; with --json it goes to stderr and stdout carries one JSON object.
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "bench/host_stats.h"
#include "bench/job_watch.h"
#include "bench/single_trainer.h"
#include "bench/training_throughput.h"
#include "common/error_detail.h"
#include "common/flags.h"
#include "common/process_tuning.h"
#include "common/status_macros.h"
#include "coordinator/job_spec.h"
#include "data/idx_reader.h"
#include "nlohmann/json.hpp"
#include "proto/coordinator.pb.h"
#include "proto/job.pb.h"
#include "tests/training_cluster.h"

namespace shardps {
namespace bench {
namespace {

using testing::TrainingCluster;

constexpr int kBatchSize = 256;
constexpr int kNumPs = 2;
constexpr int kWorkerThreads = 1;  // what TrainingCluster passes to every worker
constexpr double kTargetRatio = 0.8;
constexpr int kLossWindow = 50;  // steps in the loss shown, as the chief's JobStatus.loss
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Config {
  bool json = false;
  int64_t steps = 1500;  // ~6 s per run: shorter runs swing with this VM's drift
  int64_t warmup_steps = 0;  // 0: steps / 10
  std::string data_dir = std::string(kDefaultFashionMnistDir);
  double cluster_timeout_s = 120;
};

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ---------------------------------------------------------------------------------------
// CPU accounting from /proc (bench/host_stats.h)

// The processes whose CPU time is attributed to each role.
struct Roles {
  std::vector<pid_t> workers;
  std::vector<pid_t> ps;
  std::vector<pid_t> chief;
};

struct CpuSnapshot {
  double workers = 0;
  double ps = 0;
  double chief = 0;
  double self = 0;     // this process
  double machine = 0;  // everything on the machine
  double ours() const { return workers + ps + chief + self; }
};

CpuSnapshot TakeCpu(const Roles& roles) {
  auto sum = [](const std::vector<pid_t>& pids) {
    double s = 0;
    for (pid_t pid : pids) {
      const double cpu = ProcessCpuSeconds(pid);
      if (!std::isnan(cpu)) s += cpu;
    }
    return s;
  };
  CpuSnapshot snap;
  snap.workers = sum(roles.workers);
  snap.ps = sum(roles.ps);
  snap.chief = sum(roles.chief);
  snap.self = sum({getpid()});
  snap.machine = MachineBusySeconds();
  return snap;
}

// ---------------------------------------------------------------------------------------
// Results

struct Result {
  std::string key;  // JSON key: "single_1thread", "cluster_async_1worker", ...
  std::string label;
  bool cluster = false;
  std::string mode;  // cluster: "async" or "sync"
  int workers = 0;   // cluster
  int threads_per_worker = 0;
  int total_threads = 0;
  double examples_per_s = kNaN;
  int64_t measured_steps = 0;
  double measured_s = kNaN;
  // Single process, 1 thread: its runs before and after the 1-worker async cluster (the
  // figure is their mean; see Main).
  std::vector<double> runs;
  double ratio_same_threads = kNaN;        // to the single process at threads_per_worker threads
  double ratio_same_total = kNaN;          // to the single process at total_threads threads
  double whole_run_examples_per_s = kNaN;  // cluster: all steps over the chief's elapsed_s
  double cluster_start_s = kNaN;  // cluster: starting the processes until the chief answers
  double startup_s = kNaN;        // cluster: from submitting the job to its first step done
  double loss = kNaN;             // mean training loss of the last kLossWindow steps
  double accuracy = kNaN;
  int64_t steps_requeued = 0;
  // CPU milliseconds per measured step.
  double worker_cpu_ms = kNaN;
  double ps_cpu_ms = kNaN;
  double chief_cpu_ms = kNaN;
  double other_cores = kNaN;  // CPU of processes outside the benchmark per wall-second
  // Single process: wall milliseconds per step of each phase.
  double gather_ms = kNaN;
  double compute_ms = kNaN;
  double adam_ms = kNaN;
  // The machine during each run (the single process's measured steps; a cluster from its
  // start to its job's end).
  std::vector<HostStats> hosts;
};

void SetCpu(const CpuSnapshot& a, const CpuSnapshot& b, int64_t steps, double seconds, bool cluster,
            Result* r) {
  if (steps <= 0 || seconds <= 0) return;
  const double per_step_ms = 1e3 / static_cast<double>(steps);
  if (cluster) {
    r->worker_cpu_ms = (b.workers - a.workers) * per_step_ms;
    r->ps_cpu_ms = (b.ps - a.ps) * per_step_ms;
    r->chief_cpu_ms = (b.chief - a.chief) * per_step_ms;
  } else {
    // The single process is its own worker and ps.
    r->worker_cpu_ms = (b.self - a.self) * per_step_ms;
  }
  const double other = (b.machine - a.machine) - (b.ours() - a.ours());
  r->other_cores = std::max(0.0, other / seconds);
}

// ---------------------------------------------------------------------------------------
// The job

std::string JobJson(const Config& config, const std::string& mode) {
  nlohmann::json job = {
      {"name", "training-bench"},
      {"model", "mlp:256,128"},
      {"dataset", "fashion_mnist"},
      {"data_dir", config.data_dir},
      {"batch_size", kBatchSize},
      {"steps", config.steps},
      {"optimizer", {{"type", "adam"}, {"learning_rate", 0.001}}},
      {"mode", mode},
      {"partitioner", "min_size:262144:4"},
      {"placement", "by_bytes"},
      {"seed", 42},
      {"backend", "cpu"},
  };
  return job.dump();
}

// ---------------------------------------------------------------------------------------
// (a) The single process

// The mean loss and accuracy of the last kLossWindow steps, as the chief's JobStatus has them.
class LossWindow {
 public:
  void Add(const SingleTrainer::Trained& step) {
    recent_.push_back({static_cast<double>(step.result.loss) * step.examples,
                       static_cast<double>(step.result.correct),
                       static_cast<double>(step.examples)});
    if (recent_.size() > static_cast<size_t>(kLossWindow)) recent_.pop_front();
  }
  double loss() const { return Sum(&Entry::loss_x_examples) / Sum(&Entry::examples); }
  double accuracy() const { return Sum(&Entry::correct) / Sum(&Entry::examples); }

 private:
  struct Entry {
    double loss_x_examples;
    double correct;
    double examples;
  };
  double Sum(double Entry::*field) const {
    double s = 0;
    for (const Entry& e : recent_) s += e.*field;
    return s;
  }
  std::deque<Entry> recent_;
};

// The single process' loop: every step timed by phase, the ones from warmup_steps on summed;
// the CPU and the host sampled where the measured steps begin and end.
struct SingleRun {
  double t0 = 0, t1 = 0;
  double gather_s = 0, compute_s = 0, adam_s = 0;
  CpuSnapshot cpu0, cpu1;
  LossWindow window;
  HostStats host;
};

absl::Status RunSingleSteps(const Config& config, SingleTrainer& trainer, SingleRun* run) {
  const Roles self_only;
  std::optional<HostRun> host;
  for (int64_t s = 0; s < config.steps; ++s) {
    if (s == config.warmup_steps) {
      host.emplace();
      run->cpu0 = TakeCpu(self_only);
      run->t0 = Now();
    }
    SingleTrainer::StepTimes times;
    ASSIGN_OR_RETURN(SingleTrainer::Trained step, trainer.Step(s, &times));
    if (s >= config.warmup_steps) {
      run->gather_s += times.gather_s;
      run->compute_s += times.compute_s;
      run->adam_s += times.update_s;
    }
    run->window.Add(step);
  }
  run->t1 = Now();
  run->cpu1 = TakeCpu(self_only);
  run->host = host->Stop();
  return absl::OkStatus();
}

absl::StatusOr<Result> MeasureSingleProcess(const Config& config, const JobSpec& job,
                                            const Dataset& data, int threads) {
  ASSIGN_OR_RETURN(std::unique_ptr<SingleTrainer> trainer,
                   SingleTrainer::Create(job, data, threads));
  SingleRun run;
  RETURN_IF_ERROR(RunSingleSteps(config, *trainer, &run));

  Result r;
  r.key = absl::StrCat("single_", threads, threads == 1 ? "thread" : "threads");
  r.label = absl::StrCat("single process, ", threads, threads == 1 ? " thread" : " threads");
  r.threads_per_worker = threads;
  r.total_threads = threads;
  r.measured_steps = config.steps - config.warmup_steps;
  r.measured_s = run.t1 - run.t0;
  const int64_t batch_size = job.batch_size();
  const int64_t examples = ExamplesInSteps(config.steps, data.num_examples, batch_size) -
                           ExamplesInSteps(config.warmup_steps, data.num_examples, batch_size);
  r.examples_per_s = static_cast<double>(examples) / r.measured_s;
  const double per_step_ms = 1e3 / static_cast<double>(r.measured_steps);
  r.gather_ms = run.gather_s * per_step_ms;
  r.compute_ms = run.compute_s * per_step_ms;
  r.adam_ms = run.adam_s * per_step_ms;
  r.loss = run.window.loss();
  r.accuracy = run.window.accuracy();
  r.hosts = {run.host};
  SetCpu(run.cpu0, run.cpu1, r.measured_steps, r.measured_s, /*cluster=*/false, &r);
  return r;
}

// ---------------------------------------------------------------------------------------
// (b) A local cluster

// The chief, the workers and (the other children) the ps of a cluster.
Roles RolesOf(TrainingCluster& cluster, int num_workers) {
  Roles roles;
  roles.chief.push_back(cluster.chief()->pid());
  for (int i = 0; i < num_workers; ++i) roles.workers.push_back(cluster.worker(i)->pid());
  for (pid_t pid : ChildPids(getpid())) {
    const bool known =
        std::find(roles.chief.begin(), roles.chief.end(), pid) != roles.chief.end() ||
        std::find(roles.workers.begin(), roles.workers.end(), pid) != roles.workers.end();
    if (!known) roles.ps.push_back(pid);
  }
  return roles;
}

// A cluster's job as the benchmark saw it: the chief's steps_done and the CPU at every poll.
struct ClusterRun {
  double t_start = 0;   // starting the processes
  double t_submit = 0;  // the chief answered; the job is submitted
  std::vector<ProgressSample> samples;
  std::vector<CpuSnapshot> cpu;
  JobStatus last;
  double startup_s = kNaN;
  HostStats host;
};

absl::Status FollowClusterJob(const Config& config, TrainingCluster& cluster,
                              const std::string& job_id, int num_workers, ClusterRun* run) {
  const Roles roles = RolesOf(cluster, num_workers);
  FollowOptions follow;
  follow.timeout = absl::Seconds(config.cluster_timeout_s) - absl::Seconds(Now() - run->t_submit);
  follow.on_status = [&](const JobStatus& status) {
    const double t = Now();
    run->samples.push_back({t, status.steps_done()});
    run->cpu.push_back(TakeCpu(roles));
    if (std::isnan(run->startup_s) && status.steps_done() > 0) run->startup_s = t - run->t_submit;
  };
  follow.chief_running = [&cluster] { return cluster.chief()->Running(); };
  follow.logs = [&cluster] { return cluster.Logs(); };
  ASSIGN_OR_RETURN(run->last, FollowJob(cluster.chief_client(), job_id, follow));
  return absl::OkStatus();
}

Result ClusterResult(const std::string& mode, int num_workers, const Window& window,
                     const ClusterRun& run, int64_t num_examples) {
  const JobStatus& last = run.last;
  Result r;
  r.key = absl::StrCat("cluster_", mode, "_", num_workers, num_workers == 1 ? "worker" : "workers");
  r.label = absl::StrCat(kNumPs, " ps, ", num_workers,
                         num_workers == 1 ? " worker, " : " workers, ", mode);
  r.cluster = true;
  r.mode = mode;
  r.workers = num_workers;
  r.threads_per_worker = kWorkerThreads;
  r.total_threads = num_workers * kWorkerThreads;
  r.examples_per_s = window.examples_per_s;
  r.measured_steps = window.steps;
  r.measured_s = window.seconds;
  if (last.elapsed_s() > 0) {
    r.whole_run_examples_per_s =
        static_cast<double>(ExamplesInSteps(last.steps_done(), num_examples, kBatchSize)) /
        last.elapsed_s();
  }
  r.cluster_start_s = run.t_submit - run.t_start;
  r.startup_s = run.startup_s;
  r.loss = last.loss();
  r.accuracy = last.accuracy();
  r.steps_requeued = last.steps_requeued();
  r.hosts = {run.host};
  SetCpu(run.cpu[window.begin], run.cpu[window.end], window.steps, window.seconds,
         /*cluster=*/true, &r);
  return r;
}

absl::StatusOr<Result> MeasureCluster(const Config& config, const std::string& mode,
                                      int num_workers, int64_t num_examples) {
  // The chief is long-lived and gets the job once it is up, so that every step of the job is
  // seen in the samples (a chief started with --job may run a short job to its end before
  // its first status call is answered).
  const std::string job_json = JobJson(config, mode);
  testing::WriteTempFile(absl::StrCat("job_", mode, "_", num_workers, "w.json"), job_json);
  TrainingCluster::Options options;
  options.num_ps = kNumPs;
  options.num_workers = num_workers;
  options.evaluator = false;
  options.long_lived = true;
  const HostRun host;
  ClusterRun run;
  run.t_start = Now();
  ASSIGN_OR_RETURN(std::unique_ptr<TrainingCluster> cluster, TrainingCluster::Start(options));
  run.t_submit = Now();
  absl::StatusOr<SubmitJobResponse> submitted = SubmitJob(cluster->chief_client(), job_json);
  if (!submitted.ok()) {
    return absl::Status(
        submitted.status().code(),
        absl::StrCat("submit: ", submitted.status().message(), "\n", cluster->Logs()));
  }
  RETURN_IF_ERROR(FollowClusterJob(config, *cluster, submitted->job_id(), num_workers, &run));
  run.host = host.Stop();
  std::optional<Window> window = SteadyWindow(run.samples, config.warmup_steps,
                                              run.last.total_steps(), num_examples, kBatchSize);
  if (!window.has_value()) {
    return absl::InternalError(absl::StrCat("no measurable window in ", run.samples.size(),
                                            " samples of the ", mode, " job with ", num_workers,
                                            " workers; run more --steps"));
  }
  return ClusterResult(mode, num_workers, *window, run, num_examples);
}
// ---------------------------------------------------------------------------------------
// Report

std::string Num(double v, const char* fmt) {
  if (std::isnan(v)) return "-";
  // printf, not absl::StrFormat: the format is chosen at run time, which clang's
  // absl::StrFormat refuses (it checks formats at compile time).
  char text[64];
  std::snprintf(text, sizeof(text), fmt, v);
  return text;
}

const Result* Find(const std::vector<Result>& results, const std::string& key) {
  for (const Result& r : results) {
    if (r.key == key) return &r;
  }
  return nullptr;
}

const Result* SingleAt(const std::vector<Result>& results, int threads) {
  for (const Result& r : results) {
    if (!r.cluster && r.total_threads == threads) return &r;
  }
  return nullptr;
}

void SetRatios(std::vector<Result>* results) {
  for (Result& r : *results) {
    const Result* same_threads = SingleAt(*results, r.threads_per_worker);
    const Result* same_total = SingleAt(*results, r.total_threads);
    if (same_threads != nullptr) {
      r.ratio_same_threads = r.examples_per_s / same_threads->examples_per_s;
    }
    if (same_total != nullptr) {
      r.ratio_same_total = r.examples_per_s / same_total->examples_per_s;
    }
  }
}

struct Target {
  double ratio = kNaN;
  bool met = false;
};

Target TargetOf(const std::vector<Result>& results) {
  Target t;
  if (const Result* r = Find(results, "cluster_async_1worker")) {
    t.ratio = r->ratio_same_threads;
    t.met = !std::isnan(t.ratio) && t.ratio >= kTargetRatio;
  }
  return t;
}

const char kThreadsNote[] =
    "each cluster worker computes on 1 thread (the harness starts workers with --threads=1); "
    "the single process is measured on 1 thread (the same compute threads per worker) and on "
    "2 (the same total as 2 workers). The single process also applies Adam on its one "
    "thread; in a cluster the 2 ps and the chief share the machine's cores with the workers.";

// The machine during each run: load, the cores others used, BUSY where they used > 10%.
void PrintHostLines(std::ostream& out, const std::vector<Result>& results) {
  out << "host during each run (bench/host_stats.h):\n";
  for (const Result& r : results) {
    for (size_t i = 0; i < r.hosts.size(); ++i) {
      out << "  " << r.label << (r.hosts.size() > 1 ? absl::StrCat(", run ", i + 1) : "")
          << ": " << r.hosts[i].Line() << "\n";
    }
  }
}

void PrintTable(std::ostream& out, const Config& config, const std::vector<Result>& results,
                double load_before, double load_after) {
  out << "training_bench: Fashion-MNIST, MLP 784-256-128-10, Adam (lr 0.001), batch " << kBatchSize
      << " per worker, cpu backend; " << config.steps << " steps per run, examples/s over steps ["
      << config.warmup_steps << ", " << config.steps << ")\n";
  out << "machine: " << std::thread::hardware_concurrency() << " cores; 1-min load average "
      << Num(load_before, "%.2f") << " before, " << Num(load_after, "%.2f") << " after\n";
  out << "threads: " << kThreadsNote << "\n\n";
  const std::string header =
      absl::StrFormat("%-28s %7s %10s %8s %8s %10s %7s %6s %6s | %7s %6s %6s %6s", "configuration",
                      "threads", "examples/s", "vs 1thr", "vs same", "whole run", "1st step",
                      "loss", "acc", "cpu ms/step:", "ps", "chief", "other");
  out << header << "\n";
  out << absl::StrFormat("%-28s %7s %10s %8s %8s %10s %7s %6s %6s | %12s %6s %6s %6s\n", "", "", "",
                         "", "total", "ex/s", "s", "", "", "worker", "", "", "cores");
  out << std::string(header.size(), '-') << "\n";
  for (const Result& r : results) {
    const std::string threads = r.cluster ? absl::StrCat(r.workers, "x", r.threads_per_worker)
                                          : absl::StrCat(r.total_threads);
    out << absl::StrFormat("%-28s %7s %10s %8s %8s %10s %7s %6s %6s | %12s %6s %6s %6s\n", r.label,
                           threads, Num(r.examples_per_s, "%.0f"),
                           Num(r.ratio_same_threads, "%.2f"), Num(r.ratio_same_total, "%.2f"),
                           Num(r.whole_run_examples_per_s, "%.0f"), Num(r.startup_s, "%.1f"),
                           Num(r.loss, "%.3f"), Num(r.accuracy, "%.3f"),
                           Num(r.worker_cpu_ms, "%.2f"), Num(r.ps_cpu_ms, "%.2f"),
                           Num(r.chief_cpu_ms, "%.2f"), Num(r.other_cores, "%.2f"));
  }
  out << "\nvs 1thr: ratio to the single process at the same compute threads per worker (1); "
         "vs same total: to the single process at the cluster's total compute threads.\n"
         "whole run: all steps over the chief's elapsed time (workers starting the job and "
         "warm-up included); 1st step s: from submitting the job to its first step done.\n";
  for (const Result& r : results) {
    if (r.cluster) continue;
    out << absl::StrFormat(
        "%s, wall ms per step: gather %.2f, forward+backward %.2f, Adam %.2f (total %.2f)\n",
        r.label, r.gather_ms, r.compute_ms, r.adam_ms, r.gather_ms + r.compute_ms + r.adam_ms);
  }
  for (const Result& r : results) {
    if (r.runs.size() == 2) {
      out << absl::StrFormat(
          "%s: %.0f examples/s before and %.0f after the 1-worker async cluster; the figure "
          "and every ratio to it use the mean (this shared machine drifts by +-15%% within a "
          "minute)\n",
          r.label, r.runs[0], r.runs[1]);
    }
  }
  for (const Result& r : results) {
    if (r.cluster && r.steps_requeued > 0) {
      out << r.label << ": " << r.steps_requeued << " steps re-queued (worker failures)\n";
    }
  }
  PrintHostLines(out, results);
  const Target target = TargetOf(results);
  out << absl::StrFormat(
      "\ntarget: 1 worker async >= %.1f x single process (1 thread) at batch %d: %s (%s)\n",
      kTargetRatio, kBatchSize, Num(target.ratio, "%.2f"), target.met ? "met" : "NOT MET");
}

nlohmann::json ToJson(const Config& config, const JobSpec& job, const std::vector<Result>& results,
                      double load_before, double load_after) {
  auto num = [](double v) -> nlohmann::json {
    if (std::isnan(v)) return nullptr;
    return v;
  };
  nlohmann::json out;
  out["bench"] = "training_bench";
  out["job"] = nlohmann::json::parse(JobSpecToJson(job));
  out["job"].erase("mode");  // each cluster result names its own
  out["steps"] = config.steps;
  out["warmup_steps"] = config.warmup_steps;
  out["num_ps"] = kNumPs;
  out["machine"] = {{"cores", std::thread::hardware_concurrency()},
                    {"load_average_1m_before", num(load_before)},
                    {"load_average_1m_after", num(load_after)}};
  out["threads"] = kThreadsNote;
  nlohmann::json list = nlohmann::json::array();
  for (const Result& r : results) {
    nlohmann::json j = {
        {"key", r.key},
        {"label", r.label},
        {"kind", r.cluster ? "cluster" : "single_process"},
        {"runs_examples_per_s", r.runs},
        {"threads_per_worker", r.threads_per_worker},
        {"total_threads", r.total_threads},
        {"examples_per_s", num(r.examples_per_s)},
        {"measured_steps", r.measured_steps},
        {"measured_s", num(r.measured_s)},
        {"ratio_vs_single_same_threads_per_worker", num(r.ratio_same_threads)},
        {"ratio_vs_single_same_total_threads", num(r.ratio_same_total)},
        {"train_loss", num(r.loss)},
        {"train_accuracy", num(r.accuracy)},
        {"cpu_ms_per_step", {{"worker", num(r.worker_cpu_ms)}}},
        {"other_cores", num(r.other_cores)},
    };
    j["host"] = nlohmann::json::array();
    for (const HostStats& h : r.hosts) {
      j["host"].push_back({{"load_average_1m_before", num(h.load_before)},
                           {"load_average_1m_after", num(h.load_after)},
                           {"others_cores", h.others_cores()},
                           {"busy", h.busy()}});
    }
    if (r.cluster) {
      j["mode"] = r.mode;
      j["workers"] = r.workers;
      j["whole_run_examples_per_s"] = num(r.whole_run_examples_per_s);
      j["cluster_start_s"] = num(r.cluster_start_s);
      j["submit_to_first_step_s"] = num(r.startup_s);
      j["steps_requeued"] = r.steps_requeued;
      j["cpu_ms_per_step"]["ps"] = num(r.ps_cpu_ms);
      j["cpu_ms_per_step"]["chief"] = num(r.chief_cpu_ms);
    } else {
      j["wall_ms_per_step"] = {{"gather", num(r.gather_ms)},
                               {"forward_backward", num(r.compute_ms)},
                               {"adam", num(r.adam_ms)}};
    }
    list.push_back(std::move(j));
  }
  out["results"] = std::move(list);
  const Target target = TargetOf(results);
  out["target"] = {
      {"what", absl::StrFormat("1 worker async >= %.1f x single process (1 thread) at batch %d",
                               kTargetRatio, kBatchSize)},
      {"threshold", kTargetRatio},
      {"ratio", num(target.ratio)},
      {"met", target.met}};
  return out;
}

// ---------------------------------------------------------------------------------------

// The command line into `config`; returns -1 to go on, else the exit code.
int ParseFlags(int argc, char** argv, Config* config) {
  FlagParser flags("training_bench",
                   "Training examples/s of local shardps clusters (2 ps; 1 and 2 workers; async "
                   "and sync) against one process training the same model with no network.");
  flags.AddBool("json", &config->json, "print one JSON object on stdout (the table on stderr)");
  flags.AddInt("steps", &config->steps,
               "training steps per run (each run: the single process "
               "and every cluster configuration)");
  flags.AddInt("warmup_steps", &config->warmup_steps,
               "steps left out at the start of each run (0: steps / 10)");
  flags.AddString("data_dir", &config->data_dir, "where Fashion-MNIST's IDX files are");
  flags.AddDouble("cluster_timeout_s", &config->cluster_timeout_s,
                  "give up on a cluster run after this long");
  const int rc = HandleParseResult(flags, flags.Parse(argc, argv));
  if (rc >= 0) return rc;
  if (config->warmup_steps <= 0) config->warmup_steps = config->steps / 10;
  if (config->steps < 2 || config->warmup_steps >= config->steps) {
    std::cerr << "training_bench: --steps must be >= 2 and above --warmup_steps\n";
    return 2;
  }
  return -1;
}

// Every run, in order: the single process on 1 and 2 threads, then each cluster, with the
// single process on 1 thread again right after the 1-worker async cluster.
absl::StatusOr<std::vector<Result>> MeasureAll(const Config& config, const JobSpec& job,
                                               const Dataset& data) {
  std::ostream& log = std::cerr;
  std::vector<Result> results;
  for (int threads : {1, 2}) {
    log << "single process, " << threads << " thread(s)...\n";
    absl::StatusOr<Result> r = MeasureSingleProcess(config, job, data, threads);
    if (!r.ok()) return Annotate(r.status(), "single process");
    results.push_back(*std::move(r));
  }
  for (int workers : {1, 2}) {
    for (const char* mode : {"async", "sync"}) {
      log << "cluster: " << kNumPs << " ps, " << workers << " worker(s), " << mode << "...\n";
      absl::StatusOr<Result> r = MeasureCluster(config, mode, workers, data.num_examples);
      if (!r.ok()) {
        return Annotate(r.status(), absl::StrCat("cluster (", workers, " workers, ", mode, ")"));
      }
      results.push_back(*std::move(r));
      if (workers != 1 || std::string(mode) != "async") continue;
      // The target's baseline again, right after the run it is compared with: the machine's
      // speed drifts, so the 1-thread figure is the mean of the runs that bracket it.
      log << "single process, 1 thread, again...\n";
      absl::StatusOr<Result> again = MeasureSingleProcess(config, job, data, 1);
      if (!again.ok()) return Annotate(again.status(), "single process");
      Result& first = results[0];
      first.runs = {first.examples_per_s, again->examples_per_s};
      first.examples_per_s = (first.runs[0] + first.runs[1]) / 2;
      first.hosts.push_back(again->hosts.front());
    }
  }
  return results;
}

int Main(int argc, char** argv) {
  TuneMallocForBulkTransfers();  // as the daemons do
  DisableMutexDeadlockDetection();
  Config config;
  if (const int rc = ParseFlags(argc, argv, &config); rc >= 0) return rc;
  testing::SetUpRunfilesForBazelRun(argv[0], "coordinator/chief", "training_bench");
  const double load_before = LoadAverage1m();

  absl::StatusOr<JobSpec> job = ParseJobSpec(JobJson(config, "async"), /*num_workers=*/1);
  if (!job.ok()) {
    std::cerr << "training_bench: " << job.status().message() << "\n";
    return 1;
  }
  std::cerr << "loading Fashion-MNIST from " << config.data_dir << "...\n";
  absl::StatusOr<Dataset> data = LoadFashionMnist(config.data_dir, Split::kTrain);
  if (!data.ok()) {
    std::cerr << "training_bench: " << data.status() << "\n";
    return 1;
  }
  absl::StatusOr<std::vector<Result>> results = MeasureAll(config, *job, *data);
  if (!results.ok()) {
    std::cerr << "training_bench: " << results.status() << "\n";
    return 1;
  }
  SetRatios(&*results);
  const double load_after = LoadAverage1m();
  PrintTable(config.json ? std::cerr : std::cout, config, *results, load_before, load_after);
  if (config.json) {
    std::cout << ToJson(config, *job, *results, load_before, load_after).dump(2) << std::endl;
  }
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace shardps

int main(int argc, char** argv) { return shardps::bench::Main(argc, argv); }
