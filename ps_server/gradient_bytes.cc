#include "ps_server/gradient_bytes.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <new>

#include "common/finite.h"

namespace shardps {

GradientBytes::GradientBytes(absl::string_view bytes)
    : GradientBytes(absl::MakeConstSpan(&bytes, 1)) {}

GradientBytes::GradientBytes(absl::Span<const absl::string_view> pieces) {
  pieces_.reserve(pieces.size());
  starts_.reserve(pieces.size());
  for (absl::string_view piece : pieces) {
    if (piece.empty()) continue;
    pieces_.push_back(piece);
    starts_.push_back(size_);
    size_ += static_cast<int64_t>(piece.size());
  }
}

size_t GradientBytes::PieceAt(int64_t offset) const {
  // The last piece starting at or before `offset`.
  return static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), offset) -
                             starts_.begin()) -
         1;
}

GradientBytes GradientBytes::Sub(int64_t offset, int64_t length) const {
  std::vector<absl::string_view> pieces;
  if (length > 0) {
    for (size_t i = PieceAt(offset); i < pieces_.size() && length > 0; ++i) {
      const int64_t skip = std::max<int64_t>(0, offset - starts_[i]);
      const int64_t take =
          std::min<int64_t>(length, static_cast<int64_t>(pieces_[i].size()) - skip);
      pieces.push_back(pieces_[i].substr(static_cast<size_t>(skip), static_cast<size_t>(take)));
      length -= take;
    }
  }
  return GradientBytes(pieces);
}

int64_t GradientBytes::FirstNonFinite(float* max_abs) const {
  const int64_t floats = size_ / 4;
  int64_t index = 0;  // floats checked so far
  char carry[4];      // a float split between two pieces
  size_t carried = 0;
  float top = 0;
  auto done = [&](int64_t result) {
    if (max_abs != nullptr) *max_abs = top;
    return result;
  };
  for (absl::string_view piece : pieces_) {
    const char* p = piece.data();
    size_t n = piece.size();
    if (carried > 0) {
      const size_t take = std::min(n, 4 - carried);
      std::memcpy(carry + carried, p, take);
      carried += take;
      p += take;
      n -= take;
      if (carried < 4) continue;
      carried = 0;
      float piece_top = 0;
      if (shardps::FirstNonFinite(carry, 1, &piece_top) == 0) {
        top = std::numeric_limits<float>::infinity();
        return done(index);
      }
      top = std::max(top, piece_top);
      ++index;
    }
    const int64_t whole = static_cast<int64_t>(n / 4);
    float piece_top = 0;
    const int64_t bad = shardps::FirstNonFinite(p, whole, &piece_top);
    top = std::max(top, piece_top);
    if (bad < whole) return done(index + bad);
    index += whole;
    carried = n % 4;
    std::memcpy(carry, p + 4 * whole, carried);
  }
  return done(floats);
}

float GradientBytes::At(int64_t i) const {
  float value;
  CopyTo(i, i + 1, &value);
  return value;
}

void GradientBytes::CopyTo(int64_t begin, int64_t end, float* out) const {
  int64_t offset = 4 * begin;
  int64_t left = 4 * (end - begin);
  char* dst = reinterpret_cast<char*>(out);
  if (left <= 0) return;
  for (size_t i = PieceAt(offset); left > 0; ++i) {
    const int64_t skip = offset - starts_[i];
    const int64_t take = std::min<int64_t>(left, static_cast<int64_t>(pieces_[i].size()) - skip);
    std::memcpy(dst, pieces_[i].data() + skip, static_cast<size_t>(take));
    dst += take;
    offset += take;
    left -= take;
  }
}

void GradientBytes::ForEachRun(int64_t begin, int64_t end,
                               absl::FunctionRef<void(int64_t, const float*, int64_t)> fn) const {
  // Per thread, on the heap: too large for the stacks of gRPC's threads to take lightly.
  thread_local std::unique_ptr<float[]> scratch_buffer;
  if (scratch_buffer == nullptr) scratch_buffer.reset(new (std::nothrow) float[kScratchFloats]);
  // Out of memory, runs go through a small buffer on the stack instead: this may run on a
  // ParallelFor helper, where an exception would end the process. (Results do not depend on
  // how a gradient is cut into runs.)
  constexpr int64_t kSmallFloats = 256;
  float small[kSmallFloats];
  float* const scratch = scratch_buffer != nullptr ? scratch_buffer.get() : small;
  const int64_t scratch_floats = scratch_buffer != nullptr ? kScratchFloats : kSmallFloats;
  size_t i = begin < end ? PieceAt(4 * begin) : 0;
  for (int64_t f = begin; f < end;) {
    const int64_t offset = 4 * f;
    while (offset >= starts_[i] + static_cast<int64_t>(pieces_[i].size())) ++i;
    const char* p = pieces_[i].data() + (offset - starts_[i]);
    const int64_t in_piece = (starts_[i] + static_cast<int64_t>(pieces_[i].size()) - offset) / 4;
    if (reinterpret_cast<uintptr_t>(p) % alignof(float) == 0 && in_piece > 0) {
      const int64_t n = std::min(end - f, in_piece);
      fn(f, reinterpret_cast<const float*>(p), n);
      f += n;
      continue;
    }
    const int64_t n = std::min(end - f, scratch_floats);
    CopyTo(f, f + n, scratch);
    fn(f, scratch, n);
    f += n;
  }
}

}  // namespace shardps
