// Tests of the metrics registry and its text exposition format (promtool checks it when
// installed).
#include "metrics/registry.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(RegistryTest, CountersSumEveryThread) {
  Registry registry;
  auto family = registry.AddCounter("pushes_total", "pushes", {"variable"});
  ASSERT_TRUE(family.ok()) << family.status();
  Counter* counter = family->With({"emb"});
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([counter] {
      for (int i = 0; i < 1000; ++i) counter->Add();
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(counter->Value(), 8000u);
  EXPECT_EQ(family->With({"emb"}), counter);
  EXPECT_THAT(registry.Render(), HasSubstr("pushes_total{variable=\"emb\"} 8000\n"));
}

TEST(RegistryTest, HistogramBucketsAreCumulative) {
  Registry registry;
  auto family = registry.AddHistogram("latency_seconds", "latency", {"rpc"}, {0.1, 1});
  ASSERT_TRUE(family.ok());
  Histogram* histogram = family->With({"Pull"});
  histogram->Observe(0.05);
  histogram->Observe(0.1);  // le is "less or equal"
  histogram->Observe(0.5);
  histogram->Observe(7);
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE latency_seconds histogram\n"));
  EXPECT_THAT(text, HasSubstr("latency_seconds_bucket{rpc=\"Pull\",le=\"0.1\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("latency_seconds_bucket{rpc=\"Pull\",le=\"1\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("latency_seconds_bucket{rpc=\"Pull\",le=\"+Inf\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("latency_seconds_sum{rpc=\"Pull\"} 7.65\n"));
  EXPECT_THAT(text, HasSubstr("latency_seconds_count{rpc=\"Pull\"} 4\n"));
}

TEST(RegistryTest, LabelValuesAreBounded) {
  Registry registry;
  auto family = registry.AddCounter("rows_total", "rows", {"variable"}, /*max_series=*/2);
  ASSERT_TRUE(family.ok());
  family->With({"a"})->Add(1);
  family->With({"b"})->Add(2);
  Counter* overflow = family->With({"c"});
  EXPECT_EQ(family->With({"d"}), overflow);
  overflow->Add(4);
  family->With({"d"})->Add(8);
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("rows_total{variable=\"_other\"} 12\n"));
  EXPECT_THAT(text, Not(HasSubstr("variable=\"c\"")));
}

TEST(RegistryTest, RefusesBadNamesAndClashes) {
  Registry registry;
  EXPECT_FALSE(registry.AddCounter("pushes", "no _total", {}).ok());
  EXPECT_FALSE(registry.AddGauge("bytes_total", "a gauge named as a counter", {}).ok());
  EXPECT_FALSE(registry.AddGauge("2bytes", "starts with a digit", {}).ok());
  EXPECT_FALSE(registry.AddGauge("bytes", "bad label", {"le"}).ok());
  EXPECT_FALSE(registry.AddHistogram("h_seconds", "unsorted", {}, {2, 1}).ok());
  ASSERT_TRUE(registry.AddGauge("bytes", "ok", {"variable"}).ok());
  EXPECT_FALSE(registry.AddGauge("bytes", "other labels", {"shard"}).ok());
  EXPECT_TRUE(registry.AddGauge("bytes", "the same again", {"variable"}).ok());
}

TEST(RegistryTest, EscapesLabelValuesAndFormatsValues) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(1e21), "1e+21");
  EXPECT_EQ(FormatValue(1.0 / 0.0), "+Inf");
}

TEST(RegistryTest, CallbackGaugesAreReadAtScrape) {
  Registry registry;
  int version = 3;
  ASSERT_TRUE(registry
                  .AddCallbackGauge("shard_version", "version", {"shard"},
                                    [&version](Sink* sink) {
                                      sink->Add({"w/0"}, version);
                                      sink->Add({"wrong", "count"}, 1);  // dropped
                                    })
                  .ok());
  EXPECT_THAT(registry.Render(), HasSubstr("shard_version{shard=\"w/0\"} 3\n"));
  version = 4;
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("shard_version{shard=\"w/0\"} 4\n"));
  EXPECT_THAT(text, Not(HasSubstr("wrong")));
}

TEST(RegistryTest, ScrapeHooksRunBeforeCallbacks) {
  Registry registry;
  int snapshot = 0;
  int source = 5;
  registry.AddScrapeHook([&] { snapshot = source; });
  ASSERT_TRUE(registry
                  .AddCallbackGauge("a_value", "a", {},
                                    [&](Sink* sink) { sink->Add({}, snapshot); })
                  .ok());
  EXPECT_THAT(registry.Render(), HasSubstr("a_value 5\n"));
  source = 6;
  EXPECT_THAT(registry.Render(), HasSubstr("a_value 6\n"));
}

// promtool (Debian's prometheus package) checks the format and Prometheus' naming rules.
TEST(RegistryTest, PromtoolAcceptsTheOutput) {
  std::string promtool = "/usr/bin/promtool";
  if (std::ifstream(promtool).fail()) promtool = "/usr/local/bin/promtool";  // deploy/setup.sh's
  if (std::ifstream(promtool).fail()) {
    GTEST_SKIP() << "promtool is not installed (apt-get install prometheus): format unchecked";
  }
  Registry registry;
  auto pushes = registry.AddCounter("shardps_ps_pushes_total", "Pushes applied.", {"variable"});
  auto bytes = registry.AddGauge("shardps_ps_bytes", "Bytes held.\nSecond line.", {"variable"});
  auto latency = registry.AddHistogram("shardps_ps_request_seconds", "Request latency.",
                                       {"rpc"}, LatencyBuckets());
  ASSERT_TRUE(pushes.ok() && bytes.ok() && latency.ok());
  pushes->With({"emb \"x\"\\y"})->Add(3);
  bytes->With({"emb"})->Set(1.5e9);
  latency->With({"Pull"})->Observe(0.002);
  ASSERT_TRUE(registry
                  .AddCallbackGauge("shardps_ps_version", "Shard version.", {"shard"},
                                    [](Sink* sink) { sink->Add({"emb/0"}, 12); })
                  .ok());
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  const std::string file = absl::StrCat(dir, "/metrics.txt");
  std::ofstream(file) << registry.Render();
  const std::string command =
      absl::StrCat(promtool, " check metrics < ", file, " > ", file, ".out 2>&1");
  const int rc = std::system(command.c_str());
  std::ifstream out(file + ".out");
  std::string report((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << report << "\n" << registry.Render();
}

}  // namespace
}  // namespace metrics
}  // namespace shardps
