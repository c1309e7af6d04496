#include "ps_server/memory_budget.h"

#include <string>

#include "absl/strings/match.h"
#include "common/error_detail.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(MemoryBudgetTest, ReservesUpToTheBudgetLessTheSnapshotReserve) {
  MemoryBudget budget(1000, 0.5, /*ps_task=*/3);
  EXPECT_EQ(budget.limit_bytes(), 500);
  EXPECT_TRUE(budget.Reserve(300, "variable 'a'").ok());
  EXPECT_EQ(budget.available_bytes(), 200);
  const absl::Status s = budget.Reserve(201, "variable 'b' (shard 'b/part_1')");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  for (const char* needle : {"'b/part_1'", "201 bytes", "200 bytes available", "ps task 3",
                             "--memory_budget_bytes=1000"}) {
    EXPECT_TRUE(absl::StrContains(s.message(), needle)) << needle << " not in " << s;
  }
  const auto detail = GetDetail(s);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->kind(), ErrorDetail::LIMIT);
  EXPECT_EQ(detail->limit(), "--memory_budget_bytes");
  EXPECT_EQ(detail->ps_task(), 3);
  EXPECT_EQ(budget.used_bytes(), 300);  // the refusal reserved nothing
  EXPECT_TRUE(budget.Reserve(200, "variable 'b'").ok());
  budget.Release(300);
  EXPECT_EQ(budget.available_bytes(), 300);
}

TEST(MemoryBudgetTest, NoBudgetAcceptsEverything) {
  MemoryBudget budget(0, 0.5, 0);
  EXPECT_TRUE(budget.Reserve(int64_t{1} << 50, "huge").ok());
  EXPECT_EQ(budget.available_bytes(), 0);
  EXPECT_EQ(budget.used_bytes(), int64_t{1} << 50);
}

TEST(MemoryBudgetTest, ValidateNamesTheOption) {
  EXPECT_TRUE(MemoryBudget::Validate(0, 0).ok());
  EXPECT_TRUE(absl::StrContains(MemoryBudget::Validate(-1, 0.5).message(),
                                "memory_budget_bytes"));
  EXPECT_TRUE(absl::StrContains(MemoryBudget::Validate(10, 1.0).message(), "snapshot_reserve"));
  EXPECT_FALSE(MemoryBudget::Validate(10, -0.1).ok());
}

TEST(MemoryBudgetTest, AReservationReturnsWhatItDoesNotKeep) {
  MemoryBudget budget(1000, 0.5, 0);
  {
    BudgetReservation reservation(&budget);
    ASSERT_TRUE(reservation.Add(100, "variable 'a'").ok());
    ASSERT_TRUE(reservation.Add(200, "variable 'b'").ok());
    EXPECT_EQ(reservation.Add(300, "variable 'c'").code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(budget.used_bytes(), 300);
    reservation.Keep(200);
  }
  EXPECT_EQ(budget.used_bytes(), 200);
}

}  // namespace
}  // namespace shardps
