#include "ps_server/shard.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "compute/parallel_for.h"
#include "gtest/gtest.h"
#include "ps_server/gradient_bytes.h"

namespace shardps {
namespace {

std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

ShardSpec Spec(int64_t rows, int64_t width, OptimizerSpec::Type type = OptimizerSpec::SGD,
               int sync_replicas = 0) {
  ShardSpec s;
  s.set_name("v/part_0");
  s.set_variable("v");
  s.set_num_parts(1);
  s.mutable_shape()->add_dim(rows);
  s.mutable_shape()->add_dim(width);
  s.mutable_full_shape()->add_dim(rows);
  s.mutable_full_shape()->add_dim(width);
  s.mutable_initializer()->set_type(InitializerSpec::CONSTANT);
  s.mutable_initializer()->set_value(1.0);
  s.mutable_optimizer()->set_type(type);
  s.mutable_optimizer()->set_learning_rate(0.5);
  s.mutable_optimizer()->set_momentum(0.5);
  if (sync_replicas > 0) {
    s.mutable_update()->set_mode(UpdateSpec::SYNC);
    s.mutable_update()->set_num_replicas(sync_replicas);
  }
  return s;
}

std::shared_ptr<Shard> Make(const ShardSpec& spec) {
  auto shard = Shard::Create(spec, Geometry{spec.shape().dim(0), spec.shape().dim(1)}, 16);
  EXPECT_TRUE(shard.ok()) << shard.status();
  return *std::move(shard);
}

std::vector<float> All(Shard& shard) {
  std::vector<float> out(static_cast<size_t>(shard.size()));
  absl::MutexLock lock(&shard.mu());
  shard.CopyRange({0, shard.rows()}, out.data());
  return out;
}

TEST(ShardTest, CreateInitializesAndCountsBytes) {
  auto shard = Make(Spec(3, 2, OptimizerSpec::ADAM));
  EXPECT_EQ(shard->rows(), 3);
  EXPECT_EQ(shard->width(), 2);
  EXPECT_EQ(shard->bytes(), 3 * 2 * 4 * 3);  // parameters and Adam's two slots
  EXPECT_EQ(All(*shard), std::vector<float>(6, 1.0f));
  absl::MutexLock lock(&shard->mu());
  EXPECT_EQ(shard->version(), 0);
}

TEST(ShardTest, NewStateHasTheShardsGeometryAndFillsSlotsOnlyWhenAsked) {
  auto shard = Make(Spec(5, 3, OptimizerSpec::ADAM));
  for (bool initialize_slots : {true, false}) {
    Shard::State state = shard->NewState(initialize_slots);
    ASSERT_EQ(state.slots.size(), 2u);
    for (const ParamBlocks* b : {&state.params, &state.slots[0], &state.slots[1]}) {
      EXPECT_EQ(b->rows(), 5);
      EXPECT_EQ(b->width(), 3);
    }
    if (initialize_slots) {
      std::vector<float> slot(15, -1.0f);
      state.slots[1].CopyOut(0, 15, slot.data());
      EXPECT_EQ(slot, std::vector<float>(15, 0.0f));  // Adam's initial moments
    }
  }
}

TEST(ShardTest, DenseAndRowUpdatesAgreeAndAdvanceTheVersion) {
  ParallelFor parallel(1);
  auto dense = Make(Spec(4, 3, OptimizerSpec::MOMENTUM));
  auto rows = Make(Spec(4, 3, OptimizerSpec::MOMENTUM));
  const std::vector<float> grad = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const std::string bytes = Bytes(grad);
  const std::vector<int64_t> ids = {0, 1, 2, 3};
  for (int t = 0; t < 3; ++t) {
    absl::MutexLock a(&dense->mu());
    absl::MutexLock b(&rows->mu());
    ASSERT_TRUE(dense->ApplyDense({0, 4}, GradientBytes(bytes), &parallel).ok());
    ASSERT_TRUE(rows->ApplyRows(ids, grad.data(), &parallel).ok());
  }
  EXPECT_EQ(All(*dense), All(*rows));
  EXPECT_NE(All(*dense), std::vector<float>(12, 1.0f));
  absl::MutexLock lock(&dense->mu());
  EXPECT_EQ(dense->version(), 3);
}

TEST(ShardTest, ASharedRangeKeepsItsBytesThroughAnUpdate) {
  ParallelFor parallel(0);
  auto shard = Make(Spec(2, 2));
  std::vector<absl::string_view> pieces;
  std::vector<std::shared_ptr<const void>> holds;
  {
    absl::MutexLock lock(&shard->mu());
    shard->ShareRange({0, 2}, &pieces, &holds);
    const std::string grad = Bytes({1, 1, 1, 1});
    ASSERT_TRUE(shard->ApplyDense({0, 2}, GradientBytes(grad), &parallel).ok());
  }
  std::string shared;
  for (absl::string_view p : pieces) shared.append(p.data(), p.size());
  EXPECT_EQ(shared, Bytes({1, 1, 1, 1}));
  EXPECT_EQ(All(*shard), (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}));
}

TEST(ShardTest, CopyRowsGathersRowsInTheOrderAsked) {
  auto shard = Make(Spec(3, 2));
  {
    absl::MutexLock lock(&shard->mu());
    const std::vector<float> values = {0, 1, 2, 3, 4, 5};
    shard->Assign({0, 3}, values.data(), false);
  }
  std::vector<float> out(4);
  absl::MutexLock lock(&shard->mu());
  shard->CopyRows({2, 0}, reinterpret_cast<char*>(out.data()));
  EXPECT_EQ(out, (std::vector<float>{4, 5, 0, 1}));
}

TEST(ShardTest, AssignResetsSlotsOnlyWhenAsked) {
  ParallelFor parallel(0);
  auto shard = Make(Spec(2, 1, OptimizerSpec::MOMENTUM));
  absl::MutexLock lock(&shard->mu());
  const std::string grad = Bytes({1, 1});
  // v = -0.5, p = 0.5
  ASSERT_TRUE(shard->ApplyDense({0, 2}, GradientBytes(grad), &parallel).ok());
  const std::vector<float> ten = {10};
  shard->Assign({0, 1}, ten.data(), /*reset_slots=*/false);   // row 0 keeps v
  shard->Assign({1, 2}, ten.data(), /*reset_slots=*/true);    // row 1: v = 0
  ASSERT_TRUE(shard->ApplyDense({0, 2}, GradientBytes(grad), &parallel).ok());
  std::vector<float> out(2);
  shard->CopyRange({0, 2}, out.data());
  // Row 0: v = 0.5 * -0.5 - 0.5 = -0.75. Row 1: v = -0.5.
  EXPECT_EQ(out, (std::vector<float>{10 - 0.75f, 10 - 0.5f}));
  EXPECT_EQ(shard->version(), 2);
}

TEST(ShardTest, SyncStepsApplyOnceWhenEveryReplicaIsIn) {
  auto shard = Make(Spec(2, 1, OptimizerSpec::SGD, /*sync_replicas=*/2));
  absl::MutexLock lock(&shard->mu());
  EXPECT_EQ(shard->CheckStep(-1).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(shard->CheckStep(1).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(shard->CheckStep(0).ok());
  const std::string g0 = Bytes({1, 2});
  absl::StatusOr<UpdateResult> r = shard->AddDense(0, {0, 2}, GradientBytes(g0));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->applied);
  EXPECT_EQ(shard->version(), 0);
  auto rows = shard->AddRows(1, {1}, {4});
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE(rows->applied);
  EXPECT_EQ(shard->version(), 1);
  std::vector<float> out(2);
  shard->CopyRange({0, 2}, out.data());
  EXPECT_EQ(out, (std::vector<float>{1 - 0.5f, 1 - 0.5f * 6}));
  EXPECT_EQ(shard->CheckStep(0).code(), absl::StatusCode::kAborted);
}

// Issue 23 §5: pushes of -3e38 (finite, so the gradient check passes them) must not turn SGD
// or momentum rows into inf, nor overflow Adam's second moment: the update that would is
// refused, naming the variable and the shard, and the shard is unchanged (values, version).
TEST(ShardFiniteTest, AnUpdateThatWouldOverflowIsRefusedAndChangesNothing) {
  for (OptimizerSpec::Type type :
       {OptimizerSpec::SGD, OptimizerSpec::MOMENTUM, OptimizerSpec::ADAM}) {
    SCOPED_TRACE(OptimizerSpec::Type_Name(type));
    ParallelFor parallel(1);
    auto dense = Make(Spec(4, 3, type));
    auto rows = Make(Spec(4, 3, type));
    const std::vector<float> huge(12, -3e38f);
    const std::string bytes = Bytes(huge);
    const std::vector<int64_t> ids = {0, 1, 2, 3};
    absl::Status dense_status, rows_status;
    int pushes = 0;
    std::vector<float> dense_before, rows_before;
    for (; pushes < 40; ++pushes) {
      dense_before = All(*dense);
      rows_before = All(*rows);
      absl::MutexLock a(&dense->mu());
      absl::MutexLock b(&rows->mu());
      dense_status = dense->ApplyDense({0, 4}, GradientBytes(bytes), &parallel);
      rows_status = rows->ApplyRows(ids, huge.data(), &parallel);
      if (!dense_status.ok()) break;
    }
    ASSERT_LT(pushes, 40) << "40 pushes of -3e38 were all applied";
    EXPECT_EQ(dense_status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(dense_status.message().find("variable 'v' (shard 'v/part_0')"), std::string::npos)
        << dense_status;
    EXPECT_NE(dense_status.message().find("non-finite"), std::string::npos) << dense_status;
    EXPECT_EQ(rows_status.code(), absl::StatusCode::kInvalidArgument) << rows_status;
    EXPECT_EQ(All(*dense), dense_before);
    EXPECT_EQ(All(*rows), rows_before);
    for (float x : All(*dense)) EXPECT_TRUE(std::isfinite(x));
    absl::MutexLock lock(&dense->mu());
    EXPECT_EQ(dense->version(), pushes);
  }
}

// SYNC: each replica's gradient is harmless, their sum overflows. The step is refused for all
// its replicas: the push that completes it fails, the shard keeps its version and values, and
// a re-run's push for the step fails the same way (so the chief counts attempts), until a
// restore replaces the state.
TEST(ShardFiniteTest, ASyncStepWhoseSumWouldOverflowIsRefusedForAllReplicas) {
  auto shard = Make(Spec(2, 1, OptimizerSpec::SGD, /*sync_replicas=*/2));
  // SGD with lr 0.5 from p = 1: p - 0.5 * (g0 + g1); the sum of two -3.4e38 is -inf in float
  // (each is finite, and so is p - 0.5 * g for either alone).
  const std::string g = Bytes({-3.4e38f, 1.0f});
  absl::MutexLock lock(&shard->mu());
  absl::StatusOr<UpdateResult> first = shard->AddDense(0, {0, 2}, GradientBytes(g));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->applied);
  absl::StatusOr<UpdateResult> last = shard->AddDense(1, {0, 2}, GradientBytes(g));
  ASSERT_FALSE(last.ok());
  EXPECT_EQ(last.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(last.status().message().find("sync step 0"), std::string::npos) << last.status();
  EXPECT_NE(last.status().message().find("shard 'v/part_0'"), std::string::npos)
      << last.status();
  EXPECT_NE(last.status().message().find("all its replicas"), std::string::npos)
      << last.status();
  EXPECT_EQ(shard->version(), 0);
  EXPECT_EQ(shard->refused_step().code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> out(2);
  shard->CopyRange({0, 2}, out.data());
  EXPECT_EQ(out, (std::vector<float>{1, 1}));
  // A restore starts afresh.
  shard->ReplaceState(shard->NewState(), 0);
  EXPECT_TRUE(shard->refused_step().ok());
}

// The cheap check relies on the ranges of the shard's values; every write that is not a
// dense apply forgets them. Here a restore brings an Adagrad accumulator of -5 (a pushed
// gradient of 1 then takes sqrt(-4)): a stale range (>= 0.1 from before the restore) would
// let the update through as NaN; the shard scans again and the exact check refuses it.
TEST(ShardFiniteTest, RangesAreForgottenByEveryOtherWrite) {
  ParallelFor parallel(1);
  auto shard = Make(Spec(2, 2, OptimizerSpec::ADAGRAD));
  const std::string ones = Bytes({1, 1, 1, 1});
  absl::MutexLock lock(&shard->mu());
  ASSERT_TRUE(shard->ApplyDense({0, 2}, GradientBytes(ones), &parallel).ok());
  Shard::State state = shard->NewState(/*initialize_slots=*/true);
  std::vector<float> negative(4, -5.0f);
  state.slots[0].Writable(0, 2);
  state.slots[0].ForEachRun(0, 4, [&](int64_t first, float* v, int64_t m) {
    std::memcpy(v, negative.data() + first, static_cast<size_t>(m) * sizeof(float));
  });
  shard->ReplaceState(std::move(state), 1);
  absl::Status after_restore = shard->ApplyDense({0, 2}, GradientBytes(ones), &parallel);
  EXPECT_EQ(after_restore.code(), absl::StatusCode::kInvalidArgument) << after_restore;
  EXPECT_EQ(shard->version(), 1);
}

TEST(ShardTest, RequestIdsAreRemembered) {
  auto shard = Make(Spec(1, 1));
  absl::MutexLock lock(&shard->mu());
  EXPECT_FALSE(shard->SeenRequest(5));
  shard->RememberRequest(5);
  EXPECT_TRUE(shard->SeenRequest(5));
}

// Delay compensation's memory: the spec's worst case is reserved (BytesFor), and what the
// retained versions hold is counted as it is (StalenessBytes): one copy of a block per
// version kept whose update changed that block.
TEST(ShardTest, DelayCompensationCountsItsMemory) {
  // 8 rows of 1 << 16 floats: two blocks of 4 rows (1 MiB each).
  ShardSpec spec = Spec(8, int64_t{1} << 16);
  spec.mutable_update()->set_delay_compensation(0.5);
  spec.mutable_update()->set_retained_versions(3);
  const Geometry geometry{8, int64_t{1} << 16};
  const int64_t params_bytes = 8 * (int64_t{1} << 16) * 4;
  EXPECT_EQ(*Shard::BytesFor(spec, geometry), (1 + 3) * params_bytes);  // SGD: no slots
  spec.mutable_update()->set_delay_compensation_adaptive(true);
  EXPECT_EQ(*Shard::BytesFor(spec, geometry), (1 + 3 + 1) * params_bytes);
  spec.mutable_update()->set_delay_compensation_adaptive(false);

  auto shard = Make(spec);
  ParallelFor parallel(0);
  const int64_t block = params_bytes / 2;
  const std::vector<float> row_grad(size_t{1} << 16, 1.0f);
  absl::MutexLock lock(&shard->mu());
  EXPECT_EQ(shard->StalenessBytes(), 0);
  // Five updates of row 0 (block 0): the three versions kept each hold their own block 0.
  for (int k = 0; k < 5; ++k) {
    ASSERT_TRUE(
        shard->ApplyDense({0, 1}, GradientBytes(Bytes(row_grad)), &parallel, shard->version())
            .ok());
  }
  EXPECT_EQ(shard->StalenessBytes(), 3 * block);
  // An update of row 4 (block 1) at version 5 keeps versions 3, 4, 5: the old block 0 of
  // versions 3 and 4 (version 5's is the current one), and one old block 1 that they share.
  ASSERT_TRUE(
      shard->ApplyDense({4, 5}, GradientBytes(Bytes(row_grad)), &parallel, shard->version())
          .ok());
  EXPECT_EQ(shard->StalenessBytes(), 2 * block + block);
  // A push to row 0 computed at version 2, now at 6: versions 3, 4 and 5 touched row 0 (6 did
  // not), and version 2 is no longer kept: compensated against the oldest kept, version 3.
  ASSERT_TRUE(shard->ApplyDense({0, 1}, GradientBytes(Bytes(row_grad)), &parallel, 2).ok());
  const StalenessStats& stats = shard->staleness_stats();
  EXPECT_EQ(stats.pushes_with_base, 6);  // the first push, at version 0, had none
  EXPECT_EQ(stats.max_staleness, 3);
  EXPECT_EQ(stats.compensated, 0);  // the others were fresh
  EXPECT_EQ(stats.compensated_partially, 1);
  // An assignment drops the versions kept (nothing to diff against across it).
  const std::vector<float> zeros(size_t{1} << 16, 0.0f);
  shard->Assign({0, 1}, zeros.data(), false);
  EXPECT_EQ(shard->StalenessBytes(), 0);
}

TEST(ShardTest, BaseVersionMustBeAVersionTheShardHad) {
  auto shard = Make(Spec(2, 2));
  absl::MutexLock lock(&shard->mu());
  EXPECT_TRUE(shard->CheckBaseVersion(0).ok());
  for (int64_t bad : {int64_t{-1}, int64_t{1}}) {
    absl::Status s = shard->CheckBaseVersion(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("shard 'v/part_0'"), absl::string_view::npos) << s;
  }
}

}  // namespace
}  // namespace shardps
