#include "ps_server/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

// The pieces a Run calls, sorted.
std::vector<std::pair<int64_t, int64_t>> Pieces(ParallelFor& parallel, int64_t n,
                                                int64_t grain, int64_t align) {
  absl::Mutex mu;
  std::vector<std::pair<int64_t, int64_t>> pieces;
  parallel.Run(n, grain, align, [&](int64_t begin, int64_t end) {
    absl::MutexLock lock(&mu);
    pieces.emplace_back(begin, end);
  });
  std::sort(pieces.begin(), pieces.end());
  return pieces;
}

TEST(ParallelForTest, PiecesCoverTheRangeOnceAlignedAndAtLeastAGrain) {
  ParallelFor parallel(3);
  for (int64_t n : {int64_t{0}, int64_t{5}, int64_t{999}, int64_t{4096}, int64_t{100003}}) {
    const auto pieces = Pieces(parallel, n, /*grain=*/100, /*align=*/16);
    ASSERT_FALSE(pieces.empty()) << n;
    EXPECT_LE(pieces.size(), 4u) << n;
    int64_t expected_begin = 0;
    for (size_t i = 0; i < pieces.size(); ++i) {
      EXPECT_EQ(pieces[i].first, expected_begin) << n;
      if (i > 0) {
        EXPECT_EQ(pieces[i].first % 16, 0) << n;
      }
      if (pieces.size() > 1) {
        EXPECT_GE(pieces[i].second - pieces[i].first, 100 - 16) << n;
      }
      expected_begin = pieces[i].second;
    }
    EXPECT_EQ(expected_begin, n);
  }
}

TEST(ParallelForTest, SmallRunsStayOnTheCallersThread) {
  ParallelFor parallel(2);
  const std::thread::id caller = std::this_thread::get_id();
  int calls = 0;
  parallel.Run(150, /*grain=*/100, 1, [&](int64_t begin, int64_t end) {
    ++calls;
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 150);
  });
  EXPECT_EQ(calls, 1);
}

TEST(ParallelForTest, NoHelpersMeansOnePiece) {
  ParallelFor parallel(0);
  EXPECT_EQ(Pieces(parallel, 1 << 20, 1, 1).size(), 1u);
}

TEST(ParallelForTest, ConcurrentCallersEachGetEveryElementOnce) {
  ParallelFor parallel(2);
  constexpr int kCallers = 4;
  constexpr int64_t kN = 1 << 16;
  std::vector<std::vector<std::atomic<int>>> hits(kCallers);
  for (auto& h : hits) h = std::vector<std::atomic<int>>(kN);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int rep = 0; rep < 20; ++rep) {
        parallel.Run(kN, 1024, 8, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) hits[c][i].fetch_add(1);
        });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) {
    for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(hits[c][i].load(), 20) << c << " " << i;
  }
}

TEST(ParallelForTest, UsableCoresIsPositive) { EXPECT_GE(UsableCores(), 1); }

}  // namespace
}  // namespace shardps
