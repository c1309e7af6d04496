// Evaluates on the real Fashion-MNIST test set installed by Debian's dataset-fashion-mnist.
#include "evaluator/evaluator.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "evaluator/metrics_file.h"
#include "evaluator/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

class EvaluatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = ComputeBackend::Create(BackendKind::kCpu, 1);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = *std::move(backend);
  }
  std::unique_ptr<ComputeBackend> backend_;
};

TEST_F(EvaluatorTest, ZeroSoftmaxIsChanceOnEveryTestExample) {
  auto evaluator = Evaluator::Create(testing::SoftmaxJob("job-1"), backend_.get());
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  ASSERT_EQ((*evaluator)->variable_names(),
            (std::vector<std::string>{"fm/dense_0/kernel", "fm/dense_0/bias"}));
  auto metrics = (*evaluator)->Evaluate((*evaluator)->NewValues());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->examples(), 10000);
  // All logits equal: the first class wins every tie, and the test set has 1000 of each.
  EXPECT_DOUBLE_EQ(metrics->accuracy(), 0.1);
  EXPECT_NEAR(metrics->loss(), std::log(10.0), 1e-5);
  EXPECT_GT(metrics->unix_time(), 0);
}

TEST_F(EvaluatorTest, TrainedParametersBeatChanceAndAreDeterministic) {
  auto evaluator = Evaluator::Create(testing::SoftmaxJob("job-1"), backend_.get());
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  const auto values = testing::TrainSoftmax(50);
  auto first = (*evaluator)->Evaluate(values);
  auto second = (*evaluator)->Evaluate(values);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_GT(first->accuracy(), 0.5);
  EXPECT_EQ(first->accuracy(), second->accuracy());
  EXPECT_EQ(first->loss(), second->loss());
}

TEST_F(EvaluatorTest, WrongValuesAreInvalidArgumentNamingTheVariable) {
  auto evaluator = Evaluator::Create(testing::SoftmaxJob("job-1"), backend_.get());
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  auto values = (*evaluator)->NewValues();
  values[1].resize(9);
  auto metrics = (*evaluator)->Evaluate(values);
  EXPECT_EQ(metrics.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(metrics.status().message(), HasSubstr("fm/dense_0/bias"));
  values.pop_back();
  EXPECT_EQ((*evaluator)->Evaluate(values).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(EvaluatorTest, MissingDataIsFailedPreconditionNamingTheDirectory) {
  JobSpec job = testing::SoftmaxJob("job-1");
  job.set_data_dir("/nonexistent/fashion");
  auto evaluator = Evaluator::Create(job, backend_.get());
  EXPECT_EQ(evaluator.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(evaluator.status().message(), HasSubstr("/nonexistent/fashion"));
}

TEST_F(EvaluatorTest, BadModelIsInvalidArgument) {
  JobSpec job = testing::SoftmaxJob("job-1");
  job.set_model("mlp:0");
  auto evaluator = Evaluator::Create(job, backend_.get());
  EXPECT_EQ(evaluator.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(evaluator.status().message(), HasSubstr("model"));
}

TEST(MetricsFileTest, OneEscapedJsonLinePerRecord) {
  EvalRecord record;
  record.job_id = "job \"1\"";
  record.metrics.set_step(41);
  record.metrics.set_steps_done(42);
  record.metrics.set_checkpoint_id(7);
  record.metrics.set_loss(0.5);
  record.metrics.set_accuracy(0.875);
  record.metrics.set_examples(10000);
  record.metrics.set_unix_time(1.5);
  record.final = true;
  EXPECT_EQ(EvalJsonLine(record),
            R"({"job_id": "job \"1\"", "step": 42, "version": 41, "checkpoint_id": 7, )"
            R"("time": 1.500, "loss": 0.500000, "accuracy": 0.875000, "examples": 10000, )"
            R"("consistent": true, "final": true})");

  const std::string path = testing::NewTempDir("metrics") + "/m.jsonl";
  {
    auto file = MetricsFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_TRUE((*file)->Append(record).ok());
  }
  {
    auto file = MetricsFile::Open(path);  // appends to what is there
    ASSERT_TRUE(file.ok()) << file.status();
    record.final = false;
    ASSERT_TRUE((*file)->Append(record).ok());
  }
  std::ifstream in(path);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0], HasSubstr("\"final\": true"));
  EXPECT_THAT(lines[1], HasSubstr("\"final\": false"));
}

TEST(MetricsFileTest, UnwritablePathIsFailedPreconditionNamingIt) {
  auto file = MetricsFile::Open("/nonexistent/dir/m.jsonl");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(file.status().message(), HasSubstr("/nonexistent/dir/m.jsonl"));
}

}  // namespace
}  // namespace shardps
