// MovieLens-100k trained in shardps against the single-process reference of the same model:
// embeddings of dimension 16 for the 8 categorical features (user, item,
// genres multi-hot with sum pooling, ...), the 2 dense inputs, one hidden layer of 64 ReLU
// units, sigmoid; Adagrad (learning rate 0.2, initial accumulator 0.1) for every variable,
// batches of 256, 5 epochs; rating >= 4 is a click. data/movielens/reference.py trains it in
// numpy; shardps trains it on a real local cluster (2 ps, 2 async workers, evaluator), its
// tables once fixed (the schema's vocabularies) and once dynamic (the same ids as hashed
// keys, rows made by their first push). The held-out AUCs must agree within 0.02.
//
// Needs the converted data (data/movielens/prepare.sh; deploy/test.sh passes its directory as
// SHARDPS_MOVIELENS_DIR) and the virtualenv of deploy/python_env.sh (SHARDPS_VENV) for the
// reference; skipped, saying so, without either.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/training_cluster.h"

namespace shardps {
namespace testing {
namespace {

// The reference's hyperparameters, and shardps' job with the same ones.
constexpr char kLearningRate[] = "0.2";
constexpr char kEpochs[] = "5";

std::string DataDir() {
  const char* dir = std::getenv("SHARDPS_MOVIELENS_DIR");
  return dir == nullptr ? "" : dir;
}

class MovieLensTrainingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (DataDir().empty()) {
      skip_ = "SHARDPS_MOVIELENS_DIR is not set (deploy/test.sh sets it to the directory of "
              "data/movielens/prepare.sh, which needs PyPI once)";
      return;
    }
    std::string why;
    python_ = VenvPython(&why);
    if (python_.empty()) {
      skip_ = why;
      return;
    }
    // The TSV files as ctrbin, with and without the schema's vocabularies.
    fixed_dir_ = FreshTempDir("movielens_fixed");
    hashed_dir_ = FreshTempDir("movielens_hashed");
    for (const std::string& dir : {fixed_dir_, hashed_dir_}) {
      ASSERT_EQ(std::system(absl::StrCat("mkdir -p '", dir, "'").c_str()), 0);
      for (const std::string split : {"train", "test"}) {
        std::vector<std::string> args = {"convert", absl::StrCat("--in=", DataDir(), "/", split, ".tsv"),
                                         absl::StrCat("--out=", dir, "/", split, ".ctrbin")};
        if (dir == fixed_dir_) {
          args.push_back(absl::StrCat("--schema=", DataDir(), "/schema.json"));
        } else {
          // No vocabularies: every feature's ids are unbounded keys, read by dynamic tables.
          args.insert(args.end(), {"--dense=2", "--categorical=8", "--max_hotness=6"});
        }
        std::string out;
        absl::StatusOr<int> rc = RunCommand(BinaryPath("data/ctr/ctr_tool"), args, {}, &out);
        ASSERT_TRUE(rc.ok()) << rc.status();
        ASSERT_EQ(*rc, 0) << out;
      }
    }
    std::string out;
    absl::StatusOr<int> rc = RunCommand(
        python_,
        {BinaryPath("data/movielens/reference.py"), "--data", DataDir(), "--lr", kLearningRate,
         "--epochs", kEpochs},
        {}, &out, absl::Minutes(5));
    ASSERT_TRUE(rc.ok()) << rc.status();
    ASSERT_EQ(*rc, 0) << out;
    // stdout is one JSON object, stderr may come first: the object starts at the last line
    // that opens one.
    const size_t start = out.rfind("\n{");
    const nlohmann::json report =
        nlohmann::json::parse(start == std::string::npos ? out : out.substr(start + 1));
    reference_auc_ = report["models"]["mlp"]["auc"].get<double>();
    std::cout << "reference (numpy, one process): held-out AUC " << reference_auc_
              << ", log loss " << report["models"]["mlp"]["logloss"].get<double>() << ", "
              << report["models"]["mlp"]["seconds"].get<double>() << " s\n";
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_GT(reference_auc_, 0.7) << "the reference did not train";
  }

  void TrainAndCompare(const std::string& dir, const std::string& name) {
    const std::string job = absl::StrCat(
        R"({"name": ")", name, R"(", "model": "dlrm:top=64;dim=16;interaction=concat;pooling=sum", )",
        R"("dataset": "movielens", "data_dir": ")", dir, R"(", "batch_size": 256, "epochs": )",
        kEpochs, R"(, "optimizer": {"type": "adagrad", "learning_rate": )", kLearningRate,
        R"(, "initial_accumulator_value": 0.1}, "mode": "async", "partitioner": "fixed:2", )",
        R"("seed": 5, "backend": "cpu"})");
    TrainingCluster::Options options;
    options.evaluator = true;
    options.job_file = WriteTempFile(name + ".json", job);
    auto cluster = TrainingCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    auto status = (*cluster)->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(5));
    ASSERT_TRUE(status.ok()) << status.status() << (*cluster)->Logs();
    ASSERT_TRUE(status->has_eval()) << (*cluster)->Logs();
    const EvalMetrics& eval = status->last_eval();
    EXPECT_EQ(eval.examples(), 19633);
    std::cout << name << ": shardps held-out AUC " << eval.auc() << ", log loss " << eval.loss()
              << "; the reference's " << reference_auc_ << "\n";
    EXPECT_NEAR(eval.auc(), reference_auc_, 0.02);
    EXPECT_EQ(*(*cluster)->chief()->Wait(absl::Seconds(60)), 0) << (*cluster)->Logs();
  }

  static std::string skip_;
  static std::string python_;
  static std::string fixed_dir_;
  static std::string hashed_dir_;
  static double reference_auc_;
};

std::string MovieLensTrainingTest::skip_;
std::string MovieLensTrainingTest::python_;
std::string MovieLensTrainingTest::fixed_dir_;
std::string MovieLensTrainingTest::hashed_dir_;
double MovieLensTrainingTest::reference_auc_ = 0;

TEST_F(MovieLensTrainingTest, FixedTablesMatchTheReference) {
  TrainAndCompare(fixed_dir_, "movielens");
}

TEST_F(MovieLensTrainingTest, DynamicTablesMatchTheReference) {
  TrainAndCompare(hashed_dir_, "movielenshashed");
}

}  // namespace
}  // namespace testing
}  // namespace shardps
