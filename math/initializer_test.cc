#include "math/initializer.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

InitializerSpec Spec(InitializerSpec::Type type, uint64_t seed = 7) {
  InitializerSpec spec;
  spec.set_type(type);
  spec.set_seed(seed);
  return spec;
}

std::vector<float> Fill(const InitializerSpec& spec, std::vector<int64_t> full_shape,
                        const char* variable = "w") {
  int64_t n = 1;
  for (int64_t d : full_shape) n *= d;
  std::vector<float> out(n);
  EXPECT_TRUE(InitializeRows(spec, variable, full_shape, 0, absl::MakeSpan(out)).ok());
  return out;
}

struct Moments {
  double mean;
  double stddev;
};
Moments ComputeMoments(const std::vector<float>& v) {
  double sum = 0, sq = 0;
  for (float x : v) sum += x;
  const double mean = sum / v.size();
  for (float x : v) sq += (x - mean) * (x - mean);
  return {mean, std::sqrt(sq / v.size())};
}

TEST(InitializerTest, ShardingDoesNotChangeValues) {
  const std::vector<int64_t> full = {13, 7};
  for (auto type : {InitializerSpec::RANDOM_UNIFORM, InitializerSpec::RANDOM_NORMAL,
                    InitializerSpec::TRUNCATED_NORMAL, InitializerSpec::GLOROT_UNIFORM,
                    InitializerSpec::CONSTANT, InitializerSpec::ZEROS}) {
    InitializerSpec spec = Spec(type);
    spec.set_value(1.5);
    const std::vector<float> whole = Fill(spec, full);
    // Five shards of 3, 3, 3, 2, 2 rows (TF's fixed-size partitioning of 13).
    std::vector<float> parts;
    int64_t offset = 0;
    for (int64_t rows : {3, 3, 3, 2, 2}) {
      std::vector<float> part(rows * 7);
      ASSERT_TRUE(InitializeRows(spec, "w", full, offset, absl::MakeSpan(part)).ok());
      parts.insert(parts.end(), part.begin(), part.end());
      offset += rows;
    }
    ASSERT_EQ(parts.size(), whole.size());
    EXPECT_EQ(std::memcmp(parts.data(), whole.data(), whole.size() * sizeof(float)), 0)
        << "type " << type;
  }
}

TEST(InitializerTest, SeedAndVariableChangeValues) {
  const std::vector<float> a = Fill(Spec(InitializerSpec::RANDOM_NORMAL, 1), {64});
  const std::vector<float> b = Fill(Spec(InitializerSpec::RANDOM_NORMAL, 2), {64});
  const std::vector<float> c = Fill(Spec(InitializerSpec::RANDOM_NORMAL, 1), {64}, "other");
  const std::vector<float> a2 = Fill(Spec(InitializerSpec::RANDOM_NORMAL, 1), {64});
  EXPECT_EQ(a, a2);
  int same_ab = 0, same_ac = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    same_ab += a[i] == b[i];
    same_ac += a[i] == c[i];
  }
  EXPECT_EQ(same_ab, 0);
  EXPECT_EQ(same_ac, 0);
}

TEST(InitializerTest, ConstantAndZeros) {
  InitializerSpec spec = Spec(InitializerSpec::CONSTANT);
  spec.set_value(-2.25);
  for (float x : Fill(spec, {3, 4})) EXPECT_EQ(x, -2.25f);
  for (float x : Fill(Spec(InitializerSpec::ZEROS), {5})) EXPECT_EQ(x, 0.0f);
}

TEST(InitializerTest, UniformDefaultRangeAndMoments) {
  const std::vector<float> v = Fill(Spec(InitializerSpec::RANDOM_UNIFORM), {200, 100});
  for (float x : v) {
    ASSERT_GE(x, -0.05f);
    ASSERT_LT(x, 0.05f);
  }
  const Moments m = ComputeMoments(v);
  EXPECT_NEAR(m.mean, 0.0, 0.001);
  EXPECT_NEAR(m.stddev, 0.1 / std::sqrt(12.0), 0.001);

  InitializerSpec spec = Spec(InitializerSpec::RANDOM_UNIFORM);
  spec.set_minval(2);
  spec.set_maxval(3);
  for (float x : Fill(spec, {1000})) {
    ASSERT_GE(x, 2.0f);
    ASSERT_LT(x, 3.0f);
  }
}

TEST(InitializerTest, NormalMoments) {
  InitializerSpec spec = Spec(InitializerSpec::RANDOM_NORMAL);
  spec.set_mean(1.0);
  spec.set_stddev(2.0);
  const Moments m = ComputeMoments(Fill(spec, {20000}));
  EXPECT_NEAR(m.mean, 1.0, 0.05);
  EXPECT_NEAR(m.stddev, 2.0, 0.05);

  // stddev 0 means Keras' 0.05.
  const Moments d = ComputeMoments(Fill(Spec(InitializerSpec::RANDOM_NORMAL), {20000}));
  EXPECT_NEAR(d.mean, 0.0, 0.002);
  EXPECT_NEAR(d.stddev, 0.05, 0.002);
}

TEST(InitializerTest, TruncatedNormalStaysWithinTwoStddev) {
  InitializerSpec spec = Spec(InitializerSpec::TRUNCATED_NORMAL);
  spec.set_mean(-1.0);
  spec.set_stddev(0.5);
  const std::vector<float> v = Fill(spec, {20000});
  for (float x : v) ASSERT_LE(std::abs(x + 1.0), 1.0 + 1e-6);
  const Moments m = ComputeMoments(v);
  EXPECT_NEAR(m.mean, -1.0, 0.02);
  // A standard normal truncated at +-2 has stddev 0.8796.
  EXPECT_NEAR(m.stddev, 0.5 * 0.8796, 0.02);
}

TEST(InitializerTest, GlorotUniformUsesFullShapeFans) {
  const std::vector<float> v = Fill(Spec(InitializerSpec::GLOROT_UNIFORM), {300, 200});
  const double limit = std::sqrt(6.0 / 500.0);
  for (float x : v) ASSERT_LE(std::abs(x), limit);
  const Moments m = ComputeMoments(v);
  EXPECT_NEAR(m.stddev, limit / std::sqrt(3.0), 0.002);

  // A shard of the variable uses the full shape's fans, not its own.
  std::vector<float> part(10 * 200);
  ASSERT_TRUE(InitializeRows(Spec(InitializerSpec::GLOROT_UNIFORM), "w", {300, 200}, 290,
                             absl::MakeSpan(part))
                  .ok());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), v.begin() + 290 * 200));
}

TEST(InitializerTest, KerasFans) {
  EXPECT_EQ(ComputeFans({}).fan_in, 1);
  EXPECT_EQ(ComputeFans({}).fan_out, 1);
  EXPECT_EQ(ComputeFans({5}).fan_in, 5);
  EXPECT_EQ(ComputeFans({5}).fan_out, 5);
  EXPECT_EQ(ComputeFans({3, 4}).fan_in, 3);
  EXPECT_EQ(ComputeFans({3, 4}).fan_out, 4);
  // Conv kernel [kh, kw, in, out]: receptive field kh * kw.
  EXPECT_EQ(ComputeFans({3, 5, 8, 16}).fan_in, 3 * 5 * 8);
  EXPECT_EQ(ComputeFans({3, 5, 8, 16}).fan_out, 3 * 5 * 16);
}

TEST(InitializerTest, RankZeroIsOneValue) {
  InitializerSpec spec = Spec(InitializerSpec::CONSTANT);
  spec.set_value(4);
  float x = 0;
  ASSERT_TRUE(InitializeRows(spec, "scalar", {}, 0, absl::MakeSpan(&x, 1)).ok());
  EXPECT_EQ(x, 4.0f);
}

TEST(InitializerTest, RejectsInvalidSpecs) {
  InitializerSpec uniform = Spec(InitializerSpec::RANDOM_UNIFORM);
  uniform.set_minval(1);
  uniform.set_maxval(1);
  EXPECT_EQ(ValidateInitializer(uniform).code(), absl::StatusCode::kInvalidArgument);
  uniform.set_maxval(0.5);
  EXPECT_EQ(ValidateInitializer(uniform).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ValidateInitializer(uniform).message().find("minval"), std::string::npos);

  InitializerSpec normal = Spec(InitializerSpec::RANDOM_NORMAL);
  normal.set_stddev(-1);
  EXPECT_EQ(ValidateInitializer(normal).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ValidateInitializer(normal).message().find("stddev"), std::string::npos);
  InitializerSpec truncated = Spec(InitializerSpec::TRUNCATED_NORMAL);
  truncated.set_mean(NAN);
  EXPECT_EQ(ValidateInitializer(truncated).code(), absl::StatusCode::kInvalidArgument);
  InitializerSpec constant = Spec(InitializerSpec::CONSTANT);
  constant.set_value(INFINITY);
  EXPECT_EQ(ValidateInitializer(constant).code(), absl::StatusCode::kInvalidArgument);
  InitializerSpec unknown = Spec(static_cast<InitializerSpec::Type>(42));
  EXPECT_EQ(ValidateInitializer(unknown).code(), absl::StatusCode::kInvalidArgument);
}

TEST(InitializerTest, RejectsRowsOutsideTheVariable) {
  std::vector<float> out(3 * 7);
  const InitializerSpec spec = Spec(InitializerSpec::ZEROS);
  EXPECT_FALSE(InitializeRows(spec, "w", {13, 7}, 11, absl::MakeSpan(out)).ok());
  EXPECT_FALSE(InitializeRows(spec, "w", {13, 7}, -1, absl::MakeSpan(out)).ok());
  EXPECT_FALSE(InitializeRows(spec, "w", {13, 0}, 0, absl::MakeSpan(out)).ok());
  std::vector<float> ragged(8);
  EXPECT_FALSE(InitializeRows(spec, "w", {13, 7}, 0, absl::MakeSpan(ragged)).ok());
  EXPECT_TRUE(InitializeRows(spec, "w", {13, 7}, 10, absl::MakeSpan(out)).ok());
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

TEST(KeyedRowInitializerTest, DependsOnlyOnSeedTableAndKey) {
  InitializerSpec spec;
  spec.set_type(InitializerSpec::RANDOM_NORMAL);
  spec.set_seed(7);
  auto a = KeyedRowInitializer::Create(spec, "emb", 8);
  auto b = KeyedRowInitializer::Create(spec, "emb", 8);
  auto other_table = KeyedRowInitializer::Create(spec, "emb2", 8);
  spec.set_seed(8);
  auto other_seed = KeyedRowInitializer::Create(spec, "emb", 8);
  ASSERT_TRUE(a.ok() && b.ok() && other_table.ok() && other_seed.ok());
  for (int64_t key : {int64_t{0}, int64_t{-1}, int64_t{1} << 62, int64_t{12345}}) {
    std::vector<float> ra(8), rb(8), rt(8), rs(8), rk(8);
    a->Fill(key, ra.data());
    b->Fill(key, rb.data());
    other_table->Fill(key, rt.data());
    other_seed->Fill(key, rs.data());
    a->Fill(key + 1, rk.data());
    EXPECT_EQ(ra, rb) << key;
    EXPECT_NE(ra, rt) << key;
    EXPECT_NE(ra, rs) << key;
    EXPECT_NE(ra, rk) << key;
    for (float v : ra) EXPECT_LT(std::abs(v), 0.05f * 8) << key;
  }
}

TEST(KeyedRowInitializerTest, TypesAndRanges) {
  InitializerSpec spec;
  spec.set_type(InitializerSpec::CONSTANT);
  spec.set_value(0.25);
  auto c = KeyedRowInitializer::Create(spec, "t", 3);
  ASSERT_TRUE(c.ok());
  std::vector<float> row(3);
  c->Fill(99, row.data());
  EXPECT_EQ(row, std::vector<float>(3, 0.25f));

  spec.set_type(InitializerSpec::RANDOM_UNIFORM);
  spec.set_minval(1);
  spec.set_maxval(2);
  auto u = KeyedRowInitializer::Create(spec, "t", 64);
  ASSERT_TRUE(u.ok());
  std::vector<float> wide(64);
  u->Fill(5, wide.data());
  for (float v : wide) {
    EXPECT_GE(v, 1.0f);
    EXPECT_LT(v, 2.0f);
  }

  spec.set_type(InitializerSpec::TRUNCATED_NORMAL);
  spec.set_mean(0);
  spec.set_stddev(1);
  auto tn = KeyedRowInitializer::Create(spec, "t", 64);
  ASSERT_TRUE(tn.ok());
  tn->Fill(5, wide.data());
  for (float v : wide) EXPECT_LE(std::abs(v), 2.0f);

  spec.set_type(InitializerSpec::GLOROT_UNIFORM);
  auto g = KeyedRowInitializer::Create(spec, "t", 4);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("GLOROT_UNIFORM"), std::string::npos);
  spec.set_type(InitializerSpec::ZEROS);
  EXPECT_EQ(KeyedRowInitializer::Create(spec, "t", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace shardps
