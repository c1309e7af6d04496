#include "ps_server/param_blocks.h"

#include <algorithm>
#include <atomic>
#include <cstring>

namespace shardps {
namespace {

int ShiftFor(int64_t width) {
  int shift = 0;
  const int64_t row_bytes = width * static_cast<int64_t>(sizeof(float));
  while (shift < 40 && (row_bytes << (shift + 1)) <= ParamBlocks::kTargetBlockBytes) ++shift;
  return shift;
}

}  // namespace

ParamBlocks::ParamBlocks(int64_t rows, int64_t width)
    : rows_(rows), width_(width), shift_(ShiftFor(width)) {
  const int64_t n = (rows + rows_per_block() - 1) >> shift_;
  blocks_.reserve(static_cast<size_t>(n));
  pointers_.reserve(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; ++b) {
    blocks_.push_back(std::make_shared<Block>(BlockFloats(b)));
    pointers_.push_back(blocks_.back()->data.get());
  }
}

void ParamBlocks::Fill(float value) {
  Writable(0, rows_);
  ForEachRun(0, size(), [value](int64_t, float* v, int64_t n) { std::fill_n(v, n, value); });
}

int64_t ParamBlocks::BlockFloats(int64_t b) const {
  const int64_t first = b << shift_;
  return (std::min(rows_, first + rows_per_block()) - first) * width_;
}

// A snapshot's reference to a block: holds the block (so a writer copies it) and marks it
// held by a snapshot while it lives.
struct ParamBlocks::SnapshotRef {
  explicit SnapshotRef(std::shared_ptr<Block> b) : block(std::move(b)) {
    block->snapshot_refs.fetch_add(1, std::memory_order_relaxed);
  }
  ~SnapshotRef() { block->snapshot_refs.fetch_sub(1, std::memory_order_relaxed); }
  std::shared_ptr<Block> block;
};

void ParamBlocks::MakeOwn(int64_t b) {
  std::shared_ptr<Block>& block = blocks_[static_cast<size_t>(b)];
  if (block.use_count() > 1) {
    const bool for_snapshot = block->snapshot_refs.load(std::memory_order_relaxed) > 0;
    const size_t bytes = static_cast<size_t>(BlockFloats(b)) * sizeof(float);
    auto copy = std::make_shared<Block>(BlockFloats(b));
    std::memcpy(copy->data.get(), block->data.get(), bytes);
    block = std::move(copy);
    pointers_[static_cast<size_t>(b)] = block->data.get();
    ++copies_;
    if (for_snapshot) {
      snapshot_copy_bytes_ += static_cast<int64_t>(bytes);
      if (sink_ != nullptr) sink_->fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
    }
    return;
  }
  // The count is 1: every pull that held the block has dropped its reference, with a release
  // (shared_ptr's decrement); this makes its reads of the bytes happen before our writes.
  std::atomic_thread_fence(std::memory_order_acquire);
}

RowBlocks ParamBlocks::Writable(int64_t row_begin, int64_t row_end) {
  if (row_begin < row_end) {
    for (int64_t b = row_begin >> shift_; b <= (row_end - 1) >> shift_; ++b) MakeOwn(b);
  }
  return RowBlocks{pointers_.data(), shift_, width_};
}

RowBlocks ParamBlocks::WritableRows(absl::Span<const int64_t> rows) {
  if (blocks_.size() == 1) {
    if (!rows.empty()) MakeOwn(0);
  } else {
    std::vector<bool> seen(blocks_.size(), false);
    for (int64_t r : rows) {
      const size_t b = static_cast<size_t>(r >> shift_);
      if (seen[b]) continue;
      seen[b] = true;
      MakeOwn(static_cast<int64_t>(b));
    }
  }
  return RowBlocks{pointers_.data(), shift_, width_};
}

template <typename Fn>
void ParamBlocks::Runs(int64_t begin, int64_t end, Fn fn) const {
  const int64_t block_floats = rows_per_block() * width_;
  for (int64_t e = begin; e < end;) {
    const int64_t b = e / block_floats;
    const int64_t in_block = e - b * block_floats;
    const int64_t n = std::min(end - e, BlockFloats(b) - in_block);
    fn(e, b, in_block, n);
    e += n;
  }
}

void ParamBlocks::ForEachRun(int64_t begin, int64_t end,
                             absl::FunctionRef<void(int64_t, float*, int64_t)> fn) {
  Runs(begin, end, [&](int64_t first, int64_t b, int64_t offset, int64_t n) {
    fn(first, pointers_[static_cast<size_t>(b)] + offset, n);
  });
}

void ParamBlocks::ForEachRun(int64_t begin, int64_t end,
                             absl::FunctionRef<void(int64_t, const float*, int64_t)> fn) const {
  Runs(begin, end, [&](int64_t first, int64_t b, int64_t offset, int64_t n) {
    fn(first, pointers_[static_cast<size_t>(b)] + offset, n);
  });
}

void ParamBlocks::CopyOut(int64_t begin, int64_t end, float* out) const {
  ForEachRun(begin, end, [out, begin](int64_t first, const float* values, int64_t n) {
    std::memcpy(out + (first - begin), values, static_cast<size_t>(n) * sizeof(float));
  });
}

ParamBlocks ParamBlocks::ShareAll() const {
  ParamBlocks view;
  view.rows_ = rows_;
  view.width_ = width_;
  view.shift_ = shift_;
  view.blocks_ = blocks_;
  view.pointers_ = pointers_;
  return view;
}

void ParamBlocks::Share(int64_t begin, int64_t end, std::vector<absl::string_view>* pieces,
                        std::vector<std::shared_ptr<const void>>* holds) const {
  Runs(begin, end, [&](int64_t, int64_t b, int64_t offset, int64_t n) {
    pieces->emplace_back(reinterpret_cast<const char*>(pointers_[static_cast<size_t>(b)] + offset),
                         static_cast<size_t>(n) * sizeof(float));
    holds->push_back(blocks_[static_cast<size_t>(b)]);
  });
}

void ParamBlocks::ShareForSnapshot(int64_t begin, int64_t end,
                                   std::vector<absl::string_view>* pieces,
                                   std::vector<std::shared_ptr<const void>>* holds) const {
  Runs(begin, end, [&](int64_t, int64_t b, int64_t offset, int64_t n) {
    pieces->emplace_back(reinterpret_cast<const char*>(pointers_[static_cast<size_t>(b)] + offset),
                         static_cast<size_t>(n) * sizeof(float));
    holds->push_back(std::make_shared<const SnapshotRef>(blocks_[static_cast<size_t>(b)]));
  });
}

}  // namespace shardps
