#include "client/ps_call_error.h"

#include <optional>

#include "common/error_detail.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

PsCall Call(bool layout_shards, bool deadline_passed) {
  PsCall call;
  call.ps_task = 1;
  call.ps_name = "ps:1 (127.0.0.1:2223)";
  call.layout_shards = layout_shards;
  call.deadline_passed = deadline_passed;
  return call;
}

TEST(PsCallErrorTest, OkStaysOk) {
  EXPECT_TRUE(PsCallError(absl::OkStatus(), Call(true, true)).ok());
}

TEST(PsCallErrorTest, UnreachablePsIsPsUnavailableNamingIt) {
  absl::Status s = PsCallError(absl::UnavailableError("connection refused"), Call(false, false));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "ps:1 (127.0.0.1:2223): connection refused");
  std::optional<ErrorDetail> detail = GetDetail(s);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->kind(), ErrorDetail::PS_UNAVAILABLE);
  EXPECT_EQ(detail->ps_task(), 1);
}

TEST(PsCallErrorTest, DeadlineExceededIsPsUnavailableOnlyOnceTheCallsDeadlinePassed) {
  absl::Status late = PsCallError(absl::DeadlineExceededError("deadline"), Call(true, true));
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(DetailKind(late), ErrorDetail::PS_UNAVAILABLE);
  // Before the deadline it is the ps's own answer: a pull's version wait ran out.
  absl::Status early =
      PsCallError(absl::DeadlineExceededError("version 3 did not reach 5"), Call(true, false));
  EXPECT_EQ(early.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(GetDetail(early).has_value());
  EXPECT_EQ(early.message(), "ps:1 (127.0.0.1:2223): version 3 did not reach 5");
}

TEST(PsCallErrorTest, NotFoundOfALayoutShardIsPsStateLost) {
  absl::Status s = PsCallError(absl::NotFoundError("\"w/part_1\": no such shard on ps task 1"),
                               Call(true, false));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  std::optional<ErrorDetail> detail = GetDetail(s);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->kind(), ErrorDetail::PS_STATE_LOST);
  EXPECT_EQ(detail->ps_task(), 1);
  // Not a data call: NOT_FOUND says nothing about the ps's state.
  EXPECT_FALSE(GetDetail(PsCallError(absl::NotFoundError("no"), Call(false, false))).has_value());
}

TEST(PsCallErrorTest, ADetailThePsSetIsKept) {
  ErrorDetail stale;
  stale.set_kind(ErrorDetail::STALE_GENERATION);
  stale.set_generation(4);
  absl::Status s = PsCallError(WithDetail(absl::UnavailableError("x"), stale), Call(true, true));
  std::optional<ErrorDetail> detail = GetDetail(s);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->kind(), ErrorDetail::STALE_GENERATION);
  EXPECT_EQ(detail->generation(), 4);
}

TEST(PsCallErrorTest, OtherErrorsAreOnlyNamed) {
  absl::Status s = PsCallError(absl::InvalidArgumentError("bad shape"), Call(true, true));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "ps:1 (127.0.0.1:2223): bad shape");
  EXPECT_FALSE(GetDetail(s).has_value());
}

}  // namespace
}  // namespace shardps
