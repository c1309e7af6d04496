#include "ps_server/shard_store.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "absl/base/config.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/safetensors.h"
#include "common/error_detail.h"
#include "common/fanout.h"
#include "common/status_macros.h"
#include "google/protobuf/util/message_differencer.h"
#include "proto/error.pb.h"
#include "ps_server/gradient_bytes.h"
#include "ps_server/initializer.h"
#include "ps_server/memory_budget.h"
#include "ps_server/optimizer.h"
#include "ps_server/parallel_for.h"
#include "ps_server/shard.h"
#include "checkpoint/dynamic_rows.h"
#include "partitioners/buckets.h"
#include "ps_server/shard_restore.h"
#include "ps_server/snapshot_writer.h"
#include "ps_server/staleness.h"
#include "ps_server/unique_ids.h"
#include "ps_server/version_waiters.h"

// Tensors travel as raw little-endian float32 bytes, copied with memcpy.
#ifndef ABSL_IS_LITTLE_ENDIAN
#error "shardps' wire format (raw float32 bytes) assumes a little-endian host"
#endif

namespace shardps {
namespace {

// Bounds every element count so that products of dims, byte counts and global element
// indices stay far from int64 overflow (2^46 floats is 256 TiB).
constexpr int64_t kMaxElements = int64_t{1} << 46;
// Threads reading one shard's tensors at a restore (ReadShardState): the parameters and
// each slot at once. A restore waits on the disk and on page faults more than it computes,
// so more than the cores help; each shard's fresh state is still built one shard at a time,
// so the memory a restore needs on top of the old state stays one shard's.
constexpr int kRestoreReadThreads = 4;

using FloatArray = Eigen::Map<Eigen::ArrayXf>;
using ConstFloatArray = Eigen::Map<const Eigen::ArrayXf>;

// The start of a mutating request, under the shard's lock: answers with the shard's version
// and, when the request id was already applied (a retry), marks the response a duplicate and
// returns true: the caller then changes nothing.
template <typename Response>
bool AnswerIfDuplicate(Shard& shard, uint64_t request_id, Response* response)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu()) {
  response->set_version(shard.version());
  if (!shard.SeenRequest(request_id)) return false;
  response->set_duplicate(true);
  return true;
}

// The end of an accepted Push or PushRows: remembers its request id, answers with the
// shard's version and what happened, and collects the pulls that version releases.
template <typename Response>
void RecordUpdate(Shard& shard, uint64_t request_id, const UpdateResult& result,
                  Response* response, std::vector<WaiterPtr>* ready)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu()) {
  shard.RememberRequest(request_id);
  response->set_version(shard.version());
  response->set_duplicate(result.duplicate);
  response->set_applied(result.applied);
  response->set_dropped(result.dropped);
  if (result.applied) shard.waiters().TakeReady(shard.version(), ready);
}

// Pull responses are filled in two halves so that the shard's lock covers only the memcpy:
// the caller sizes `data` first (outside the lock), then CopyRange or CopyRows copies under
// the lock and the filled string is swapped into the response. `data` starts as the
// response's own string, so a caller that recycles responses (the gRPC service pools them)
// lends its buffer: a pull of the same size then neither allocates nor zero-fills anything.
// A pull that fails leaves the response's data empty.

// The buffer a pull fills: the response's own string (its capacity, and its size when a
// recycled response last carried as many bytes), sized to `bytes` outside any lock.
std::string TakeBuffer(std::string* response_data, size_t bytes) {
  std::string data;
  data.swap(*response_data);
  data.resize(bytes);
  return data;
}

// What a pull reads: the shard's current parameters, or (exact) those of one version.
struct PullSource {
  bool exact = false;
  int64_t version = 0;  // exact: the version wanted
};

// The parameters `source` asks for, and their version. FAILED_PRECONDITION when an exact
// version is not held any more.
absl::StatusOr<std::pair<const ParamBlocks*, int64_t>> ReadableParams(const Shard& shard,
                                                                      PullSource source)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu()) {
  const int64_t version = source.exact ? source.version : shard.version();
  const ParamBlocks* params = shard.ParamsAt(version);
  if (params == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "pull from ", QuotedShard(shard.name()), ": version ", version,
        " is not held any more (the shard is at version ", shard.version(),
        "; a SYNC shard keeps the version before its last step, an ASYNC shard only its "
        "current one)"));
  }
  return std::make_pair(params, version);
}

// The response's version and shape for a pull of `range`.
void FillRangeMeta(const Shard& shard, RowRange range, int64_t version, PullResponse* response)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu()) {
  response->set_version(version);
  TensorShape* shape = response->mutable_shape();
  shape->clear_dim();
  const auto& dims = shard.spec().shape().dim();
  if (!dims.empty()) {
    shape->add_dim(range.size());
    for (int i = 1; i < dims.size(); ++i) shape->add_dim(dims[i]);
  }
}

// REQUIRES: data holds range.size() * width floats.
absl::Status CopyRange(const Shard& shard, RowRange range, PullSource source, std::string* data,
                       PullResponse* response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu()) {
  ASSIGN_OR_RETURN(auto params, ReadableParams(shard, source));
  shard.CopyRange(*params.first, range, reinterpret_cast<float*>(&(*data)[0]));
  response->mutable_data()->swap(*data);
  FillRangeMeta(shard, range, params.second, response);
  return absl::OkStatus();
}

// As CopyRange, but the bytes stay in the shard's blocks: `in_place` gets views of them and
// references that keep them unchanged (ParamBlocks::Share); the response's data stays empty.
absl::Status ShareRange(const Shard& shard, RowRange range, PullSource source,
                        ShardStore::PulledBytes* in_place, PullResponse* response)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu()) {
  ASSIGN_OR_RETURN(auto params, ReadableParams(shard, source));
  shard.ShareRange(*params.first, range, &in_place->pieces, &in_place->holds);
  response->clear_data();
  FillRangeMeta(shard, range, params.second, response);
  return absl::OkStatus();
}

// The same for the fills a waiter runs (a std::function, called under the shard's lock by
// whoever completes the waiter: the analysis cannot follow it there).
absl::Status CopyRangeLocked(const Shard& shard, RowRange range, PullSource source,
                             std::string* data, PullResponse* response)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  return CopyRange(shard, range, source, data, response);
}

// REQUIRES: data holds ids.size() * width floats.
absl::Status CopyRows(const Shard& shard, absl::Span<const int64_t> ids, PullSource source,
                      std::string* data, PullRowsResponse* response)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu()) {
  if (shard.dynamic()) {
    const int64_t version = source.exact ? source.version : shard.version();
    RETURN_IF_ERROR(shard.PullKeys(ids, version, reinterpret_cast<float*>(&(*data)[0])));
    response->mutable_data()->swap(*data);
    response->set_version(version);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(auto params, ReadableParams(shard, source));
  // Random rows of a large shard are each a cache (and TLB) miss: the rows a few ids ahead
  // are prefetched so that their misses overlap the copies before them.
  const ParamBlocks& blocks = *params.first;
  const size_t row_bytes = static_cast<size_t>(shard.width()) * sizeof(float);
  char* out = &(*data)[0];
  constexpr size_t kAhead = 8;
  for (size_t k = 0; k < ids.size(); ++k) {
    if (k + kAhead < ids.size()) {
      const char* next = reinterpret_cast<const char*>(blocks.Row(ids[k + kAhead]));
      for (size_t line = 0; line < std::min<size_t>(row_bytes, 256); line += 64) {
        __builtin_prefetch(next + line);
      }
    }
    std::memcpy(out + k * row_bytes, blocks.Row(ids[k]), row_bytes);
  }
  response->mutable_data()->swap(*data);
  response->set_version(params.second);
  return absl::OkStatus();
}

absl::Status CopyRowsLocked(const Shard& shard, absl::Span<const int64_t> ids,
                            PullSource source, std::string* data, PullRowsResponse* response)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  return CopyRows(shard, ids, source, data, response);
}

absl::StatusOr<RowRange> ResolveRange(const Shard& shard, int64_t begin, int64_t end,
                                      absl::string_view what) {
  if (shard.dynamic()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", QuotedShard(shard.name()),
        " is a dynamic table: it has no row ranges; read and write it by key (PullRows, "
        "PushRows)"));
  }
  const int64_t resolved_end = end == 0 ? shard.rows() : end;
  if (begin < 0 || begin >= resolved_end || resolved_end > shard.rows()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": row range [", begin, ", ", end, ") is not within the shard's ", shard.rows(),
        " rows (need 0 <= row_begin < row_end <= ", shard.rows(), "; row_end 0 means the end)"));
  }
  return RowRange{begin, resolved_end};
}

// A row request's ids: `ids_bytes` (raw little-endian int64s) when set, else the packed
// `ids`. Viewed in place when aligned (the usual case), else copied into `scratch`.
// INVALID_ARGUMENT naming the field when both are set or ids_bytes is not whole int64s.
absl::StatusOr<absl::Span<const int64_t>> RequestIds(
    const google::protobuf::RepeatedField<int64_t>& ids, const std::string& ids_bytes,
    absl::string_view what, std::vector<int64_t>* scratch) {
  static_assert(ABSL_IS_LITTLE_ENDIAN, "ids_bytes holds little-endian int64s");
  if (ids_bytes.empty()) return absl::MakeConstSpan(ids.data(), static_cast<size_t>(ids.size()));
  if (!ids.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": both ids (", ids.size(), " ids) and ids_bytes (", ids_bytes.size(),
        " bytes) are set; set one"));
  }
  if (ids_bytes.size() % sizeof(int64_t) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ids_bytes has ", ids_bytes.size(),
                     " bytes, not a multiple of 8 (little-endian int64 ids)"));
  }
  const size_t n = ids_bytes.size() / sizeof(int64_t);
  if (reinterpret_cast<uintptr_t>(ids_bytes.data()) % alignof(int64_t) == 0) {
    return absl::MakeConstSpan(reinterpret_cast<const int64_t*>(ids_bytes.data()), n);
  }
  scratch->resize(n);
  std::memcpy(scratch->data(), ids_bytes.data(), ids_bytes.size());
  return absl::MakeConstSpan(*scratch);
}

absl::Status CheckIds(const Shard& shard, absl::Span<const int64_t> ids, absl::string_view what) {
  if (shard.dynamic()) return shard.CheckKeys(ids, what);
  for (size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] < 0 || ids[k] >= shard.rows()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ids[", k, "] = ", ids[k],
                                                     " is out of range; the shard has ",
                                                     shard.rows(), " rows"));
    }
  }
  return absl::OkStatus();
}

// Checks that `grad` holds exactly `floats` finite float32 values.
absl::Status CheckGradient(const GradientBytes& grad, int64_t floats, absl::string_view what,
                           absl::string_view field) {
  const int64_t expected = floats * static_cast<int64_t>(sizeof(float));
  if (grad.size_bytes() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", field, " has ", grad.size_bytes(),
                                                   " bytes, expected ", expected, " (", floats,
                                                   " float32 values)"));
  }
  const int64_t bad = grad.FirstNonFinite();
  if (bad < floats) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", field, "[", bad, "] is ",
                                                   grad.At(bad), "; values must be finite"));
  }
  return absl::OkStatus();
}

// As CheckGradient, for bytes in one buffer, and returns them as floats: viewed in place
// when aligned (the usual case) or copied into `scratch`.
absl::StatusOr<const float*> CheckedFloats(absl::string_view data, int64_t floats,
                                           absl::string_view what, absl::string_view field,
                                           std::vector<float>* scratch) {
  RETURN_IF_ERROR(CheckGradient(GradientBytes(data), floats, what, field));
  if (reinterpret_cast<uintptr_t>(data.data()) % alignof(float) == 0) {
    return reinterpret_cast<const float*>(data.data());
  }
  scratch->resize(static_cast<size_t>(floats));
  if (floats > 0) std::memcpy(scratch->data(), data.data(), data.size());
  return scratch->data();
}

absl::Status CheckRequestId(uint64_t request_id, absl::string_view what) {
  if (request_id == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": request_id must be non-zero (it detects retried requests)"));
  }
  return absl::OkStatus();
}

absl::Status CheckReplica(const Shard& shard, const SyncTag& tag, absl::string_view what) {
  if (tag.replica() < 0 || tag.replica() >= shard.num_replicas()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": sync.replica ", tag.replica(),
                                                   " is not in [0, ", shard.num_replicas(), ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckTimeout(int64_t timeout_ms, absl::string_view what) {
  if (timeout_ms < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": wait_timeout_ms must be >= 0, got ", timeout_ms));
  }
  return absl::OkStatus();
}

absl::Status ValidateUpdate(const ShardSpec& spec, const std::string& what);

// A dynamic table's shard (ShardSpec.dynamic): shape and full_shape [0, dim], the buckets it
// holds, admission and eviction; no staleness policy. Returns {0 rows, dim}.
absl::StatusOr<Geometry> ValidateDynamicSpec(const ShardSpec& spec, const std::string& what) {
  const auto& shape = spec.shape().dim();
  const auto& full = spec.full_shape().dim();
  if (shape.size() != 2 || full.size() != 2 || shape[0] != 0 || full[0] != 0 ||
      shape[1] <= 0 || shape[1] != full[1] || shape[1] > kMaxElements) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": a dynamic table's shape and full_shape must both be [0, dim] with dim > 0, "
        "got [", absl::StrJoin(shape, ","), "] and [", absl::StrJoin(full, ","), "]"));
  }
  const DynamicSpec& d = spec.dynamic();
  if (d.num_buckets() <= 0 || d.num_buckets() > (1 << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": dynamic.num_buckets must be 1..1048576, got ", d.num_buckets()));
  }
  if (d.bucket_begin() < 0 || d.bucket_begin() >= d.bucket_end() ||
      d.bucket_end() > d.num_buckets()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": dynamic buckets [", d.bucket_begin(), ", ", d.bucket_end(),
        ") must be a non-empty range within [0, num_buckets ", d.num_buckets(), ")"));
  }
  if (d.admit_after() < 0 || d.admit_after() > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": dynamic.admit_after must be 0..255, got ", d.admit_after()));
  }
  if (d.ttl_steps() < 0 || d.max_rows() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": dynamic.ttl_steps (", d.ttl_steps(), ") and dynamic.max_rows (", d.max_rows(),
        ") must be >= 0"));
  }
  if (spec.row_offset() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": a dynamic table's row_offset must be 0, got ", spec.row_offset()));
  }
  const UpdateSpec& u = spec.update();
  if (u.staleness_lr() != UpdateSpec::NONE || u.delay_compensation() != 0 ||
      u.delay_compensation_adaptive() || u.retained_versions() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": update: a dynamic table has no staleness policy (staleness_lr, "
        "delay_compensation, retained_versions must be unset)"));
  }
  RETURN_IF_ERROR(Annotate(ValidateInitializer(spec.initializer()), what));
  RETURN_IF_ERROR(Annotate(Optimizer::Validate(spec.optimizer()), what));
  RETURN_IF_ERROR(ValidateUpdate(spec, what));
  return Geometry{0, shape[1]};
}

// Shape and placement checks; returns the shard's rows and row width.
absl::StatusOr<Geometry> ValidateSpec(const ShardSpec& spec) {
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
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": shape dim ", i, " is ", shape[i], " but full_shape dim ", i,
                       " is ", full[i], "; shards split dim 0 only"));
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
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": rows [", spec.row_offset(), ", ", spec.row_offset() + g.rows,
        ") do not fit in full_shape dim 0 of ", full_rows));
  }
  if (spec.num_parts() < 0 || (spec.num_parts() > 0 &&
                               (spec.part() < 0 || spec.part() >= spec.num_parts()))) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": part ", spec.part(),
                                                   " is not in [0, num_parts ",
                                                   spec.num_parts(), ")"));
  }
  RETURN_IF_ERROR(Annotate(ValidateInitializer(spec.initializer()), what));
  RETURN_IF_ERROR(Annotate(Optimizer::Validate(spec.optimizer()), what));
  RETURN_IF_ERROR(ValidateUpdate(spec, what));
  return g;
}

// The update mode's checks, and the staleness policy's.
absl::Status ValidateUpdate(const ShardSpec& spec, const std::string& what) {
  switch (spec.update().mode()) {
    case UpdateSpec::ASYNC:
      if (spec.update().replicas_to_aggregate() != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": update.replicas_to_aggregate is for SYNC only, got ",
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
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": update.replicas_to_aggregate must be 0..num_replicas (",
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

// The first difference between two specs ("modified: optimizer.learning_rate: 0.1 -> 0.2"),
// or "" when they are equal.
std::string FirstDifference(const ShardSpec& a, const ShardSpec& b) {
  google::protobuf::util::MessageDifferencer differencer;
  std::string report;
  differencer.ReportDifferencesToString(&report);
  if (differencer.Compare(a, b)) return "";
  const size_t newline = report.find('\n');
  return newline == std::string::npos ? report : report.substr(0, newline);
}


// What a request that ran out of memory answers.
absl::Status OutOfMemory(absl::string_view what) {
  return absl::ResourceExhaustedError(
      absl::StrCat(what, ": the ps ran out of memory; nothing was changed by this request"));
}

// Runs `fn`, turning std::bad_alloc into RESOURCE_EXHAUSTED: no request may take the ps down
// by needing more memory than there is. Every update allocates (and copies blocks on write)
// before it writes, so a request that fails this way has changed nothing.
template <typename Fn>
absl::Status Guarded(absl::string_view what, Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return OutOfMemory(what);
  }
}

// The same for a request on one shard ("push to shard 's'"), the message built only on
// failure (the data path pays for no string).
template <typename Fn>
absl::Status Guarded(absl::string_view kind, absl::string_view shard, Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return OutOfMemory(absl::StrCat(kind, " ", QuotedShard(shard)));
  }
}

// A dynamic shard's statistics (and its memory now as its bytes); nothing for another shard.
void FillDynamicStats(const Shard& shard, ShardInfo* info) {
  if (!shard.dynamic()) return;
  DynamicTableStats stats;
  {
    absl::MutexLock lock(&shard.mu());  // a restore may replace the table
    stats = shard.table()->stats();
  }
  DynamicShardStats* d = info->mutable_dynamic();
  d->set_rows(stats.rows);
  d->set_created(stats.created);
  d->set_evicted_ttl(stats.evicted_ttl);
  d->set_evicted_budget(stats.evicted_budget);
  d->set_admission_denied(stats.admission_denied);
  d->set_index_bytes(stats.index_bytes);
  d->set_arena_bytes(stats.arena_bytes);
  info->set_bytes(stats.index_bytes + stats.arena_bytes);
}

// "variable 'v' (shard 'v/part_1')", or "shard 'v'" for an unsplit variable.
std::string VariableAndShard(const ShardSpec& spec) {
  if (spec.variable().empty() || spec.variable() == spec.name()) return QuotedShard(spec.name());
  return absl::StrCat("variable '", spec.variable(), "' (", QuotedShard(spec.name()), ")");
}

const std::string& VariableOf(const ShardSpec& spec) {
  return spec.variable().empty() ? spec.name() : spec.variable();
}

SnapshotWriter::Options WriterOptions(const ShardStore::Options& options) {
  SnapshotWriter::Options writer;
  writer.before_write = options.before_snapshot_write;
  return writer;
}

uint64_t RandomIncarnation() {
  absl::BitGen gen;
  uint64_t incarnation = 0;
  while (incarnation == 0) incarnation = absl::Uniform<uint64_t>(gen);
  return incarnation;
}

class ShardStoreImpl final : public ShardStore {
 public:
  explicit ShardStoreImpl(const Options& options)
      : options_(options),
        start_(absl::Now()),
        incarnation_(options.incarnation != 0 ? options.incarnation : RandomIncarnation()),
        budget_(options.memory_budget_bytes, options.snapshot_reserve, options.task_index) {}

  ~ShardStoreImpl() override { Shutdown(); }

  absl::Status CreateShards(const CreateShardsRequest& request,
                            CreateShardsResponse* response) override {
    return Guarded("create shards", [&] { return CreateShardsImpl(request, response); });
  }

  absl::Status ListShards(const ListShardsRequest& request,
                          ListShardsResponse* response) override {
    return Guarded("list shards", [&]() -> absl::Status {
      response->set_task_index(options_.task_index);
      for (const std::shared_ptr<Shard>& shard : AllShards()) {
        if (!request.variable().empty() && request.variable() != VariableOf(shard->spec())) {
          continue;
        }
        ShardInfo* info = response->add_shards();
        *info->mutable_spec() = shard->spec();
        info->set_bytes(shard->bytes());
        FillDynamicStats(*shard, info);
        absl::MutexLock lock(&shard->mu());
        info->set_version(shard->version());
      }
      return absl::OkStatus();
    });
  }

  void Pull(const PullRequest& request, PullResponse* response, DoneCallback done) override {
    Pull(request, response, nullptr, std::move(done));
  }

  void Pull(const PullRequest& request, PullResponse* response, PulledBytes* in_place,
            DoneCallback done) override {
    const std::string what = absl::StrCat("pull from ", QuotedShard(request.shard()));
    bool pending = false;
    const absl::Status status = Guarded(what, [&] {
      return StartPull(request, response, in_place, what, &done, &pending);
    });
    if (!pending) done(status);
  }

  void PullBatch(const PullBatchRequest& request, std::vector<PullResponse>* responses,
                 std::vector<PulledBytes>* in_place, DoneCallback done) override {
    const int items = request.pulls_size();
    FanOut(
        "pull batch", items,
        [&]() -> absl::Status {
          // Every item is resolved first, so that a batch too large for one reply fails before
          // anything is pulled.
          int64_t total = 0;
          for (int i = 0; i < items; ++i) {
            const PullRequest& item = request.pulls(i);
            const std::string what = absl::StrCat("pull from ", QuotedShard(item.shard()));
            ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard, FindShard(item.shard(), what));
            ASSIGN_OR_RETURN(RowRange range,
                             ResolveRange(*shard, item.row_begin(), item.row_end(), what));
            total += range.size() * shard->width() * static_cast<int64_t>(sizeof(float));
            if (options_.max_reply_bytes > 0 && total > options_.max_reply_bytes) {
              return ReplyTooLarge(absl::StrCat("pull batch (", items, " items)"),
                                   absl::StrCat("at least ", total));
            }
          }
          responses->clear();
          responses->resize(static_cast<size_t>(items));
          in_place->clear();
          in_place->resize(static_cast<size_t>(items));
          return absl::OkStatus();
        },
        std::move(done),
        [&](int i, DoneCallback finish) {
          Pull(request.pulls(i), &(*responses)[static_cast<size_t>(i)],
               &(*in_place)[static_cast<size_t>(i)], std::move(finish));
        });
  }

  void PullRows(const PullRowsRequest& request, PullRowsResponse* response,
                DoneCallback done) override {
    const std::string what = absl::StrCat("pull rows from ", QuotedShard(request.shard()));
    bool pending = false;
    const absl::Status status =
        Guarded(what, [&] { return StartPullRows(request, response, what, &done, &pending); });
    if (!pending) done(status);
  }

  void PullRowsBatch(const PullRowsBatchRequest& request,
                     absl::Span<PullRowsResponse* const> responses, DoneCallback done) override {
    const int items = request.pulls_size();
    if (responses.size() != static_cast<size_t>(items)) {
      return done(absl::InvalidArgumentError(absl::StrCat(
          "pull rows batch of ", items, " items has ", responses.size(), " responses")));
    }
    FanOut(
        "pull rows batch", items,
        [&]() -> absl::Status {
          // The whole reply's size first, so that a batch too large for one reply fails
          // before anything is pulled (each item's own ids, width and limits are checked as it
          // starts).
          int64_t total = 0;
          for (int i = 0; i < items; ++i) {
            const PullRowsRequest& item = request.pulls(i);
            const std::string what = absl::StrCat("pull rows from ", QuotedShard(item.shard()));
            ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard, FindShard(item.shard(), what));
            const int64_t ids = item.ids_size() +
                                static_cast<int64_t>(item.ids_bytes().size() / sizeof(int64_t));
            RETURN_IF_ERROR(CheckReplyBytes(ids, shard->width(), what));
            total += ids * shard->width() * static_cast<int64_t>(sizeof(float));
            if (options_.max_reply_bytes > 0 && total > options_.max_reply_bytes) {
              return ReplyTooLarge(absl::StrCat("pull rows batch (", items, " items)"),
                                   absl::StrCat("at least ", total));
            }
          }
          return absl::OkStatus();
        },
        std::move(done),
        [&](int i, DoneCallback finish) {
          PullRows(request.pulls(i), responses[static_cast<size_t>(i)], std::move(finish));
        });
  }

  // A batch of `items` pulls answered as one: `check` (run guarded, as `what`) vets the whole
  // batch; then start(i, finish) starts item i, and `done` runs once, after every item has
  // finished, with the first error. Whatever runs out of memory, `done` is called exactly
  // once: it moves into a shared holder only once that is allocated.
  void FanOut(absl::string_view what, int items, const std::function<absl::Status()>& check,
              DoneCallback done, const std::function<void(int, DoneCallback)>& start) {
    std::shared_ptr<DoneCallback> holder;
    std::shared_ptr<Fanout> fan;
    const absl::Status status = Guarded(what, [&]() -> absl::Status {
      RETURN_IF_ERROR(check());
      holder = std::make_shared<DoneCallback>(std::move(done));
      fan = Fanout::Make(static_cast<size_t>(items),
                         [holder](const absl::Status& s) { (*holder)(s); });
      return absl::OkStatus();
    });
    if (fan == nullptr) {
      if (holder != nullptr) {
        (*holder)(status);
      } else {
        done(status);
      }
      return;
    }
    for (int i = 0; i < items; ++i) {
      try {
        start(i, [fan](const absl::Status& s) { fan->Finish(s); });
      } catch (const std::bad_alloc&) {
        fan->Finish(OutOfMemory(what));
      }
    }
  }

  absl::Status Push(const PushRequest& request, PushResponse* response) override {
    return Push(request, request.data(), response);
  }

  absl::Status Push(const PushRequest& request, absl::string_view data,
                    PushResponse* response) override {
    return Guarded("push to", request.shard(),
                   [&] { return PushDense(request, GradientBytes(data), response); });
  }

  absl::Status PushBatch(const PushBatchRequest& request,
                         PushBatchResponse* response) override {
    const absl::string_view data = request.data();
    return PushBatch(request, absl::MakeConstSpan(&data, 1), response);
  }

  absl::Status PushBatch(const PushBatchRequest& request,
                         absl::Span<const absl::string_view> pieces,
                         PushBatchResponse* response) override {
    return Guarded("push batch", [&] { return PushBatchImpl(request, pieces, response); });
  }

  absl::Status PushRows(const PushRowsRequest& request, PushRowsResponse* response) override {
    return Guarded("push rows to", request.shard(),
                   [&] { return PushRowsImpl(request, response); });
  }

  absl::Status PushRowsBatch(const PushRowsBatchRequest& request,
                             PushRowsBatchResponse* response) override {
    response->Clear();
    for (const PushRowsRequest& item : request.pushes()) {
      RETURN_IF_ERROR(PushRows(item, response->add_pushes()));
    }
    return absl::OkStatus();
  }

  absl::Status Assign(const AssignRequest& request, AssignResponse* response) override {
    return Guarded("assign to", request.shard(),
                   [&] { return AssignImpl(request, response); });
  }

  void Health(HealthResponse* response) override {
    response->set_task_type("ps");
    response->set_task_index(options_.task_index);
    std::vector<std::shared_ptr<Shard>> dynamic;
    {
      absl::MutexLock lock(&map_mu_);
      response->set_num_shards(static_cast<int32_t>(shards_.size()));
      int64_t bytes = total_bytes_;
      for (const auto& [name, shard] : shards_) {
        if (shard->dynamic()) {
          bytes -= shard->bytes();  // its reservation; its memory now is counted below
          dynamic.push_back(shard);
        }
      }
      response->set_bytes(bytes);
    }
    // A dynamic table holds what its rows take now (index and arena), which grows with the
    // keys pushed and may pass its reservation (none without a row budget).
    for (const std::shared_ptr<Shard>& shard : dynamic) {
      absl::MutexLock lock(&shard->mu());
      const DynamicTableStats stats = shard->table()->stats();
      response->set_bytes(response->bytes() + stats.index_bytes + stats.arena_bytes);
    }
    response->set_uptime_ms(absl::ToInt64Milliseconds(absl::Now() - start_));
    response->set_status(shutdown_.load(std::memory_order_acquire) ? "SHUTTING_DOWN"
                                                                   : "SERVING");
    response->set_incarnation(incarnation_);
    response->set_generation(generation_.load(std::memory_order_acquire));
    response->set_memory_budget_bytes(budget_.budget_bytes());
    response->set_memory_available_bytes(budget_.available_bytes());
    response->set_snapshot_copy_bytes(snapshot_copy_bytes_.load(std::memory_order_relaxed));
  }

  absl::Status SetGeneration(const SetGenerationRequest& request,
                             SetGenerationResponse* response) override {
    if (request.generation() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("set generation: generation must be >= 0, got ", request.generation()));
    }
    response->set_generation(RaiseGeneration(request.generation()));
    return absl::OkStatus();
  }

  absl::Status DropShards(const DropShardsRequest& request,
                          DropShardsResponse* response) override {
    return Guarded("drop shards", [&] { return DropShardsImpl(request, response); });
  }

  absl::Status Snapshot(const SnapshotRequest& request, SnapshotResponse* response) override {
    return Guarded(absl::StrCat("snapshot ", request.checkpoint_id()),
                   [&] { return SnapshotImpl(request, response); });
  }

  absl::Status SnapshotStatus(const SnapshotStatusRequest& request,
                              SnapshotStatusResponse* response) override {
    return Guarded("snapshot status", [&] {
      *response = writer_.Status(request.checkpoint_id());
      return absl::OkStatus();
    });
  }
  absl::Status Restore(const RestoreRequest& request, RestoreResponse* response) override {
    return Guarded("restore", [&] { return RestoreImpl(request, response); });
  }

  void Shutdown() override {
    // Set before visiting the shards: a pull that registers under a shard's lock after this
    // shard was visited sees the flag (the store's release/acquire through the lock).
    shutdown_.store(true, std::memory_order_release);
    for (const std::shared_ptr<Shard>& shard : AllShards()) {
      CancelWaiters(*shard, "the ps is shutting down");
    }
  }

 private:
  absl::Status CreateShardsImpl(const CreateShardsRequest& request,
                                CreateShardsResponse* response) {
    // 1. Validate every spec; a name twice in the request must carry the same spec.
    std::vector<Geometry> geometry(static_cast<size_t>(request.shards_size()));
    absl::flat_hash_map<std::string, int> first_index;
    std::vector<int> unique;
    for (int i = 0; i < request.shards_size(); ++i) {
      const ShardSpec& spec = request.shards(i);
      ASSIGN_OR_RETURN(geometry[i], ValidateSpec(spec));
      auto [it, inserted] = first_index.emplace(spec.name(), i);
      if (!inserted) {
        const std::string diff = FirstDifference(request.shards(it->second), spec);
        if (!diff.empty()) {
          return absl::InvalidArgumentError(absl::StrCat(
              QuotedShard(spec.name()), " appears twice in the request with different ",
              "specs (shards[", it->second, "] vs shards[", i, "]: ", diff, ")"));
        }
        continue;
      }
      unique.push_back(i);
    }
    // 2. Conflicts with existing shards fail early, before any allocation.
    std::vector<int> fresh;
    {
      absl::MutexLock lock(&map_mu_);
      for (int i : unique) {
        const ShardSpec& spec = request.shards(i);
        auto it = shards_.find(spec.name());
        if (it == shards_.end()) {
          fresh.push_back(i);
        } else {
          RETURN_IF_ERROR(CheckSameSpec(it->second->spec(), spec));
        }
      }
    }
    // 3. The memory budget, before any allocation: every new shard's bytes are reserved,
    // or none (the reservation is returned unless the shards are inserted).
    Reservation reservation(&budget_);
    for (int i : fresh) {
      const ShardSpec& spec = request.shards(i);
      ASSIGN_OR_RETURN(const int64_t bytes, Shard::BytesFor(spec, geometry[i]));
      RETURN_IF_ERROR(reservation.Add(bytes, absl::StrCat("create ", VariableAndShard(spec))));
    }
    // 4. Allocate and initialize outside the map lock (a large table takes a while).
    std::vector<std::shared_ptr<Shard>> built;
    for (int i : fresh) {
      ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard,
                       Shard::Create(request.shards(i), geometry[i], options_.request_id_window,
                                     &snapshot_copy_bytes_));
      built.push_back(std::move(shard));
    }
    // 5. Insert all or nothing; a concurrent CreateShards may have inserted some meanwhile.
    absl::MutexLock lock(&map_mu_);
    for (const auto& shard : built) {
      auto it = shards_.find(shard->name());
      if (it != shards_.end()) RETURN_IF_ERROR(CheckSameSpec(it->second->spec(), shard->spec()));
    }
    int created = 0;
    for (auto& shard : built) {
      const std::string name = shard->name();
      const int64_t bytes = shard->bytes();
      if (shards_.emplace(name, std::move(shard)).second) {
        total_bytes_ += bytes;
        reservation.Keep(bytes);
        ++created;
      }
    }
    response->set_created(created);
    return absl::OkStatus();
  }

  // Memory reserved in the budget for a request, returned when the request does not keep it.
  class Reservation {
   public:
    explicit Reservation(MemoryBudget* budget) : budget_(budget) {}
    ~Reservation() { budget_->Release(bytes_); }
    absl::Status Add(int64_t bytes, absl::string_view what) {
      RETURN_IF_ERROR(budget_->Reserve(bytes, what));
      bytes_ += bytes;
      return absl::OkStatus();
    }
    void Keep(int64_t bytes) { bytes_ -= bytes; }

   private:
    MemoryBudget* const budget_;
    int64_t bytes_ = 0;
  };

  // Starts a pull: fills the response now, or registers a waiter (then *pending is true and
  // `*done` has been taken), or fails.
  absl::Status StartPull(const PullRequest& request, PullResponse* response,
                         PulledBytes* in_place, const std::string& what, DoneCallback* done,
                         bool* pending) {
    RETURN_IF_ERROR(CheckTimeout(request.wait_timeout_ms(), what));
    ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard, FindShard(request.shard(), what));
    ASSIGN_OR_RETURN(RowRange range,
                     ResolveRange(*shard, request.row_begin(), request.row_end(), what));
    RETURN_IF_ERROR(CheckReplyBytes(range.size(), shard->width(), what));
    Shard* s = shard.get();
    const PullSource source{request.exact_version(), request.min_version()};
    if (in_place != nullptr) {
      auto share = [s, range, source, response, in_place]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return ShareRange(*s, range, source, in_place, response);
      };
      return FillOrWait(
          std::move(shard), request.min_version(), request.wait_timeout_ms(), share,
          [share]() -> std::function<absl::Status()> { return share; }, done, pending);
    }
    const size_t bytes = static_cast<size_t>(range.size() * s->width()) * sizeof(float);
    std::string data = TakeBuffer(response->mutable_data(), bytes);
    return FillOrWait(
        std::move(shard), request.min_version(), request.wait_timeout_ms(),
        [s, range, source, response, &data]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return CopyRange(*s, range, source, &data, response);
        },
        // A deferred fill takes the sized buffer along (only one of the two ever runs).
        [s, range, source, response, &data]() -> std::function<absl::Status()> {
          return [s, range, source, response, late = std::move(data)]() mutable {
            return CopyRangeLocked(*s, range, source, &late, response);
          };
        },
        done, pending);
  }

  absl::Status StartPullRows(const PullRowsRequest& request, PullRowsResponse* response,
                             const std::string& what, DoneCallback* done, bool* pending) {
    RETURN_IF_ERROR(CheckTimeout(request.wait_timeout_ms(), what));
    ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard, FindShard(request.shard(), what));
    std::vector<int64_t> scratch;
    ASSIGN_OR_RETURN(const absl::Span<const int64_t> ids,
                     RequestIds(request.ids(), request.ids_bytes(), what, &scratch));
    RETURN_IF_ERROR(CheckReplyBytes(static_cast<int64_t>(ids.size()), shard->width(), what));
    RETURN_IF_ERROR(CheckIds(*shard, ids, what));
    Shard* s = shard.get();
    const PullSource source{request.exact_version(), request.min_version()};
    const size_t bytes = ids.size() * static_cast<size_t>(s->width()) * sizeof(float);
    std::string data = TakeBuffer(response->mutable_data(), bytes);
    return FillOrWait(
        std::move(shard), request.min_version(), request.wait_timeout_ms(),
        [s, ids, source, response, &data]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return CopyRows(*s, ids, source, &data, response);
        },
        // A deferred fill owns a copy of the ids (the request need not outlive this call)
        // and takes the sized buffer along.
        [s, ids, source, response, &data]() -> std::function<absl::Status()> {
          return [s, owned = std::vector<int64_t>(ids.begin(), ids.end()), source, response,
                  late = std::move(data)]() mutable {
            return CopyRowsLocked(*s, owned, source, &late, response);
          };
        },
        done, pending);
  }

  // RESOURCE_EXHAUSTED when `count` rows of `width` floats would pass max_reply_bytes (or
  // overflow).
  absl::Status CheckReplyBytes(int64_t count, int64_t width, absl::string_view what) const {
    const int64_t row_bytes = width * static_cast<int64_t>(sizeof(float));
    const bool overflows = count > 0 && row_bytes > std::numeric_limits<int64_t>::max() / count;
    if (overflows) return ReplyTooLarge(what, absl::StrCat(count, " rows of ", row_bytes));
    const int64_t bytes = count * row_bytes;
    if (options_.max_reply_bytes > 0 && bytes > options_.max_reply_bytes) {
      return ReplyTooLarge(what, absl::StrCat(bytes));
    }
    return absl::OkStatus();
  }

  absl::Status ReplyTooLarge(absl::string_view what, absl::string_view bytes) const {
    ErrorDetail detail;
    detail.set_kind(ErrorDetail::LIMIT);
    detail.set_ps_task(options_.task_index);
    detail.set_limit("--max_reply_bytes");
    return WithDetail(absl::ResourceExhaustedError(absl::StrCat(
                          what, ": the reply would be ", bytes, " bytes, more than ps task ",
                          options_.task_index, "'s --max_reply_bytes=", options_.max_reply_bytes,
                          "; pull fewer rows per call")),
                      detail);
  }

  absl::Status PushBatchImpl(const PushBatchRequest& request,
                             absl::Span<const absl::string_view> pieces,
                             PushBatchResponse* response) {
    const GradientBytes data(pieces);
    if (request.data_bytes_size() != request.pushes_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "push batch: data_bytes has ", request.data_bytes_size(), " entries for ",
          request.pushes_size(), " pushes"));
    }
    int64_t total = 0;
    for (int i = 0; i < request.pushes_size(); ++i) {
      const int64_t bytes = request.data_bytes(i);
      if (bytes < 0 || bytes > data.size_bytes() - total) {
        return absl::InvalidArgumentError(absl::StrCat(
            "push batch: data_bytes[", i, "] = ", bytes, " overruns data (", data.size_bytes(),
            " bytes, ", total, " used by the items before)"));
      }
      if (!request.pushes(i).data().empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "push batch: pushes[", i, "].data must be empty (the bytes go in data)"));
      }
      total += bytes;
    }
    if (total != data.size_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat("push batch: data_bytes sum to ", total,
                                                     ", data has ", data.size_bytes(),
                                                     " bytes"));
    }
    response->Clear();
    int64_t offset = 0;
    for (int i = 0; i < request.pushes_size(); ++i) {
      const int64_t bytes = request.data_bytes(i);
      RETURN_IF_ERROR(
          PushDense(request.pushes(i), data.Sub(offset, bytes), response->add_pushes()));
      offset += bytes;
    }
    return absl::OkStatus();
  }

  // A dense push whose gradient is read where it lies (one buffer, or a batch's pieces).
  absl::Status PushDense(const PushRequest& request, const GradientBytes& grad,
                         PushResponse* response) {
    const std::string what = absl::StrCat("push to ", QuotedShard(request.shard()));
    RETURN_IF_ERROR(CheckRequestId(request.request_id(), what));
    ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard, FindShard(request.shard(), what));
    ASSIGN_OR_RETURN(RowRange range,
                     ResolveRange(*shard, request.row_begin(), request.row_end(), what));
    RETURN_IF_ERROR(CheckGradient(grad, range.size() * shard->width(), what, "data"));
    if (shard->sync()) RETURN_IF_ERROR(CheckReplica(*shard, request.sync(), what));

    return ApplyGradient(*shard, request, what, response,
                         [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard->mu())
                             -> absl::StatusOr<UpdateResult> {
                           UpdateResult result;
                           if (shard->sync()) {
                             result = shard->AddDense(request.sync().replica(), range, grad);
                           } else {
                             shard->ApplyDense(range, grad, &parallel_,
                                               request.base_version());
                             result.applied = true;
                           }
                           return result;
                         });
  }

  absl::Status PushRowsImpl(const PushRowsRequest& request, PushRowsResponse* response) {
    const std::string what = absl::StrCat("push rows to ", QuotedShard(request.shard()));
    RETURN_IF_ERROR(CheckRequestId(request.request_id(), what));
    ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard, FindShard(request.shard(), what));
    std::vector<int64_t> id_scratch;
    ASSIGN_OR_RETURN(const absl::Span<const int64_t> ids,
                     RequestIds(request.ids(), request.ids_bytes(), what, &id_scratch));
    RETURN_IF_ERROR(CheckIds(*shard, ids, what));
    const int64_t width = shard->width();
    std::vector<float> scratch;
    ASSIGN_OR_RETURN(const float* grad,
                     CheckedFloats(request.data(), static_cast<int64_t>(ids.size()) * width,
                                   what, "data", &scratch));
    if (shard->sync()) RETURN_IF_ERROR(CheckReplica(*shard, request.sync(), what));

    // Sum duplicate ids in order of appearance. Without duplicates (the usual case) an ASYNC
    // update reads the request's bytes in place.
    std::vector<int64_t> unique_ids;
    std::vector<float> summed;
    bool has_duplicates = false;
    {
      std::vector<uint32_t> slot;
      has_duplicates = UniqueIds(ids, shard->rows(), &unique_ids, &slot);
      if (has_duplicates || shard->sync()) {
        summed.resize(unique_ids.size() * static_cast<size_t>(width));
        std::vector<uint8_t> seen(unique_ids.size(), 0);
        for (size_t k = 0; k < ids.size(); ++k) {
          const int64_t p = slot[k];
          float* row = summed.data() + p * width;
          const float* g = grad + static_cast<int64_t>(k) * width;
          if (!seen[p]) {
            seen[p] = 1;
            std::memcpy(row, g, static_cast<size_t>(width) * sizeof(float));
          } else {
            FloatArray(row, width) += ConstFloatArray(g, width);
          }
        }
      }
    }

    return ApplyGradient(*shard, request, what, response,
                         [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard->mu())
                             -> absl::StatusOr<UpdateResult> {
                           if (shard->sync()) {
                             return shard->AddRows(request.sync().replica(),
                                                   std::move(unique_ids), std::move(summed));
                           }
                           UpdateResult result;
                           if (!ids.empty() && shard->dynamic()) {
                             RETURN_IF_ERROR(shard->ApplyKeys(
                                 has_duplicates ? absl::MakeConstSpan(unique_ids) : ids,
                                 has_duplicates ? summed.data() : grad));
                             result.applied = true;
                           } else if (!ids.empty()) {
                             if (has_duplicates) {
                               shard->ApplyRows(unique_ids, summed.data(), &parallel_,
                                                request.base_version());
                             } else {
                               shard->ApplyRows(ids, grad, &parallel_, request.base_version());
                             }
                             result.applied = true;
                           }
                           return result;
                         });
  }

  absl::Status AssignImpl(const AssignRequest& request, AssignResponse* response) {
    const std::string what = absl::StrCat("assign to ", QuotedShard(request.shard()));
    RETURN_IF_ERROR(CheckRequestId(request.request_id(), what));
    ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard, FindShard(request.shard(), what));
    ASSIGN_OR_RETURN(RowRange range,
                     ResolveRange(*shard, request.row_begin(), request.row_end(), what));
    std::vector<float> scratch;
    ASSIGN_OR_RETURN(const float* values,
                     CheckedFloats(request.data(), range.size() * shard->width(), what, "data",
                                   &scratch));
    absl::MutexLock lock(&shard->mu());
    RETURN_IF_ERROR(CheckUpdate(*shard, request.generation(), what));
    if (AnswerIfDuplicate(*shard, request.request_id(), response)) return absl::OkStatus();
    shard->ReserveRequest();
    shard->Assign(range, values, request.reset_slots());
    shard->RememberRequest(request.request_id());
    return absl::OkStatus();
  }

  absl::Status SnapshotImpl(const SnapshotRequest& request, SnapshotResponse* response) {
    const std::string what = absl::StrCat("snapshot ", request.checkpoint_id());
    if (request.path().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": path is empty"));
    }
    // Held while the cut is taken, so that no Restore replaces shards (or moves the
    // generation) in the middle of it.
    if (!restore_mu_.TryLock()) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, ": a restore is in progress; snapshot after it"));
    }
    absl::Status status;
    try {
      status = TakeCut(request, what, response);
    } catch (const std::bad_alloc&) {
      status = OutOfMemory(what);
    }
    restore_mu_.Unlock();
    return status;
  }

  // A dynamic shard's cut as tensors of the snapshot's file: "<shard>/keys" (I64 [n]),
  // "<shard>" (F32 [n, dim]), "<shard>/<slot>" for each slot, "<shard>/last_steps" (U32 [n])
  // and "<shard>/deleted_keys" (I64 [m]); its ShardInfo says which checkpoint it is an
  // increment on (base_checkpoint; 0: every row).
  void AddDynamicCut(const Shard& shard, Shard::DynamicCut cut, SnapshotWriter::Job* job,
                     ShardInfo* info) {
    *info->mutable_spec() = shard.spec();
    info->set_version(cut.version);
    info->set_base_checkpoint(cut.base_checkpoint);
    FillDynamicStats(shard, info);
    info->mutable_dynamic()->set_rows(static_cast<int64_t>(cut.keys.size()));
    const int64_t n = static_cast<int64_t>(cut.keys.size());
    auto add = [&](std::string name, std::string dtype, std::vector<int64_t> shape,
                   auto values) {
      auto held = std::make_shared<decltype(values)>(std::move(values));
      TensorToWrite tensor;
      tensor.name = std::move(name);
      tensor.dtype = std::move(dtype);
      tensor.shape = std::move(shape);
      tensor.pieces.emplace_back(reinterpret_cast<const char*>(held->data()),
                                 held->size() * sizeof((*held)[0]));
      tensor.holds.push_back(std::move(held));
      job->tensors.push_back(std::move(tensor));
    };
    const std::string& name = shard.name();
    add(absl::StrCat(name, "/keys"), "I64", {n}, std::move(cut.keys));
    for (size_t t = 0; t < cut.tensors.size(); ++t) {
      add(t == 0 ? name
                 : absl::StrCat(name, "/", shard.optimizer().slot_name(static_cast<int>(t - 1))),
          "F32", {n, shard.width()}, std::move(cut.tensors[t]));
    }
    add(absl::StrCat(name, "/last_steps"), "U32", {n}, std::move(cut.last_steps));
    const int64_t m = static_cast<int64_t>(cut.deleted.size());
    add(absl::StrCat(name, "/deleted_keys"), "I64", {m}, std::move(cut.deleted));
  }

  // Takes the snapshot's references under each shard's lock and queues the file.
  absl::Status TakeCut(const SnapshotRequest& request, const std::string& what,
                       SnapshotResponse* response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(restore_mu_) {
    RETURN_IF_ERROR(CheckSnapshotGeneration(request.generation(), what));
    if (writer_.InUse(request.checkpoint_id())) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": a snapshot with this checkpoint id is still being written"));
    }
    // The cut: each shard's version and references to its blocks, under its lock. Nothing
    // is copied; updates that come later copy the blocks they touch (copy-on-write).
    SnapshotWriter::Job job;
    job.checkpoint_id = request.checkpoint_id();
    job.path = request.path();
    SnapshotResponse answer;
    for (const std::shared_ptr<Shard>& shard : AllShards()) {
      Shard::Snapshot snapshot;
      Shard::DynamicCut cut;
      {
        absl::MutexLock lock(&shard->mu());
        if (shard->dropped()) continue;
        if (shard->sync() && shard->step_in_progress()) {
          return absl::FailedPreconditionError(absl::StrCat(
              what, ": ", QuotedShard(shard->name()), " has SYNC step ", shard->version(),
              " partly pushed; snapshots are taken at step boundaries"));
        }
        if (shard->dynamic()) {
          cut = shard->TakeDynamicCut(request.checkpoint_id(), request.incremental_since());
        } else {
          snapshot = shard->TakeSnapshot();
        }
      }
      if (shard->dynamic()) {
        AddDynamicCut(*shard, std::move(cut), &job, answer.add_shards());
        continue;
      }
      ShardInfo* info = answer.add_shards();
      *info->mutable_spec() = shard->spec();
      info->set_version(snapshot.version);
      info->set_bytes(shard->bytes());
      const std::vector<int64_t> shape(shard->spec().shape().dim().begin(),
                                       shard->spec().shape().dim().end());
      for (Shard::Snapshot::Tensor& t : snapshot.tensors) {
        TensorToWrite tensor;
        tensor.name = t.slot.empty() ? shard->name() : absl::StrCat(shard->name(), "/", t.slot);
        tensor.shape = shape;
        tensor.pieces = std::move(t.pieces);
        tensor.holds = std::move(t.holds);
        job.tensors.push_back(std::move(tensor));
      }
    }
    job.metadata = {{"format", "shardps-ps-snapshot"},
                    {"ps_task", absl::StrCat(options_.task_index)},
                    {"checkpoint_id", absl::StrCat(request.checkpoint_id())},
                    {"generation", absl::StrCat(request.generation())}};
    RETURN_IF_ERROR(Annotate(writer_.Submit(std::move(job)), what));
    *response = std::move(answer);
    return absl::OkStatus();
  }

  absl::Status RestoreImpl(const RestoreRequest& request, RestoreResponse* response) {
    // One restore at a time; a snapshot is refused meanwhile (it would cut a half-restored
    // ps).
    absl::MutexLock restoring(&restore_mu_);
    // 1. The generation first: from here on, an update from before the rollback is refused,
    // and one that slipped in before this point is overwritten below.
    if (request.generation() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("restore: generation must be >= 0, got ", request.generation()));
    }
    if (request.generation() != 0) {
      const int64_t current = generation_.load(std::memory_order_acquire);
      if (request.generation() < current) {
        return StaleGeneration("restore", request.generation(), current);
      }
      RaiseGeneration(request.generation());
    }
    // 2. The shards, and where each comes from; every check before anything is read.
    std::vector<std::shared_ptr<Shard>> shards;
    if (request.shards().empty()) {
      shards = AllShards();
    } else {
      for (const std::string& name : request.shards()) {
        ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard,
                         FindShard(name, absl::StrCat("restore ", QuotedShard(name))));
        shards.push_back(std::move(shard));
      }
    }
    std::unique_ptr<CheckpointReader> reader;
    if (!request.manifest().empty()) {
      ASSIGN_OR_RETURN(reader, CheckpointReader::Open(request.manifest()));
    }
    std::vector<std::pair<std::shared_ptr<Shard>, ShardSource>> plan;
    for (std::shared_ptr<Shard>& shard : shards) {
      ShardSource source{VariableOf(shard->spec()), request.params_only()};
      if (!request.variable_map().empty()) {
        auto it = request.variable_map().find(source.variable);
        if (it == request.variable_map().end()) continue;  // a warm start skips it
        source.variable = it->second;
      }
      if (reader != nullptr) {
        RETURN_IF_ERROR(CheckRestorable(reader->manifest(), reader->manifest_path(), *shard,
                                        source));
      }
      plan.emplace_back(std::move(shard), std::move(source));
    }
    // 3. Shard by shard: read into fresh blocks outside the shard's lock, then swap them in
    // under it. A failure (a corrupt file) leaves that shard and the ones after it as they
    // were; the caller restores again (from an older checkpoint).
    int64_t bytes_read = 0;
    for (auto& [shard, source] : plan) {
      if (shard->dynamic()) {
        RETURN_IF_ERROR(RestoreDynamic(reader.get(), shard, source, response, &bytes_read));
        continue;
      }
      absl::StatusOr<RestoredState> restored =
          reader != nullptr ? ReadShardState(*reader, *shard, source, kRestoreReadThreads)
                             : InitialShardState(*shard);
      if (!restored.ok()) return restored.status();
      bytes_read += restored->bytes_read;
      std::vector<WaiterPtr> ready;
      ShardInfo* info = response->add_shards();
      *info->mutable_spec() = shard->spec();
      info->set_bytes(shard->bytes());
      info->set_version(restored->version);
      {
        absl::MutexLock lock(&shard->mu());
        if (shard->dropped()) {
          return NoSuchShard(absl::StrCat("restore ", QuotedShard(shard->name())));
        }
        ready.reserve(shard->waiters().CountReady(restored->version));
        shard->ReplaceState(std::move(restored->state), restored->version);
        shard->waiters().TakeReady(shard->version(), &ready);
      }
      CompleteReady(&ready);
    }
    response->set_bytes_read(bytes_read);
    return absl::OkStatus();
  }

  // A snapshot belongs to the store's generation: a lower one is from a chief that has been
  // superseded (ABORTED, STALE_GENERATION), a higher one means this ps missed a
  // SetGeneration (FAILED_PRECONDITION), as for updates.
  // A dynamic shard's restore: a fresh table of its options, filled from the checkpoint's
  // chain (checkpoint/dynamic_rows.h) with the keys of its buckets, or left empty (the
  // initial state) without a reader; swapped in under the shard's lock.
  absl::Status RestoreDynamic(CheckpointReader* reader, const std::shared_ptr<Shard>& shard,
                              const ShardSource& source, RestoreResponse* response,
                              int64_t* bytes_read) {
    ASSIGN_OR_RETURN(std::unique_ptr<DynamicTable> table, shard->NewTable());
    int64_t version = 0;
    if (reader != nullptr) {
      const Optimizer& optimizer = shard->optimizer();
      const int slots = optimizer.num_slots();
      std::vector<std::string> tensors = {""};
      if (!source.params_only) {
        for (int j = 0; j < slots; ++j) tensors.emplace_back(optimizer.slot_name(j));
      }
      const DynamicSpec& d = shard->spec().dynamic();
      const int64_t dim = shard->width();
      DynamicTableReadStats stats;
      RETURN_IF_ERROR(ReadDynamicTable(
          reader->manifest(), reader->manifest_path(), source.variable, tensors,
          [&](int64_t key) {
            const int32_t b = BucketOf(key, d.num_buckets());
            return b >= d.bucket_begin() && b < d.bucket_end();
          },
          [&](const std::vector<int64_t>& keys) { return table->EraseKeys(keys); },
          [&](DynamicRowsPart& part) {
            RowBatch rows;
            rows.keys = std::move(part.keys);
            rows.last_steps = std::move(part.last_steps);
            const size_t n = rows.keys.size();
            rows.values.resize(n * static_cast<size_t>(dim * (1 + slots)));
            for (size_t k = 0; k < n; ++k) {
              float* row = rows.values.data() + k * dim * (1 + slots);
              for (int t = 0; t <= slots; ++t) {
                if (t < static_cast<int>(part.tensors.size())) {
                  std::memcpy(row + t * dim, part.tensors[t].data() + k * dim,
                              static_cast<size_t>(dim) * sizeof(float));
                } else {  // params_only: the slot's initial value
                  std::fill(row + t * dim, row + (t + 1) * dim,
                            optimizer.initial_slot_value(t - 1));
                }
              }
            }
            return table->UpsertRows(rows);
          },
          &stats));
      version = source.params_only ? 0 : stats.version;
      *bytes_read += stats.bytes_read;
    }
    std::vector<WaiterPtr> ready;
    ShardInfo* info = response->add_shards();
    *info->mutable_spec() = shard->spec();
    info->set_version(version);
    {
      absl::MutexLock lock(&shard->mu());
      if (shard->dropped()) {
        return NoSuchShard(absl::StrCat("restore ", QuotedShard(shard->name())));
      }
      ready.reserve(shard->waiters().CountReady(version));
      shard->ReplaceTable(std::move(table), version);
      shard->waiters().TakeReady(shard->version(), &ready);
    }
    FillDynamicStats(*shard, info);
    CompleteReady(&ready);
    return absl::OkStatus();
  }

  absl::Status CheckSnapshotGeneration(int64_t generation, absl::string_view what) const {
    const int64_t current = generation_.load(std::memory_order_acquire);
    if (generation < current) return StaleGeneration(what, generation, current);
    if (generation > current) return GenerationAhead(what, generation, current);
    return absl::OkStatus();
  }

  // ABORTED with ErrorDetail STALE_GENERATION: `what` belongs to a generation the ps has
  // left (a rollback happened since); it changes nothing.
  absl::Status StaleGeneration(absl::string_view what, int64_t generation,
                               int64_t current) const {
    ErrorDetail detail;
    detail.set_kind(ErrorDetail::STALE_GENERATION);
    detail.set_ps_task(options_.task_index);
    detail.set_ps_incarnation(incarnation_);
    detail.set_generation(current);
    return WithDetail(absl::AbortedError(absl::StrCat(
                          what, ": it belongs to generation ", generation, " but ps task ",
                          options_.task_index, " is at generation ", current,
                          " (rolled back since); nothing was changed")),
                      detail);
  }

  absl::Status GenerationAhead(absl::string_view what, int64_t generation,
                               int64_t current) const {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": it belongs to generation ", generation, ", ahead of ps task ",
        options_.task_index, "'s generation ", current, "; set the generation first"));
  }

  absl::Status DropShardsImpl(const DropShardsRequest& request, DropShardsResponse* response) {
    if (request.variables().empty() && !request.all()) {
      return absl::InvalidArgumentError(
          "drop shards: list the variables to drop, or set all to drop every shard");
    }
    const absl::flat_hash_set<std::string> variables(request.variables().begin(),
                                                     request.variables().end());
    std::vector<std::shared_ptr<Shard>> dropped;
    {
      absl::MutexLock lock(&map_mu_);
      for (auto it = shards_.begin(); it != shards_.end();) {
        if (request.all() || variables.contains(VariableOf(it->second->spec()))) {
          total_bytes_ -= it->second->bytes();
          dropped.push_back(std::move(it->second));
          it = shards_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (const std::shared_ptr<Shard>& shard : dropped) {
      budget_.Release(shard->bytes());
      {
        absl::MutexLock lock(&shard->mu());
        shard->MarkDropped();
      }
      CancelWaiters(*shard, "the shard was dropped");
    }
    response->set_dropped(static_cast<int32_t>(dropped.size()));
    return absl::OkStatus();
  }

  // What every gradient push does under the shard's lock: the generation fence, the
  // duplicate answer, a sync shard's step check, the base version's check, then `apply`
  // (which adds the gradient to a sync step or applies it), its record, and the pulls its
  // new version releases. `apply` runs under the lock; an error from it leaves the shard
  // unchanged.
  template <typename Request, typename Response, typename Apply>
  absl::Status ApplyGradient(Shard& shard, const Request& request, const std::string& what,
                             Response* response, Apply apply) {
    std::vector<WaiterPtr> ready;
    {
      absl::MutexLock lock(&shard.mu());
      RETURN_IF_ERROR(CheckUpdate(shard, request.generation(), what));
      if (AnswerIfDuplicate(shard, request.request_id(), response)) return absl::OkStatus();
      if (shard.sync() && shard.DropsPushFor(request.sync().step())) {
        // A straggler's push for a step applied without it: nothing changes, and its request
        // id is not remembered (a retry is answered the same way).
        response->set_dropped(true);
        return absl::OkStatus();
      }
      if (shard.sync()) RETURN_IF_ERROR(Annotate(shard.CheckStep(request.sync().step()), what));
      RETURN_IF_ERROR(Annotate(shard.CheckBaseVersion(request.base_version()), what));
      PrepareUpdate(shard, &ready);
      ASSIGN_OR_RETURN(const UpdateResult result, apply());
      RecordUpdate(shard, request.request_id(), result, response, &ready);
    }
    CompleteReady(&ready);
    return absl::OkStatus();
  }

  // Before an update changes anything: room for its request id and for the pulls its
  // version may release, so that what follows the change cannot fail (RecordUpdate).
  static void PrepareUpdate(Shard& shard, std::vector<WaiterPtr>* ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu()) {
    shard.ReserveRequest();
    ready->reserve(shard.waiters().CountReady(shard.version() + 1));
  }

  // Fails every pull waiting on `shard` with CANCELLED, saying `why`.
  void CancelWaiters(Shard& shard, absl::string_view why) {
    FailWaiters(shard, [&] {
      return absl::CancelledError(absl::StrCat("pull from ", QuotedShard(shard.name()), ": ", why));
    });
  }

  // Fails every pull waiting on `shard` with the status `error()` makes.
  void FailWaiters(Shard& shard, absl::FunctionRef<absl::Status()> error) {
    while (true) {
      WaiterPtr w;
      {
        absl::MutexLock lock(&shard.mu());
        w = shard.waiters().TakeFirst();
      }
      if (w == nullptr) return;
      timer_.Remove(*w);
      w->Finish(error());
    }
  }

  // Under the shard's lock, before a mutating request changes anything: the shard is still
  // in the store, and the request's recovery generation is the store's (or 0, unfenced).
  // Checked under the lock so that an update racing with a Restore (which raises the
  // generation first, then replaces each shard under its lock) either lands before the
  // shard is replaced or is refused: never on the restored state.
  absl::Status CheckUpdate(const Shard& shard, int64_t generation, absl::string_view what) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu()) {
    if (shard.dropped()) return NoSuchShard(what);
    if (generation == 0) return absl::OkStatus();
    const int64_t current = generation_.load(std::memory_order_acquire);
    if (generation < current) return StaleGeneration(what, generation, current);
    if (generation > current) return GenerationAhead(what, generation, current);
    return absl::OkStatus();
  }

  // Raises the generation to `generation` when that is higher; returns the generation after.
  // Pulls waiting for a version when the generation rises belong to steps of the timeline
  // being left (the chief leases the new generation's steps only once every ps is there):
  // they fail at once, ABORTED with STALE_GENERATION, instead of holding a worker's step
  // until the new timeline happens to reach their version or they time out.
  int64_t RaiseGeneration(int64_t generation) {
    int64_t current = generation_.load(std::memory_order_acquire);
    while (generation > current &&
           !generation_.compare_exchange_weak(current, generation, std::memory_order_acq_rel)) {
    }
    if (generation > current) {
      for (const std::shared_ptr<Shard>& shard : AllShards()) {
        FailWaiters(*shard, [&] {
          return StaleGeneration(absl::StrCat("pull from ", QuotedShard(shard->name())),
                                 current, generation);
        });
      }
    }
    return std::max(current, generation);
  }

  absl::Status NoSuchShard(absl::string_view what) const {
    return absl::NotFoundError(
        absl::StrCat(what, ": no such shard on ps task ", options_.task_index));
  }

  absl::StatusOr<std::shared_ptr<Shard>> FindShard(const std::string& name,
                                                   absl::string_view what) const {
    absl::MutexLock lock(&map_mu_);
    auto it = shards_.find(name);
    if (it == shards_.end()) return NoSuchShard(what);
    return it->second;
  }

  std::vector<std::shared_ptr<Shard>> AllShards() const {
    absl::MutexLock lock(&map_mu_);
    std::vector<std::shared_ptr<Shard>> all;
    all.reserve(shards_.size());
    for (const auto& entry : shards_) all.push_back(entry.second);
    return all;
  }

  static absl::Status CheckSameSpec(const ShardSpec& existing, const ShardSpec& wanted) {
    const std::string diff = FirstDifference(existing, wanted);
    if (diff.empty()) return absl::OkStatus();
    return absl::AlreadyExistsError(absl::StrCat(
        QuotedShard(wanted.name()), " already exists with a different spec (", diff, ")"));
  }

  // Fills the response now when the shard has reached min_version, else registers a waiter
  // completed later by an update, the timer, DropShards or Shutdown: then *pending is true
  // and `*done` has been moved into the waiter (the last step, after everything that may
  // throw), to be called holding no store lock.
  absl::Status FillOrWait(std::shared_ptr<Shard> shard, int64_t min_version, int64_t timeout_ms,
                          absl::FunctionRef<absl::Status()> fill_now,
                          absl::FunctionRef<std::function<absl::Status()>()> make_deferred_fill,
                          DoneCallback* done, bool* pending) {
    absl::MutexLock lock(&shard->mu());
    if (shard->dropped()) {
      return NoSuchShard(absl::StrCat("pull from ", QuotedShard(shard->name())));
    }
    if (shard->version() >= min_version) return fill_now();
    if (shutdown_.load(std::memory_order_acquire)) {
      return absl::CancelledError(absl::StrCat("pull from ", QuotedShard(shard->name()),
                                               ": the ps is shutting down"));
    }
    auto w = std::make_shared<VersionWaiter>();
    w->min_version = min_version;
    w->timeout_ms = timeout_ms;
    w->fill = make_deferred_fill();
    if (timeout_ms > 0) {
      w->on_timeout = [shard](VersionWaiter& waiter) { Expire(*shard, waiter); };
    }
    shard->waiters().Add(w);
    if (timeout_ms > 0) {
      // Lock order: the shard's, then the timer's.
      try {
        timer_.Add(w, absl::Now() + absl::Milliseconds(timeout_ms));
      } catch (const std::bad_alloc&) {
        shard->waiters().Remove(*w);
        throw;
      }
    }
    w->done = std::move(*done);
    *pending = true;
    return absl::OkStatus();
  }

  // Calls each ready waiter's `done` (with OK); the waiters were claimed and filled under
  // their shard's lock, which the caller no longer holds.
  void CompleteReady(std::vector<WaiterPtr>* ready) {
    for (const WaiterPtr& w : *ready) {
      timer_.Remove(*w);
      w->Finish(w->fill_status);
    }
    ready->clear();
  }

  // The timer's half of a waiter that timed out (the timer has claimed it).
  static void Expire(Shard& shard, VersionWaiter& w) {
    int64_t version;
    {
      absl::MutexLock lock(&shard.mu());
      shard.waiters().Remove(w);
      version = shard.version();
    }
    w.Finish(absl::DeadlineExceededError(absl::StrCat(
        "pull from ", QuotedShard(shard.name()), ": version ", version,
        " did not reach min_version ", w.min_version, " within ", w.timeout_ms, " ms")));
  }

  const Options options_;
  const absl::Time start_;
  const uint64_t incarnation_;
  std::atomic<bool> shutdown_{false};
  // The recovery generation; only rises. Read under a shard's lock by every update.
  std::atomic<int64_t> generation_{0};
  // Bytes of blocks that updates copied because a snapshot held them (Health). Outlives
  // every shard's updates: the shards are used only within the store's calls.
  std::atomic<int64_t> snapshot_copy_bytes_{0};
  MemoryBudget budget_;
  // Helpers for large updates: one per further core, so that an update finishes sooner when
  // cores are idle (the end of a push, when the client only waits).
  ParallelFor parallel_{std::min(7, UsableCores() - 1)};

  absl::Mutex restore_mu_;  // held by a Restore throughout

  mutable absl::Mutex map_mu_;
  std::map<std::string, std::shared_ptr<Shard>> shards_ ABSL_GUARDED_BY(map_mu_);
  int64_t total_bytes_ ABSL_GUARDED_BY(map_mu_) = 0;

  // Writes snapshots' files; destroyed before the shards' map (it holds only references to
  // blocks, never to shards).
  SnapshotWriter writer_{WriterOptions(options_)};
  // Last: its thread is started once every other member is initialized, and stopped first.
  WaiterTimer timer_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ShardStore>> ShardStore::Create(const Options& options) {
  if (options.request_id_window < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShardStore options: request_id_window must be >= 0, got ", options.request_id_window));
  }
  RETURN_IF_ERROR(Annotate(
      MemoryBudget::Validate(options.memory_budget_bytes, options.snapshot_reserve),
      "ShardStore options"));
  if (options.max_reply_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShardStore options: max_reply_bytes must be >= 0 (0: no limit), got ",
        options.max_reply_bytes));
  }
  return std::unique_ptr<ShardStore>(new ShardStoreImpl(options));
}

}  // namespace shardps
