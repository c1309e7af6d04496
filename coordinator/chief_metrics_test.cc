// Tests of the chief's metrics over JobStatus snapshots.
#include "coordinator/chief_metrics.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ChiefMetricsTest, ReadsEachScrapeFromTheStatus) {
  metrics::Registry registry;
  JobStatus status;
  status.set_state(JobStatus::RUNNING);
  status.set_total_steps(100);
  status.set_steps_done(10);
  status.set_steps_requeued(2);
  for (const char* state : {"busy", "busy", "failed"}) {
    WorkerInfo* worker = status.add_workers();
    worker->set_state(state);
    worker->set_failures(state[0] == 'f' ? 3 : 0);
  }
  status.add_recoveries();
  status.set_pull_ms(2);
  status.set_worker_joins(4);
  status.set_ps_scales(2);
  status.set_ps_scales_failed(1);
  status.set_layout_version(3);
  for (int i = 0; i < 3; ++i) status.add_ps();
  status.set_worker_leaves(1);
  const absl::Time now = absl::FromUnixSeconds(1000);
  ASSERT_TRUE(AddChiefMetrics(&registry, [&status] { return status; }, [now] { return now; })
                  .ok());
  std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("shardps_chief_job_running 1\n"));
  EXPECT_THAT(text, HasSubstr("shardps_chief_steps_done 10\n"));
  EXPECT_THAT(text, HasSubstr("shardps_chief_steps_leased 2\n"));
  EXPECT_THAT(text, HasSubstr("shardps_chief_steps_queued 88\n"));
  EXPECT_THAT(text, HasSubstr("shardps_chief_steps_failed 3\n"));
  EXPECT_THAT(text, HasSubstr("shardps_chief_steps_released 2\n"));
  EXPECT_THAT(text, HasSubstr("shardps_chief_recoveries 1\n"));
  EXPECT_THAT(text, HasSubstr("shardps_chief_worker_joins 4\n"));
  EXPECT_THAT(text, HasSubstr("shardps_chief_ps_scales 2\n"));
  EXPECT_THAT(text, HasSubstr("shardps_chief_ps_scales_failed 1\n"));
  EXPECT_THAT(text, HasSubstr("shardps_chief_layout_version 3\n"));
  EXPECT_THAT(text, HasSubstr("shardps_chief_ps_tasks 3\n"));
  EXPECT_THAT(text, HasSubstr("shardps_chief_worker_leaves 1\n"));
  EXPECT_THAT(text, HasSubstr("shardps_chief_step_phase_seconds{phase=\"pull\"} 0.002\n"));
  EXPECT_THAT(text, HasSubstr("shardps_chief_workers{state=\"busy\"} 2\n"));
  EXPECT_THAT(text, Not(HasSubstr("\nshardps_chief_checkpoint_bytes ")));
  EXPECT_THAT(text, Not(HasSubstr("\nshardps_chief_eval_auc ")));

  status.set_steps_done(20);
  status.set_has_checkpoint(true);
  status.mutable_last_checkpoint()->set_bytes(4096);
  status.mutable_last_checkpoint()->set_unix_time(990);
  status.mutable_last_checkpoint()->set_write_seconds(1.5);
  status.set_has_eval(true);
  status.mutable_last_eval()->set_auc(0.75);
  text = registry.Render();
  EXPECT_THAT(text, HasSubstr("shardps_chief_steps_done 20\n"));
  EXPECT_THAT(text, HasSubstr("shardps_chief_checkpoint_bytes 4096\n"));
  EXPECT_THAT(text, HasSubstr("shardps_chief_checkpoint_age_seconds 10\n"));
  EXPECT_THAT(text, HasSubstr("shardps_chief_checkpoint_duration_seconds 1.5\n"));
  EXPECT_THAT(text, HasSubstr("shardps_chief_eval_auc 0.75\n"));
}

}  // namespace
}  // namespace shardps
