// Evaluates on the real Fashion-MNIST test set installed by Debian's dataset-fashion-mnist.
#include "evaluator/evaluator.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "checkpoint/checkpoint_reader.h"
#include "evaluator/checkpoint_params.h"
#include "evaluator/metrics_file.h"
#include "evaluator/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

class EvaluatorTest : public ::testing::Test {
 protected:
  const ComputeDevice device_ = ComputeDevice::Cpu(1);
};

TEST_F(EvaluatorTest, ZeroSoftmaxIsChanceOnEveryTestExample) {
  auto evaluator = Evaluator::Create(testing::SoftmaxJob("job-1"), device_);
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
  auto evaluator = Evaluator::Create(testing::SoftmaxJob("job-1"), device_);
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
  auto evaluator = Evaluator::Create(testing::SoftmaxJob("job-1"), device_);
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
  auto evaluator = Evaluator::Create(job, device_);
  EXPECT_EQ(evaluator.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(evaluator.status().message(), HasSubstr("/nonexistent/fashion"));
}

TEST_F(EvaluatorTest, BadModelIsInvalidArgument) {
  JobSpec job = testing::SoftmaxJob("job-1");
  job.set_model("mlp:0");
  auto evaluator = Evaluator::Create(job, device_);
  EXPECT_EQ(evaluator.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(evaluator.status().message(), HasSubstr("model"));
}

// A dynamic table (hashed ids) has no whole value: the evaluator reads the rows of the keys
// its test split names, collected once, sorted, and gathers each batch's rows by key.
TEST_F(EvaluatorTest, DynamicTablesAreReadAtTheTestSplitsKeys) {
  JobSpec job;
  job.set_job_id("ctr-1");
  job.set_name("ctr");
  job.set_model("dlrm:bottom=4;top=8;dim=4");
  job.set_dataset("synthetic_ctr:examples=500,test=300,dense=2,tables=2,vocab=40,ids=hashed,seed=4");
  job.mutable_kernel_initializer()->set_type(InitializerSpec::GLOROT_UNIFORM);
  auto evaluator = Evaluator::Create(job, device_);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  const auto& params = (*evaluator)->params();
  std::vector<std::vector<float>> values = (*evaluator)->NewValues();
  size_t dynamic = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::vector<int64_t>& keys = (*evaluator)->row_keys(i);
    if (!params[i].dynamic) {
      EXPECT_TRUE(keys.empty()) << "dense: held whole";
      EXPECT_EQ(values[i].size(), static_cast<size_t>(params[i].num_elements()));
      // Dense parameters: small distinct values, so the model's output depends on the rows.
      for (size_t k = 0; k < values[i].size(); ++k) values[i][k] = 0.01f * ((k % 7) + 1);
      continue;
    }
    ++dynamic;
    ASSERT_FALSE(keys.empty()) << params[i].name;
    EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
    EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end()) << "distinct";
    EXPECT_LE(keys.size(), 300u * 1) << "one id per example and table at most";
    bool negative = false;
    for (int64_t key : keys) negative |= key < 0;
    EXPECT_TRUE(negative) << "hashed keys span the int64 range";
    EXPECT_EQ(values[i].size(), keys.size() * 4);
    // Each key's row is a function of the key.
    for (size_t r = 0; r < keys.size(); ++r) {
      for (int j = 0; j < 4; ++j) {
        values[i][r * 4 + j] = static_cast<float>((keys[r] >> (8 * j)) & 0xff) / 512.0f;
      }
    }
  }
  EXPECT_EQ(dynamic, 2u);
  absl::StatusOr<EvalMetrics> first = (*evaluator)->Evaluate(values);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->examples(), 300);
  EXPECT_GT(first->auc(), 0.0);
  // Another key's row changes the metrics: rows are found by key.
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].dynamic) {
      for (float& x : values[i]) x = -x;
    }
  }
  absl::StatusOr<EvalMetrics> second = (*evaluator)->Evaluate(values);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(first->loss(), second->loss());
  // Whole-table sized values are refused, naming the variable.
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].dynamic) values[i].push_back(0);
  }
  absl::StatusOr<EvalMetrics> bad = (*evaluator)->Evaluate(values);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("ctr/embedding/"));
}

// A fixed table is held as the rows its test split reads, not whole: a table of 5000 rows
// read by 300 examples keeps at most 300 of them. Those rows, read from a checkpoint or
// gathered from the whole table, give the metrics the whole table gives, and a row outside
// them changes nothing.
TEST_F(EvaluatorTest, FixedTablesAreHeldAtTheTestSplitsRows) {
  JobSpec job;
  job.set_job_id("ctr-2");
  job.set_name("ctrfixed");
  job.set_model("dlrm:bottom=4;top=8;dim=4");
  job.set_dataset("synthetic_ctr:examples=500,test=300,dense=2,tables=2,vocab=5000,seed=4");
  job.mutable_kernel_initializer()->set_type(InitializerSpec::GLOROT_UNIFORM);
  auto evaluator = Evaluator::Create(job, device_);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  const auto& params = (*evaluator)->params();
  // Whole values: row r of a table is a function of r; dense values small and distinct.
  std::vector<std::vector<float>> whole;
  std::vector<std::vector<int64_t>> shapes;
  int tables = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    whole.emplace_back(static_cast<size_t>(params[i].num_elements()));
    shapes.push_back(params[i].shape);
    for (size_t k = 0; k < whole[i].size(); ++k) {
      whole[i][k] = params[i].access == VariableAccess::kRows
                        ? static_cast<float>(std::sin(0.37 * static_cast<double>(k)))
                        : 0.01f * ((k % 7) + 1);
    }
    if (params[i].access != VariableAccess::kRows) {
      EXPECT_TRUE((*evaluator)->row_keys(i).empty());
      continue;
    }
    ++tables;
    const std::vector<int64_t>& keys = (*evaluator)->row_keys(i);
    ASSERT_FALSE(keys.empty());
    EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
    EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end()) << "distinct";
    EXPECT_GE(keys.front(), 0);
    EXPECT_LT(keys.back(), params[i].shape[0]);
    EXPECT_LE(keys.size(), 300u) << "one id per example and table at most";
  }
  ASSERT_EQ(tables, 2);
  auto gather = [&](const std::vector<std::vector<float>>& from) {
    std::vector<std::vector<float>> values = (*evaluator)->NewValues();
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].access != VariableAccess::kRows) {
        values[i] = from[i];
        continue;
      }
      const int64_t width = params[i].row_width();
      const std::vector<int64_t>& keys = (*evaluator)->row_keys(i);
      EXPECT_EQ(values[i].size(), keys.size() * width) << params[i].name;
      for (size_t r = 0; r < keys.size(); ++r) {
        std::copy(from[i].begin() + keys[r] * width, from[i].begin() + (keys[r] + 1) * width,
                  values[i].begin() + r * width);
      }
    }
    return values;
  };
  const std::vector<std::vector<float>> gathered = gather(whole);
  absl::StatusOr<EvalMetrics> first = (*evaluator)->Evaluate(gathered);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->examples(), 300);
  // From a checkpoint of the whole tables (each split in two files): the same rows.
  const std::string dir = testing::NewTempDir("fixed_rows");
  ASSERT_TRUE(testing::WriteModelCheckpoint(dir, job, 1, (*evaluator)->variable_names(), shapes,
                                            whole)
                  .ok());
  auto reader = CheckpointReader::Open(dir + "/ckpt-000000001");
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<std::vector<float>> read = (*evaluator)->NewValues();
  ASSERT_TRUE(ReadCheckpointParams(reader->get(), **evaluator, &read).ok());
  EXPECT_EQ(read, gathered);
  // A row no test example reads changes nothing; a row one reads changes the metrics.
  std::vector<std::vector<float>> changed = whole;
  size_t table = 0;
  while (params[table].access != VariableAccess::kRows) ++table;
  const std::vector<int64_t>& keys = (*evaluator)->row_keys(table);
  int64_t unread = 0;
  while (std::binary_search(keys.begin(), keys.end(), unread)) ++unread;
  for (int j = 0; j < 4; ++j) changed[table][unread * 4 + j] = 100.0f;
  absl::StatusOr<EvalMetrics> same = (*evaluator)->Evaluate(gather(changed));
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->loss(), first->loss());
  for (int j = 0; j < 4; ++j) changed[table][keys[0] * 4 + j] = 100.0f;
  absl::StatusOr<EvalMetrics> other = (*evaluator)->Evaluate(gather(changed));
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->loss(), first->loss());
  // Whole-table sized values are refused, naming the variable.
  std::vector<std::vector<float>> bad = gathered;
  bad[table] = whole[table];
  absl::StatusOr<EvalMetrics> refused = (*evaluator)->Evaluate(bad);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr(params[table].name));
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
  // A click model's live evaluation adds its AUC, the ceiling and the job's time.
  EvalRecord click = record;
  click.metrics.set_auc(0.75);
  click.metrics.set_auc_ceiling(0.875);
  click.metrics.set_job_elapsed_s(12.25);
  EXPECT_EQ(EvalJsonLine(click),
            R"({"job_id": "job \"1\"", "step": 42, "version": 41, "checkpoint_id": 7, )"
            R"("time": 1.500, "loss": 0.500000, "accuracy": 0.875000, "auc": 0.750000, )"
            R"("auc_ceiling": 0.875000, "job_elapsed_s": 12.250, "examples": 10000, )"
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
