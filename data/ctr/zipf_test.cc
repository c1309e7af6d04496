#include "data/ctr/zipf.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

// |observed - expected| within 5 binomial standard deviations (plus a little slack).
void ExpectFrequency(int64_t observed, int64_t draws, double p, const std::string& what) {
  const double expected = p * draws;
  const double sd = std::sqrt(draws * p * (1 - p));
  EXPECT_NEAR(static_cast<double>(observed), expected, 5 * sd + 2) << what;
}

TEST(ZipfTest, TopRanksAndTailFollowThePowerLaw) {
  const int64_t n = 1000000;
  auto zipf = ZipfSampler::Create(n, 1.1);
  ASSERT_TRUE(zipf.ok()) << zipf.status();
  // Probabilities decay as (r+1)^-1.1.
  EXPECT_NEAR(zipf->Probability(0) / zipf->Probability(9), std::pow(10.0, 1.1), 1e-9);
  SplitMix64 rng(42);
  const int draws = 400000;
  std::vector<int64_t> top(10, 0);
  int64_t tail = 0;       // ranks >= 4096 (mostly the rejection-inversion part)
  int64_t band = 0;       // ranks in [10000, 20000)
  for (int k = 0; k < draws; ++k) {
    const int64_t r = zipf->Sample(rng);
    ASSERT_GE(r, 0);
    ASSERT_LT(r, n);
    if (r < 10) ++top[r];
    if (r >= 4096) ++tail;
    if (r >= 10000 && r < 20000) ++band;
  }
  for (int r = 0; r < 10; ++r) {
    ExpectFrequency(top[r], draws, zipf->Probability(r), "rank " + std::to_string(r));
  }
  double head_mass = 0;
  for (int r = 0; r < 4096; ++r) head_mass += zipf->Probability(r);
  ExpectFrequency(tail, draws, 1 - head_mass, "tail");
  double band_mass = 0;
  for (int r = 10000; r < 20000; ++r) band_mass += zipf->Probability(r);
  ExpectFrequency(band, draws, band_mass, "band");
  // The probabilities sum to 1 (Euler-Maclaurin tail).
  double total = head_mass;
  for (int64_t r = 4096; r < n; ++r) total += zipf->Probability(r);
  EXPECT_NEAR(total, 1.0, 1e-9);
}

TEST(ZipfTest, SmallVocabulariesAndExponentEdges) {
  auto uniform = ZipfSampler::Create(10, 0.0);
  ASSERT_TRUE(uniform.ok());
  SplitMix64 rng(1);
  std::vector<int64_t> counts(10, 0);
  for (int k = 0; k < 100000; ++k) ++counts[uniform->Sample(rng)];
  for (int r = 0; r < 10; ++r) ExpectFrequency(counts[r], 100000, 0.1, "uniform");

  auto one = ZipfSampler::Create(1, 1.1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->Sample(rng), 0);

  // s = 1 exactly and a 10^9 vocabulary: the tail sampler's special cases.
  auto big = ZipfSampler::Create(1000000000, 1.0);
  ASSERT_TRUE(big.ok());
  int64_t beyond = 0;
  for (int k = 0; k < 100000; ++k) {
    const int64_t r = big->Sample(rng);
    ASSERT_LT(r, 1000000000);
    if (r >= 100000000) ++beyond;
  }
  double p_beyond = 0;  // sum_{k > 10^8} 1/k over H_n, about ln(10) / H_{10^9}
  p_beyond = std::log(10.0) / (std::log(1e9) + 0.5772156649);
  ExpectFrequency(beyond, 100000, p_beyond, "beyond 1e8");
}

TEST(ZipfTest, RejectsBadParameters) {
  EXPECT_FALSE(ZipfSampler::Create(0, 1.1).ok());
  EXPECT_FALSE(ZipfSampler::Create(10, -1).ok());
  EXPECT_FALSE(ZipfSampler::Create(10, NAN).ok());
}

}  // namespace
}  // namespace shardps
