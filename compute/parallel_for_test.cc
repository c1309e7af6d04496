#include "compute/parallel_for.h"

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

using Pieces = std::vector<std::pair<int64_t, int64_t>>;

// The pieces a Run calls, sorted.
Pieces RunPieces(ParallelFor& parallel, int64_t n, int64_t grain, int64_t align) {
  absl::Mutex mu;
  Pieces pieces;
  parallel.Run(n, grain, align, [&](int64_t begin, int64_t end) {
    absl::MutexLock lock(&mu);
    pieces.emplace_back(begin, end);
  });
  std::sort(pieces.begin(), pieces.end());
  return pieces;
}

// The split Run promises, pinned: the number of pieces and every boundary. A caller's float
// sums keep their order only while these stay as they are.
TEST(ParallelForTest, RunSplitsExactlyAsPromised) {
  ParallelFor three(3);
  // 4 pieces, boundaries n * i / 4 rounded down to multiples of 16.
  EXPECT_EQ(RunPieces(three, 1000, 10, 16),
            (Pieces{{0, 240}, {240, 496}, {496, 736}, {736, 1000}}));
  // n / grain caps the pieces: 250 / 100 = 2.
  EXPECT_EQ(RunPieces(three, 250, 100, 1), (Pieces{{0, 125}, {125, 250}}));
  // align <= 1 is 1.
  EXPECT_EQ(RunPieces(three, 10, 1, 0), (Pieces{{0, 2}, {2, 5}, {5, 7}, {7, 10}}));
  // One helper: two halves.
  ParallelFor one(1);
  EXPECT_EQ(RunPieces(one, 100003, 1, 8), (Pieces{{0, 50000}, {50000, 100003}}));
}

TEST(ParallelForTest, PiecesCoverTheRangeOnceAlignedAndAtLeastAGrain) {
  ParallelFor parallel(3);
  for (int64_t n : {int64_t{0}, int64_t{5}, int64_t{999}, int64_t{4096}, int64_t{100003}}) {
    const auto pieces = RunPieces(parallel, n, /*grain=*/100, /*align=*/16);
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
  EXPECT_EQ(RunPieces(parallel, 1 << 20, 1, 1).size(), 1u);
}

// ForEach calls each of the caller's tasks exactly once, whatever the helpers: the split is
// the caller's, so the same tasks with any number of helpers give the same results.
TEST(ParallelForTest, ForEachCallsEveryTaskOnce) {
  for (int helpers : {0, 1, 3}) {
    ParallelFor parallel(helpers);
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{4}, int64_t{9}}) {
      std::vector<std::atomic<int>> calls(count);
      parallel.ForEach(count, [&](int64_t i) { calls[i].fetch_add(1); });
      for (int64_t i = 0; i < count; ++i) {
        EXPECT_EQ(calls[i].load(), 1) << helpers << " helpers, task " << i << " of " << count;
      }
    }
  }
}

TEST(ParallelForTest, ForEachOfOneTaskStaysOnTheCallersThread) {
  ParallelFor parallel(2);
  const std::thread::id caller = std::this_thread::get_id();
  int calls = 0;
  parallel.ForEach(1, [&](int64_t i) {
    ++calls;
    EXPECT_EQ(i, 0);
    EXPECT_EQ(std::this_thread::get_id(), caller);
  });
  EXPECT_EQ(calls, 1);
}

// Tasks that write their own outputs give bit-identical results with or without helpers.
TEST(ParallelForTest, ForEachResultsDoNotDependOnTheHelpers) {
  auto sums = [](ParallelFor& parallel) {
    std::vector<float> out(7);
    parallel.ForEach(7, [&](int64_t t) {
      float s = 0;
      for (int k = 0; k < 10000; ++k) s += 1.0f / static_cast<float>(t * 10000 + k + 1);
      out[t] = s;
    });
    return out;
  };
  ParallelFor none(0), three(3);
  EXPECT_EQ(sums(none), sums(three));
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
        if (rep % 2 == 0) {
          parallel.Run(kN, 1024, 8, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) hits[c][i].fetch_add(1);
          });
        } else {
          parallel.ForEach(8, [&](int64_t t) {
            for (int64_t i = kN * t / 8; i < kN * (t + 1) / 8; ++i) hits[c][i].fetch_add(1);
          });
        }
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
