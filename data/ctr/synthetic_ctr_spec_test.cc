#include "data/ctr/synthetic_ctr_spec.h"

#include <numeric>

#include "gtest/gtest.h"

namespace shardps {
namespace {

void ExpectError(const std::string& spec, const std::string& fragment) {
  auto config = ParseSyntheticCtrSpec(spec);
  ASSERT_FALSE(config.ok()) << spec;
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find(fragment), std::string::npos)
      << spec << ": " << config.status().message();
}

TEST(SyntheticCtrSpecTest, ParsesKeysAndLists) {
  auto c = ParseSyntheticCtrSpec(
      "synthetic_ctr:examples=5000,dense=4,vocab=1000|20|300,hot=1|1..3|2,zipf=1.2,seed=9,"
      "click_rate=0.1,ids=hashed,missing=0.25,offset=100,signal=3,interaction=0.5,dim=8");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_examples, 5000);
  EXPECT_EQ(c->offset, 100);
  EXPECT_EQ(c->num_dense, 4);
  ASSERT_EQ(c->features.size(), 3u);
  EXPECT_EQ(c->features[1].vocab_size, 20);
  EXPECT_EQ(c->features[1].hotness, 3);
  EXPECT_TRUE(c->features[1].variable_hotness);
  EXPECT_EQ(c->features[2].hotness, 2);
  EXPECT_FALSE(c->features[2].variable_hotness);
  EXPECT_DOUBLE_EQ(c->zipf, 1.2);
  EXPECT_EQ(c->seed, 9u);
  EXPECT_TRUE(c->hashed_ids);
  EXPECT_DOUBLE_EQ(c->missing, 0.25);
  EXPECT_EQ(c->dim, 8);
}

TEST(SyntheticCtrSpecTest, DefaultsAndSingleValues) {
  auto c = ParseSyntheticCtrSpec("vocab=500,tables=3");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_dense, 13);
  ASSERT_EQ(c->features.size(), 3u);
  for (const auto& f : c->features) EXPECT_EQ(f.vocab_size, 500);
  EXPECT_DOUBLE_EQ(c->zipf, 1.1);
  auto d = ParseSyntheticCtrSpec("synthetic_ctr:");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->features.size(), 26u);
}

TEST(SyntheticCtrSpecTest, CriteoLikePresetAndScale) {
  const std::vector<int64_t> sizes = CriteoLikeVocabSizes();
  ASSERT_EQ(sizes.size(), 26u);
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  EXPECT_GT(total, 19000000);
  EXPECT_LT(total, 21000000);
  EXPECT_EQ(*std::min_element(sizes.begin(), sizes.end()), 3);
  auto c = ParseSyntheticCtrSpec("synthetic_ctr:preset=criteo_like,scale=2,examples=10");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_dense, 13);
  ASSERT_EQ(c->features.size(), 26u);
  EXPECT_EQ(c->features[2].vocab_size, 2 * sizes[2]);
  auto small = ParseSyntheticCtrSpec("preset=criteo_like,scale=0.001,dense=2");
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->num_dense, 2);  // later keys override the preset
  EXPECT_EQ(small->features[8].vocab_size, 1);
}

TEST(SyntheticCtrSpecTest, ErrorsNameTheKey) {
  ExpectError("synthetic_ctr:examples=0", "key \"examples\"");
  ExpectError("synthetic_ctr:examples=abc", "key \"examples\"");
  ExpectError("synthetic_ctr:vocab=10|x", "key \"vocab\"");
  ExpectError("synthetic_ctr:vocab=10|20,tables=3", "key \"vocab\"");
  ExpectError("synthetic_ctr:hot=1|2,vocab=1|2|3", "key \"hot\"");
  ExpectError("synthetic_ctr:hot=0", "key \"hot\"");
  ExpectError("synthetic_ctr:zipf=-1", "key \"zipf\"");
  ExpectError("synthetic_ctr:click_rate=1.5", "key \"click_rate\"");
  ExpectError("synthetic_ctr:ids=sparse", "key \"ids\"");
  ExpectError("synthetic_ctr:preset=kaggle", "key \"preset\"");
  ExpectError("synthetic_ctr:colour=red", "unknown key \"colour\"");
  ExpectError("synthetic_ctr:seed=1,seed=2", "key \"seed\" given twice");
  ExpectError("synthetic_ctr:seed", "not key=value");
}

TEST(SyntheticCtrSpecTest, FormatRoundTrips) {
  auto c = ParseSyntheticCtrSpec(
      "vocab=1000|20|300,hot=1|1..3|2,zipf=1.05,click_rate=0.123456789,seed=18446744073709551615");
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string text = FormatSyntheticCtrSpec(*c);
  auto back = ParseSyntheticCtrSpec(text);
  ASSERT_TRUE(back.ok()) << back.status() << " " << text;
  EXPECT_EQ(FormatSyntheticCtrSpec(*back), text);
  EXPECT_EQ(back->seed, c->seed);
  EXPECT_EQ(back->click_rate, c->click_rate);
  EXPECT_EQ(back->features[1].variable_hotness, true);
}

}  // namespace
}  // namespace shardps
