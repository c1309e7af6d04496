// TensorBoard reads what the chief and the evaluator write: a real cluster (chief, 2 ps, 2
// workers, evaluator in ps mode, as processes) trains a short sync click model (DLRM on
// synthetic click logs, so that the evaluator measures AUC too) with --tensorboard_dir on
// the chief and the evaluator, as deploy/run_local.sh runs them. tests/read_tensorboard.py
// reads the two runs with the `tensorboard` package from PyPI (no TensorFlow): its own
// record reader checks every CRC, its EventAccumulator gives the series. The test checks
// that each series exists, that steps increase and the chief's end at the job's last step,
// and that the evaluator's series equal its metrics file's values, evaluation by evaluation.
// Then one flipped byte in a copy of the evaluator's file is named by TensorBoard's reader.
//
// Needs the virtualenv of deploy/python_env.sh, named by SHARDPS_VENV (deploy/test.sh passes
// it); without it, or with a virtualenv made before tensorboard was in it, the test is
// skipped, saying so:
//   bazel test //tests:tensorboard_python_test --test_env=SHARDPS_VENV=$(deploy/python_env.sh)
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/training_cluster.h"

namespace shardps {
namespace testing {
namespace {

namespace fs = std::filesystem;

constexpr int kSteps = 600;
constexpr int kBatch = 256;

// The JSON of the line "RESULT {...}" that read_tensorboard.py prints last; null when none.
nlohmann::json ParseResult(const std::string& output) {
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::ConsumePrefix(&line, "RESULT ")) {
      return nlohmann::json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    }
  }
  return nullptr;
}

std::vector<nlohmann::json> MetricsLines(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::vector<nlohmann::json> records;
  while (std::getline(in, line)) records.push_back(nlohmann::json::parse(line));
  return records;
}

// Whether `name` is events.out.tfevents.<unix seconds>.<host>[.<n>].
bool IsEventFileName(const std::string& name) {
  std::vector<std::string> parts = absl::StrSplit(name, '.');
  int64_t seconds = 0;
  return parts.size() >= 5 && parts[0] == "events" && parts[1] == "out" &&
         parts[2] == "tfevents" && absl::SimpleAtoi(parts[3], &seconds) && seconds > 1.7e9 &&
         !parts[4].empty();
}

// The metrics file writes 6 decimals of a double; TensorBoard holds a float.
void ExpectSameValue(double tensorboard, double metrics_file, const std::string& what) {
  EXPECT_NEAR(tensorboard, metrics_file, 1e-6 + 1e-7 * std::fabs(metrics_file)) << what;
}

TEST(TensorBoardPythonTest, TensorBoardReadsTheChiefsAndTheEvaluatorsSeries) {
  std::string why;
  const std::string python = VenvPython(&why);
  std::string out;
  if (!python.empty() &&
      RunCommand(python, {"-c", "import tensorboard"}, {}, &out).value_or(-1) != 0) {
    why = absl::StrCat(python, " has no tensorboard package (a virtualenv made before it was "
                       "added to deploy/python_env.sh: run that again)");
  }
  if (!why.empty()) {
    GTEST_SKIP() << "\n*** SKIPPED: no Python virtualenv with the tensorboard package: " << why
                 << ". The chief's and the evaluator's TensorBoard event files are NOT read "
                    "with TensorBoard. Run:\n***   bazel test //tests:tensorboard_python_test "
                    "--test_env=SHARDPS_VENV=$(deploy/python_env.sh)\n";
  }

  const std::string logdir = FreshTempDir("tensorboard");
  const std::string job = WriteTempFile(
      "tb.json",
      absl::StrCat(
          R"({"name": "tb", "model": "dlrm:bottom=16,8;top=32;dim=8;interaction=dot;pooling=mean",)",
          R"( "dataset": "synthetic_ctr:examples=200000,test=10000,dense=4,tables=4,)",
          R"(vocab=50|300|2000|1000,hot=1|1|1..3|1,seed=11", "batch_size": )", kBatch,
          R"(, "steps": )", kSteps,
          R"(, "optimizer": {"type": "adam", "learning_rate": 0.005}, "mode": "sync",)",
          R"( "partitioner": "fixed:2", "seed": 5, "backend": "cpu", "eval_every_steps": 150})"));
  TrainingCluster::Options options;
  options.evaluator = true;
  options.job_file = job;
  options.chief_flags = {"--tensorboard_dir=" + logdir + "/chief"};
  options.evaluator_flags = {"--tensorboard_dir=" + logdir + "/evaluator"};
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto status = (*cluster)->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(4));
  ASSERT_TRUE(status.ok()) << status.status() << (*cluster)->Logs();
  ASSERT_EQ(status->steps_done(), kSteps);
  // Both exit 0 at the job's end: whatever they wrote is in their files.
  ASSERT_EQ((*cluster)->chief()->Wait(absl::Seconds(60)).value_or(-1), 0) << (*cluster)->Logs();
  ASSERT_EQ((*cluster)->evaluator()->Wait(absl::Seconds(30)).value_or(-1), 0)
      << (*cluster)->Logs();
  const std::vector<nlohmann::json> evals = MetricsLines((*cluster)->metrics_file());
  ASSERT_FALSE(evals.empty()) << (*cluster)->Logs();

  ASSERT_EQ(RunCommand(python, {"tests/read_tensorboard.py", "--logdir", logdir}, {}, &out,
                       absl::Seconds(120))
                .value_or(-1),
            0)
      << out;
  std::cout << out;
  const nlohmann::json result = ParseResult(out);
  ASSERT_TRUE(result.is_object()) << out;
  EXPECT_TRUE(result["errors"].empty()) << out;
  const nlohmann::json& runs = result["runs"];
  ASSERT_EQ(runs.size(), 2u) << out;  // two runs: chief and evaluator
  for (const char* run : {"chief", "evaluator"}) {
    ASSERT_TRUE(runs.contains(run)) << out;
    const nlohmann::json& r = runs[run];
    ASSERT_EQ(r["files"].size(), 1u) << run << ": one daemon, one file\n" << out;
    EXPECT_TRUE(IsEventFileName(r["files"][0])) << r["files"][0];
    EXPECT_EQ(r["file_versions"], nlohmann::json::array({"brain.Event:2"})) << run;
  }

  // The chief: every series, at increasing steps, up to the job's last step.
  const nlohmann::json& train = runs["chief"]["series"];
  ASSERT_EQ(train.size(), 3u) << out;
  for (const char* tag : {"train/loss", "train/examples_per_s", "train/steps_per_s"}) {
    ASSERT_TRUE(train.contains(tag)) << tag << "\n" << out;
    const nlohmann::json& points = train[tag];
    ASSERT_FALSE(points.empty()) << tag;
    for (size_t i = 0; i < points.size(); ++i) {
      const double value = points[i][1];
      EXPECT_TRUE(std::isfinite(value) && value > 0) << tag << " at " << points[i][0];
      if (i > 0) {
        EXPECT_GT(points[i][0].get<int64_t>(), points[i - 1][0].get<int64_t>()) << tag;
      }
    }
    EXPECT_EQ(points.back()[0].get<int64_t>(), kSteps) << tag << ": " << points.dump();
  }
  // examples/s is steps/s times the batch, point by point (where both were measured).
  ASSERT_EQ(train["train/examples_per_s"].size(), train["train/steps_per_s"].size());
  for (size_t i = 0; i < train["train/steps_per_s"].size(); ++i) {
    const double steps_per_s = train["train/steps_per_s"][i][1];
    const double examples_per_s = train["train/examples_per_s"][i][1];
    EXPECT_NEAR(examples_per_s, steps_per_s * kBatch, 1e-5 * examples_per_s);
  }

  // The evaluator: its series are its metrics file, line by line.
  const nlohmann::json& eval = runs["evaluator"]["series"];
  ASSERT_EQ(eval.size(), 3u) << out;
  for (const auto& [tag, field] : std::vector<std::pair<std::string, std::string>>{
           {"eval/accuracy", "accuracy"}, {"eval/loss", "loss"}, {"eval/auc", "auc"}}) {
    ASSERT_TRUE(eval.contains(tag)) << tag << "\n" << out;
    const nlohmann::json& points = eval[tag];
    ASSERT_EQ(points.size(), evals.size()) << tag << ": " << points.dump();
    for (size_t i = 0; i < evals.size(); ++i) {
      EXPECT_EQ(points[i][0].get<int64_t>(), evals[i]["step"].get<int64_t>()) << tag << " " << i;
      ExpectSameValue(points[i][1], evals[i][field], absl::StrCat(tag, " ", i));
      if (i > 0) {
        EXPECT_GE(points[i][0].get<int64_t>(), points[i - 1][0].get<int64_t>()) << tag;
      }
    }
    EXPECT_EQ(points.back()[0].get<int64_t>(), kSteps) << tag << ": the final evaluation";
  }
  std::cout << evals.size() << " evaluations; final AUC " << evals.back()["auc"] << "\n";
  EXPECT_GT(evals.back()["auc"].get<double>(), 0.6) << "a trained model, not chance";

  // The check can fail: one flipped byte in the last record of a copy of the evaluator's
  // file is named by TensorBoard's reader, and the script exits 1.
  const std::string copy = FreshTempDir("tensorboard_corrupt");
  fs::create_directories(copy);
  fs::copy(logdir + "/evaluator", copy + "/evaluator");
  const std::string victim =
      copy + "/evaluator/" + runs["evaluator"]["files"][0].get<std::string>();
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << victim;
    f.seekg(-6, std::ios::end);  // in the last record's data, before its CRC
    const std::streamoff at = f.tellg();
    char byte = 0;
    f.read(&byte, 1);
    byte ^= 0x10;
    f.seekp(at);
    f.write(&byte, 1);
  }
  EXPECT_EQ(RunCommand(python, {"tests/read_tensorboard.py", "--logdir", copy}, {}, &out,
                       absl::Seconds(120))
                .value_or(-1),
            1)
      << out;
  EXPECT_TRUE(absl::StrContains(out, victim)) << out;
  EXPECT_TRUE(absl::StrContains(out, "crc32")) << out;
}

}  // namespace
}  // namespace testing
}  // namespace shardps
