#include "math/initializer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace shardps {
namespace {

constexpr double kKerasDefaultRange = 0.05;   // RandomUniform's [-0.05, 0.05)
constexpr double kKerasDefaultStddev = 0.05;  // RandomNormal / TruncatedNormal
constexpr double kPi = 3.14159265358979323846;
// Truncated normal: P(|z| > 2) is 4.6%, so 64 redraws leave a chance of 1e-86 of running out;
// then the value is the mean.
constexpr int kMaxTruncatedDraws = 64;

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
constexpr uint64_t kAttemptMul = 0xD6E8FEB86659FD93ULL;
constexpr uint64_t kSecondDraw = 0x6A09E667F3BCC909ULL;

// splitmix64's finalizer: a bijection on 64 bits with full avalanche.
uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// A stable string hash (absl::Hash is salted per process, so it cannot key values that must
// be equal on every ps task and every run).
uint64_t Fnv1a64(absl::string_view s) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ULL;
  }
  return h;
}

// The counter-based generator: 64 random bits for draw `attempt` of element `index`.
// key + index * kGolden is injective in index (kGolden is odd) and Mix64 is a bijection, so
// distinct (index, attempt) pairs of one key never share a counter.
uint64_t Bits(uint64_t key, uint64_t index, uint64_t attempt) {
  return Mix64(Mix64(key + index * kGolden) ^ (attempt * kAttemptMul));
}

// [0, 1) with 53 random bits.
double Unit(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

// One standard normal from one counter (Box-Muller, cosine branch).
double StandardNormal(uint64_t bits) {
  const double u1 = 1.0 - Unit(bits);           // (0, 1]: log is finite
  const double u2 = Unit(Mix64(bits ^ kSecondDraw));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
}

// A draw from [lo, hi) rounded to float, kept below hi when the rounding reaches it.
float UniformFloat(uint64_t bits, double lo, double hi) {
  float v = static_cast<float>(lo + (hi - lo) * Unit(bits));
  if (static_cast<double>(v) >= hi) {
    v = std::nextafter(static_cast<float>(hi), -std::numeric_limits<float>::infinity());
  }
  return v;
}

absl::Status CheckFinite(double v, absl::string_view field) {
  if (!std::isfinite(v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("initializer.", field, " must be finite, got ", v));
  }
  return absl::OkStatus();
}


// An initializer with its defaults resolved (GLOROT_UNIFORM as the uniform range its caller
// computed from the fans).
struct Draw {
  InitializerSpec::Type type;
  double value;   // CONSTANT
  double lo, hi;  // RANDOM_UNIFORM, GLOROT_UNIFORM
  double mean, stddev;
};

Draw Resolve(const InitializerSpec& spec, double lo, double hi) {
  Draw d{spec.type(), spec.value(), lo, hi, spec.mean(), spec.stddev()};
  if (spec.type() == InitializerSpec::RANDOM_UNIFORM && lo == 0 && hi == 0) {
    d.lo = -kKerasDefaultRange;
    d.hi = kKerasDefaultRange;
  }
  if (d.stddev == 0) d.stddev = kKerasDefaultStddev;
  return d;
}

// data[i] = the value of counter (key, first + i).
void Fill(const Draw& d, uint64_t key, uint64_t first, float* data, int64_t size) {
  switch (d.type) {
    case InitializerSpec::ZEROS:
      std::fill(data, data + size, 0.0f);
      break;
    case InitializerSpec::CONSTANT:
      std::fill(data, data + size, static_cast<float>(d.value));
      break;
    case InitializerSpec::RANDOM_UNIFORM:
    case InitializerSpec::GLOROT_UNIFORM:
      for (int64_t i = 0; i < size; ++i) {
        data[i] = UniformFloat(Bits(key, first + i, 0), d.lo, d.hi);
      }
      break;
    case InitializerSpec::RANDOM_NORMAL:
      for (int64_t i = 0; i < size; ++i) {
        data[i] = static_cast<float>(d.mean + d.stddev * StandardNormal(Bits(key, first + i, 0)));
      }
      break;
    case InitializerSpec::TRUNCATED_NORMAL:
      for (int64_t i = 0; i < size; ++i) {
        double z = 0.0;
        for (int attempt = 0; attempt < kMaxTruncatedDraws; ++attempt) {
          const double draw = StandardNormal(Bits(key, first + i, attempt));
          if (std::abs(draw) <= 2.0) {
            z = draw;
            break;
          }
        }
        data[i] = static_cast<float>(d.mean + d.stddev * z);
      }
      break;
    default:
      break;  // ValidateInitializer rejected it.
  }
}

// The per-row key of a hashed-key row: distinct keys of one table get distinct counters
// (Mix64 is a bijection), and the row's elements are counters 0 .. dim-1 under it.
constexpr uint64_t kKeyedRowSalt = 0x3C6EF372FE94F82BULL;

}  // namespace

absl::StatusOr<KeyedRowInitializer> KeyedRowInitializer::Create(const InitializerSpec& spec,
                                                                 absl::string_view table,
                                                                 int64_t dim) {
  absl::Status valid = ValidateInitializer(spec);
  if (!valid.ok()) return valid;
  if (spec.type() == InitializerSpec::GLOROT_UNIFORM) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table '", table,
        "': initializer.type GLOROT_UNIFORM needs a fixed row count; a dynamic table takes "
        "zeros, constant, random_uniform, random_normal or truncated_normal"));
  }
  if (dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("table '", table, "': dim must be > 0, got ", dim));
  }
  KeyedRowInitializer init;
  const Draw d = Resolve(spec, spec.minval(), spec.maxval());
  init.type_ = d.type;
  init.value_ = d.value;
  init.lo_ = d.lo;
  init.hi_ = d.hi;
  init.mean_ = d.mean;
  init.stddev_ = d.stddev;
  init.table_key_ = Mix64(spec.seed() ^ Mix64(Fnv1a64(table) ^ kKeyedRowSalt));
  init.dim_ = dim;
  return init;
}

void KeyedRowInitializer::Fill(int64_t key, float* out) const {
  const Draw d{type_, value_, lo_, hi_, mean_, stddev_};
  shardps::Fill(d, Mix64(table_key_ ^ Mix64(static_cast<uint64_t>(key) + kGolden)), 0, out,
                dim_);
}

absl::Status ValidateInitializer(const InitializerSpec& spec) {
  switch (spec.type()) {
    case InitializerSpec::ZEROS:
    case InitializerSpec::GLOROT_UNIFORM:
      return absl::OkStatus();
    case InitializerSpec::CONSTANT:
      return CheckFinite(spec.value(), "value");
    case InitializerSpec::RANDOM_UNIFORM: {
      absl::Status s = CheckFinite(spec.minval(), "minval");
      if (s.ok()) s = CheckFinite(spec.maxval(), "maxval");
      if (!s.ok()) return s;
      if (spec.minval() == 0 && spec.maxval() == 0) return absl::OkStatus();
      if (spec.minval() >= spec.maxval()) {
        return absl::InvalidArgumentError(
            absl::StrCat("initializer.minval (", spec.minval(),
                         ") must be below initializer.maxval (", spec.maxval(), ")"));
      }
      return absl::OkStatus();
    }
    case InitializerSpec::RANDOM_NORMAL:
    case InitializerSpec::TRUNCATED_NORMAL: {
      absl::Status s = CheckFinite(spec.mean(), "mean");
      if (s.ok()) s = CheckFinite(spec.stddev(), "stddev");
      if (!s.ok()) return s;
      if (spec.stddev() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("initializer.stddev must be >= 0, got ", spec.stddev()));
      }
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("initializer.type ", static_cast<int>(spec.type()), " is unknown"));
  }
}

Fans ComputeFans(absl::Span<const int64_t> full_shape) {
  const size_t rank = full_shape.size();
  if (rank == 0) return {1.0, 1.0};
  if (rank == 1) {
    const double n = static_cast<double>(full_shape[0]);
    return {n, n};
  }
  double receptive_field = 1.0;
  for (size_t i = 0; i + 2 < rank; ++i) receptive_field *= static_cast<double>(full_shape[i]);
  return {static_cast<double>(full_shape[rank - 2]) * receptive_field,
          static_cast<double>(full_shape[rank - 1]) * receptive_field};
}

absl::Status InitializeRows(const InitializerSpec& spec, absl::string_view variable,
                            absl::Span<const int64_t> full_shape, int64_t row_offset,
                            absl::Span<float> out) {
  absl::Status valid = ValidateInitializer(spec);
  if (!valid.ok()) return valid;
  int64_t full_rows = 1;
  int64_t row_width = 1;
  for (size_t i = 0; i < full_shape.size(); ++i) {
    if (full_shape[i] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("variable '", variable, "': full_shape dim ",
                                                     i, " is ", full_shape[i],
                                                     "; every dim must be > 0"));
    }
    if (i == 0) {
      full_rows = full_shape[0];
    } else {
      if (row_width > std::numeric_limits<int64_t>::max() / full_shape[i]) {
        return absl::InvalidArgumentError(
            absl::StrCat("variable '", variable, "': full_shape overflows int64"));
      }
      row_width *= full_shape[i];
    }
  }
  if (full_rows > std::numeric_limits<int64_t>::max() / row_width) {
    return absl::InvalidArgumentError(
        absl::StrCat("variable '", variable, "': full_shape overflows int64"));
  }
  const int64_t size = static_cast<int64_t>(out.size());
  if (size % row_width != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("variable '", variable, "': ", size,
                     " values are not a whole number of rows of width ", row_width));
  }
  const int64_t rows = size / row_width;
  if (row_offset < 0 || row_offset > full_rows - rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("variable '", variable, "': rows [", row_offset, ", ", row_offset + rows,
                     ") fall outside its ", full_rows, " rows"));
  }

  double lo = spec.minval();
  double hi = spec.maxval();
  if (spec.type() == InitializerSpec::GLOROT_UNIFORM) {
    const Fans fans = ComputeFans(full_shape);
    hi = std::sqrt(6.0 / (fans.fan_in + fans.fan_out));
    lo = -hi;
  }
  const Draw draw = Resolve(spec, lo, hi);
  const uint64_t key = Mix64(spec.seed() ^ Mix64(Fnv1a64(variable)));
  const uint64_t first = static_cast<uint64_t>(row_offset) * static_cast<uint64_t>(row_width);
  Fill(draw, key, first, out.data(), size);
  return absl::OkStatus();
}

}  // namespace shardps
