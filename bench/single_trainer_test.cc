// SingleTrainer on a small separable dataset: it learns, a run is reproducible bit for bit,
// its batches follow the job's size over epochs (the last of an epoch short), its phases are
// timed when asked, and a bad job is refused.
#include "bench/single_trainer.h"

#include "coordinator/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace bench {
namespace {

// 50 examples of 4 features in 2 classes: the class is whether feature 0 exceeds feature 1.
Dataset Separable() {
  Dataset d;
  d.num_examples = 50;
  d.feature_dim = 4;
  d.num_classes = 2;
  for (int i = 0; i < 50; ++i) {
    const float a = static_cast<float>((i * 37) % 50) / 50.0f;
    const float b = static_cast<float>((i * 11 + 7) % 50) / 50.0f;
    d.features.insert(d.features.end(), {a, b, 0.5f, 1.0f});
    d.labels.push_back(a > b ? 1 : 0);
  }
  return d;
}

JobSpec Job(const std::string& model) {
  absl::StatusOr<JobSpec> job = ParseJobSpec(
      R"({"name": "t", "model": ")" + model +
          R"(", "batch_size": 16, "optimizer": {"type": "adam", "learning_rate": 0.05},
          "seed": 3, "backend": "cpu"})",
      1);
  EXPECT_TRUE(job.ok()) << job.status();
  return *job;
}

TEST(SingleTrainerTest, LearnsAndIsReproducible) {
  const Dataset data = Separable();
  auto a = SingleTrainer::Create(Job("mlp:8"), data, 1);
  auto b = SingleTrainer::Create(Job("mlp:8"), data, 1);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*a)->params(), (*b)->params());
  // Correct answers over the first epoch (4 steps) and over the last.
  int64_t first_correct = 0, last_correct = 0;
  for (int64_t s = 0; s < 200; ++s) {
    auto ta = (*a)->Step(s);
    auto tb = (*b)->Step(s);
    ASSERT_TRUE(ta.ok()) << ta.status();
    ASSERT_TRUE(tb.ok()) << tb.status();
    EXPECT_EQ(ta->result.loss, tb->result.loss);
    if (s < 4) first_correct += ta->result.correct;
    if (s >= 196) last_correct += ta->result.correct;
  }
  EXPECT_EQ((*a)->params(), (*b)->params());
  EXPECT_GE(last_correct, 40) << "of 50 (chance: 25); the first epoch had " << first_correct;
}

TEST(SingleTrainerTest, BatchesFollowTheJobOverEpochsAndPhasesAreTimed) {
  const Dataset data = Separable();
  auto trainer = SingleTrainer::Create(Job("softmax"), data, 1);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  EXPECT_EQ((*trainer)->batch_size(), 16);
  EXPECT_EQ((*trainer)->steps_per_epoch(), 4);  // 16, 16, 16, 2
  std::vector<int64_t> sizes;
  for (int64_t s = 0; s < 8; ++s) {
    SingleTrainer::StepTimes times;
    auto step = (*trainer)->Step(s, &times);
    ASSERT_TRUE(step.ok()) << step.status();
    sizes.push_back(step->examples);
    EXPECT_GE(step->result.correct, 0);
    EXPECT_LE(step->result.correct, step->examples);
    EXPECT_GE(times.gather_s, 0);
    EXPECT_GT(times.gather_s + times.compute_s + times.update_s, 0);
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{16, 16, 16, 2, 16, 16, 16, 2}));
  EXPECT_EQ((*trainer)->params().size(), 2u);  // kernel and bias
}

TEST(SingleTrainerTest, ABadModelIsRefused) {
  const Dataset data = Separable();
  JobSpec job = Job("softmax");
  job.set_model("mlp:0");
  EXPECT_FALSE(SingleTrainer::Create(job, data, 1).ok());
}

}  // namespace
}  // namespace bench
}  // namespace shardps
