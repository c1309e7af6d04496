#include "ps_server/shard_spec_checks.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/error_detail.h"
#include "common/status_macros.h"
#include "google/protobuf/util/message_differencer.h"
#include "math/initializer.h"
#include "math/optimizer.h"
#include "ps_server/staleness.h"

namespace shardps {
namespace {

// Bounds every element count so that products of dims, byte counts and global element
// indices stay far from int64 overflow (2^46 floats is 256 TiB).
constexpr int64_t kMaxElements = int64_t{1} << 46;

// The update mode's checks, and the staleness policy's.
absl::Status ValidateUpdate(const ShardSpec& spec, const std::string& what) {
  switch (spec.update().mode()) {
    case UpdateSpec::ASYNC:
      if (spec.update().replicas_to_aggregate() != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": update.replicas_to_aggregate is for SYNC only, got ",
                         spec.update().replicas_to_aggregate(), " in ASYNC mode"));
      }
      break;
    case UpdateSpec::SYNC:
      if (spec.update().num_replicas() < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": update.num_replicas must be >= 1 for SYNC, got ",
                         spec.update().num_replicas()));
      }
      if (spec.update().replicas_to_aggregate() < 0 ||
          spec.update().replicas_to_aggregate() > spec.update().num_replicas()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": update.replicas_to_aggregate must be 0..num_replicas (",
                         spec.update().num_replicas(), "; 0: all of them), got ",
                         spec.update().replicas_to_aggregate()));
      }
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": update.mode ", static_cast<int>(spec.update().mode()), " is unknown"));
  }
  return Annotate(ValidateStalenessSpec(spec.update()), what);
}

// A dynamic table's shard (ShardSpec.dynamic): shape and full_shape [0, dim], the buckets it
// holds, admission and eviction; no staleness policy. Returns {0 rows, dim}.
absl::StatusOr<Geometry> ValidateDynamicSpec(const ShardSpec& spec, const std::string& what) {
  const auto& shape = spec.shape().dim();
  const auto& full = spec.full_shape().dim();
  if (shape.size() != 2 || full.size() != 2 || shape[0] != 0 || full[0] != 0 || shape[1] <= 0 ||
      shape[1] != full[1] || shape[1] > kMaxElements) {
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     ": a dynamic table's shape and full_shape must both be [0, dim] with dim > 0, "
                     "got [",
                     absl::StrJoin(shape, ","), "] and [", absl::StrJoin(full, ","), "]"));
  }
  const DynamicSpec& d = spec.dynamic();
  if (d.num_buckets() <= 0 || d.num_buckets() > (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": dynamic.num_buckets must be 1..1048576, got ", d.num_buckets()));
  }
  // Empty: a shard added to a running table (a ps added live), which bucket moves then fill.
  if (d.bucket_begin() < 0 || d.bucket_begin() > d.bucket_end() ||
      d.bucket_end() > d.num_buckets()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": dynamic buckets [", d.bucket_begin(), ", ", d.bucket_end(),
                     ") must be a range within [0, num_buckets ", d.num_buckets(), ")"));
  }
  if (d.admit_after() < 0 || d.admit_after() > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": dynamic.admit_after must be 0..255, got ", d.admit_after()));
  }
  if (d.ttl_steps() < 0 || d.max_rows() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": dynamic.ttl_steps (", d.ttl_steps(),
                                                   ") and dynamic.max_rows (", d.max_rows(),
                                                   ") must be >= 0"));
  }
  if (spec.row_offset() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": a dynamic table's row_offset must be 0, got ", spec.row_offset()));
  }
  const UpdateSpec& u = spec.update();
  if (u.staleness_lr() != UpdateSpec::NONE || u.delay_compensation() != 0 ||
      u.delay_compensation_adaptive() || u.retained_versions() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     ": update: a dynamic table has no staleness policy (staleness_lr, "
                     "delay_compensation, retained_versions must be unset)"));
  }
  RETURN_IF_ERROR(Annotate(ValidateInitializer(spec.initializer()), what));
  RETURN_IF_ERROR(Annotate(Optimizer::Validate(spec.optimizer()), what));
  RETURN_IF_ERROR(ValidateUpdate(spec, what));
  return Geometry{0, shape[1]};
}

}  // namespace

absl::StatusOr<Geometry> ValidateShardSpec(const ShardSpec& spec) {
  if (spec.name().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a shard spec has an empty name (variable '", spec.variable(), "')"));
  }
  const std::string what = QuotedShard(spec.name());
  const auto& shape = spec.shape().dim();
  const auto& full = spec.full_shape().dim();
  if (spec.has_dynamic()) return ValidateDynamicSpec(spec, what);
  if (shape.size() != full.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": shape has rank ", shape.size(),
                                                   ", full_shape has rank ", full.size()));
  }
  for (int i = 0; i < shape.size(); ++i) {
    if (shape[i] <= 0 || full[i] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": dim ", i, " is ", shape[i],
                                                     " (shape) / ", full[i],
                                                     " (full_shape); every dim must be > 0"));
    }
    if (i > 0 && shape[i] != full[i]) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": shape dim ", i, " is ", shape[i],
                                                     " but full_shape dim ", i, " is ", full[i],
                                                     "; shards split dim 0 only"));
    }
  }
  Geometry g{1, 1};
  int64_t full_rows = 1;
  if (!shape.empty()) {
    g.rows = shape[0];
    full_rows = full[0];
    for (int i = 1; i < shape.size(); ++i) {
      if (g.width > kMaxElements / shape[i]) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": shape is too large"));
      }
      g.width *= shape[i];
    }
    if (full_rows > kMaxElements / g.width) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": full_shape is too large"));
    }
  }
  if (spec.row_offset() < 0 || spec.row_offset() > full_rows - g.rows) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": rows [", spec.row_offset(), ", ", spec.row_offset() + g.rows,
                     ") do not fit in full_shape dim 0 of ", full_rows));
  }
  if (spec.num_parts() < 0 ||
      (spec.num_parts() > 0 && (spec.part() < 0 || spec.part() >= spec.num_parts()))) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": part ", spec.part(), " is not in [0, num_parts ", spec.num_parts(), ")"));
  }
  RETURN_IF_ERROR(Annotate(ValidateInitializer(spec.initializer()), what));
  RETURN_IF_ERROR(Annotate(Optimizer::Validate(spec.optimizer()), what));
  RETURN_IF_ERROR(ValidateUpdate(spec, what));
  return g;
}

std::string FirstSpecDifference(const ShardSpec& a, const ShardSpec& b) {
  google::protobuf::util::MessageDifferencer differencer;
  std::string report;
  differencer.ReportDifferencesToString(&report);
  if (differencer.Compare(a, b)) return "";
  const size_t newline = report.find('\n');
  return newline == std::string::npos ? report : report.substr(0, newline);
}

absl::Status CheckSameSpec(const ShardSpec& existing, const ShardSpec& wanted) {
  std::string diff;
  if (existing.has_dynamic() && wanted.has_dynamic()) {
    // A dynamic table's shard keeps the range bucket moves gave it and the part count it was
    // made with (a ps added live makes the table's later shards with more): neither is the
    // shard's to compare. A client that then finds shards that do not tile the table's
    // buckets (Discover) drops and makes them again.
    ShardSpec a = existing, b = wanted;
    for (ShardSpec* s : {&a, &b}) {
      s->clear_num_parts();
      s->mutable_dynamic()->clear_bucket_begin();
      s->mutable_dynamic()->clear_bucket_end();
    }
    diff = FirstSpecDifference(a, b);
  } else {
    diff = FirstSpecDifference(existing, wanted);
  }
  if (diff.empty()) return absl::OkStatus();
  return absl::AlreadyExistsError(absl::StrCat(
      QuotedShard(wanted.name()), " already exists with a different spec (", diff, ")"));
}

}  // namespace shardps
