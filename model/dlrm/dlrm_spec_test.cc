#include "model/dlrm/dlrm_spec.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

std::vector<DlrmTableSchema> Tables(int n, int64_t vocab = 1000) {
  std::vector<DlrmTableSchema> t;
  for (int i = 0; i < n; ++i) t.push_back({"C" + std::to_string(i + 1), vocab});
  return t;
}

void ExpectInvalid(absl::string_view text, int num_dense, int tables, const std::string& part) {
  auto spec = ParseDlrmSpec(text, num_dense, Tables(tables));
  ASSERT_FALSE(spec.ok()) << text;
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr(part)) << text;
}

TEST(DlrmSpecTest, ParsesTheExample) {
  auto spec = ParseDlrmSpec("dlrm:bottom=64,16;top=64,32;interaction=dot;pooling=sum;dim=16",
                            13, Tables(26));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->num_dense, 13);
  EXPECT_EQ(spec->bottom, (std::vector<int>{64, 16}));
  EXPECT_EQ(spec->top, (std::vector<int>{64, 32}));
  EXPECT_EQ(spec->interaction, DlrmInteraction::kDot);
  ASSERT_EQ(spec->tables.size(), 26u);
  EXPECT_EQ(spec->tables[25].name, "C26");
  EXPECT_EQ(spec->tables[25].vocab_size, 1000);
  EXPECT_EQ(spec->tables[25].dim, 16);
  EXPECT_EQ(spec->NumVectors(), 27);
  EXPECT_EQ(spec->InteractionWidth(), 16 + 27 * 26 / 2);
  EXPECT_EQ(spec->VectorsWidth(), 16 * 27);
  EXPECT_EQ(spec->TableColumn(2), 16 + 32);
}

TEST(DlrmSpecTest, DefaultsAndOverrides) {
  auto spec = ParseDlrmSpec("dlrm:top=8;dim.C2=4;pooling.C3=mean", 0, Tables(3));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->bottom.empty());
  EXPECT_EQ(spec->interaction, DlrmInteraction::kConcat);
  EXPECT_EQ(spec->tables[0].dim, 16);
  EXPECT_EQ(spec->tables[1].dim, 4);
  EXPECT_EQ(spec->tables[2].pooling, DlrmPooling::kMean);
  EXPECT_EQ(spec->tables[0].pooling, DlrmPooling::kSum);
  EXPECT_EQ(spec->InteractionWidth(), 16 + 4 + 16);
  auto bare = ParseDlrmSpec("dlrm:", 5, {});
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->InteractionWidth(), 5);
}

TEST(DlrmSpecTest, ToStringIsTheInverse) {
  for (const char* text : {"dlrm:bottom=64,16;top=64,32;interaction=dot;pooling=sum;dim=16",
                           "dlrm:bottom=;top=;interaction=concat;pooling=mean;dim=8;dim.C2=3;"
                           "pooling.C3=sum",
                           "dlrm:top=512,256;bottom=512,256,64;interaction=dot;dim=64"}) {
    const int num_dense = 13;
    auto spec = ParseDlrmSpec(text, num_dense, Tables(3));
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.status();
    const std::string out = DlrmSpecToString(*spec);
    auto again = ParseDlrmSpec(out, num_dense, Tables(3));
    ASSERT_TRUE(again.ok()) << out << ": " << again.status();
    EXPECT_EQ(*again, *spec) << out;
  }
  auto spec = ParseDlrmSpec("dlrm:bottom=4;top=2;interaction=dot;dim=4", 3, Tables(2));
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(DlrmSpecToString(*spec), "dlrm:bottom=4;top=2;interaction=dot;pooling=sum;dim=4");
}

TEST(DlrmSpecTest, RejectsBadTextNamingTheKey) {
  ExpectInvalid("bottom=1", 1, 1, "does not start with \"dlrm:\"");
  ExpectInvalid("dlrm:bottom=4,x", 1, 1, "key \"bottom\" value \"x\": not an integer");
  ExpectInvalid("dlrm:top=0", 1, 1, "key \"top\" value \"0\": out of range");
  ExpectInvalid("dlrm:interaction=cross", 1, 1, "key \"interaction\"");
  ExpectInvalid("dlrm:pooling=max", 1, 1, "key \"pooling\" value \"max\"");
  ExpectInvalid("dlrm:dim=0", 1, 1, "key \"dim\"");
  ExpectInvalid("dlrm:dim.C9=4", 1, 2, "no table named \"C9\"");
  ExpectInvalid("dlrm:pooling.C1=avg", 1, 2, "key \"pooling.C1\"");
  ExpectInvalid("dlrm:color=red", 1, 1, "key \"color\" value \"red\": unknown key");
  ExpectInvalid("dlrm:dim=4;dim=8", 1, 1, "key \"dim\" value \"8\": repeated key");
  ExpectInvalid("dlrm:bottom", 1, 1, "\"bottom\" is not key=value");
  ExpectInvalid("dlrm:bottom=8", 0, 1, "no dense features");
  ExpectInvalid("dlrm:", 0, 0, "no input");
  ExpectInvalid("dlrm:bottom=8;interaction=dot;dim=4", 3, 2,
                "table \"C1\" has dim 4 and the bottom output has 8");
  ExpectInvalid("dlrm:interaction=dot;dim.C2=4", 0, 2,
                "table \"C2\" has dim 4 and table \"C1\" has 16");
}

TEST(DlrmSpecTest, ValidateRejectsBadTables) {
  DlrmSpec spec;
  spec.num_dense = 1;
  spec.tables = {{"a", 10, 4, DlrmPooling::kSum}, {"a", 10, 4, DlrmPooling::kSum}};
  EXPECT_THAT(std::string(ValidateDlrmSpec(spec).message()), HasSubstr("\"a\" is used twice"));
  spec.tables = {{"a b", 10, 4, DlrmPooling::kSum}};
  EXPECT_THAT(std::string(ValidateDlrmSpec(spec).message()), HasSubstr("bad name \"a b\""));
  spec.tables = {{"a", -1, 4, DlrmPooling::kSum}};
  EXPECT_THAT(std::string(ValidateDlrmSpec(spec).message()), HasSubstr("vocab_size = -1"));
  spec.tables = {{"a", 10, 4, DlrmPooling::kSum}};
  spec.top = {3, -2};
  EXPECT_THAT(std::string(ValidateDlrmSpec(spec).message()), HasSubstr("top[1] = -2"));
}

TEST(DlrmSpecTest, DenseParamsInFixedOrder) {
  auto spec = ParseDlrmSpec("dlrm:bottom=8,4;top=6;interaction=dot;dim=4", 3, Tables(2));
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::vector<DlrmParamInfo> params = DlrmDenseParams(*spec);
  std::vector<std::string> names;
  for (const auto& p : params) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"bottom_0/kernel", "bottom_0/bias",
                                             "bottom_1/kernel", "bottom_1/bias", "top_0/kernel",
                                             "top_0/bias", "top_1/kernel", "top_1/bias"}));
  EXPECT_EQ(params[0].shape, (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(params[3].shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(params[4].shape, (std::vector<int64_t>{4 + 3, 6}));  // 3 vectors: 3 pairs
  EXPECT_EQ(params[6].shape, (std::vector<int64_t>{6, 1}));
  EXPECT_EQ(params[7].num_elements(), 1);

  std::vector<std::vector<float>> storage;
  for (const auto& p : params) storage.emplace_back(p.num_elements());
  std::vector<absl::Span<const float>> spans(storage.begin(), storage.end());
  EXPECT_TRUE(CheckDlrmDenseParams(*spec, spans).ok());
  spans[5] = {};
  const absl::Status s = CheckDlrmDenseParams(*spec, spans);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("top_0/bias has 0 floats (null)"));
}

}  // namespace
}  // namespace shardps
