#include "coordinator/ps_monitor.h"

#include <atomic>
#include <memory>

#include "absl/strings/str_cat.h"
#include "client/intercepting_ps_interface.h"
#include "client/local_ps_interface.h"
#include "client/ps_client.h"
#include "gtest/gtest.h"
#include "ps_server/shard_store.h"

namespace shardps {
namespace {

// Two in-process ps behind interceptors: ps 1 can be taken down and restarted.
struct Cluster {
  Cluster() {
    std::vector<std::unique_ptr<PsInterface>> ps;
    for (int k = 0; k < 2; ++k) {
      ShardStore::Options o;
      o.task_index = k;
      o.incarnation = 100 + k;
      stores.push_back(*ShardStore::Create(o));
      auto ic = std::make_unique<InterceptingPsInterface>(
          absl::StrCat("ps:", k), NewLocalPsInterface(absl::StrCat("ps:", k), stores.back().get()));
      interceptors.push_back(ic.get());
      ps.push_back(std::move(ic));
    }
    PsClient::Options options;
    options.max_attempts = 1;
    client = *PsClient::Create(std::move(ps), options);
  }
  void Down(int k) {
    interceptors[k]->SetInterceptor(
        [](absl::string_view, const google::protobuf::Message&, google::protobuf::Message*,
           absl::Time) -> std::optional<absl::Status> {
          return absl::UnavailableError("connection refused");
        });
  }
  void Restart(int k, uint64_t incarnation) {
    ShardStore::Options o;
    o.task_index = k;
    o.incarnation = incarnation;
    stores.push_back(*ShardStore::Create(o));
    interceptors[k]->SetInner(NewLocalPsInterface(absl::StrCat("ps:", k), stores.back().get()));
    interceptors[k]->SetInterceptor(nullptr);
  }
  std::vector<std::unique_ptr<ShardStore>> stores;
  std::vector<InterceptingPsInterface*> interceptors;
  std::unique_ptr<PsClient> client;
};

PsMonitor::Options Fast() {
  PsMonitor::Options o;
  o.interval = absl::Milliseconds(20);
  o.probe_timeout = absl::Seconds(1);
  o.unreachable_after = absl::Milliseconds(100);
  o.max_interval = absl::Milliseconds(80);
  return o;
}

// Polls `pred` on the monitor's views for up to 10 s.
template <typename Pred>
bool Eventually(PsMonitor& m, Pred pred) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    if (pred(m.Views())) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

TEST(PsMonitorTest, SeesEveryPsUpWithItsIncarnation) {
  Cluster c;
  std::atomic<int> changes{0};
  PsMonitor m(c.client.get(), Fast(), [&] { ++changes; });
  ASSERT_TRUE(Eventually(m, [](const std::vector<PsMonitor::PsView>& v) {
    return v.size() == 2 && v[0].up && v[1].up;
  }));
  auto v = m.Views();
  EXPECT_EQ(v[0].incarnation, 100u);
  EXPECT_EQ(v[1].incarnation, 101u);
  EXPECT_GE(changes.load(), 1);
}

TEST(PsMonitorTest, UnreachableOnlyAfterTheGracePeriodThenBackWithNewIncarnation) {
  Cluster c;
  PsMonitor::Options o = Fast();
  o.unreachable_after = absl::Milliseconds(300);
  PsMonitor m(c.client.get(), o, nullptr);
  ASSERT_TRUE(Eventually(m, [](const auto& v) { return v[1].up; }));
  c.Down(1);
  const absl::Time down = absl::Now();
  ASSERT_TRUE(Eventually(m, [](const auto& v) { return !v[1].up; }));
  EXPECT_GE(absl::Now() - down, absl::Milliseconds(250));
  auto v = m.Views();
  EXPECT_TRUE(v[0].up);
  EXPECT_NE(v[1].error.find("connection refused"), std::string::npos) << v[1].error;
  EXPECT_EQ(v[1].incarnation, 101u);  // the last one seen
  c.Restart(1, 555);
  ASSERT_TRUE(Eventually(m, [](const auto& v) { return v[1].up && v[1].incarnation == 555; }));
}

TEST(PsMonitorTest, ProbeNowProbesWithoutWaitingForTheInterval) {
  Cluster c;
  PsMonitor::Options o = Fast();
  o.interval = absl::Seconds(30);
  o.max_interval = absl::Seconds(30);
  PsMonitor m(c.client.get(), o, nullptr);
  ASSERT_TRUE(Eventually(m, [](const auto& v) { return v[1].up; }));
  c.Restart(1, 777);
  m.ProbeNow();
  ASSERT_TRUE(Eventually(m, [](const auto& v) { return v[1].incarnation == 777; }));
}

}  // namespace
}  // namespace shardps
