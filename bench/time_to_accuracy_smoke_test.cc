// Runs time_to_accuracy for one epoch, once: a shardps cluster (1 worker, async), the single
// process and, where TensorFlow's virtualenv is given (SHARDPS_TF_VENV; CI never installs
// it), TensorFlow's ParameterServerStrategy; checks that each run trained, was evaluated on
// the full test set from its clock's start to its final model, and that the table and the
// JSON carry every figure. Speed is never asserted.
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/process.h"
#include "tests/wait.h"

namespace shardps {
namespace {

// Runs the benchmark on `configs` for one epoch and returns its JSON.
nlohmann::json RunOneEpoch(const std::string& configs, const std::vector<std::string>& extra,
                           std::string* table) {
  const std::string json_path = absl::StrCat(testing::TempDir(), "/tta_", getpid(), ".json");
  // --keep_busy: tests share the machine, so the runs are counted even when others were busy.
  std::vector<std::string> args = {"--runs=1", "--epochs=1", "--keep_busy",
                                   absl::StrCat("--configs=", configs),
                                   absl::StrCat("--json_file=", json_path)};
  args.insert(args.end(), extra.begin(), extra.end());
  absl::StatusOr<int> code = testing::RunCommand(testing::BinaryPath("bench/time_to_accuracy"),
                                                 args, {}, table, absl::Minutes(4));
  EXPECT_TRUE(code.ok()) << code.status() << "\n" << *table;
  EXPECT_EQ(code.value_or(-1), 0) << *table;
  nlohmann::json json = nlohmann::json::parse(testing::ReadWholeFile(json_path), nullptr, false);
  EXPECT_TRUE(json.is_object()) << *table;
  return json;
}

// One configuration's single run: trained and evaluated from start to end.
void ExpectEvaluatedRun(const nlohmann::json& config, const std::string& table) {
  SCOPED_TRACE(config.value("key", std::string("?")));
  ASSERT_EQ(config.at("runs").size(), 1u) << table;
  const nlohmann::json& run = config.at("runs")[0];
  ASSERT_FALSE(run.contains("error")) << run.at("error").get<std::string>();
  EXPECT_EQ(run.at("steps").get<int64_t>(), 235);  // ceil(60000 / 256)
  EXPECT_EQ(run.at("examples").get<int64_t>(), 60000);
  EXPECT_GT(run.at("examples_per_s").get<double>(), 0);
  EXPECT_GE(run.at("first_step_s").get<double>(), 0);
  const nlohmann::json& evals = run.at("evaluations");
  ASSERT_GE(evals.size(), 2u) << table;
  // The single process evaluates its initial model first, near chance. A cluster's evaluator
  // polls its chief and on a loaded machine may first look once some steps are applied (its
  // "step" is the chief's count when it looked, which the model may have passed by the time
  // it is read). The last evaluation sees a trained model (one epoch of Adam reaches ~0.8;
  // 0.6 leaves room for async runs).
  if (config.value("system", std::string()) == "shardps_single_process") {
    EXPECT_EQ(evals.front().at("step").get<int64_t>(), 0) << table;
    EXPECT_LT(evals.front().at("accuracy").get<double>(), 0.3);
  }
  EXPECT_LT(evals.front().at("step").get<int64_t>(), evals.back().at("step").get<int64_t>());
  EXPECT_TRUE(evals.back().at("final").get<bool>());
  EXPECT_GT(run.at("final_accuracy").get<double>(), 0.6);
  double last_t = -1;
  for (const nlohmann::json& e : evals) {
    EXPECT_GE(e.at("t").get<double>(), 0) << "an evaluation before the clock started";
    EXPECT_GE(e.at("t").get<double>(), last_t);
    last_t = e.at("t").get<double>();
  }
  EXPECT_LE(last_t, run.at("train_s").get<double>() + 60);
  // The label is a row of the table.
  EXPECT_NE(table.find(config.at("label").get<std::string>()), std::string::npos);
}

TEST(TimeToAccuracySmokeTest, ShardpsClusterAndSingleProcess) {
  std::string table;
  nlohmann::json json = RunOneEpoch("async:1,single", {}, &table);
  ASSERT_TRUE(json.is_object());
  ASSERT_EQ(json.at("configs").size(), 2u) << table;
  for (const nlohmann::json& config : json.at("configs")) ExpectEvaluatedRun(config, table);
  EXPECT_EQ(json.at("configs")[0].at("key"), "async:1");
  EXPECT_EQ(json.at("configs")[1].at("system"), "shardps_single_process");
  for (const char* column : {"to 0.8699", "to 0.880", "final acc", "examples/s", "this/1proc",
                             "load average", "curves"}) {
    EXPECT_NE(table.find(column), std::string::npos) << column;
  }
  EXPECT_TRUE(json.at("configs")[0].at("summary").contains("time_to_0.880_s"));
  EXPECT_TRUE(json.at("configs")[0].at("summary").contains("time_to_0.8749_s"));
  // The cluster against the single process beside it.
  const nlohmann::json& ratio =
      json.at("configs")[0].at("summary").at("examples_per_s_over_single_process");
  ASSERT_TRUE(ratio.is_number()) << table;
  EXPECT_GT(ratio.get<double>(), 0);
}

TEST(TimeToAccuracySmokeTest, TensorFlowPeer) {
  const char* venv = std::getenv("SHARDPS_TF_VENV");
  if (venv == nullptr || *venv == '\0') {
    GTEST_SKIP() << "SHARDPS_TF_VENV is not set (bench/tf_peer/venv.sh makes TensorFlow's "
                    "virtualenv; CI does not install TensorFlow)";
  }
  const std::string python = absl::StrCat(venv, "/bin/python");
  if (access(python.c_str(), X_OK) != 0) {
    GTEST_SKIP() << "SHARDPS_TF_VENV=" << venv << " has no bin/python";
  }
  std::string table;
  nlohmann::json json = RunOneEpoch("tf:1", {absl::StrCat("--tf_python=", python)}, &table);
  ASSERT_TRUE(json.is_object());
  ASSERT_EQ(json.at("configs").size(), 1u) << table;
  EXPECT_EQ(json.at("configs")[0].at("system"), "tensorflow");
  ExpectEvaluatedRun(json.at("configs")[0], table);
}

}  // namespace
}  // namespace shardps
