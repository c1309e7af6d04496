#include "common/error_detail.h"

#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(ErrorDetailTest, RoundTripsOnStatus) {
  ErrorDetail detail;
  detail.set_kind(ErrorDetail::PS_UNAVAILABLE);
  detail.set_ps_task(3);
  detail.set_ps_incarnation(77);
  absl::Status s = WithDetail(absl::UnavailableError("ps:3 down"), detail);
  std::optional<ErrorDetail> got = GetDetail(s);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->kind(), ErrorDetail::PS_UNAVAILABLE);
  EXPECT_EQ(got->ps_task(), 3);
  EXPECT_EQ(got->ps_incarnation(), 77u);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "ps:3 down");
}

TEST(ErrorDetailTest, NoDetailIsUnspecified) {
  EXPECT_FALSE(GetDetail(absl::AbortedError("x")).has_value());
  EXPECT_EQ(DetailKind(absl::AbortedError("x")), ErrorDetail::UNSPECIFIED);
  EXPECT_EQ(DetailKind(absl::OkStatus()), ErrorDetail::UNSPECIFIED);
}

TEST(ErrorDetailTest, OkStaysOk) {
  EXPECT_TRUE(WithDetail(absl::OkStatus(), ErrorDetail::STALE_STEP).ok());
  EXPECT_TRUE(Annotate(absl::OkStatus(), "step 3").ok());
}

TEST(ErrorDetailTest, LaterDetailReplacesEarlier) {
  absl::Status s = WithDetail(absl::AbortedError("x"), ErrorDetail::STALE_STEP);
  s = WithDetail(s, ErrorDetail::STALE_GENERATION, 1);
  EXPECT_EQ(DetailKind(s), ErrorDetail::STALE_GENERATION);
  EXPECT_EQ(GetDetail(s)->ps_task(), 1);
}

TEST(ErrorDetailTest, AnnotateKeepsCodeAndDetail) {
  absl::Status s = WithDetail(absl::NotFoundError("no such shard"), ErrorDetail::PS_STATE_LOST, 1);
  absl::Status a = Annotate(s, "step 12");
  EXPECT_EQ(a.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(a.message(), "step 12: no such shard");
  EXPECT_EQ(DetailKind(a), ErrorDetail::PS_STATE_LOST);
  EXPECT_EQ(GetDetail(a)->ps_task(), 1);
}

TEST(ErrorDetailTest, GarbagePayloadIsNoDetail) {
  absl::Status s = absl::AbortedError("x");
  s.SetPayload(kErrorDetailUrl, absl::Cord("\xff\xff\xff"));
  EXPECT_FALSE(GetDetail(s).has_value());
}

}  // namespace
}  // namespace shardps
