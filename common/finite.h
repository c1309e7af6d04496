// FirstNonFinite: where the first NaN or infinity is in an array of float32 values, checked
// at memory speed. The ps validates every pushed gradient with it before applying anything,
// so it must cost far less than the update itself (Eigen's allFinite() computed x - x per
// element and cost more than an SGD step).
//
// Thread-safety: pure function.
#ifndef SHARDPS_COMMON_FINITE_H_
#define SHARDPS_COMMON_FINITE_H_

#include <cstdint>

namespace shardps {

// The index of the first value in values[0, n) that is NaN or +-infinity, or n if all are
// finite. `values` points at n little-endian float32 values and need not be aligned (a
// gradient is checked where it lies in gRPC's receive buffers).
int64_t FirstNonFinite(const void* values, int64_t n);

// The same, and in the same pass the largest |value| of values[0, n) into *max_abs (+inf when
// one is not finite; 0 for n == 0): the ps checks a pushed gradient and learns its magnitude
// (Optimizer::RangesAfter) for the price of the check alone.
int64_t FirstNonFinite(const void* values, int64_t n, float* max_abs);

// The smallest and largest of values[0, n) (as FirstNonFinite reads them), or -inf and +inf
// when any is NaN or infinite; {+inf, -inf} for n == 0. At memory speed.
struct FloatRange {
  float lo;
  float hi;
};
FloatRange RangeOf(const void* values, int64_t n);

// The largest |value| of values[0, n), or +inf when any is NaN or infinite; 0 for n == 0.
float MaxAbs(const void* values, int64_t n);

}  // namespace shardps

#endif  // SHARDPS_COMMON_FINITE_H_
