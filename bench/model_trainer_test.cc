// ModelTrainer (the one-process limit for any built-in model): the click model learns on
// generated data and is reproducible bit for bit; the MLP trains exactly as SingleTrainer
// (the limit time_to_accuracy has used since issue 9), so both share one definition of "the
// same model, optimizer and batches"; the single_process tool writes the evaluator's metrics
// lines on a paused clock and refuses bad input with exit 2.
#include "bench/model_trainer.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/single_trainer.h"
#include "coordinator/job_spec.h"
#include "data/idx_reader.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/process.h"

namespace shardps {
namespace bench {
namespace {

constexpr char kClickJob[] = R"({"name": "ctr", "model": "dlrm:bottom=16;top=16;dim=4",
    "dataset": "synthetic_ctr:preset=criteo_like,scale=0.001,seed=7,examples=6000,test=2000",
    "batch_size": 128, "epochs": 2, "backend": "cpu", "seed": 5,
    "optimizer": {"type": "adagrad", "learning_rate": 0.05, "initial_accumulator_value": 0.1}})";

JobSpec Parse(const std::string& text) {
  absl::StatusOr<JobSpec> job = ParseJobSpec(text, 1);
  EXPECT_TRUE(job.ok()) << job.status();
  return *job;
}

TEST(ModelTrainerTest, TheClickModelLearnsAndIsReproducible) {
  const JobSpec job = Parse(kClickJob);
  auto a = ModelTrainer::Create(job, 1);
  auto b = ModelTrainer::Create(job, 1);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<EvalMetrics> before = (*a)->Evaluate();
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_GT(before->auc(), 0);  // a click model has one
  EXPECT_EQ((*a)->steps_per_epoch(), 47);  // ceil(6000 / 128)
  EXPECT_EQ((*a)->total_steps(), 94);
  EXPECT_EQ((*a)->ExamplesIn(94), 12000);
  const std::vector<std::vector<float>> initial = (*a)->values();
  for (int64_t s = 0; s < (*a)->total_steps(); ++s) {
    auto ta = (*a)->Step(s);
    auto tb = (*b)->Step(s);
    ASSERT_TRUE(ta.ok()) << ta.status();
    ASSERT_TRUE(tb.ok()) << tb.status();
    EXPECT_EQ(ta->loss, tb->loss);
    EXPECT_EQ(ta->examples, s % 47 == 46 ? 6000 - 46 * 128 : 128);
  }
  EXPECT_EQ((*a)->values(), (*b)->values());
  // Every variable moved: the dense layers by ApplyDense, the tables by row pushes.
  const std::vector<std::vector<float>>& now = (*a)->values();
  ASSERT_EQ(now.size(), initial.size());
  for (size_t i = 0; i < now.size(); ++i) EXPECT_NE(now[i], initial[i]) << "variable " << i;
  absl::StatusOr<EvalMetrics> after = (*a)->Evaluate();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GT(after->auc(), before->auc() + 0.05)
      << "AUC " << before->auc() << " before, " << after->auc() << " after 2 epochs";
  EXPECT_LT(after->loss(), before->loss());
}

TEST(ModelTrainerTest, TrainsTheMlpExactlyAsSingleTrainer) {
  const std::string dir(kDefaultFashionMnistDir);
  absl::StatusOr<Dataset> train = LoadFashionMnist(dir, Split::kTrain);
  if (!train.ok()) GTEST_SKIP() << "no Fashion-MNIST in " << dir << ": " << train.status();
  const JobSpec job = Parse(R"({"name": "m", "model": "mlp:32", "batch_size": 64, "epochs": 1,
      "optimizer": {"type": "adam", "learning_rate": 0.001}, "seed": 3, "backend": "cpu"})");
  auto generic = ModelTrainer::Create(job, 1);
  auto mlp = SingleTrainer::Create(job, *train, 1);
  ASSERT_TRUE(generic.ok()) << generic.status();
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  EXPECT_EQ((*generic)->values(), (*mlp)->params()) << "initial values differ";
  for (int64_t s = 0; s < 30; ++s) {
    auto a = (*generic)->Step(s);
    auto b = (*mlp)->Step(s);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(a->loss, b->result.loss) << "step " << s;
  }
  EXPECT_EQ((*generic)->values(), (*mlp)->params());
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(testing::TempDir(), "/", name);
  std::ofstream(path) << text;
  return path;
}

// Runs single_process on the click job; its metrics lines.
std::vector<nlohmann::json> RunTool(const std::string& eval, std::string* output) {
  const std::string job = WriteFile("click.json", kClickJob);
  const std::string metrics = absl::StrCat(testing::TempDir(), "/metrics-", eval, ".jsonl");
  absl::StatusOr<int> rc = testing::RunCommand(
      testing::BinaryPath("bench/single_process"),
      {absl::StrCat("--job=", job), "--threads=2", "--eval_every_steps=30",
       absl::StrCat("--eval=", eval), absl::StrCat("--metrics_file=", metrics)},
      {}, output, absl::Minutes(3));
  EXPECT_TRUE(rc.ok()) << rc.status();
  EXPECT_EQ(rc.value_or(-1), 0) << *output;
  std::ifstream in(metrics);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

TEST(ModelTrainerTest, SingleProcessToolEvaluatesOnAPausedClock) {
  std::string output;
  const std::vector<nlohmann::json> lines = RunTool("paused", &output);
  EXPECT_NE(output.find("single process (2 threads): 94 steps, 12000 examples"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("evaluations excluded"), std::string::npos) << output;
  // Steps 0, 30, 60, 90 and the final 94.
  ASSERT_EQ(lines.size(), 5u) << output;
  double last = -1;
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].at("step").get<int64_t>(), i < 4 ? 30 * static_cast<int64_t>(i) : 94);
    EXPECT_GE(lines[i].at("job_elapsed_s").get<double>(), last);
    last = lines[i].at("job_elapsed_s").get<double>();
    EXPECT_TRUE(lines[i].contains("auc"));
    EXPECT_EQ(lines[i].at("final").get<bool>(), i == 4);
  }
  EXPECT_LT(lines[0].at("job_elapsed_s").get<double>(), 0.1);
}

TEST(ModelTrainerTest, SingleProcessToolEvaluatesBesideTheTraining) {
  std::string output;
  const std::vector<nlohmann::json> lines = RunTool("concurrent", &output);
  EXPECT_NE(output.find("evaluations beside it, on the clock"), std::string::npos) << output;
  // At least the first and the final; the ones offered while another ran are skipped.
  ASSERT_GE(lines.size(), 2u) << output;
  EXPECT_EQ(lines.front().at("step").get<int64_t>(), 0);
  EXPECT_EQ(lines.back().at("step").get<int64_t>(), 94);
  EXPECT_TRUE(lines.back().at("final").get<bool>());
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_GT(lines[i].at("step").get<int64_t>(), lines[i - 1].at("step").get<int64_t>());
    EXPECT_GE(lines[i].at("job_elapsed_s").get<double>(),
              lines[i - 1].at("job_elapsed_s").get<double>());
    EXPECT_FALSE(lines[i - 1].at("final").get<bool>());
  }
}

TEST(ModelTrainerTest, SingleProcessToolRefusesBadInput) {
  const std::string bad_job = WriteFile("bad.json", R"({"name": "x", "model": "mlp:32",
      "batch_size": -4})");
  // Each case and what its message must name.
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--threads=0", "--job=x"}, "--threads"},
      {{"--job=/nonexistent/job.json"}, "/nonexistent/job.json"},
      {{absl::StrCat("--job=", bad_job)}, "batch_size"},
      {{}, "--job"},
  };
  for (const auto& [args, named] : cases) {
    std::string output;
    absl::StatusOr<int> rc =
        testing::RunCommand(testing::BinaryPath("bench/single_process"), args, {}, &output);
    ASSERT_TRUE(rc.ok()) << rc.status();
    EXPECT_EQ(*rc, 2) << absl::StrJoin(args, " ") << ": " << output;
    EXPECT_NE(output.find(named), std::string::npos) << output;
  }
}

}  // namespace
}  // namespace bench
}  // namespace shardps
