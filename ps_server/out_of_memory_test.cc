#include "ps_server/out_of_memory.h"

#include <new>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(OutOfMemoryTest, GuardedPassesStatusesOnAndTurnsBadAllocIntoResourceExhausted) {
  EXPECT_EQ(Guarded("list shards", [] { return absl::NotFoundError("x"); }).code(),
            absl::StatusCode::kNotFound);
  const absl::Status s = Guarded("list shards", []() -> absl::Status { throw std::bad_alloc(); });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "list shards: the ps ran out of memory; nothing was changed by this request");
  const absl::Status shard =
      Guarded("push to", "w", []() -> absl::Status { throw std::bad_alloc(); });
  EXPECT_TRUE(absl::StrContains(shard.message(), "push to shard 'w': the ps ran out of memory"))
      << shard;
}

}  // namespace
}  // namespace shardps
