// A trained model leaves shardps in an open format that people read without shardps: a real
// cluster (chief, 2 ps, 2 workers, evaluator in ps mode, as processes) trains a short sync MLP
// job on Fashion-MNIST with a checkpoint directory to its end; the real `shardctl export`
// writes the final checkpoint's variables, and tests/check_export.py, with numpy and the
// reference safetensors package only, checks every data file's CRC-32C against the manifest,
// stacks the per-ps files into whole variables (equal to the export, bit for bit), rebuilds
// the MLP's forward pass in numpy and reproduces the evaluator's final test accuracy.
//
// Needs the virtualenv of deploy/python_env.sh, named by SHARDPS_VENV (deploy/test.sh passes
// it); without it the test is skipped, saying so:
//   bazel test //tests:export_python_test --test_env=SHARDPS_VENV=$(deploy/python_env.sh)
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/training_cluster.h"

namespace shardps {
namespace testing {
namespace {

namespace fs = std::filesystem;

// The JSON of the line "RESULT {...}" that check_export.py prints last; null when none.
nlohmann::json ParseResult(const std::string& output) {
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::ConsumePrefix(&line, "RESULT ")) {
      return nlohmann::json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    }
  }
  return nullptr;
}

// The evaluator's record marked final (its last line), parsed; null when none.
nlohmann::json FinalMetrics(const std::string& metrics_file) {
  std::ifstream in(metrics_file);
  std::string line;
  nlohmann::json final_record;
  while (std::getline(in, line)) {
    nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_object() && record.value("final", false)) final_record = record;
  }
  return final_record;
}

TEST(ExportPythonTest, NumpyReadsTheExportAndReproducesTheEvaluatorsAccuracy) {
  std::string why;
  const std::string python = VenvPython(&why);
  if (python.empty()) {
    GTEST_SKIP() << "\n*** SKIPPED: no Python virtualenv with numpy and safetensors: " << why
                 << ". The export of a trained checkpoint is NOT checked against numpy and the "
                    "reference safetensors implementation. Run:\n***   bazel test "
                    "//tests:export_python_test --test_env=SHARDPS_VENV=$(deploy/python_env.sh)\n";
  }

  // dense_0/kernel (784 x 64 floats, 196 KiB) is split in 3 shards by min_size:65536:3 and
  // placed round-robin, so it spans both ps files; sync mode makes the run reproducible.
  const std::string ckpt_dir = TempDir() + "/export_ckpt";
  constexpr int kSteps = 400;
  const std::string job = WriteTempFile(
      "export.json",
      absl::StrCat(R"({"name": "px", "model": "mlp:64,32", "batch_size": 64, "steps": )", kSteps,
                   R"(, "optimizer": {"type": "adam", "learning_rate": 0.002}, "mode": "sync",)",
                   R"( "partitioner": "min_size:65536:3", "seed": 7, "backend": "cpu",)",
                   R"( "eval_every_steps": 200,)",
                   R"( "checkpoint": {"dir": ")", ckpt_dir, R"(", "every_steps": 150, "keep": 2}})"));
  TrainingCluster::Options options;
  options.evaluator = true;
  options.job_file = job;
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto status = (*cluster)->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(4));
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->steps_done(), kSteps);
  // The chief ends the job once the final checkpoint is committed and the final evaluation
  // is in; it and the evaluator exit 0.
  ASSERT_EQ((*cluster)->chief()->Wait(absl::Seconds(60)).value_or(-1), 0) << (*cluster)->Logs();
  ASSERT_EQ((*cluster)->evaluator()->Wait(absl::Seconds(30)).value_or(-1), 0)
      << (*cluster)->Logs();
  const nlohmann::json eval = FinalMetrics((*cluster)->metrics_file());
  ASSERT_TRUE(eval.is_object()) << "no final evaluation in " << (*cluster)->metrics_file() << "\n"
                                << (*cluster)->Logs();
  ASSERT_EQ(eval.value("examples", 0), 10000);
  ASSERT_EQ(eval.value("step", int64_t{0}), kSteps) << eval.dump();  // steps done
  EXPECT_TRUE(eval.value("consistent", false)) << eval.dump();
  ASSERT_TRUE(status->has_eval());
  EXPECT_DOUBLE_EQ(status->last_eval().accuracy(), eval.value("accuracy", -1.0));
  const double accuracy = status->last_eval().accuracy();  // the chief's copy, a double
  const double loss = eval.value("loss", -1.0);

  // The real shardctl, on the job's checkpoint dir (its newest committed checkpoint: the
  // final one), without and with the optimizer's slots.
  const std::string shardctl = BinaryPath("coordinator/cli/shardctl");
  const std::string model = TempDir() + "/px_model.safetensors";
  const std::string full = TempDir() + "/px_full.safetensors";
  std::string out;
  ASSERT_EQ(RunCommand(shardctl, {"export", ckpt_dir, model}, {}, &out).value_or(-1), 0) << out;
  ASSERT_EQ(RunCommand(shardctl, {"export", ckpt_dir, full, "--slots"}, {}, &out).value_or(-1),
            0)
      << out;

  ASSERT_EQ(RunCommand(python,
                       {"tests/check_export.py", "--checkpoint", ckpt_dir, "--export", model,
                        "--export_slots", full},
                       {}, &out, absl::Seconds(120))
                .value_or(-1),
            0)
      << out;
  std::cout << "evaluator (ps mode), final: accuracy " << accuracy << ", loss " << loss << "\n"
            << out;
  const nlohmann::json result = ParseResult(out);
  ASSERT_TRUE(result.is_object()) << out;
  EXPECT_TRUE(result.value("final", false)) << out;
  EXPECT_EQ(result.value("steps_done", int64_t{0}), kSteps);
  EXPECT_EQ(result.value("problems", -1), 0);
  // Both ps wrote a file; 6 variables, each with Adam's two slots.
  EXPECT_EQ(result.value("files", 0), 2);
  EXPECT_EQ(result.value("variables", 0), 6);
  EXPECT_EQ(result.value("variables_equal", 0), 6);
  EXPECT_EQ(result.value("tensors_with_slots", 0), 18);
  EXPECT_EQ(result.value("tensors_with_slots_equal", 0), 18);
  EXPECT_GE(result.value("tensors_crc_checked", 0), 18 + 2 * 3);  // dense_0's 3 shards
  EXPECT_EQ(result.value("examples", 0), 10000);
  EXPECT_NEAR(result.value("accuracy", -1.0), accuracy, 1e-4) << out;
  EXPECT_NEAR(result.value("loss", -1.0), loss, 1e-4) << out;
  EXPECT_GE(accuracy, 0.7) << "a trained model, not chance";

  // The check can fail: one flipped byte in a copy of the final checkpoint's ps 1 file is
  // named, by file and CRC, and makes the script exit 1.
  const std::string final_ckpt = [&] {
    std::string newest;
    for (const auto& entry : fs::directory_iterator(ckpt_dir)) {
      const std::string name = entry.path().filename();
      if (absl::StartsWith(name, "ckpt-") && fs::exists(entry.path() / "manifest.json") &&
          name > newest) {
        newest = name;
      }
    }
    return newest.empty() ? std::string() : ckpt_dir + "/" + newest;
  }();
  ASSERT_FALSE(final_ckpt.empty());
  const std::string copy = TempDir() + "/export_ckpt_corrupt";
  fs::copy(final_ckpt, copy, fs::copy_options::recursive);
  const std::string victim = copy + "/ps-00001-of-00002.safetensors";
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << victim;
    f.seekg(0, std::ios::end);
    const std::streamoff middle = f.tellg() / 2;  // in the tensors' data, past the header
    f.seekg(middle);
    char byte = 0;
    f.read(&byte, 1);
    byte ^= 0x10;
    f.seekp(middle);
    f.write(&byte, 1);
  }
  EXPECT_EQ(RunCommand(python,
                       {"tests/check_export.py", "--checkpoint", copy, "--export", model,
                        "--export_slots", full},
                       {}, &out, absl::Seconds(120))
                .value_or(-1),
            1)
      << out;
  EXPECT_NE(out.find(victim + ": crc32c"), std::string::npos) << out;
  EXPECT_NE(out.find("differ from the per-ps files"), std::string::npos) << out;
}

}  // namespace
}  // namespace testing
}  // namespace shardps
