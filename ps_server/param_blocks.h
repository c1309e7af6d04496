// ParamBlocks: a shard's parameters (rows x width float32, row-major) in blocks of whole rows,
// each block reference-counted, so that a pull can send parameters from where they lie. Each
// optimizer slot of a shard is a ParamBlocks of the same geometry (so the same blocks hold
// the same rows), and a snapshot takes references to parameters and slots alike. A pull takes
// references to the blocks it sends (Share) under the shard's lock; a writer first makes every
// block it is about to change its own (Writable), copying a block that a pull still holds, so
// the pull sends the bytes it took, before the update, and never half of one.
//
// Thread-safety: not thread-safe; guarded by the shard's mutex. References handed out by
// Share may be dropped on any thread. The one exception: blocks not yet shared with anyone
// (a restore's new state, before it is installed) may be filled from several threads at once
// through ForEachRun over disjoint rows, which only reads the block pointers.
#ifndef SHARDPS_PS_SERVER_PARAM_BLOCKS_H_
#define SHARDPS_PS_SERVER_PARAM_BLOCKS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "math/optimizer.h"

namespace shardps {

class ParamBlocks {
 public:
  // Blocks hold the largest power of two of rows that fits in this (at least one row).
  static constexpr int64_t kTargetBlockBytes = int64_t{1} << 20;

  // Uninitialized parameters. Throws std::bad_alloc when memory runs out.
  ParamBlocks(int64_t rows, int64_t width);
  // No rows.
  ParamBlocks() : ParamBlocks(0, 1) {}
  // Movable (a restore builds fresh blocks and moves them in); references handed out stay
  // valid.
  ParamBlocks(ParamBlocks&&) = default;
  ParamBlocks& operator=(ParamBlocks&&) = default;

  // Sets every element to `value` (making every block writable first).
  void Fill(float value);

  // A read-only view of these parameters as they are now, sharing every block (no copy):
  // a later write to either copies the block first, so the view keeps this version. Used by
  // SYNC shards to serve the version before the last step. Throws std::bad_alloc. The view
  // must not be written.
  ParamBlocks ShareAll() const;

  int64_t rows() const { return rows_; }
  int64_t width() const { return width_; }
  int64_t size() const { return rows_ * width_; }
  int64_t rows_per_block() const { return int64_t{1} << shift_; }
  int64_t num_blocks() const { return static_cast<int64_t>(blocks_.size()); }
  // Block b's identity (two views hold the same bytes for its rows when these are equal)
  // and size. REQUIRES: 0 <= b < num_blocks().
  const void* block_id(int64_t b) const { return blocks_[static_cast<size_t>(b)].get(); }
  int64_t block_bytes(int64_t b) const {
    return BlockFloats(b) * static_cast<int64_t>(sizeof(float));
  }
  // Blocks copied because a pull or a snapshot held them when a writer came (for tests and
  // metrics), and the bytes of those copied because a snapshot held them.
  int64_t copies() const { return copies_; }
  int64_t snapshot_copy_bytes() const { return snapshot_copy_bytes_; }
  // Also adds those bytes to `*sink` (a store-wide figure read without the shard's lock).
  // REQUIRES: *sink outlives every write through these blocks.
  void set_snapshot_copy_sink(std::atomic<int64_t>* sink) { sink_ = sink; }

  // Makes the blocks holding rows [row_begin, row_end), or the rows listed, safe to write:
  // each one a pull still holds is replaced by a copy. Returns the row map to write through;
  // it stays valid until the next Writable or WritableRows.
  RowBlocks Writable(int64_t row_begin, int64_t row_end);
  RowBlocks WritableRows(absl::Span<const int64_t> rows);

  // Calls fn(first, values, n) for consecutive runs covering elements [begin, end) of the
  // flattened parameters, one run per block: values[0, n) are elements [first, first + n).
  // Writing through `values` REQUIRES Writable over those rows first.
  void ForEachRun(int64_t begin, int64_t end,
                  absl::FunctionRef<void(int64_t, float*, int64_t)> fn);
  void ForEachRun(int64_t begin, int64_t end,
                  absl::FunctionRef<void(int64_t, const float*, int64_t)> fn) const;

  const float* Row(int64_t r) const {
    return pointers_[static_cast<size_t>(r >> shift_)] +
           (r & ((int64_t{1} << shift_) - 1)) * width_;
  }

  // The row map to read through (never to write: see Writable); valid until the next
  // Writable, WritableRows or assignment.
  RowBlocks ReadRows() const { return RowBlocks{pointers_.data(), shift_, width_}; }

  // Copies elements [begin, end) to `out`.
  void CopyOut(int64_t begin, int64_t end, float* out) const;

  // Appends views of elements [begin, end) to `pieces` and a reference to each block they lie
  // in to `holds`: while a reference is held, that block's bytes do not change.
  void Share(int64_t begin, int64_t end, std::vector<absl::string_view>* pieces,
             std::vector<std::shared_ptr<const void>>* holds) const;
  // As Share, for a checkpoint snapshot: a block copied while a snapshot's reference to it is
  // held counts in snapshot_copy_bytes().
  void ShareForSnapshot(int64_t begin, int64_t end, std::vector<absl::string_view>* pieces,
                        std::vector<std::shared_ptr<const void>>* holds) const;

 private:
  struct Block {
    explicit Block(int64_t floats) : data(new float[static_cast<size_t>(floats)]) {}
    std::unique_ptr<float[]> data;
    std::atomic<int> snapshot_refs{0};  // snapshots' references among its holders
  };
  struct SnapshotRef;

  int64_t BlockFloats(int64_t b) const;
  void MakeOwn(int64_t b);
  // fn(first, block index, offset in the block, n) for each run of elements [begin, end).
  template <typename Fn>
  void Runs(int64_t begin, int64_t end, Fn fn) const;

  int64_t rows_;
  int64_t width_;
  int shift_;
  std::vector<std::shared_ptr<Block>> blocks_;
  std::vector<float*> pointers_;  // blocks_[b]->data.get()
  int64_t copies_ = 0;
  int64_t snapshot_copy_bytes_ = 0;
  std::atomic<int64_t>* sink_ = nullptr;
};

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_PARAM_BLOCKS_H_
