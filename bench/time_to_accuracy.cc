// time_to_accuracy: how long shardps and TensorFlow's ParameterServerStrategy take to train the
// same model to the same test accuracy on this machine, and shardps' single process as the
// limit. bench/time_to_accuracy.sh builds it, sets up TensorFlow's virtualenv and runs it:
//
//   bench/time_to_accuracy.sh [--runs=N] [--configs=LIST] [--epochs=E] [--json]
//
// The job on every side: Fashion-MNIST (the IDX files of the data directory), MLP
// 784-256-128-10 (ReLU, softmax cross-entropy), batch 256 per worker, Adam (learning rate
// 0.001, beta1 0.9, beta2 0.999, epsilon 1e-7, no decay), glorot_uniform kernels and zero
// biases, 2 ps, 10 epochs (2,350 steps of one batch), the variables partitioned by
// TensorFlow's MinSizePartitioner(256 KiB, 4 shards) and placed round-robin.
//
// Configurations (--configs: a comma-separated list; a name without ":N" means 1 and 2
// workers; "all", the default, is every one):
//   tf:N          TensorFlow PSS with a ClusterCoordinator, N workers, async (its only mode),
//                 one step per scheduled function (bench/tf_peer/tf_pss.py), no loop
//   tf-spe10:N, tf-spe20:N, tf-spe50:N
//                 the same with 10, 20 or 50 steps per scheduled function (tf_keras'
//                 steps_per_execution), traced as a Python loop, which saves the
//                 coordinator's dispatch
//   tf-spe10-range:N  10 steps in a tf.range while-loop (the shape of tf_keras'
//                 train_function; tensorflow#46387); not in "all"
//   tf-spe10-t2:N  10 steps per function, 2 intra-op threads per worker; not in "all"
//   async:N       shardps async with the job file's defaults (steps_in_flight 2 with one
//                 worker, 1 with several; the worker's own last update applied)
//   async-sif1:N  shardps async, steps_in_flight 1
//   sync:N        shardps sync (num_replicas = N)
//   stale:N       shardps bounded staleness, the default bound (2)
//   async-old:N   shardps async with the old defaults: 2 steps in flight, without the
//                 worker's own last update
//   async-own-off:N, async-slr:N, async-dc:N, async-sif1-slr:N, async-sif1-dc:N
//                 shardps async with one of the async update options changed from the
//                 default: apply_own_gradient off, staleness_lr inverse, delay_compensation
//                 0.04; the last two with 1 step in flight. Not part of "all": name them.
//   single, single-t2
//                 shardps' model, data and ps optimizer in this process on 1 or 2 threads,
//                 evaluated beside the training by the clusters' rule: the limit (the faster
//                 of the two, by time to 0.880, is the one the clusters are held to)
//   single-paused, single-t2-paused
//                 the same with the clock stopped for each evaluation (before issue 22's
//                 rule); not in "all"
//
// Runs go in rounds: each round runs every configuration once, odd rounds in reverse order,
// so the systems alternate and drift of this shared machine's speed touches all alike.
//
// Clocks. Each starts when the variables exist and training begins. shardps: the job's start
// as its chief reports it (it answers SubmitJob once the variables are created on the ps,
// then starts dispatching; JobStatus.elapsed_s counts from there): the start is the
// earliest (poll time - elapsed_s) over this benchmark's status polls. TensorFlow: after the
// strategy, the coordinator and the variables exist, right before the per-worker datasets
// are created and the first step is scheduled. Both clocks therefore include the workers'
// start of the job (shardps' workers load the data; TensorFlow builds its dataset and traces
// and ships the step function): the "1st step" column shows how long that took.
//
// Evaluation, the same way on both sides: concurrently, in a separate process, on the full
// test set (10,000 examples), every 50 steps (eval_every_steps: 4.7 evaluations an epoch), on
// one compute thread. shardps: its evaluator daemon (it polls the chief every 200 ms, pulls a
// consistent snapshot of the ps, evaluates). TensorFlow: a thread of the coordinator polls the
// ps' step counter every 200 ms, reads every variable from the ps and hands the values to an
// evaluator process (bench/tf_peer/numpy_eval.py). Both write shardps' metrics lines, each
// timed when its evaluation ended. The single process pauses its clock while it evaluates.
//
// Time to a target, the same rule on every side (bench/tta_curve.h): interpolated between the
// last evaluation below it and the first at or above it. The targets are fixed before the
// runs (--targets; the default's derivation is at kDefaultTargets); the table checks them
// against the rule applied to this run's final accuracies, prints every run's curve, and
// leaves out of its medians the runs during which other processes used more than 10% of the
// cores, saying how many.
//
// The table goes to stdout (with --json to stderr, and stdout carries one JSON object), with
// each run's host figures: the load and the CPU other processes used (bench/host_stats.h).
// The single process is bench/single_trainer.h; a cluster's job is followed by
// bench/job_watch.h.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/background_runner.h"
#include "bench/host_stats.h"
#include "bench/job_watch.h"
#include "bench/single_trainer.h"
#include "bench/training_throughput.h"
#include "bench/tta_curve.h"
#include "common/error_detail.h"
#include "common/flags.h"
#include "common/process_tuning.h"
#include "common/status_macros.h"
#include "compute/compute_device.h"
#include "coordinator/job_spec.h"
#include "data/idx_reader.h"
#include "evaluator/evaluator.h"
#include "nlohmann/json.hpp"
#include "proto/coordinator.pb.h"
#include "proto/job.pb.h"
#include "tests/process.h"
#include "tests/training_cluster.h"

namespace shardps {
namespace bench {
namespace {

using testing::TrainingCluster;

constexpr int kBatchSize = 256;
constexpr int kNumPs = 2;
constexpr double kLearningRate = 0.001;
constexpr int64_t kSeed = 42;
// The targets' default, fixed before the runs of 2026-11-28 by the rule of bench/tta_curve.h
// (the lower of the two systems' final accuracy less 0.002, 0.005 and 0.01) from the medians
// recorded on 2026-11-23 (docs/tensorflow-comparison.md): the lowest best final accuracy of a
// system at 1 or 2 workers was 0.8799 (shardps sync, 2 workers; TensorFlow's best at 2
// workers ended at 0.8803), so 0.8779, 0.8749 and 0.8699; and 0.880, the headline.
constexpr char kDefaultTargets[] = "0.8699,0.8749,0.8779,0.880";
constexpr double kHeadlineTarget = 0.880;
constexpr double kRuleMargins[] = {0.002, 0.005, 0.01};
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Options {
  int64_t runs = 3;
  std::string configs = "all";
  int64_t epochs = 10;
  bool json = false;
  std::string data_dir = std::string(kDefaultFashionMnistDir);
  // 235 steps an epoch: 4.7 evaluations an epoch on both sides.
  int64_t eval_every_steps = 50;
  std::string targets = kDefaultTargets;
  std::vector<double> target_list;  // parsed from targets, ascending
  std::string json_file;  // also write the JSON here
  std::string tf_python;  // empty: $SHARDPS_TF_VENV/bin/python, else no TensorFlow runs
  std::string tf_script;  // empty: bench/tf_peer/tf_pss.py from the runfiles
  int64_t tf_worker_threads = 1;
  std::string job_fields;  // a JSON object merged into every shardps job
  double run_timeout_s = 600;
};

double UnixNow() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

std::string Uptime() {
  std::string output;
  absl::StatusOr<int> rc = testing::RunCommand("/usr/bin/uptime", {}, {}, &output);
  if (!rc.ok() || *rc != 0) return absl::StrFormat("load average %.2f", LoadAverage1m());
  return std::string(absl::StripAsciiWhitespace(output));
}

// ---------------------------------------------------------------------------------------
// Configurations

enum class System { kShardps, kTensorFlow, kSingle };

struct ConfigSpec {
  std::string key;  // "async:1", "tf:2", "single"
  std::string label;
  System system = System::kShardps;
  int workers = 1;
  std::string mode = "async";
  int steps_in_flight = 0;  // shardps; 0: the job file's default
  int tf_steps_per_execution = 1;
  // shardps: job file fields (a JSON object) merged into the job, for the update options.
  std::string job_extra;
  bool in_all = true;  // part of --configs=all (the options' variants are asked for by name)
  std::string tf_loop = "unrolled";  // tf_pss.py --loop
  int tf_worker_threads = -1;        // -1: --tf_worker_threads
  int single_threads = 1;            // the single process' compute threads
  bool single_paused = false;        // the single process stops its clock to evaluate
};

// Every configuration, in the order of a round: for each worker count, shardps and
// TensorFlow alternate.
std::vector<ConfigSpec> AllConfigs(const Options& options) {
  std::vector<ConfigSpec> all;
  auto workers_text = [](int n) { return absl::StrCat(n, n == 1 ? " worker" : " workers"); };
  for (int w : {1, 2}) {
    all.push_back({absl::StrCat("async:", w),
                   absl::StrCat("shardps async (default in flight), ", workers_text(w)),
                   System::kShardps, w, "async", 0, 1});
    all.push_back({absl::StrCat("tf:", w), absl::StrCat("TF PSS async, ", workers_text(w)),
                   System::kTensorFlow, w, "async", 0, 1});
    all.push_back({absl::StrCat("async-sif1:", w),
                   absl::StrCat("shardps async, 1 in flight, ", workers_text(w)),
                   System::kShardps, w, "async", 1, 1});
    // TensorFlow as its users tune it: steps per scheduled function (tf_keras'
    // steps_per_execution), the loop that runs them, the workers' threads.
    for (int spe : {10, 20, 50}) {
      all.push_back({absl::StrCat("tf-spe", spe, ":", w),
                     absl::StrCat("TF PSS async, ", spe, " steps/function, ", workers_text(w)),
                     System::kTensorFlow, w, "async", 0, spe});
    }
    {
      ConfigSpec range{absl::StrCat("tf-spe10-range:", w),
                       absl::StrCat("TF PSS async, 10 steps/function in tf.range, ",
                                    workers_text(w)),
                       System::kTensorFlow, w, "async", 0, 10};
      range.tf_loop = "range";
      range.in_all = false;
      all.push_back(range);
      ConfigSpec threads{absl::StrCat("tf-spe10-t2:", w),
                         absl::StrCat("TF PSS async, 10 steps/function, 2 threads/worker, ",
                                      workers_text(w)),
                         System::kTensorFlow, w, "async", 0, 10};
      threads.tf_worker_threads = 2;
      threads.in_all = false;
      all.push_back(threads);
    }
    all.push_back({absl::StrCat("sync:", w), absl::StrCat("shardps sync, ", workers_text(w)),
                   System::kShardps, w, "sync", 0, 1});
    all.push_back({absl::StrCat("stale:", w),
                   absl::StrCat("shardps stale (bound 2), ", workers_text(w)), System::kShardps,
                   w, "stale", 0, 1});
    // The async update options, each alone on top of the default (not in "all").
    const std::pair<const char*, const char*> variants[] = {
        {"async-old", R"({"steps_in_flight": 2, "apply_own_gradient": false})"},
        {"async-own-off", R"({"apply_own_gradient": false})"},
        {"async-slr", R"({"staleness_lr": "inverse"})"},
        {"async-dc", R"({"delay_compensation": 0.04})"},
        {"async-sif1-slr", R"({"steps_in_flight": 1, "staleness_lr": "inverse"})"},
        {"async-sif1-dc", R"({"steps_in_flight": 1, "delay_compensation": 0.04})"},
    };
    for (const auto& [name, extra] : variants) {
      ConfigSpec c{absl::StrCat(name, ":", w),
                   absl::StrCat("shardps ", absl::StripPrefix(name, "async-"), " ", extra, ", ",
                                workers_text(w)),
                   System::kShardps, w, "async", 0, 1};
      c.job_extra = extra;
      c.in_all = false;
      all.push_back(std::move(c));
    }
    if (w == 1) {
      all.push_back({"single", "shardps single process, 1 thread", System::kSingle, 1, "", 0, 1});
      ConfigSpec two{"single-t2", "shardps single process, 2 threads", System::kSingle, 1, "", 0,
                     1};
      two.single_threads = 2;
      all.push_back(two);
      for (int threads : {1, 2}) {
        ConfigSpec paused{threads == 1 ? "single-paused" : "single-t2-paused",
                          absl::StrCat("shardps single process, ", threads,
                                       threads == 1 ? " thread" : " threads", ", eval paused"),
                          System::kSingle, 1, "", 0, 1};
        paused.single_threads = threads;
        paused.single_paused = true;
        paused.in_all = false;
        all.push_back(paused);
      }
    }
  }
  return all;
}

absl::StatusOr<std::vector<ConfigSpec>> SelectConfigs(const Options& options) {
  const std::vector<ConfigSpec> all = AllConfigs(options);
  if (options.configs == "all") {
    std::vector<ConfigSpec> out;
    for (const ConfigSpec& c : all) {
      if (c.in_all) out.push_back(c);
    }
    return out;
  }
  std::vector<bool> chosen(all.size(), false);
  for (absl::string_view item : absl::StrSplit(options.configs, ',', absl::SkipEmpty())) {
    bool matched = false;
    for (size_t i = 0; i < all.size(); ++i) {
      const std::string& key = all[i].key;
      const bool exact = key == item;
      const bool any_workers =
          item.find(':') == absl::string_view::npos && absl::StartsWith(key, absl::StrCat(item, ":"));
      if (exact || any_workers) {
        chosen[i] = true;
        matched = true;
      }
    }
    if (!matched) {
      std::vector<std::string> keys;
      for (const ConfigSpec& c : all) keys.push_back(c.key);
      return absl::InvalidArgumentError(absl::StrCat("--configs: unknown configuration \"", item,
                                                     "\"; known: ", absl::StrJoin(keys, ", "),
                                                     " (a name without :N means 1 and 2 workers)"));
    }
  }
  std::vector<ConfigSpec> out;
  for (size_t i = 0; i < all.size(); ++i) {
    if (chosen[i]) out.push_back(all[i]);
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// One run

struct RunResult {
  std::string error;  // empty: the run completed
  double load_1m = kNaN;  // at its start
  double train_s = kNaN;  // the clock at the last step done
  double first_step_s = kNaN;
  int64_t steps = 0;
  int64_t examples = 0;
  double examples_per_s = kNaN;
  // shardps, from the chief's last status: means over the job's last 50 steps.
  double train_loss = kNaN;
  double pull_ms = kNaN;
  double compute_ms = kNaN;
  double push_ms = kNaN;
  std::vector<EvalPoint> points;
  std::string logs;  // where its logs are
  HostStats host;    // the machine during the run
};

absl::StatusOr<nlohmann::json> JobJson(const Options& options, const ConfigSpec& config) {
  nlohmann::json job = {
      {"name", "tta"},
      {"model", "mlp:256,128"},
      {"dataset", "fashion_mnist"},
      {"data_dir", options.data_dir},
      {"batch_size", kBatchSize},
      {"epochs", options.epochs},
      {"optimizer",
       {{"type", "adam"},
        {"learning_rate", kLearningRate},
        {"beta1", 0.9},
        {"beta2", 0.999},
        {"epsilon", 1e-7}}},
      {"mode", config.mode.empty() ? "async" : config.mode},
      {"partitioner", "min_size:262144:4"},
      {"placement", "round_robin"},
      {"seed", kSeed},
      {"kernel_initializer", "glorot_uniform"},
      {"backend", "cpu"},
      {"eval_every_steps", options.eval_every_steps},
  };
  if (config.steps_in_flight > 0) job["steps_in_flight"] = config.steps_in_flight;
  if (!config.job_extra.empty()) job.update(nlohmann::json::parse(config.job_extra));
  if (!options.job_fields.empty()) {
    nlohmann::json extra = nlohmann::json::parse(options.job_fields, nullptr, false);
    if (!extra.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--job_fields must be a JSON object, got: ", options.job_fields));
    }
    job.update(extra);
  }
  return job;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read \"", path, "\""));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// After the job: waits for the evaluator's exit (it ends after its final evaluation of a job
// that succeeded) and reads its evaluations, timed from `start`.
absl::Status CollectEvaluations(TrainingCluster& cluster, double start, RunResult* r) {
  absl::StatusOr<int> evaluator_exit = cluster.evaluator()->Wait(absl::Seconds(60));
  if (!evaluator_exit.ok() || *evaluator_exit != 0) {
    return absl::InternalError(absl::StrCat(
        "the evaluator did not end with 0 after the job: ",
        evaluator_exit.ok() ? absl::StrCat("exit ", *evaluator_exit)
                            : evaluator_exit.status().ToString(),
        "\n", cluster.Logs()));
  }
  ASSIGN_OR_RETURN(std::string metrics, ReadFile(cluster.metrics_file()));
  ASSIGN_OR_RETURN(r->points, ParseMetricsLines(metrics, start));
  return absl::OkStatus();
}

absl::Status RunShardps(const Options& options, const ConfigSpec& config, RunResult* r) {
  ASSIGN_OR_RETURN(nlohmann::json job, JobJson(options, config));
  TrainingCluster::Options cluster_options;
  cluster_options.num_ps = kNumPs;
  cluster_options.num_workers = config.workers;
  cluster_options.evaluator = true;
  // The job is submitted once the chief answers, so that the start of the job is seen.
  cluster_options.long_lived = true;
  ASSIGN_OR_RETURN(std::unique_ptr<TrainingCluster> cluster,
                   TrainingCluster::Start(cluster_options));
  r->logs = cluster->metrics_file();
  absl::StatusOr<SubmitJobResponse> submitted = SubmitJob(cluster->chief_client(), job.dump());
  if (!submitted.ok()) {
    return Annotate(submitted.status(), absl::StrCat("submit\n", cluster->Logs()));
  }
  double start = std::numeric_limits<double>::infinity();
  double first_step = kNaN;
  FollowOptions follow;
  follow.timeout = absl::Seconds(options.run_timeout_s);
  follow.on_status = [&](const JobStatus& status) {
    const double now = UnixNow();
    if (status.job_id() != submitted->job_id()) return;
    // elapsed_s stops at the end of training: only earlier polls place the start.
    if (!status.training_done()) start = std::min(start, now - status.elapsed_s());
    if (std::isnan(first_step) && status.steps_done() > 0) first_step = now;
  };
  follow.chief_running = [&cluster] { return cluster->chief()->Running(); };
  follow.logs = [&cluster] { return cluster->Logs(); };
  ASSIGN_OR_RETURN(const JobStatus last,
                   FollowJob(cluster->chief_client(), submitted->job_id(), follow));
  if (!std::isfinite(start)) {
    // The job ended before a poll saw it train: its start is its end less its length.
    start = UnixNow() - last.elapsed_s();
  }
  RETURN_IF_ERROR(CollectEvaluations(*cluster, start, r));
  r->train_s = last.elapsed_s();
  r->first_step_s = first_step - start;
  r->steps = last.steps_done();
  r->examples = ExamplesInSteps(last.steps_done(), 60000, kBatchSize);
  r->examples_per_s = static_cast<double>(r->examples) / r->train_s;
  r->train_loss = last.loss();
  r->pull_ms = last.pull_ms();
  r->compute_ms = last.compute_ms();
  r->push_ms = last.push_ms();
  return absl::OkStatus();
}

absl::Status RunTensorFlow(const Options& options, const ConfigSpec& config, int run_index,
                           RunResult* r) {
  const std::string dir =
      testing::FreshTempDir(absl::StrCat("tf_", absl::StrReplaceAll(config.key, {{":", "_"}}),
                                         "_run", run_index));
  const std::string out = absl::StrCat(dir, "/run.json");
  r->logs = dir;
  const std::vector<std::string> args = {
      options.tf_script,
      "run",
      absl::StrCat("--workers=", config.workers),
      absl::StrCat("--ps=", kNumPs),
      absl::StrCat("--epochs=", options.epochs),
      absl::StrCat("--batch_size=", kBatchSize),
      absl::StrCat("--learning_rate=", kLearningRate),
      absl::StrCat("--seed=", kSeed),
      absl::StrCat("--eval_every_steps=", options.eval_every_steps),
      absl::StrCat("--steps_per_execution=", config.tf_steps_per_execution),
      absl::StrCat("--loop=", config.tf_loop),
      absl::StrCat("--worker_threads=", config.tf_worker_threads >= 0
                                            ? config.tf_worker_threads
                                            : options.tf_worker_threads),
      absl::StrCat("--data_dir=", options.data_dir),
      absl::StrCat("--log_dir=", dir),
      absl::StrCat("--out=", out),
  };
  std::string output;
  absl::StatusOr<int> rc = testing::RunCommand(options.tf_python, args, {}, &output,
                                               absl::Seconds(options.run_timeout_s));
  if (!rc.ok() || *rc != 0) {
    return absl::InternalError(absl::StrCat(
        "tf_pss.py ", rc.ok() ? absl::StrCat("exited ", *rc) : rc.status().ToString(), "; logs in ",
        dir, "\n", output.size() > 4000 ? output.substr(output.size() - 4000) : output));
  }
  ASSIGN_OR_RETURN(std::string text, ReadFile(out));
  nlohmann::json run = nlohmann::json::parse(text, nullptr, false);
  if (!run.is_object() || !run.value("start_time", nlohmann::json()).is_number() ||
      !run.value("records", nlohmann::json()).is_array()) {
    return absl::InternalError(absl::StrCat(out, ": no start_time or records"));
  }
  if (run.contains("eval_error") && run["eval_error"].is_string()) {
    return absl::InternalError(
        absl::StrCat("the TensorFlow run's evaluations failed: ", run["eval_error"].get<std::string>()));
  }
  const double start = run["start_time"].get<double>();
  for (const nlohmann::json& record : run["records"]) {
    ASSIGN_OR_RETURN(EvalPoint point, PointFromRecord(record, start));
    r->points.push_back(point);
  }
  std::stable_sort(r->points.begin(), r->points.end(),
                   [](const EvalPoint& a, const EvalPoint& b) { return a.t < b.t; });
  auto number = [&](const char* key) {
    auto it = run.find(key);
    return it != run.end() && it->is_number() ? it->get<double>() : kNaN;
  };
  r->train_s = number("train_s");
  r->first_step_s = number("first_step_s");
  r->steps = static_cast<int64_t>(number("steps"));
  r->examples = static_cast<int64_t>(number("examples"));
  r->examples_per_s = number("examples_per_s");
  return absl::OkStatus();
}

// The single process (bench/single_trainer.h): data, parameters and optimizer state are ready
// (outside the clock), then it trains on its threads. Every eval_every_steps steps it copies
// the parameters and, by the clusters' rule, evaluates the copy on a thread of its own beside
// the training (bench/background_runner.h: skipped while the last evaluation runs, as the
// evaluator daemon skips versions), each point timed when its evaluation ends; or, paused,
// stops its clock while it evaluates. The evaluator's own code (evaluator/evaluator.h)
// evaluates the full test set on one thread of its own device.
absl::Status RunSingle(const Options& options, const ConfigSpec& config, const Dataset& train,
                       RunResult* r) {
  ASSIGN_OR_RETURN(nlohmann::json job_json, JobJson(options, config));
  ASSIGN_OR_RETURN(JobSpec job, ParseJobSpec(job_json.dump(), /*num_workers=*/1));
  ASSIGN_OR_RETURN(std::unique_ptr<SingleTrainer> trainer,
                   SingleTrainer::Create(job, train, config.single_threads));
  const ComputeDevice eval_device = ComputeDevice::Cpu(1);
  ASSIGN_OR_RETURN(std::unique_ptr<Evaluator> evaluator, Evaluator::Create(job, eval_device));
  const int64_t total_steps = trainer->steps_per_epoch() * job.epochs();
  const absl::Time start = absl::Now();
  absl::Duration paused;  // evaluations, when the clock stops for them
  auto clock = [&] { return absl::ToDoubleSeconds(absl::Now() - start - paused); };
  absl::Mutex mu;  // r->points and `failed`, appended to by the evaluation thread
  absl::Status failed;
  std::vector<std::vector<float>> copy;
  // `stamp` < 0: the clock when the evaluation ends (beside the training); else that time.
  auto evaluate_copy = [&](int64_t step, bool final, double stamp) {
    absl::StatusOr<EvalMetrics> m = evaluator->Evaluate(copy);
    absl::MutexLock lock(&mu);
    if (!m.ok()) {
      failed = m.status();
      return;
    }
    EvalPoint p;
    p.t = stamp < 0 ? clock() : stamp;
    p.step = step;
    p.accuracy = m->accuracy();
    p.loss = m->loss();
    p.final = final;
    r->points.push_back(p);
  };
  BackgroundRunner runner;
  auto evaluate = [&](int64_t step, bool final) -> absl::Status {
    if (!config.single_paused && !final && runner.busy()) return absl::OkStatus();
    runner.Wait();
    const absl::Time t0 = absl::Now();
    const double before = clock();  // paused: the clock stops here
    copy = trainer->params();
    if (!config.single_paused && !final) {
      runner.TryStart([&evaluate_copy, step] { evaluate_copy(step, false, -1); });
    } else {
      evaluate_copy(step, final, config.single_paused ? before : -1);
      if (config.single_paused) paused += absl::Now() - t0;
    }
    absl::MutexLock lock(&mu);
    return failed;
  };
  RETURN_IF_ERROR(evaluate(0, false));
  for (int64_t s = 0; s < total_steps; ++s) {
    RETURN_IF_ERROR(trainer->Step(s).status());
    if (s == 0) r->first_step_s = clock();
    const int64_t done = s + 1;
    if (done == total_steps) break;
    if (done % options.eval_every_steps == 0) RETURN_IF_ERROR(evaluate(done, false));
  }
  const double train_s = clock();
  RETURN_IF_ERROR(evaluate(total_steps, true));
  runner.Wait();
  std::stable_sort(r->points.begin(), r->points.end(),
                   [](const EvalPoint& a, const EvalPoint& b) { return a.t < b.t; });
  r->train_s = train_s;
  r->steps = total_steps;
  r->examples = ExamplesInSteps(total_steps, train.num_examples, kBatchSize);
  r->examples_per_s = static_cast<double>(r->examples) / train_s;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// Report

struct ConfigResults {
  ConfigSpec config;
  std::vector<RunResult> runs;
};

std::vector<const RunResult*> Completed(const ConfigResults& c) {
  std::vector<const RunResult*> out;
  for (const RunResult& r : c.runs) {
    if (r.error.empty()) out.push_back(&r);
  }
  return out;
}

// The runs the figures count: completed, and not flagged busy (other processes used more
// than 10% of the cores during the run, bench/host_stats.h). The table says how many busy
// runs it left out.
// --keep_busy counts them (a machine that is never quiet, such as a test's).
bool g_keep_busy = false;

std::vector<const RunResult*> Counted(const ConfigResults& c) {
  std::vector<const RunResult*> out;
  for (const RunResult* r : Completed(c)) {
    if (g_keep_busy || !r->host.busy()) out.push_back(r);
  }
  return out;
}

Spread TimeSpread(const ConfigResults& c, double target) {
  std::vector<std::optional<double>> values;
  for (const RunResult* r : Counted(c)) values.push_back(TimeToAccuracy(r->points, target));
  return Summarize(values);
}

Spread ValueSpread(const ConfigResults& c, double RunResult::*field) {
  std::vector<std::optional<double>> values;
  for (const RunResult* r : Counted(c)) {
    const double v = r->*field;
    values.push_back(std::isnan(v) ? std::nullopt : std::optional<double>(v));
  }
  return Summarize(values);
}

Spread FinalSpread(const ConfigResults& c) {
  std::vector<std::optional<double>> values;
  for (const RunResult* r : Counted(c)) values.push_back(FinalAccuracy(r->points));
  return Summarize(values);
}

// "12.3 (10.1–14.0)", "never", "12.3 (10.1–never)", "-" without runs.
std::string Cell(const Spread& s, int decimals) {
  if (s.runs == 0) return "-";
  auto value = [&](const std::optional<double>& v) {
    return v.has_value() ? absl::StrFormat("%.*f", decimals, *v) : std::string("never");
  };
  if (s.runs == 1) return value(s.median);
  if (!s.min.has_value()) return "never";
  return absl::StrCat(value(s.median), " (", value(s.min), "-", value(s.max), ")");
}

// The TensorFlow configuration with the same worker count that reached `target` soonest (by
// median): null when none did.
const ConfigResults* BestTf(const std::vector<ConfigResults>& all, int workers, double target) {
  const ConfigResults* best = nullptr;
  double best_median = std::numeric_limits<double>::infinity();
  for (const ConfigResults& tf : all) {
    if (tf.config.system != System::kTensorFlow || tf.config.workers != workers) continue;
    const Spread s = TimeSpread(tf, target);
    if (s.median.has_value() && *s.median < best_median) {
      best = &tf;
      best_median = *s.median;
    }
  }
  return best;
}

// TensorFlow's best median time to `target` (same worker count) over this configuration's;
// NaN where either is missing.
double SpeedupOverTf(const std::vector<ConfigResults>& all, const ConfigResults& c,
                     double target) {
  if (c.config.system == System::kTensorFlow) return kNaN;
  const ConfigResults* tf = BestTf(all, c.config.workers, target);
  if (tf == nullptr) return kNaN;
  const Spread a = TimeSpread(*tf, target), b = TimeSpread(c, target);
  if (a.median.has_value() && b.median.has_value() && *b.median > 0) return *a.median / *b.median;
  return kNaN;
}

// The single-process configuration that reached `target` soonest (by median): the limit;
// where none reached it, the one with the most examples/s.
const ConfigResults* BestSingle(const std::vector<ConfigResults>& all, double target) {
  const ConfigResults* best = nullptr;
  double best_median = std::numeric_limits<double>::infinity();
  for (const ConfigResults& c : all) {
    if (c.config.system != System::kSingle) continue;
    const Spread s = TimeSpread(c, target);
    if (s.median.has_value() && *s.median < best_median) {
      best = &c;
      best_median = *s.median;
    }
  }
  if (best != nullptr) return best;
  double best_rate = 0;
  for (const ConfigResults& c : all) {
    if (c.config.system != System::kSingle) continue;
    const Spread s = ValueSpread(c, &RunResult::examples_per_s);
    if (s.median.has_value() && *s.median > best_rate) {
      best = &c;
      best_rate = *s.median;
    }
  }
  return best;
}

// This configuration's median time to `target` over the fastest single process'; NaN where
// either is missing.
double OverSingle(const std::vector<ConfigResults>& all, const ConfigResults& c, double target) {
  const ConfigResults* single = BestSingle(all, target);
  if (single == nullptr) return kNaN;
  const Spread a = TimeSpread(c, target), b = TimeSpread(*single, target);
  if (a.median.has_value() && b.median.has_value() && *b.median > 0) return *a.median / *b.median;
  return kNaN;
}

// Median examples/s over the fastest single process' (by time to `target`).
double ThroughputOfSingle(const std::vector<ConfigResults>& all, const ConfigResults& c,
                          double target) {
  const ConfigResults* single = BestSingle(all, target);
  if (single == nullptr) return kNaN;
  const Spread a = ValueSpread(c, &RunResult::examples_per_s);
  const Spread b = ValueSpread(*single, &RunResult::examples_per_s);
  if (a.median.has_value() && b.median.has_value() && *b.median > 0) return *a.median / *b.median;
  return kNaN;
}

// A target as the table and the JSON keys spell it: 4 decimals, or 3 when the 4th is 0
// ("0.880", "0.8699").
std::string TargetText(double target) {
  std::string text = absl::StrFormat("%.4f", target);
  if (text.back() == '0') text.pop_back();
  return text;
}

std::string Ratio(double v) { return std::isnan(v) ? "-" : absl::StrFormat("%.2fx", v); }

// The best final accuracy (by median) among `system`'s configurations with `workers` workers
// (the single process counts as 1 worker of shardps'); NaN without one.
double BestFinal(const std::vector<ConfigResults>& all, bool tensorflow, int workers) {
  double best = kNaN;
  for (const ConfigResults& c : all) {
    if ((c.config.system == System::kTensorFlow) != tensorflow || c.config.workers != workers ||
        c.config.system == System::kSingle) {
      continue;
    }
    const Spread s = FinalSpread(c);
    if (s.median.has_value() && !(*s.median <= best)) best = *s.median;
  }
  return best;
}

const char kClockNote[] =
    "clock: from the moment the variables exist and training begins (shardps: the job's "
    "start as the chief reports it, after it created the variables; TensorFlow: after the "
    "strategy, coordinator and variables exist, right before the per-worker datasets and the "
    "first schedule), to the end of the evaluation that first reached the accuracy";
const char kEvalNote[] =
    "evaluation: concurrent, in a separate process on one thread, the full test set (10,000) "
    "every eval_every_steps steps (polled every 200 ms) on both sides (shardps: its evaluator "
    "daemon, a consistent snapshot pulled from the ps; TensorFlow: the coordinator reads the "
    "variables from the ps, an evaluator process evaluates them; the single process: a thread "
    "of its own evaluates a copy beside the training, or with its clock paused where the "
    "label says so). Time to a target: interpolated between the last evaluation below "
    "it and the first at or above it (bench/tta_curve.h), the same rule on every side";

// "3", "2/3" (one failed), "3 (1 busy)".
std::string RunsCell(const ConfigResults& c) {
  const size_t completed = Completed(c).size(), counted = Counted(c).size();
  std::string out = completed == c.runs.size() ? absl::StrCat(completed)
                                                : absl::StrCat(completed, "/", c.runs.size());
  if (counted < completed) absl::StrAppend(&out, " (", completed - counted, " busy)");
  return out;
}

// The targets' rule, checked against this run: were the fixed targets below both systems'
// final accuracy?
void PrintTargetsRule(std::ostream& out, const Options& options,
                      const std::vector<ConfigResults>& results) {
  for (int w : {1, 2}) {
    const double shardps = BestFinal(results, false, w), tf = BestFinal(results, true, w);
    if (std::isnan(shardps) || std::isnan(tf)) continue;
    const std::vector<double> rule =
        TargetsBelow(shardps, tf, std::vector<double>(std::begin(kRuleMargins),
                                                      std::end(kRuleMargins)));
    out << absl::StrFormat(
        "targets' rule, %d worker(s): best final accuracy shardps %.4f, TensorFlow %.4f; the "
        "lower less 0.002/0.005/0.01 would be %s (this run used %s, fixed before it)\n",
        w, shardps, tf, absl::StrJoin(rule, ", ", [](std::string* o, double v) {
          absl::StrAppend(o, absl::StrFormat("%.4f", v));
        }),
        options.targets);
  }
}

// Every run's evaluations, (seconds, accuracy).
void PrintCurves(std::ostream& out, const std::vector<ConfigResults>& results) {
  out << "\ncurves (run clock s: accuracy), every evaluation of each run:\n";
  for (const ConfigResults& c : results) {
    for (size_t i = 0; i < c.runs.size(); ++i) {
      const RunResult& r = c.runs[i];
      if (!r.error.empty()) continue;
      std::string line = absl::StrCat("  ", c.config.key, " run ", i + 1,
                                      r.host.busy() ? " (busy)" : "", ":");
      for (const EvalPoint& p : r.points) {
        absl::StrAppend(&line, absl::StrFormat(" %.1f:%.4f", p.t, p.accuracy));
      }
      out << line << "\n";
    }
  }
}

void PrintTable(std::ostream& out, const Options& options,
                const std::vector<ConfigResults>& results, const std::string& uptime_before,
                const std::string& uptime_after) {
  const std::vector<double>& targets = options.target_list;
  out << "time_to_accuracy: Fashion-MNIST, MLP 784-256-128-10, Adam (lr 0.001), batch "
      << kBatchSize << " per worker, " << kNumPs << " ps, " << options.epochs << " epochs; "
      << options.runs << " runs per configuration in alternating rounds; median (min-max)\n";
  out << kClockNote << "\n" << kEvalNote << " (eval_every_steps " << options.eval_every_steps
      << ")\n";
  out << "machine: " << std::thread::hardware_concurrency() << " cores; before: " << uptime_before
      << "; after: " << uptime_after << "\n\n";
  std::string header = absl::StrFormat("%-56s %-10s", "configuration", "runs");
  for (double target : targets) {
    absl::StrAppend(&header, absl::StrFormat(" %-19s", absl::StrCat("to ", TargetText(target), " (s)")));
  }
  absl::StrAppend(&header, absl::StrFormat(" %-22s %-20s %-14s %-10s %-10s %-9s", "final acc",
                                           "examples/s", "1st step (s)", "TF/this", "this/1proc",
                                           "ex/s/1proc"));
  out << header << "\n" << std::string(header.size(), '-') << "\n";
  for (const ConfigResults& c : results) {
    std::string row = absl::StrFormat("%-56s %-10s", c.config.label, RunsCell(c));
    for (double target : targets) {
      absl::StrAppend(&row, absl::StrFormat(" %-19s", Cell(TimeSpread(c, target), 1)));
    }
    absl::StrAppend(
        &row, absl::StrFormat(" %-22s %-20s %-14s %-10s %-10s %-9s", Cell(FinalSpread(c), 4),
                              Cell(ValueSpread(c, &RunResult::examples_per_s), 0),
                              Cell(ValueSpread(c, &RunResult::first_step_s), 1),
                              Ratio(SpeedupOverTf(results, c, kHeadlineTarget)),
                              Ratio(OverSingle(results, c, kHeadlineTarget)),
                              Ratio(ThroughputOfSingle(results, c, kHeadlineTarget))));
    out << row << "\n";
  }
  // Where a shardps step's time goes.
  out << "\nshardps, per step over each job's last 50 steps (medians over runs): training loss; "
         "a worker's pull, compute and push wall ms (a step's pull and push overlap the other "
         "step's compute when 2 are in flight)\n";
  for (const ConfigResults& c : results) {
    if (c.config.system != System::kShardps) continue;
    out << absl::StrFormat("  %-56s loss %s  pull %s  compute %s  push %s\n", c.config.label,
                           Cell(ValueSpread(c, &RunResult::train_loss), 4),
                           Cell(ValueSpread(c, &RunResult::pull_ms), 2),
                           Cell(ValueSpread(c, &RunResult::compute_ms), 2),
                           Cell(ValueSpread(c, &RunResult::push_ms), 2));
  }
  out << "\nnever: the run's evaluations did not reach it; a median is \"never\" when half or "
         "more of the runs did not. examples/s: "
      << options.epochs
      << " epochs of examples over the clock at the last step done (start-up included). "
         "TF/this: the median time to 0.880 of the TensorFlow configuration with the same "
         "workers that reached it soonest, over this row's median. this/1proc: this row's "
         "median time to 0.880 over the fastest single process' (the limit); ex/s/1proc: its "
         "examples/s over that single process'. Busy runs (others used more than 10% of the "
         "cores) are left out of every median and ratio.\n";
  PrintTargetsRule(out, options, results);
  for (const ConfigResults& c : results) {
    for (size_t i = 0; i < c.runs.size(); ++i) {
      if (!c.runs[i].error.empty()) {
        out << c.config.label << ", run " << i + 1 << " failed: "
            << c.runs[i].error.substr(0, c.runs[i].error.find('\n')) << "\n";
      }
    }
  }
  out << "host during each run (bench/host_stats.h):\n";
  for (const ConfigResults& c : results) {
    for (size_t i = 0; i < c.runs.size(); ++i) {
      out << "  " << c.config.label << ", run " << i + 1 << ": " << c.runs[i].host.Line() << "\n";
    }
  }
  PrintCurves(out, results);
}

nlohmann::json SpreadJson(const Spread& s) {
  auto opt = [](const std::optional<double>& v) -> nlohmann::json {
    if (!v.has_value()) return nullptr;
    return *v;
  };
  return {{"median", opt(s.median)}, {"min", opt(s.min)}, {"max", opt(s.max)},
          {"runs", s.runs}, {"present", s.present}};
}

nlohmann::json Num(double v) {
  if (std::isnan(v)) return nullptr;
  return v;
}

nlohmann::json RunJson(const std::vector<double>& targets, const ConfigResults& c,
                       const RunResult& r) {
  nlohmann::json run;
  if (!r.error.empty()) run["error"] = r.error;
  run["load_average_1m"] = Num(r.load_1m);
  run["host"] = {{"load_average_1m_before", Num(r.host.load_before)},
                 {"load_average_1m_after", Num(r.host.load_after)},
                 {"others_cores", r.host.others_cores()},
                 {"busy", r.host.busy()}};
  run["train_s"] = Num(r.train_s);
  run["first_step_s"] = Num(r.first_step_s);
  run["steps"] = r.steps;
  run["examples"] = r.examples;
  run["examples_per_s"] = Num(r.examples_per_s);
  if (c.config.system == System::kShardps) {
    run["train_loss_last_50_steps"] = Num(r.train_loss);
    run["pull_ms"] = Num(r.pull_ms);
    run["compute_ms"] = Num(r.compute_ms);
    run["push_ms"] = Num(r.push_ms);
  }
  for (double target : targets) {
    std::optional<double> t = TimeToAccuracy(r.points, target);
    run[absl::StrCat("time_to_", TargetText(target), "_s")] = t.has_value() ? nlohmann::json(*t)
                                                                   : nlohmann::json(nullptr);
  }
  std::optional<double> final = FinalAccuracy(r.points);
  run["final_accuracy"] = final.has_value() ? nlohmann::json(*final) : nlohmann::json(nullptr);
  nlohmann::json curve = nlohmann::json::array();
  for (const EvalPoint& p : r.points) {
    curve.push_back({{"t", p.t}, {"step", p.step}, {"accuracy", p.accuracy},
                     {"loss", Num(p.loss)}, {"final", p.final}});
  }
  run["evaluations"] = std::move(curve);
  run["logs"] = r.logs;
  return run;
}

nlohmann::json SummaryJson(const std::vector<double>& targets,
                           const std::vector<ConfigResults>& results, const ConfigResults& c) {
  nlohmann::json summary;
  for (double target : targets) {
    summary[absl::StrCat("time_to_", TargetText(target), "_s")] = SpreadJson(TimeSpread(c, target));
  }
  summary["runs_counted"] = Counted(c).size();
  summary["final_accuracy"] = SpreadJson(FinalSpread(c));
  summary["examples_per_s"] = SpreadJson(ValueSpread(c, &RunResult::examples_per_s));
  summary["first_step_s"] = SpreadJson(ValueSpread(c, &RunResult::first_step_s));
  summary["train_s"] = SpreadJson(ValueSpread(c, &RunResult::train_s));
  if (c.config.system == System::kShardps) {
    summary["train_loss_last_50_steps"] = SpreadJson(ValueSpread(c, &RunResult::train_loss));
    summary["pull_ms"] = SpreadJson(ValueSpread(c, &RunResult::pull_ms));
    summary["compute_ms"] = SpreadJson(ValueSpread(c, &RunResult::compute_ms));
    summary["push_ms"] = SpreadJson(ValueSpread(c, &RunResult::push_ms));
  }
  summary["best_tf_time_to_0.880_over_this"] = Num(SpeedupOverTf(results, c, kHeadlineTarget));
  summary["time_to_0.880_over_single_process"] = Num(OverSingle(results, c, kHeadlineTarget));
  summary["examples_per_s_over_single_process"] =
      Num(ThroughputOfSingle(results, c, kHeadlineTarget));
  if (const ConfigResults* tf = BestTf(results, c.config.workers, kHeadlineTarget);
      tf != nullptr && c.config.system != System::kTensorFlow) {
    summary["best_tf"] = tf->config.key;
  }
  return summary;
}

nlohmann::json ConfigJson(const std::vector<double>& targets,
                          const std::vector<ConfigResults>& results, const ConfigResults& c) {
  nlohmann::json j;
  j["key"] = c.config.key;
  j["label"] = c.config.label;
  j["system"] = c.config.system == System::kTensorFlow ? "tensorflow"
                : c.config.system == System::kSingle   ? "shardps_single_process"
                                                       : "shardps";
  j["workers"] = c.config.workers;
  if (c.config.system == System::kShardps) {
    j["mode"] = c.config.mode;
    j["steps_in_flight"] = c.config.steps_in_flight;  // 0: the job file's default
  }
  if (c.config.system == System::kTensorFlow) {
    j["steps_per_execution"] = c.config.tf_steps_per_execution;
    j["loop"] = c.config.tf_loop;
    if (c.config.tf_worker_threads >= 0) j["worker_threads"] = c.config.tf_worker_threads;
  }
  if (c.config.system == System::kSingle) j["threads"] = c.config.single_threads;
  j["summary"] = SummaryJson(targets, results, c);
  nlohmann::json runs = nlohmann::json::array();
  for (const RunResult& r : c.runs) runs.push_back(RunJson(targets, c, r));
  j["runs"] = std::move(runs);
  return j;
}

nlohmann::json ToJson(const Options& options, const std::vector<ConfigResults>& results,
                      const std::string& uptime_before, const std::string& uptime_after) {
  nlohmann::json out;
  out["bench"] = "time_to_accuracy";
  out["job"] = {{"model", "mlp:256,128"},
                {"dataset", "fashion_mnist"},
                {"batch_size_per_worker", kBatchSize},
                {"optimizer", "adam lr 0.001 beta1 0.9 beta2 0.999 epsilon 1e-7"},
                {"num_ps", kNumPs},
                {"epochs", options.epochs},
                {"eval_every_steps", options.eval_every_steps},
                {"targets", options.target_list}};
  if (!options.job_fields.empty()) out["job"]["shardps_job_fields"] = options.job_fields;
  out["runs_per_config"] = options.runs;
  out["clock"] = kClockNote;
  out["evaluation"] = kEvalNote;
  out["machine"] = {{"cores", std::thread::hardware_concurrency()},
                    {"uptime_before", uptime_before},
                    {"uptime_after", uptime_after}};
  nlohmann::json configs = nlohmann::json::array();
  for (const ConfigResults& c : results) {
    configs.push_back(ConfigJson(options.target_list, results, c));
  }
  out["configs"] = std::move(configs);
  return out;
}

std::string Brief(const std::vector<double>& targets, const RunResult& r) {
  if (!r.error.empty()) return absl::StrCat("FAILED: ", r.error.substr(0, r.error.find('\n')));
  std::string out;
  for (double target : targets) {
    std::optional<double> t = TimeToAccuracy(r.points, target);
    absl::StrAppend(&out, absl::StrFormat("%s at %s, ", TargetText(target),
                                          t.has_value() ? absl::StrFormat("%.1f s", *t) : "never"));
  }
  std::optional<double> final = FinalAccuracy(r.points);
  absl::StrAppend(&out, absl::StrFormat("final %.4f, %.0f examples/s, 1st step %.1f s (load %.2f)",
                                        final.value_or(kNaN), r.examples_per_s, r.first_step_s,
                                        r.load_1m));
  if (!std::isnan(r.train_loss)) {
    absl::StrAppend(&out, absl::StrFormat("; last 50 steps: loss %.4f, pull/compute/push "
                                          "%.2f/%.2f/%.2f ms",
                                          r.train_loss, r.pull_ms, r.compute_ms, r.push_ms));
  }
  absl::StrAppend(&out, "; host: ", r.host.Line());
  return out;
}

// The command line into `options`; returns -1 to go on, else the exit code.
int ParseFlags(int argc, char** argv, Options* options) {
  FlagParser flags("time_to_accuracy",
                   "Time to test accuracy of shardps clusters, TensorFlow's "
                   "ParameterServerStrategy and shardps' single process on the same job.");
  flags.AddInt("runs", &options->runs, "runs of each configuration (rounds)");
  flags.AddString("configs", &options->configs,
                  "comma-separated: tf, tf-spe10, tf-spe20, tf-spe50, async, async-sif1, sync, "
                  "stale, or a variant (tf-spe10-range, tf-spe10-t2, async-old, async-own-off, "
                  "async-slr, async-dc, async-sif1-slr, async-sif1-dc) (each :1 or :2, or both "
                  "without), single, single-t2; or all");
  flags.AddInt("epochs", &options->epochs, "epochs of each run");
  flags.AddBool("json", &options->json, "one JSON object on stdout (the table on stderr)");
  flags.AddString("json_file", &options->json_file, "also write the JSON object to this file");
  flags.AddString("data_dir", &options->data_dir, "Fashion-MNIST's IDX files");
  flags.AddInt("eval_every_steps", &options->eval_every_steps, "steps between evaluations");
  flags.AddString("tf_python", &options->tf_python,
                  "the Python of TensorFlow's virtualenv (default: $SHARDPS_TF_VENV/bin/python; "
                  "bench/tf_peer/venv.sh makes it); without one, TensorFlow's configurations "
                  "are left out");
  flags.AddString("tf_script", &options->tf_script,
                  "bench/tf_peer/tf_pss.py (default: from this binary's runfiles)");
  flags.AddBool("keep_busy", &g_keep_busy,
                "count the runs during which other processes used more than 10% of the cores "
                "(left out by default)");
  flags.AddString("targets", &options->targets,
                  "comma-separated test accuracies to time, fixed before the runs (the default "
                  "comes from the rule in bench/tta_curve.h applied to recorded runs)");
  flags.AddInt("tf_worker_threads", &options->tf_worker_threads,
               "intra-op threads of each TensorFlow worker (shardps' workers compute on 1)");
  flags.AddString("job_fields", &options->job_fields,
                  "a JSON object merged into every shardps job file (e.g. "
                  "'{\"steps_in_flight\": 1}'), to measure an option");
  flags.AddDouble("run_timeout_s", &options->run_timeout_s, "give up on one run after this long");
  const int rc = HandleParseResult(flags, flags.Parse(argc, argv));
  if (rc >= 0) return rc;
  if (options->runs < 1 || options->epochs < 1 || options->eval_every_steps < 1) {
    std::cerr << "time_to_accuracy: --runs, --epochs and --eval_every_steps must be >= 1\n";
    return 2;
  }
  options->target_list.clear();
  for (absl::string_view item : absl::StrSplit(options->targets, ',', absl::SkipEmpty())) {
    double target = 0;
    if (!absl::SimpleAtod(item, &target) || !(target > 0 && target < 1)) {
      std::cerr << "time_to_accuracy: --targets: \"" << item
                << "\" is not an accuracy between 0 and 1\n";
      return 2;
    }
    options->target_list.push_back(target);
  }
  if (options->target_list.empty()) {
    std::cerr << "time_to_accuracy: --targets is empty\n";
    return 2;
  }
  std::sort(options->target_list.begin(), options->target_list.end());
  if (!options->job_fields.empty() &&
      !nlohmann::json::parse(options->job_fields, nullptr, false).is_object()) {
    std::cerr << "time_to_accuracy: --job_fields must be a JSON object\n";
    return 2;
  }
  return -1;
}

// The selected configurations that can run here: TensorFlow's need its virtualenv (found
// from --tf_python or SHARDPS_TF_VENV, into options->tf_python), and are left out, saying so,
// without it.
std::vector<ConfigResults> RunnableConfigs(const std::vector<ConfigSpec>& selected,
                                           Options* options) {
  if (options->tf_python.empty()) {
    if (const char* venv = std::getenv("SHARDPS_TF_VENV"); venv != nullptr && *venv != '\0') {
      options->tf_python = absl::StrCat(venv, "/bin/python");
    }
  }
  if (options->tf_script.empty()) {
    options->tf_script = testing::BinaryPath("bench/tf_peer/tf_pss.py");
  }
  const bool has_tf = !options->tf_python.empty() && access(options->tf_python.c_str(), X_OK) == 0;
  std::vector<ConfigResults> results;
  for (const ConfigSpec& c : selected) {
    if (c.system == System::kTensorFlow && !has_tf) {
      std::cerr << "time_to_accuracy: leaving out " << c.key
                << ": no TensorFlow virtualenv (--tf_python or SHARDPS_TF_VENV; "
                   "bench/tf_peer/venv.sh makes one)\n";
      continue;
    }
    results.push_back({c, {}});
  }
  return results;
}

// One run of a configuration, with the machine's load and others' CPU around it.
RunResult RunOnce(const Options& options, const ConfigSpec& config, int64_t round,
                  const std::optional<Dataset>& train) {
  RunResult r;
  r.load_1m = LoadAverage1m();
  const HostRun host;
  absl::Status s;
  switch (config.system) {
    case System::kShardps:
      s = RunShardps(options, config, &r);
      break;
    case System::kTensorFlow:
      s = RunTensorFlow(options, config, static_cast<int>(round), &r);
      break;
    case System::kSingle:
      s = RunSingle(options, config, *train, &r);
      break;
  }
  r.host = host.Stop();
  if (!s.ok()) r.error = s.ToString();
  return r;
}

// Runs go in rounds, each every configuration once, odd rounds in reverse order.
void RunRounds(const Options& options, const std::optional<Dataset>& train,
               std::vector<ConfigResults>* results) {
  std::ostream& log = std::cerr;
  for (int64_t round = 0; round < options.runs; ++round) {
    std::vector<size_t> order;
    for (size_t i = 0; i < results->size(); ++i) order.push_back(i);
    if (round % 2 == 1) std::reverse(order.begin(), order.end());
    for (size_t i : order) {
      ConfigResults& c = (*results)[i];
      log << "[round " << round + 1 << "/" << options.runs << "] " << c.config.label << "... "
          << std::flush;
      RunResult r = RunOnce(options, c.config, round, train);
      log << Brief(options.target_list, r) << "\n";
      if (!r.error.empty() && r.error.find('\n') != std::string::npos) log << r.error << "\n";
      c.runs.push_back(std::move(r));
    }
  }
}

// The table (stdout, or stderr with --json) and the JSON (stdout with --json, --json_file);
// the exit code.
int Report(const Options& options, const std::vector<ConfigResults>& results,
           const std::string& uptime_before) {
  const std::string uptime_after = Uptime();
  PrintTable(options.json ? std::cerr : std::cout, options, results, uptime_before, uptime_after);
  const nlohmann::json json = ToJson(options, results, uptime_before, uptime_after);
  if (options.json) std::cout << json.dump(2) << std::endl;
  if (!options.json_file.empty()) {
    std::ofstream out(options.json_file);
    out << json.dump(2) << "\n";
    if (!out) {
      std::cerr << "time_to_accuracy: cannot write --json_file " << options.json_file << "\n";
      return 1;
    }
  }
  for (const ConfigResults& c : results) {
    if (Completed(c).empty()) return 1;  // a configuration with no completed run
  }
  return 0;
}

int Main(int argc, char** argv) {
  TuneMallocForBulkTransfers();  // as the daemons do
  DisableMutexDeadlockDetection();
  Options options;
  if (const int rc = ParseFlags(argc, argv, &options); rc >= 0) return rc;
  testing::SetUpRunfilesForBazelRun(argv[0], "coordinator/chief", "time_to_accuracy");
  absl::StatusOr<std::vector<ConfigSpec>> selected = SelectConfigs(options);
  if (!selected.ok()) {
    std::cerr << "time_to_accuracy: " << selected.status().message() << "\n";
    return 2;
  }
  std::vector<ConfigResults> results = RunnableConfigs(*selected, &options);
  if (results.empty()) {
    std::cerr << "time_to_accuracy: no configuration to run\n";
    return 2;
  }
  std::optional<Dataset> train;
  for (const ConfigResults& c : results) {
    if (c.config.system != System::kSingle) continue;
    absl::StatusOr<Dataset> loaded = LoadFashionMnist(options.data_dir, Split::kTrain);
    if (!loaded.ok()) {
      std::cerr << "time_to_accuracy: " << loaded.status() << "\n";
      return 1;
    }
    train = *std::move(loaded);
  }
  const std::string uptime_before = Uptime();
  std::cerr << "time_to_accuracy: " << results.size() << " configurations x " << options.runs
            << " runs; " << uptime_before << "; logs under " << testing::TempDir() << "\n";
  RunRounds(options, train, &results);
  return Report(options, results, uptime_before);
}

}  // namespace
}  // namespace bench
}  // namespace shardps

int main(int argc, char** argv) { return shardps::bench::Main(argc, argv); }
