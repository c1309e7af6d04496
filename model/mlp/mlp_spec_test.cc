#include "model/mlp/mlp_spec.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ModelTest, ParsesSoftmax) {
  absl::StatusOr<MlpSpec> spec = ParseMlpSpec("softmax", 784, 10);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->input_dim, 784);
  EXPECT_TRUE(spec->hidden.empty());
  EXPECT_EQ(spec->num_classes, 10);
  EXPECT_EQ(MlpSpecToString(*spec), "softmax");
}

TEST(ModelTest, ParsesMlp) {
  absl::StatusOr<MlpSpec> spec = ParseMlpSpec("mlp:256,128", 784, 10);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->hidden, ElementsAre(256, 128));
  EXPECT_THAT(spec->LayerDims(), ElementsAre(784, 256, 128, 10));
  EXPECT_EQ(spec->num_layers(), 3);
  EXPECT_EQ(MlpSpecToString(*spec), "mlp:256,128");
}

TEST(ModelTest, RejectsBadText) {
  for (const char* text : {"", "mlp", "mlp:", "mlp:256,", "mlp:0", "mlp:-3", "mlp:12x", "cnn"}) {
    absl::StatusOr<MlpSpec> spec = ParseMlpSpec(text, 784, 10);
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(spec.status().message(), HasSubstr(std::string("\"") + text + "\"")) << text;
  }
}

TEST(ModelTest, RejectsBadDims) {
  EXPECT_THAT(ParseMlpSpec("softmax", 0, 10).status().message(), HasSubstr("input_dim"));
  EXPECT_THAT(ParseMlpSpec("softmax", 784, 1).status().message(), HasSubstr("num_classes"));
  EXPECT_FALSE(ValidateMlpSpec(MlpSpec{4, {3, 0}, 2}).ok());
  EXPECT_TRUE(ValidateMlpSpec(MlpSpec{4, {3, 5}, 2}).ok());
}

TEST(ModelTest, ParamsInOrder) {
  std::vector<ParamInfo> params = Params(MlpSpec{784, {256, 128}, 10});
  ASSERT_EQ(params.size(), 6u);
  EXPECT_EQ(params[0].name, "dense_0/kernel");
  EXPECT_THAT(params[0].shape, ElementsAre(784, 256));
  EXPECT_EQ(params[1].name, "dense_0/bias");
  EXPECT_THAT(params[1].shape, ElementsAre(256));
  EXPECT_EQ(params[2].name, "dense_1/kernel");
  EXPECT_THAT(params[2].shape, ElementsAre(256, 128));
  EXPECT_EQ(params[5].name, "dense_2/bias");
  EXPECT_THAT(params[5].shape, ElementsAre(10));
  EXPECT_EQ(params[4].num_elements(), 1280);

  std::vector<ParamInfo> softmax = Params(MlpSpec{784, {}, 10});
  ASSERT_EQ(softmax.size(), 2u);
  EXPECT_EQ(softmax[0].name, "dense_0/kernel");
  EXPECT_THAT(softmax[0].shape, ElementsAre(784, 10));
}

}  // namespace
}  // namespace shardps
