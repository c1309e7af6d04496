#include "partitioners/partitioner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace shardps {
namespace {

std::string ShapeString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// Every dim must be >= 1: TensorFlow would divide by zero on a zero dim (MaxSize) or make
// empty shards; a negative dim is not a shape at all.
absl::Status ValidateDims(absl::Span<const int64_t> shape) {
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 1) {
      return absl::InvalidArgumentError(absl::StrCat("shape ", ShapeString(shape), ": dim ", i,
                                                     " is ", shape[i],
                                                     "; every dim must be >= 1"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ElementBytes(DataType dtype, int64_t bytes_per_string) {
  if (dtype == DataType::kString) {
    if (bytes_per_string < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("bytes_per_string must be >= 1, got ", bytes_per_string));
    }
    return bytes_per_string;
  }
  const int size = DataTypeSize(dtype);
  if (size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype ", static_cast<int>(dtype), " is not a known DataType"));
  }
  return size;
}

absl::StatusOr<int64_t> CheckedProduct(absl::Span<const int64_t> shape, int64_t factor) {
  int64_t product = factor;
  for (int64_t dim : shape) {
    if (__builtin_mul_overflow(product, dim, &product)) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", ShapeString(shape), " is too large: its size overflows int64"));
    }
  }
  return product;
}

// Common checks of NumShards: the dtype is known and every dim is >= 1. Returns the element
// size in bytes.
absl::StatusOr<int64_t> CheckInputs(absl::Span<const int64_t> shape, DataType dtype,
                                    int64_t bytes_per_string) {
  ASSIGN_OR_RETURN(int64_t element_bytes, ElementBytes(dtype, bytes_per_string));
  RETURN_IF_ERROR(ValidateDims(shape));
  return element_bytes;
}

class FixedShardsPartitioner : public Partitioner {
 public:
  explicit FixedShardsPartitioner(int num_shards) : num_shards_(num_shards) {}

  absl::StatusOr<int> NumShards(absl::Span<const int64_t> shape,
                                DataType dtype) const override {
    RETURN_IF_ERROR(CheckInputs(shape, dtype, /*bytes_per_string=*/1).status());
    if (shape.empty()) return 1;
    return static_cast<int>(std::min<int64_t>(num_shards_, shape[0]));
  }

  std::string DebugString() const override {
    return absl::StrCat("FixedShardsPartitioner(num_shards=", num_shards_, ")");
  }

 private:
  const int num_shards_;
};

class MinSizePartitioner : public Partitioner {
 public:
  MinSizePartitioner(int64_t min_shard_bytes, int max_shards, int64_t bytes_per_string)
      : min_shard_bytes_(min_shard_bytes),
        max_shards_(max_shards),
        bytes_per_string_(bytes_per_string) {}

  absl::StatusOr<int> NumShards(absl::Span<const int64_t> shape,
                                DataType dtype) const override {
    ASSIGN_OR_RETURN(int64_t element_bytes, CheckInputs(shape, dtype, bytes_per_string_));
    if (shape.empty()) return 1;
    ASSIGN_OR_RETURN(int64_t total_bytes, CheckedProduct(shape, element_bytes));
    // TF: int(math.ceil(total_size_bytes / min_slice_size)); exact in integers.
    const int64_t by_size =
        total_bytes / min_shard_bytes_ + (total_bytes % min_shard_bytes_ != 0 ? 1 : 0);
    const int64_t n = std::max<int64_t>(
        1, std::min({shape[0], static_cast<int64_t>(max_shards_), by_size}));
    return static_cast<int>(n);
  }

  std::string DebugString() const override {
    return absl::StrCat("MinSizePartitioner(min_shard_bytes=", min_shard_bytes_,
                        ", max_shards=", max_shards_, ", bytes_per_string=", bytes_per_string_,
                        ")");
  }

 private:
  const int64_t min_shard_bytes_;
  const int max_shards_;
  const int64_t bytes_per_string_;
};

class MaxSizePartitioner : public Partitioner {
 public:
  MaxSizePartitioner(int64_t max_shard_bytes, int max_shards, int64_t bytes_per_string)
      : max_shard_bytes_(max_shard_bytes),
        max_shards_(max_shards),
        bytes_per_string_(bytes_per_string) {}

  absl::StatusOr<int> NumShards(absl::Span<const int64_t> shape,
                                DataType dtype) const override {
    ASSIGN_OR_RETURN(int64_t element_bytes, CheckInputs(shape, dtype, bytes_per_string_));
    if (shape.empty()) return 1;
    // Elements per row, exactly; TF computes num_elements / shape[0] in floating point,
    // which gives the same (integral) value.
    ASSIGN_OR_RETURN(int64_t row_elements, CheckedProduct(shape.subspan(1), 1));
    // The arithmetic below mirrors TensorFlow's variable_axis_size_partitioner, floating
    // point included, so that both agree on every shape.
    const double bytes_per_row = 1.0 * static_cast<double>(row_elements) * element_bytes;
    const double rows_per_shard =
        std::max(1.0, std::floor(static_cast<double>(max_shard_bytes_) / bytes_per_row));
    double n = std::ceil(1.0 * static_cast<double>(shape[0]) / rows_per_shard);
    if (max_shards_ > 0) n = std::min(n, static_cast<double>(max_shards_));
    if (n > static_cast<double>(std::numeric_limits<int>::max())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shape ", ShapeString(shape), " would need ", n, " shards of at most ",
          max_shard_bytes_, " bytes, more than an int holds; set max_shards"));
    }
    return static_cast<int>(n);
  }

  std::string DebugString() const override {
    return absl::StrCat("MaxSizePartitioner(max_shard_bytes=", max_shard_bytes_,
                        ", max_shards=", max_shards_ > 0 ? absl::StrCat(max_shards_) : "unset",
                        ", bytes_per_string=", bytes_per_string_, ")");
  }

 private:
  const int64_t max_shard_bytes_;
  const int max_shards_;  // 0: no cap.
  const int64_t bytes_per_string_;
};

// Parses a non-negative decimal integer made of digits only (no sign, no spaces).
absl::StatusOr<int64_t> ParseSpecInt(absl::string_view spec, absl::string_view field,
                                     absl::string_view text, int64_t max) {
  int64_t value = 0;
  const bool digits_only =
      !text.empty() && text.size() <= 18 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits_only || !absl::SimpleAtoi(text, &value) || value > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        "partitioner spec \"", absl::CHexEscape(spec), "\": ", field, " \"",
        absl::CHexEscape(text), "\" is not an integer in [0, ", max, "]"));
  }
  return value;
}

absl::Status WithSpec(absl::string_view spec, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("partitioner spec \"", absl::CHexEscape(spec),
                                                  "\": ", status.message()));
}

}  // namespace

int DataTypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::kBool:
    case DataType::kInt8:
    case DataType::kUInt8:
      return 1;
    case DataType::kInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
    case DataType::kFloat64:
      return 8;
    case DataType::kString:
      return 0;
  }
  return 0;
}

absl::string_view DataTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kBool: return "bool";
    case DataType::kInt8: return "int8";
    case DataType::kUInt8: return "uint8";
    case DataType::kInt16: return "int16";
    case DataType::kFloat16: return "float16";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kInt32: return "int32";
    case DataType::kFloat32: return "float32";
    case DataType::kInt64: return "int64";
    case DataType::kFloat64: return "float64";
    case DataType::kString: return "string";
  }
  return "unknown";
}

absl::StatusOr<DataType> ParseDataType(absl::string_view name) {
  static constexpr DataType kAll[] = {
      DataType::kBool,    DataType::kInt8,    DataType::kUInt8,   DataType::kInt16,
      DataType::kFloat16, DataType::kBFloat16, DataType::kInt32,  DataType::kFloat32,
      DataType::kInt64,   DataType::kFloat64, DataType::kString};
  for (DataType dtype : kAll) {
    if (DataTypeName(dtype) == name) return dtype;
  }
  if (name == "float") return DataType::kFloat32;
  if (name == "double") return DataType::kFloat64;
  if (name == "half") return DataType::kFloat16;
  return absl::InvalidArgumentError(absl::StrCat("dtype \"", absl::CHexEscape(name),
                                                 "\" is not a known DataType"));
}

absl::StatusOr<int64_t> TensorBytes(absl::Span<const int64_t> shape, DataType dtype,
                                    int64_t bytes_per_string) {
  ASSIGN_OR_RETURN(int64_t element_bytes, ElementBytes(dtype, bytes_per_string));
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("shape ", ShapeString(shape), ": dim ", i,
                                                     " is negative"));
    }
  }
  return CheckedProduct(shape, element_bytes);
}

absl::StatusOr<std::unique_ptr<Partitioner>> NewFixedShardsPartitioner(int num_shards) {
  if (num_shards < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("FixedShardsPartitioner: num_shards must be >= 1, got ", num_shards));
  }
  return std::unique_ptr<Partitioner>(new FixedShardsPartitioner(num_shards));
}

absl::StatusOr<std::unique_ptr<Partitioner>> NewMinSizePartitioner(int64_t min_shard_bytes,
                                                                   int max_shards,
                                                                   int64_t bytes_per_string) {
  if (min_shard_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MinSizePartitioner: min_shard_bytes must be >= 1, got ", min_shard_bytes));
  }
  if (max_shards < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("MinSizePartitioner: max_shards must be >= 1, got ", max_shards));
  }
  if (bytes_per_string < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MinSizePartitioner: bytes_per_string must be >= 1, got ", bytes_per_string));
  }
  return std::unique_ptr<Partitioner>(
      new MinSizePartitioner(min_shard_bytes, max_shards, bytes_per_string));
}

absl::StatusOr<std::unique_ptr<Partitioner>> NewMaxSizePartitioner(int64_t max_shard_bytes,
                                                                   int max_shards,
                                                                   int64_t bytes_per_string) {
  if (max_shard_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MaxSizePartitioner: max_shard_bytes must be >= 1, got ", max_shard_bytes));
  }
  if (max_shards < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MaxSizePartitioner: max_shards must be >= 1 (or 0 for no cap), got ", max_shards));
  }
  if (bytes_per_string < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MaxSizePartitioner: bytes_per_string must be >= 1, got ", bytes_per_string));
  }
  return std::unique_ptr<Partitioner>(
      new MaxSizePartitioner(max_shard_bytes, max_shards, bytes_per_string));
}

absl::StatusOr<std::unique_ptr<Partitioner>> ParsePartitioner(absl::string_view spec) {
  return ParsePartitioner(spec, 0);
}

absl::StatusOr<std::unique_ptr<Partitioner>> ParsePartitioner(absl::string_view spec,
                                                              int num_ps) {
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  // A count: an integer, or "ps" (the number of ps).
  auto count = [&](absl::string_view name, absl::string_view text) -> absl::StatusOr<int64_t> {
    if (text != "ps") return ParseSpecInt(spec, name, text, kMaxInt);
    if (num_ps < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "partitioner spec \"", absl::CHexEscape(spec), "\": ", name,
          " \"ps\" needs the number of ps tasks, and none is known here"));
    }
    return int64_t{num_ps};
  };
  constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
  const std::vector<absl::string_view> parts = absl::StrSplit(spec, ':');
  const absl::string_view kind = parts[0];
  const size_t num_args = parts.size() - 1;
  absl::StatusOr<std::unique_ptr<Partitioner>> result;
  if (kind == "fixed") {
    if (num_args != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "partitioner spec \"", absl::CHexEscape(spec),
          "\": expected fixed:<num_shards>, got ", num_args, " arguments"));
    }
    ASSIGN_OR_RETURN(int64_t num_shards, count("num_shards", parts[1]));
    result = NewFixedShardsPartitioner(static_cast<int>(num_shards));
  } else if (kind == "min_size") {
    if (num_args > 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "partitioner spec \"", absl::CHexEscape(spec),
          "\": expected min_size[:<min_shard_bytes>[:<max_shards>]], got ", num_args,
          " arguments"));
    }
    int64_t min_shard_bytes = 256 << 10;
    int64_t max_shards = 1;
    if (num_args >= 1) {
      ASSIGN_OR_RETURN(min_shard_bytes,
                       ParseSpecInt(spec, "min_shard_bytes", parts[1], kMaxInt64));
    }
    if (num_args >= 2) {
      ASSIGN_OR_RETURN(max_shards, count("max_shards", parts[2]));
    }
    result = NewMinSizePartitioner(min_shard_bytes, static_cast<int>(max_shards));
  } else if (kind == "max_size") {
    if (num_args < 1 || num_args > 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "partitioner spec \"", absl::CHexEscape(spec),
          "\": expected max_size:<max_shard_bytes>[:<max_shards>] (max_shard_bytes is "
          "required), got ",
          num_args, " arguments"));
    }
    ASSIGN_OR_RETURN(int64_t max_shard_bytes,
                     ParseSpecInt(spec, "max_shard_bytes", parts[1], kMaxInt64));
    int64_t max_shards = 0;
    if (num_args == 2) {
      ASSIGN_OR_RETURN(max_shards, count("max_shards", parts[2]));
    }
    result = NewMaxSizePartitioner(max_shard_bytes, static_cast<int>(max_shards));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "partitioner spec \"", absl::CHexEscape(spec), "\": unknown partitioner \"",
        absl::CHexEscape(kind),
        "\"; expected fixed:<num_shards>, min_size[:<min_shard_bytes>[:<max_shards>]] or "
        "max_size:<max_shard_bytes>[:<max_shards>]"));
  }
  if (!result.ok()) return WithSpec(spec, result.status());
  return result;
}

absl::StatusOr<std::vector<ShardSlice>> SliceVariable(absl::string_view name,
                                                      absl::Span<const int64_t> shape,
                                                      int num_shards) {
  if (name.empty()) {
    return absl::InvalidArgumentError("SliceVariable: variable name is empty");
  }
  const std::string quoted = absl::StrCat("variable \"", absl::CHexEscape(name), "\"");
  if (num_shards < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(quoted, ": num_shards must be >= 1, got ", num_shards));
  }
  if (shape.empty()) {
    if (num_shards != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          quoted, ": a scalar (shape []) cannot be split into ", num_shards, " shards"));
    }
    return std::vector<ShardSlice>{ShardSlice{std::string(name), 0, 1, 0, {}}};
  }
  if (absl::Status status = ValidateDims(shape); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(quoted, ": ", status.message()));
  }
  if (num_shards > shape[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat(quoted, ": num_shards ", num_shards, " exceeds shape[0] ", shape[0],
                     " of shape ", ShapeString(shape), "; a shard needs at least one row"));
  }
  std::vector<ShardSlice> slices;
  slices.reserve(num_shards);
  const int64_t base = shape[0] / num_shards;
  const int64_t extra = shape[0] % num_shards;
  int64_t offset = 0;
  for (int i = 0; i < num_shards; ++i) {
    ShardSlice slice;
    slice.name = num_shards == 1 ? std::string(name) : absl::StrCat(name, "/part_", i);
    slice.part = i;
    slice.num_parts = num_shards;
    slice.row_offset = offset;
    slice.shape.assign(shape.begin(), shape.end());
    slice.shape[0] = base + (i < extra ? 1 : 0);
    offset += slice.shape[0];
    slices.push_back(std::move(slice));
  }
  return slices;
}

}  // namespace shardps
