#include "coordinator/ps_monitor.h"

#include <atomic>
#include <memory>

#include "coordinator/in_process_ps.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

// Two in-process ps behind interceptors: ps 1 can be taken down and restarted.
std::unique_ptr<InProcessPs> TwoPs() {
  InProcessPs::Options o;
  o.name_prefix = "ps:";
  o.first_incarnation = 100;
  o.intercept = true;
  o.client.max_attempts = 1;
  return *InProcessPs::Create(o);
}

// Task k restarts as `incarnation` and answers again.
void Restart(InProcessPs& ps, int k, uint64_t incarnation) {
  ASSERT_TRUE(ps.Restart(k, incarnation).ok());
  ps.Up(k);
}

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
  std::unique_ptr<InProcessPs> c = TwoPs();
  std::atomic<int> changes{0};
  PsMonitor m(c->client(), Fast(), [&] { ++changes; });
  ASSERT_TRUE(Eventually(m, [](const std::vector<PsMonitor::PsView>& v) {
    return v.size() == 2 && v[0].up && v[1].up;
  }));
  auto v = m.Views();
  EXPECT_EQ(v[0].incarnation, 100u);
  EXPECT_EQ(v[1].incarnation, 101u);
  EXPECT_GE(changes.load(), 1);
}

TEST(PsMonitorTest, UnreachableOnlyAfterTheGracePeriodThenBackWithNewIncarnation) {
  std::unique_ptr<InProcessPs> c = TwoPs();
  PsMonitor::Options o = Fast();
  o.unreachable_after = absl::Milliseconds(300);
  PsMonitor m(c->client(), o, nullptr);
  ASSERT_TRUE(Eventually(m, [](const auto& v) { return v[1].up; }));
  c->Down(1);
  const absl::Time down = absl::Now();
  ASSERT_TRUE(Eventually(m, [](const auto& v) { return !v[1].up; }));
  EXPECT_GE(absl::Now() - down, absl::Milliseconds(250));
  auto v = m.Views();
  EXPECT_TRUE(v[0].up);
  EXPECT_NE(v[1].error.find("connection refused"), std::string::npos) << v[1].error;
  EXPECT_EQ(v[1].incarnation, 101u);  // the last one seen
  Restart(*c, 1, 555);
  ASSERT_TRUE(Eventually(m, [](const auto& v) { return v[1].up && v[1].incarnation == 555; }));
}

TEST(PsMonitorTest, ProbeNowProbesWithoutWaitingForTheInterval) {
  std::unique_ptr<InProcessPs> c = TwoPs();
  PsMonitor::Options o = Fast();
  o.interval = absl::Seconds(30);
  o.max_interval = absl::Seconds(30);
  PsMonitor m(c->client(), o, nullptr);
  ASSERT_TRUE(Eventually(m, [](const auto& v) { return v[1].up; }));
  Restart(*c, 1, 777);
  m.ProbeNow();
  ASSERT_TRUE(Eventually(m, [](const auto& v) { return v[1].incarnation == 777; }));
}

}  // namespace
}  // namespace shardps
