// GradientBytes: a dense tensor's float32 bytes read where they lie, possibly split over
// several pieces at any byte boundary and address. A pushed gradient arrives in gRPC's receive
// slices (16 KiB HTTP/2 frames, 9-byte frame headers between them), so its floats are neither
// contiguous nor aligned; the ps checks and applies it from there instead of first copying
// the whole batch into one buffer (that copy was a tenth of the ps' CPU in a bulk push).
//
// A view: the pieces' memory must outlive it. Thread-safety: const methods may be called
// concurrently (the optimizer's parallel pieces each read their own range).
#ifndef SHARDPS_PS_SERVER_GRADIENT_BYTES_H_
#define SHARDPS_PS_SERVER_GRADIENT_BYTES_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace shardps {

class GradientBytes {
 public:
  // Floats a misaligned run is copied through at a time (64 KiB: stays in L2, and long
  // enough that an optimizer's per-call set-up, Adam's two pow()s, costs ~1% of the run).
  static constexpr int64_t kScratchFloats = 16384;

  GradientBytes() = default;
  explicit GradientBytes(absl::string_view bytes);
  explicit GradientBytes(absl::Span<const absl::string_view> pieces);

  int64_t size_bytes() const { return size_; }

  // Bytes [offset, offset + length) of this view. REQUIRES: the range lies within it.
  GradientBytes Sub(int64_t offset, int64_t length) const;

  // The index of the first NaN or infinity among the whole floats of the view (its first
  // size_bytes() / 4 * 4 bytes), or size_bytes() / 4 when there is none; with `max_abs`, in
  // the same pass, the largest |float| there (+inf when one is not finite).
  int64_t FirstNonFinite(float* max_abs = nullptr) const;

  // Float i. REQUIRES: 0 <= i < size_bytes() / 4.
  float At(int64_t i) const;

  // Copies floats [begin, end) to `out`.
  void CopyTo(int64_t begin, int64_t end, float* out) const;

  // Calls fn(first, values, n) for consecutive runs that together cover floats [begin, end)
  // in order: values[0, n) are floats [first, first + n). A run is read in place when its
  // piece holds it aligned, otherwise copied through a per-thread buffer of kScratchFloats.
  void ForEachRun(int64_t begin, int64_t end,
                  absl::FunctionRef<void(int64_t, const float*, int64_t)> fn) const;

 private:
  // The piece holding byte `offset` (< size_).
  size_t PieceAt(int64_t offset) const;

  std::vector<absl::string_view> pieces_;  // no empty pieces
  std::vector<int64_t> starts_;            // starts_[i]: offset of pieces_[i]
  int64_t size_ = 0;
};

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_GRADIENT_BYTES_H_
