// Initial values of a shard, computed so that they do not depend on the partitioning.
//
// Every element of a variable gets its value from a counter-based generator keyed by
// (seed, variable name, global element index): element i of the FULL variable always gets the
// same value, whichever shard holds it and however the variable is split along axis 0. A
// variable created whole and the same variable created in five shards are bit-identical.
//
// Semantics follow Keras' initializers: RANDOM_UNIFORM defaults to [-0.05, 0.05) when minval
// and maxval are both 0; RANDOM_NORMAL / TRUNCATED_NORMAL use stddev 0.05 when it is 0;
// TRUNCATED_NORMAL redraws values more than two standard deviations from the mean;
// GLOROT_UNIFORM draws from [-limit, limit] with limit = sqrt(6 / (fan_in + fan_out)) and
// Keras' fans computed from the FULL shape. The random streams are our own (not TF's Philox
// bits), so values match Keras in distribution, not bit for bit.
//
// Thread-safety: free functions without shared state; safe to call concurrently.
#ifndef SHARDPS_MATH_INITIALIZER_H_
#define SHARDPS_MATH_INITIALIZER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/ps.pb.h"

namespace shardps {

// Checks the spec on its own: known type, finite parameters, minval < maxval (unless both are
// 0), stddev >= 0. INVALID_ARGUMENT names the field at fault.
absl::Status ValidateInitializer(const InitializerSpec& spec);

// Keras' fans for `full_shape`: rank 0 -> (1, 1); rank 1 -> (shape[0], shape[0]); rank 2 ->
// (shape[0], shape[1]); higher ranks multiply shape[0..rank-3] (the receptive field) into both.
struct Fans {
  double fan_in;
  double fan_out;
};
Fans ComputeFans(absl::Span<const int64_t> full_shape);

// Fills `out` with rows [row_offset, row_offset + out.size() / row_width) of the variable
// `variable` of shape `full_shape`, where row_width is the product of full_shape[1..] (1 for
// rank 0 and rank 1). A rank-0 variable is one row of width 1. Fails with INVALID_ARGUMENT
// when the spec is invalid, any dim is not positive, out.size() is not a whole number of
// rows, or the rows fall outside the variable.
absl::Status InitializeRows(const InitializerSpec& spec, absl::string_view variable,
                            absl::Span<const int64_t> full_shape, int64_t row_offset,
                            absl::Span<float> out);

// Initial values of hashed-key rows (ps_server/dynamic_table.h): row `key` of a table gets
// dim values that depend only on (spec incl. its seed, table name, key), from the same
// counter-based generator, so every ps task and every re-sharding computes the same row.
// GLOROT_UNIFORM is refused (its range needs a row count a dynamic table does not have).
// Thread-safety: immutable after Create; Fill may be called from any number of threads.
class KeyedRowInitializer {
 public:
  static absl::StatusOr<KeyedRowInitializer> Create(const InitializerSpec& spec,
                                                    absl::string_view table, int64_t dim);
  // Writes the row's dim() values to out[0 .. dim()).
  void Fill(int64_t key, float* out) const;
  int64_t dim() const { return dim_; }

 private:
  KeyedRowInitializer() = default;
  InitializerSpec::Type type_ = InitializerSpec::ZEROS;
  double value_ = 0, lo_ = 0, hi_ = 0, mean_ = 0, stddev_ = 0;
  uint64_t table_key_ = 0;
  int64_t dim_ = 0;
};

}  // namespace shardps

#endif  // SHARDPS_MATH_INITIALIZER_H_
