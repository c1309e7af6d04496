// Variable partitioners with TensorFlow's semantics, exactly: how many shards a variable of a
// given shape and dtype is split into (FixedShardsPartitioner, MinSizePartitioner,
// MaxSizePartitioner of tf.distribute.experimental.partitioners), and how its rows are cut
// into those shards (ParameterServerStrategy's slicing and "{name}/part_{i}" naming).
//
// The chief, the client library and the ps all call these functions, so the shard layout is
// derived in one place and never by hand. Only axis 0 is ever split, as in TensorFlow.
//
// Pure functions with no I/O. A Partitioner is immutable after construction, so one instance
// may be shared by any number of threads.
#ifndef SHARDPS_PARTITIONERS_PARTITIONER_H_
#define SHARDPS_PARTITIONERS_PARTITIONER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace shardps {

enum class DataType {
  kBool,
  kInt8,
  kUInt8,
  kInt16,
  kFloat16,
  kBFloat16,
  kInt32,
  kFloat32,
  kInt64,
  kFloat64,
  kString,  // Variable length: partitioners count bytes_per_string bytes per element.
};

// Bytes per element; 0 for kString (and for a value outside the enum).
int DataTypeSize(DataType dtype);
// "float32", "int64", "string", ...; "unknown" for a value outside the enum.
absl::string_view DataTypeName(DataType dtype);
// Inverse of DataTypeName; also accepts TensorFlow's aliases "float", "double", "half".
absl::StatusOr<DataType> ParseDataType(absl::string_view name);

// Bytes of a dense tensor of `shape` and `dtype`, counting `bytes_per_string` per string
// element. INVALID_ARGUMENT for a negative dim, bytes_per_string < 1 or int64 overflow.
absl::StatusOr<int64_t> TensorBytes(absl::Span<const int64_t> shape, DataType dtype,
                                    int64_t bytes_per_string = 16);

// Decides the number of shards along axis 0 for a variable.
class Partitioner {
 public:
  virtual ~Partitioner() = default;

  // Number of shards, in [1, shape[0]]. A rank-0 variable gets 1 shard. INVALID_ARGUMENT
  // when a dim is zero or negative, or dtype is not a known DataType.
  virtual absl::StatusOr<int> NumShards(absl::Span<const int64_t> shape,
                                        DataType dtype) const = 0;

  // E.g. "MinSizePartitioner(min_shard_bytes=262144, max_shards=1, bytes_per_string=16)".
  virtual std::string DebugString() const = 0;
};

// TF FixedShardsPartitioner: min(num_shards, shape[0]) shards. num_shards must be >= 1.
absl::StatusOr<std::unique_ptr<Partitioner>> NewFixedShardsPartitioner(int num_shards);

// TF MinSizePartitioner: as many shards as keep each at least min_shard_bytes, at most
// max_shards and shape[0]: max(1, min(shape[0], max_shards, ceil(bytes / min_shard_bytes))).
absl::StatusOr<std::unique_ptr<Partitioner>> NewMinSizePartitioner(
    int64_t min_shard_bytes = 256 << 10, int max_shards = 1, int64_t bytes_per_string = 16);

// TF MaxSizePartitioner: as few shards as keep each at most max_shard_bytes (but at least one
// row per shard), capped by max_shards when max_shards > 0 (0 means no cap, TF's None).
absl::StatusOr<std::unique_ptr<Partitioner>> NewMaxSizePartitioner(
    int64_t max_shard_bytes, int max_shards = 0, int64_t bytes_per_string = 16);

// A partitioner from a config or command-line spec:
//   "fixed:<num_shards>"
//   "min_size" | "min_size:<min_shard_bytes>" | "min_size:<min_shard_bytes>:<max_shards>"
//   "max_size:<max_shard_bytes>" | "max_size:<max_shard_bytes>:<max_shards>"
// A count (num_shards, max_shards) may be "ps": the number of ps tasks the variables are
// placed on, `num_ps` ("fixed:ps", "min_size:262144:ps", TensorFlow's usual
// max_shards = number of ps), so that a job's layout follows its ps count across a scale-ps
// (docs/elastic.md). INVALID_ARGUMENT naming the part of the spec at fault ("ps" with
// num_ps < 1 included).
absl::StatusOr<std::unique_ptr<Partitioner>> ParsePartitioner(absl::string_view spec,
                                                              int num_ps);
// The same, for a spec without "ps" counts.
absl::StatusOr<std::unique_ptr<Partitioner>> ParsePartitioner(absl::string_view spec);

// One shard of a variable split along axis 0.
struct ShardSlice {
  std::string name;  // "{variable}/part_{part}", or the plain variable name when unsplit.
  int part = 0;
  int num_parts = 1;
  int64_t row_offset = 0;      // First row of the variable held by this shard.
  std::vector<int64_t> shape;  // The shard's shape: shape[0] rows, other dims as the variable.
};

// Cuts `shape` into `num_shards` slices along axis 0 as ParameterServerStrategy does: the
// first shape[0] % num_shards shards hold one extra row (13 rows over 5: 3,3,3,2,2). With one
// shard the slice keeps the variable's name (a rank-0 variable can only have one shard).
// INVALID_ARGUMENT for an empty name, num_shards < 1 or > shape[0], or a dim < 1.
absl::StatusOr<std::vector<ShardSlice>> SliceVariable(absl::string_view name,
                                                      absl::Span<const int64_t> shape,
                                                      int num_shards);

}  // namespace shardps

#endif  // SHARDPS_PARTITIONERS_PARTITIONER_H_
