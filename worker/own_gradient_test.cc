#include "worker/own_gradient.h"

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "math/optimizer.h"

namespace shardps {
namespace {

OptimizerSpec Adam(double lr) {
  OptimizerSpec spec;
  spec.set_type(OptimizerSpec::ADAM);
  spec.set_learning_rate(lr);
  return spec;
}

OptimizerSpec Sgd(double lr) {
  OptimizerSpec spec;
  spec.set_type(OptimizerSpec::SGD);
  spec.set_learning_rate(lr);
  return spec;
}

std::vector<float> Gradient(int n, int seed) {
  std::vector<float> g(n);
  for (int i = 0; i < n; ++i) g[i] = std::sin(0.37f * static_cast<float>(i * (seed + 3)) + seed);
  return g;
}

// A gated pull that ended before any push began: the compute after it gets the previous
// compute's update.
OwnGradient::PullMark EarlyPull(OwnGradient& own) {
  OwnGradient::PullMark mark = own.PullStarted(/*gated=*/true);
  own.PullEnded(&mark);
  return mark;
}

TEST(PushProgressTest, PrefixesSkipNoStep) {
  PushProgress p;
  p.MarkStarted(2);
  EXPECT_EQ(p.started_prefix(), 0u);
  p.MarkStarted(1);
  EXPECT_EQ(p.started_prefix(), 2u);
  p.MarkDone(1);
  p.MarkDone(3);
  EXPECT_EQ(p.done_prefix(), 1u);
  p.MarkDone(2);
  EXPECT_EQ(p.done_prefix(), 3u);
  p.MarkDone(2);  // again: no effect
  EXPECT_EQ(p.done_prefix(), 3u);
}

// The full pipeline of one worker with two steps in flight: step k+1 pulls while step k
// computes. With the own update added, every step computes on exactly the parameters a
// one-step-at-a-time run computes on.
TEST(OwnGradientTest, PipelinedStepsComputeOnTheSequentialParameters) {
  for (const OptimizerSpec& spec : {Adam(1e-2), Sgd(0.1)}) {
    const int n = 257;
    auto own = OwnGradient::Create(spec, {static_cast<size_t>(n)});
    ASSERT_TRUE(own.ok());
    auto rule = Optimizer::Create(spec);
    ASSERT_TRUE(rule.ok());
    std::vector<float> ps(n, 0.5f);
    std::vector<std::vector<float>> slot_bufs((*rule)->num_slots(), std::vector<float>(n));
    for (int k = 0; k < (*rule)->num_slots(); ++k) {
      std::fill(slot_bufs[k].begin(), slot_bufs[k].end(), (*rule)->initial_slot_value(k));
    }
    std::vector<float*> slots;
    for (auto& b : slot_bufs) slots.push_back(b.data());
    // The sequential run's parameters, for comparison.
    std::vector<float> seq_params(n, 0.5f);
    std::vector<std::vector<float>> seq_slot_bufs = slot_bufs;
    std::vector<float*> seq_slots;
    for (auto& b : seq_slot_bufs) seq_slots.push_back(b.data());

    // The gradient is a function of the parameters, so a wrong base changes it.
    auto gradient = [&](const std::vector<float>& p, int step) {
      std::vector<float> g = Gradient(n, step);
      for (int i = 0; i < n; ++i) g[i] += 0.3f * p[i];
      return g;
    };

    std::vector<std::vector<float>> pulled = {ps};
    OwnGradient::PullMark mark = EarlyPull(**own);
    for (int step = 1; step <= 8; ++step) {
      const uint64_t seq = (*own)->BeginCompute();
      const bool applied = (*own)->ApplyBefore(seq, mark, absl::MakeSpan(pulled));
      EXPECT_EQ(applied, step > 1) << "step " << step;
      // Compare with the sequential run's parameters at this step.
      ASSERT_EQ(pulled[0], seq_params) << spec.ShortDebugString() << " step " << step;
      std::vector<std::vector<float>> grads = {gradient(pulled[0], step)};
      (*own)->EndCompute(seq, grads, true);
      // The next step's pull happens now, before this step's push.
      std::vector<std::vector<float>> next = {ps};
      OwnGradient::PullMark next_mark = EarlyPull(**own);
      (*own)->PushStarting(seq);
      (*rule)->ApplyDense(step, grads[0], ps.data(), slots);
      (*own)->PushEnded(seq);
      // Sequential reference.
      std::vector<float> g = gradient(seq_params, step);
      (*rule)->ApplyDense(step, g, seq_params.data(), seq_slots);
      pulled = std::move(next);
      mark = next_mark;
    }
  }
}

TEST(OwnGradientTest, NothingIsAddedWhenThePullHoldsTheUpdateOrMayHoldIt) {
  const int n = 8;
  auto own = OwnGradient::Create(Sgd(1.0), {static_cast<size_t>(n)});
  ASSERT_TRUE(own.ok());
  const uint64_t first = (*own)->BeginCompute();
  (*own)->EndCompute(first, {std::vector<float>(n, 1.0f)}, true);

  // A pull that began after the push was done holds the update.
  (*own)->PushStarting(first);
  (*own)->PushEnded(first);
  OwnGradient::PullMark after = (*own)->PullStarted(true);
  (*own)->PullEnded(&after);
  std::vector<std::vector<float>> params = {std::vector<float>(n, 0.0f)};
  const uint64_t second = (*own)->BeginCompute();
  EXPECT_FALSE((*own)->ApplyBefore(second, after, absl::MakeSpan(params)));
  EXPECT_EQ(params[0], std::vector<float>(n, 0.0f));

  // An ungated pull (waiting for a version) that ended while the push was in flight may hold
  // it on some shards: nothing is added.
  (*own)->EndCompute(second, {std::vector<float>(n, 1.0f)}, true);
  OwnGradient::PullMark ungated = (*own)->PullStarted(false);
  (*own)->PushStarting(second);
  (*own)->PullEnded(&ungated);
  (*own)->PushEnded(second);
  const uint64_t third = (*own)->BeginCompute();
  EXPECT_FALSE((*own)->ApplyBefore(third, ungated, absl::MakeSpan(params)));
  EXPECT_EQ(params[0], std::vector<float>(n, 0.0f));
}

TEST(OwnGradientTest, AFailedComputeLeavesNoUpdateForTheNextStep) {
  const int n = 4;
  auto own = OwnGradient::Create(Sgd(1.0), {static_cast<size_t>(n)});
  ASSERT_TRUE(own.ok());
  OwnGradient::PullMark mark = EarlyPull(**own);
  const uint64_t first = (*own)->BeginCompute();
  (*own)->EndCompute(first, {std::vector<float>(n, 1.0f)}, false);
  (*own)->Skip(first);
  std::vector<std::vector<float>> params = {std::vector<float>(n, 0.0f)};
  EXPECT_FALSE((*own)->ApplyBefore((*own)->BeginCompute(), mark, absl::MakeSpan(params)));
  EXPECT_EQ(params[0], std::vector<float>(n, 0.0f));
  EXPECT_EQ((*own)->updates(), 0);
}

// Pulls and pushes of a job do not overlap: a gated pull waits for the push in flight, and a
// push waits for the gated pull in flight.
TEST(OwnGradientTest, GatedPullsAndPushesDoNotOverlap) {
  auto own = OwnGradient::Create(Sgd(1.0), {4});
  ASSERT_TRUE(own.ok());
  const uint64_t seq = (*own)->BeginCompute();
  (*own)->EndCompute(seq, {std::vector<float>(4, 1.0f)}, true);

  (*own)->PushStarting(seq);
  std::atomic<bool> pulled{false};
  std::thread puller([&] {
    OwnGradient::PullMark mark = (*own)->PullStarted(true);
    pulled = true;
    (*own)->PullEnded(&mark);
    EXPECT_EQ(mark.done_before_start, seq);  // it went out only after the push was done
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(pulled.load());  // still waiting for the push
  (*own)->PushEnded(seq);
  puller.join();
  EXPECT_TRUE(pulled.load());

  OwnGradient::PullMark held = (*own)->PullStarted(true);
  const uint64_t next = (*own)->BeginCompute();
  (*own)->EndCompute(next, {std::vector<float>(4, 1.0f)}, true);
  std::atomic<bool> pushing{false};
  std::thread pusher([&] {
    (*own)->PushStarting(next);
    pushing = true;
    (*own)->PushEnded(next);
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(pushing.load());  // waiting for the pull
  (*own)->PullEnded(&held);
  pusher.join();
  EXPECT_EQ(held.started_before_end, seq);  // the pull ended before `next`'s push began
}

TEST(OwnGradientTest, BadOptimizerIsRefused) {
  OptimizerSpec bad = Sgd(-1);
  EXPECT_EQ(OwnGradient::Create(bad, {4}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace shardps
