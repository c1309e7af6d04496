#include "common/status_macros.h"

#include "gtest/gtest.h"

namespace shardps {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::Status Quarter(int x, int* out) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(*out, Half(h));
  return absl::OkStatus();
}

absl::Status Check(bool fail) {
  RETURN_IF_ERROR(fail ? absl::NotFoundError("x") : absl::OkStatus());
  return absl::OkStatus();
}

TEST(StatusMacrosTest, AssignOrReturnPropagatesError) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  EXPECT_EQ(Quarter(6, &out).code(), absl::StatusCode::kInvalidArgument);
}

TEST(StatusMacrosTest, ReturnIfError) {
  EXPECT_TRUE(Check(false).ok());
  EXPECT_EQ(Check(true).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace shardps
