#include "model/dlrm/dlrm_batch.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(DedupIdsTest, FirstOccurrenceOrderAndPositions) {
  const std::vector<int32_t> offsets = {0, 3, 3, 5};  // example 1 has no ids
  const std::vector<int64_t> ids = {42, 7, 42, -5, 7};
  DedupedIds out;
  ASSERT_TRUE(DedupIds(offsets, ids, &out).ok());
  EXPECT_THAT(out.unique_ids, ElementsAre(42, 7, -5));
  EXPECT_THAT(out.positions, ElementsAre(0, 1, 0, 2, 1));
  EXPECT_THAT(out.offsets, ElementsAre(0, 3, 3, 5));

  // Reused: the old contents go.
  ASSERT_TRUE(DedupIds(std::vector<int32_t>{0, 1}, std::vector<int64_t>{9}, &out).ok());
  EXPECT_THAT(out.unique_ids, ElementsAre(9));
  EXPECT_THAT(out.positions, ElementsAre(0));

  const std::vector<float> rows = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(DedupIds(offsets, ids, &out).ok());
  const DlrmTableBatch view = TableBatchView(out, rows);
  EXPECT_EQ(view.num_rows, 3);
  EXPECT_EQ(view.positions.size(), 5u);
  EXPECT_EQ(view.rows.data(), rows.data());
}

TEST(DedupIdsTest, RejectsMalformedOffsets) {
  DedupedIds out;
  const std::vector<int64_t> ids = {1, 2};
  EXPECT_THAT(std::string(DedupIds({}, ids, &out).message()), HasSubstr("offsets is empty"));
  EXPECT_THAT(std::string(DedupIds(std::vector<int32_t>{1, 2}, ids, &out).message()),
              HasSubstr("offsets[0] = 1"));
  EXPECT_THAT(std::string(DedupIds(std::vector<int32_t>{0, 2, 1}, ids, &out).message()),
              HasSubstr("offsets[2] = 1 < offsets[1] = 2"));
  EXPECT_THAT(std::string(DedupIds(std::vector<int32_t>{0, 1}, ids, &out).message()),
              HasSubstr("offsets end at 1 but there are 2 ids"));
}

TEST(ValidateDlrmBatchTest, AcceptsGoodAndNamesBad) {
  DlrmSpec spec;
  spec.num_dense = 2;
  spec.tables = {{"user", 0, 2, DlrmPooling::kMean}};
  const std::vector<float> dense = {1, 2, 3, 4}, labels = {0, 1}, rows = {1, 2, 3, 4};
  const std::vector<int32_t> offsets = {0, 0, 2}, positions = {1, 0};
  DlrmBatch batch;
  batch.batch = 2;
  batch.dense = dense;
  batch.labels = labels;
  batch.tables = {{rows, 2, offsets, positions}};
  EXPECT_TRUE(ValidateDlrmBatch(spec, batch).ok()) << ValidateDlrmBatch(spec, batch);

  auto expect = [&](const DlrmBatch& b, const std::string& text) {
    const absl::Status s = ValidateDlrmBatch(spec, b);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(text));
  };
  DlrmBatch b = batch;
  b.batch = 0;
  expect(b, "batch = 0");
  b = batch;
  b.tables[0].num_rows = 3;
  expect(b, "table \"user\" rows has 4 floats, expected num_rows x dim = 3 x 2");
  b = batch;
  const std::vector<int32_t> bad_pos = {1, -1};
  b.tables[0].positions = bad_pos;
  expect(b, "table \"user\" positions[1] = -1");
  b = batch;
  const std::vector<float> nan_dense = {1, 2, 3, std::nanf("")};
  b.dense = nan_dense;
  expect(b, "dense feature 1 of example 1 is not finite");
  b = batch;
  const std::vector<float> bad_labels = {0, -0.5f};
  b.labels = bad_labels;
  expect(b, "label -0.5 of example 1");
}

}  // namespace
}  // namespace shardps
