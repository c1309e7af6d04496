// Runs durability_bench --quick with tiny sizes and checks that every figure is measured.
// Speed is never asserted: the figures only have to be there (and be numbers).
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/process.h"
#include "tests/wait.h"

namespace shardps {
namespace {

TEST(DurabilityBenchSmokeTest, QuickRunPrintsEveryFigure) {
  const std::string binary = testing::BinaryPath("bench/durability_bench");
  const std::string base = testing::TempDir() + "/bench";
  const std::string json_path = testing::TempDir() + "/figures.json";
  // Warm page cache only: a test must not empty the page cache of a machine it shares.
  std::string out;
  absl::StatusOr<int> code = testing::RunCommand(
      binary,
      {"--quick", "--cache=warm", "--rows=2048", "--cols=64", absl::StrCat("--dir=", base),
       absl::StrCat("--json=", json_path)},
      {}, &out, absl::Minutes(4));
  ASSERT_TRUE(code.ok()) << code.status() << "\n" << out;
  ASSERT_EQ(*code, 0) << out;
  const std::string& table = out;  // stdout and stderr together
  // Every file the run wrote is gone: its directory under --dir was removed.
  EXPECT_TRUE(std::filesystem::is_empty(base)) << base << " still holds files";

  nlohmann::json json;
  ASSERT_NO_THROW(json = nlohmann::json::parse(testing::ReadWholeFile(json_path))) << out;
  const nlohmann::json& figures = json.at("figures");
  for (const char* key :
       {"disk_write_bytes_per_s", "checkpoint_bytes_per_s", "checkpoint_cut_ms",
        "checkpoint_ps_cores", "disk_read_warm_bytes_per_s", "restore_warm_bytes_per_s",
        "restore_warm_ps_cores", "ps_peak_rss_steady", "ps_peak_rss_checkpoint_extra",
        "snapshot_copy_bytes", "checkpoint_under_pushes_bytes_per_s",
        "pushes_per_s_with_checkpoint", "steps_per_s_before", "median_gap_ms", "step_time_ms",
        "longest_gap_ms", "stall_ms", "pause_ms", "recovery_seconds", "recovery_ps_serving_s",
        "recovery_detected_s", "recovery_recovered_s", "recovery_first_step_s"}) {
    ASSERT_TRUE(figures.contains(key)) << key << " missing:\n" << table;
    EXPECT_TRUE(figures[key].at("value").is_number()) << key << ":\n" << table;
    // The table shows it too.
    EXPECT_NE(table.find(figures[key].at("label").get<std::string>()), std::string::npos) << key;
  }
  // Targets are shown as met or missed, never left out, with their ratio to the baseline.
  for (const char* key : {"checkpoint_bytes_per_s", "restore_warm_bytes_per_s", "stall_ms",
                          "recovery_seconds"}) {
    EXPECT_TRUE(figures[key].at("met").is_boolean()) << key;
    ASSERT_TRUE(figures[key].contains("ratio")) << key;
    EXPECT_TRUE(figures[key]["ratio"].is_number()) << key;
  }
  for (const char* key : {"checkpoint_bytes_per_s", "restore_warm_bytes_per_s", "stall_ms"}) {
    EXPECT_GE(figures[key]["ratio"].get<double>(), 0) << key;
  }
  // Rates against their baselines: positive. (recovery_seconds is the time from the kill to
  // the next step less the restore's bytes at the restore bandwidth measured beforehand: on a
  // loaded machine the estimate can exceed the time itself, and the figure goes below 0.)
  for (const char* key : {"checkpoint_bytes_per_s", "restore_warm_bytes_per_s",
                          "restore_warm_vs_fresh_memory", "steps_per_s_before"}) {
    ASSERT_TRUE(figures[key].contains("ratio")) << key;
    EXPECT_GT(figures[key]["ratio"].get<double>(), 0) << key;
  }
  EXPECT_GT(json.at("recovery").at("kill_to_first_step_seconds").get<double>(), 0) << table;
  EXPECT_NE(table.find("page cache"), std::string::npos);
  EXPECT_EQ(json.at("config").at("rows"), 2048);
}

}  // namespace
}  // namespace shardps
