#include "data/ctr/ctr_batch.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

CtrSchema TwoFeatures() {
  CtrSchema schema;
  schema.num_dense = 2;
  schema.features = {{"a", 10, 1}, {"b", 0, 3}};
  return schema;
}

TEST(CtrBatchTest, BuildsCsrAndValidates) {
  const CtrSchema schema = TwoFeatures();
  CtrBatch batch;
  batch.Reset(schema, 2);
  const float row0[] = {1, 2};
  batch.BeginExample(1, row0, 2);
  batch.AddId(0, 7);
  batch.AddId(1, -5);
  batch.AddId(1, 3);
  batch.EndExample();
  const float row1[] = {3, 4};
  batch.BeginExample(0, row1, 2);  // feature a missing, b one id
  batch.AddId(1, 9);
  batch.EndExample();
  EXPECT_EQ(batch.size, 2);
  EXPECT_EQ(batch.features[0].offsets, (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(batch.features[1].offsets, (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(batch.features[1].ids, (std::vector<int64_t>{-5, 3, 9}));
  EXPECT_EQ(batch.dense, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_TRUE(ValidateBatch(schema, batch).ok());

  CtrBatch bad = batch;
  bad.features[0].ids[0] = 10;
  EXPECT_NE(ValidateBatch(schema, bad).message().find("id 10 outside [0, 10)"),
            std::string::npos);
  bad = batch;
  bad.labels[1] = 0.5f;
  EXPECT_FALSE(ValidateBatch(schema, bad).ok());
  bad = batch;
  bad.features[0].ids.push_back(1);  // example 0 gets 2 ids of a one-hot feature
  bad.features[0].offsets = {0, 2, 2};
  EXPECT_NE(ValidateBatch(schema, bad).message().find("max_hotness"), std::string::npos);

  // Reset keeps capacity and empties.
  const int64_t* ids_data = batch.features[1].ids.data();
  batch.Reset(schema, 2);
  EXPECT_EQ(batch.size, 0);
  EXPECT_EQ(batch.features[1].offsets, (std::vector<int64_t>{0}));
  EXPECT_EQ(batch.features[1].ids.data(), ids_data);
}

TEST(CtrBatchTest, SchemaValidation) {
  CtrSchema schema = TwoFeatures();
  EXPECT_TRUE(ValidateSchema(schema).ok());
  schema.features[1].name = "a";
  EXPECT_NE(ValidateSchema(schema).message().find("duplicate"), std::string::npos);
  schema = TwoFeatures();
  schema.features[0].max_hotness = 0;
  EXPECT_NE(ValidateSchema(schema).message().find("max_hotness"), std::string::npos);
  schema = TwoFeatures();
  schema.features[0].vocab_size = -1;
  EXPECT_FALSE(ValidateSchema(schema).ok());
}

// A schema's max_hotness bounds an example's ids; Reset reserved capacity x max_hotness ids,
// 2^37 bytes for a ctrbin file's header saying 2^31 - 1 (fuzz/ctr_binary_fuzzer; its
// regression case regression_max_hotness).
TEST(CtrBatchTest, ResetDoesNotReserveByMaxHotness) {
  CtrSchema schema = TwoFeatures();
  schema.features[1].max_hotness = 0x7fffffff;
  ASSERT_TRUE(ValidateSchema(schema).ok());
  CtrBatch batch;
  batch.Reset(schema, 64);
  EXPECT_EQ(batch.size, 0);
  ASSERT_EQ(batch.features.size(), 2u);
  EXPECT_LE(batch.features[1].ids.capacity(), 64u * 64u);
  const float dense[2] = {1, 2};
  batch.BeginExample(1, dense, 2);
  for (int64_t id = 0; id < 100; ++id) batch.AddId(1, id);
  batch.EndExample();
  EXPECT_TRUE(ValidateBatch(schema, batch).ok());
  EXPECT_EQ(batch.features[1].ids.size(), 100u);
}

TEST(CtrBatchTest, IndexChecksNameTheIndex) {
  const std::vector<int64_t> indices = {0, 4, 5};
  const absl::Status status = CheckExampleIndices(indices, 5);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("example index 5 (position 2)"), std::string::npos);
  EXPECT_TRUE(CheckExampleIndices(indices, 6).ok());
}

TEST(CtrBatchTest, DenseTransformIsLog1pOfPositivePart) {
  EXPECT_EQ(CriteoDenseValue(-3), 0.0f);
  EXPECT_EQ(CriteoDenseValue(0), 0.0f);
  EXPECT_FLOAT_EQ(CriteoDenseValue(1), static_cast<float>(std::log(2.0)));
}

}  // namespace
}  // namespace shardps
