#include "coordinator/training_summary.h"

#include <string>
#include <vector>

#include "common/test_files.h"
#include "gtest/gtest.h"
#include "observability/tfevents_reader.h"

namespace shardps {
namespace {

JobStatus Running(const std::string& job_id, int64_t steps, double loss, double steps_per_sec) {
  JobStatus status;
  status.set_state(JobStatus::RUNNING);
  status.set_job_id(job_id);
  status.set_steps_done(steps);
  status.set_total_steps(20);
  status.set_loss(loss);
  status.set_steps_per_sec(steps_per_sec);
  status.set_examples_per_sec(steps_per_sec * 64);
  return status;
}

// (step, tag=value ...) of each scalar event after the version record.
std::vector<std::string> Points(const std::string& path) {
  auto events = ReadTfEvents(path);
  EXPECT_TRUE(events.ok()) << events.status();
  std::vector<std::string> points;
  if (!events.ok()) return points;
  for (size_t i = 1; i < events->size(); ++i) {
    std::string point = std::to_string((*events)[i].step());
    for (const auto& value : (*events)[i].summary().value()) {
      point += " " + value.tag() + "=" + std::to_string(value.simple_value());
    }
    points.push_back(point);
  }
  return points;
}

TEST(TrainingSummaryTest, WritesAPointPerIntervalWithStepsDoneAndTheLastStepAtTheEnd) {
  const std::string dir = MakeTestDir("training_summary") + "/chief";
  auto writer = std::make_unique<SummaryWriter>(dir);
  SummaryWriter* file = writer.get();
  TrainingSummary summary(std::move(writer), absl::Seconds(1));
  const absl::Time t0 = absl::FromUnixSeconds(1795412345);

  summary.Observe(JobStatus(), t0);                           // no job
  summary.Observe(Running("a", 0, 0, 0), t0);                 // no step yet
  EXPECT_EQ(file->path(), "") << "nothing written before the first step";
  summary.Observe(Running("a", 5, 2.0, 0), t0);               // loss only: no speed yet
  summary.Observe(Running("a", 8, 1.5, 10), t0 + absl::Milliseconds(500));  // too soon
  summary.Observe(Running("a", 12, 1.25, 10), t0 + absl::Seconds(1));
  summary.Observe(Running("a", 12, 1.25, 10), t0 + absl::Seconds(3));       // no new step
  JobStatus done = Running("a", 20, 0.5, 8);
  done.set_training_done(true);
  summary.Observe(done, t0 + absl::Seconds(3) + absl::Milliseconds(100));  // the end: at once
  done.set_state(JobStatus::SUCCEEDED);
  summary.Observe(done, t0 + absl::Seconds(5));                            // written already
  summary.Observe(Running("b", 3, 2.5, 4), t0 + absl::Seconds(5) + absl::Milliseconds(10));
  // A restarted chief resumes job b at step 9 before it has seen a step: no loss, no speed
  // yet (0 in its status), so no point, and none that drops to 0.
  summary.Observe(Running("b", 9, 0, 0), t0 + absl::Seconds(7));
  summary.Observe(Running("b", 10, 0.75, 0), t0 + absl::Seconds(7) + absl::Milliseconds(200));

  EXPECT_EQ(Points(file->path()),
            (std::vector<std::string>{
                "5 train/loss=2.000000",
                "12 train/loss=1.250000 train/examples_per_s=640.000000 train/steps_per_s=10.000000",
                "20 train/loss=0.500000 train/examples_per_s=512.000000 train/steps_per_s=8.000000",
                "3 train/loss=2.500000 train/examples_per_s=256.000000 train/steps_per_s=4.000000",
                "10 train/loss=0.750000",
            }));
}

}  // namespace
}  // namespace shardps
