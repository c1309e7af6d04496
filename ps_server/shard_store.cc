#include "ps_server/shard_store.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "absl/base/config.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/error_detail.h"
#include "common/status_macros.h"
#include "google/protobuf/util/message_differencer.h"
#include "ps_server/gradient_bytes.h"
#include "ps_server/initializer.h"
#include "ps_server/optimizer.h"
#include "ps_server/parallel_for.h"
#include "ps_server/shard.h"
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

// The response's version and shape for a pull of `range`.
void FillRangeMeta(const Shard& shard, RowRange range, PullResponse* response)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu()) {
  response->set_version(shard.version());
  TensorShape* shape = response->mutable_shape();
  shape->clear_dim();
  const auto& dims = shard.spec().shape().dim();
  if (!dims.empty()) {
    shape->add_dim(range.size());
    for (int i = 1; i < dims.size(); ++i) shape->add_dim(dims[i]);
  }
}

// REQUIRES: data holds range.size() * width floats.
void CopyRange(const Shard& shard, RowRange range, std::string* data, PullResponse* response)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu()) {
  shard.CopyRange(range, reinterpret_cast<float*>(&(*data)[0]));
  response->mutable_data()->swap(*data);
  FillRangeMeta(shard, range, response);
}

// As CopyRange, but the bytes stay in the shard's blocks: `in_place` gets views of them and
// references that keep them unchanged (ParamBlocks::Share); the response's data stays empty.
void ShareRange(const Shard& shard, RowRange range, ShardStore::PulledBytes* in_place,
                PullResponse* response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu()) {
  shard.ShareRange(range, &in_place->pieces, &in_place->holds);
  response->clear_data();
  FillRangeMeta(shard, range, response);
}

// REQUIRES: data holds ids.size() * width floats.
void CopyRows(const Shard& shard, absl::Span<const int64_t> ids, std::string* data,
              PullRowsResponse* response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu()) {
  shard.CopyRows(ids, &(*data)[0]);
  response->mutable_data()->swap(*data);
  response->set_version(shard.version());
}

absl::StatusOr<RowRange> ResolveRange(const Shard& shard, int64_t begin, int64_t end,
                                      absl::string_view what) {
  const int64_t resolved_end = end == 0 ? shard.rows() : end;
  if (begin < 0 || begin >= resolved_end || resolved_end > shard.rows()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": row range [", begin, ", ", end, ") is not within the shard's ", shard.rows(),
        " rows (need 0 <= row_begin < row_end <= ", shard.rows(), "; row_end 0 means the end)"));
  }
  return RowRange{begin, resolved_end};
}

absl::Status CheckIds(const Shard& shard, absl::Span<const int64_t> ids, absl::string_view what) {
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

// Shape and placement checks; returns the shard's rows and row width.
absl::StatusOr<Geometry> ValidateSpec(const ShardSpec& spec) {
  if (spec.name().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a shard spec has an empty name (variable '", spec.variable(), "')"));
  }
  const std::string what = QuotedShard(spec.name());
  const auto& shape = spec.shape().dim();
  const auto& full = spec.full_shape().dim();
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
  switch (spec.update().mode()) {
    case UpdateSpec::ASYNC:
      break;
    case UpdateSpec::SYNC:
      if (spec.update().num_replicas() < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": update.num_replicas must be >= 1 for SYNC, got ",
                         spec.update().num_replicas()));
      }
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": update.mode ", static_cast<int>(spec.update().mode()), " is unknown"));
  }
  return g;
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


class ShardStoreImpl final : public ShardStore {
 public:
  explicit ShardStoreImpl(const Options& options) : options_(options), start_(absl::Now()) {}

  ~ShardStoreImpl() override { Shutdown(); }

  absl::Status CreateShards(const CreateShardsRequest& request,
                            CreateShardsResponse* response) override {
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
    // 3. Allocate and initialize outside the map lock (a large table takes a while).
    std::vector<std::shared_ptr<Shard>> built;
    for (int i : fresh) {
      ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard,
                       Shard::Create(request.shards(i), geometry[i], options_.request_id_window));
      built.push_back(std::move(shard));
    }
    // 4. Insert all or nothing; a concurrent CreateShards may have inserted some meanwhile.
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
        ++created;
      }
    }
    response->set_created(created);
    return absl::OkStatus();
  }

  absl::Status ListShards(const ListShardsRequest& request,
                          ListShardsResponse* response) override {
    response->set_task_index(options_.task_index);
    for (const std::shared_ptr<Shard>& shard : AllShards()) {
      const std::string& variable =
          shard->spec().variable().empty() ? shard->name() : shard->spec().variable();
      if (!request.variable().empty() && request.variable() != variable) continue;
      ShardInfo* info = response->add_shards();
      *info->mutable_spec() = shard->spec();
      info->set_bytes(shard->bytes());
      absl::MutexLock lock(&shard->mu());
      info->set_version(shard->version());
    }
    return absl::OkStatus();
  }

  void Pull(const PullRequest& request, PullResponse* response, DoneCallback done) override {
    Pull(request, response, nullptr, std::move(done));
  }

  void Pull(const PullRequest& request, PullResponse* response, PulledBytes* in_place,
            DoneCallback done) override {
    const std::string what = absl::StrCat("pull from ", QuotedShard(request.shard()));
    absl::Status status = CheckTimeout(request.wait_timeout_ms(), what);
    std::shared_ptr<Shard> shard;
    RowRange range{0, 0};
    if (status.ok()) {
      absl::StatusOr<std::shared_ptr<Shard>> found = FindShard(request.shard(), what);
      status = found.status();
      if (status.ok()) shard = *std::move(found);
    }
    if (status.ok()) {
      absl::StatusOr<RowRange> resolved =
          ResolveRange(*shard, request.row_begin(), request.row_end(), what);
      status = resolved.status();
      if (status.ok()) range = *resolved;
    }
    if (!status.ok()) {
      done(status);
      return;
    }
    Shard* s = shard.get();
    if (in_place != nullptr) {
      auto share = [s, range, response, in_place]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        ShareRange(*s, range, in_place, response);
      };
      FillOrWait(
          std::move(shard), request.min_version(), request.wait_timeout_ms(), share,
          [share]() -> std::function<void()> { return share; }, std::move(done));
      return;
    }
    const size_t bytes = static_cast<size_t>(range.size() * s->width()) * sizeof(float);
    std::string data = TakeBuffer(response->mutable_data(), bytes);
    FillOrWait(
        std::move(shard), request.min_version(), request.wait_timeout_ms(),
        [s, range, response, &data]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          CopyRange(*s, range, &data, response);
        },
        // A deferred fill takes the sized buffer along (only one of the two ever runs).
        [s, range, response, &data]() -> std::function<void()> {
          return [s, range, response, late = std::move(data)]() mutable
                 ABSL_NO_THREAD_SAFETY_ANALYSIS { CopyRange(*s, range, &late, response); };
        },
        std::move(done));
  }

  void PullRows(const PullRowsRequest& request, PullRowsResponse* response,
                DoneCallback done) override {
    const std::string what = absl::StrCat("pull rows from ", QuotedShard(request.shard()));
    absl::Status status = CheckTimeout(request.wait_timeout_ms(), what);
    std::shared_ptr<Shard> shard;
    if (status.ok()) {
      absl::StatusOr<std::shared_ptr<Shard>> found = FindShard(request.shard(), what);
      status = found.status();
      if (status.ok()) shard = *std::move(found);
    }
    const absl::Span<const int64_t> ids(request.ids().data(),
                                        static_cast<size_t>(request.ids_size()));
    if (status.ok()) status = CheckIds(*shard, ids, what);
    if (!status.ok()) {
      done(status);
      return;
    }
    Shard* s = shard.get();
    const size_t bytes = ids.size() * static_cast<size_t>(s->width()) * sizeof(float);
    std::string data = TakeBuffer(response->mutable_data(), bytes);
    FillOrWait(
        std::move(shard), request.min_version(), request.wait_timeout_ms(),
        [s, ids, response, &data]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          CopyRows(*s, ids, &data, response);
        },
        // A deferred fill owns a copy of the ids (the request need not outlive this call)
        // and takes the sized buffer along.
        [s, ids, response, &data]() -> std::function<void()> {
          return [s, owned = std::vector<int64_t>(ids.begin(), ids.end()), response,
                  late = std::move(data)]() mutable ABSL_NO_THREAD_SAFETY_ANALYSIS {
            CopyRows(*s, owned, &late, response);
          };
        },
        std::move(done));
  }

  absl::Status Push(const PushRequest& request, PushResponse* response) override {
    return Push(request, request.data(), response);
  }

  absl::Status PushBatch(const PushBatchRequest& request,
                         PushBatchResponse* response) override {
    const absl::string_view data = request.data();
    return PushBatch(request, absl::MakeConstSpan(&data, 1), response);
  }

  absl::Status PushBatch(const PushBatchRequest& request,
                         absl::Span<const absl::string_view> pieces,
                         PushBatchResponse* response) override {
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

  absl::Status Push(const PushRequest& request, absl::string_view data,
                    PushResponse* response) override {
    return PushDense(request, GradientBytes(data), response);
  }

  absl::Status PushRows(const PushRowsRequest& request, PushRowsResponse* response) override {
    const std::string what = absl::StrCat("push rows to ", QuotedShard(request.shard()));
    RETURN_IF_ERROR(CheckRequestId(request.request_id(), what));
    ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard, FindShard(request.shard(), what));
    const absl::Span<const int64_t> ids(request.ids().data(),
                                        static_cast<size_t>(request.ids_size()));
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

    std::vector<WaiterPtr> ready;
    {
      absl::MutexLock lock(&shard->mu());
      if (AnswerIfDuplicate(*shard, request.request_id(), response)) return absl::OkStatus();
      UpdateResult result;
      if (shard->sync()) {
        RETURN_IF_ERROR(Annotate(shard->CheckStep(request.sync().step()), what));
        ASSIGN_OR_RETURN(result, shard->AddRows(request.sync().replica(),
                                                std::move(unique_ids), std::move(summed)));
      } else if (!ids.empty()) {
        if (has_duplicates) {
          shard->ApplyRows(unique_ids, summed.data(), &parallel_);
        } else {
          shard->ApplyRows(ids, grad, &parallel_);
        }
        result.applied = true;
      }
      RecordUpdate(*shard, request.request_id(), result, response, &ready);
    }
    CompleteReady(&ready);
    return absl::OkStatus();
  }

  absl::Status Assign(const AssignRequest& request, AssignResponse* response) override {
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
    if (AnswerIfDuplicate(*shard, request.request_id(), response)) return absl::OkStatus();
    shard->Assign(range, values, request.reset_slots());
    shard->RememberRequest(request.request_id());
    return absl::OkStatus();
  }

  void Health(HealthResponse* response) override {
    response->set_task_type("ps");
    response->set_task_index(options_.task_index);
    {
      absl::MutexLock lock(&map_mu_);
      response->set_num_shards(static_cast<int32_t>(shards_.size()));
      response->set_bytes(total_bytes_);
    }
    response->set_uptime_ms(absl::ToInt64Milliseconds(absl::Now() - start_));
    response->set_status(shutdown_.load(std::memory_order_acquire) ? "SHUTTING_DOWN"
                                                                   : "SERVING");
  }

  absl::Status SetGeneration(const SetGenerationRequest&, SetGenerationResponse*) override {
    return absl::UnimplementedError("SetGeneration is not implemented yet");
  }
  absl::Status DropShards(const DropShardsRequest&, DropShardsResponse*) override {
    return absl::UnimplementedError("DropShards is not implemented yet");
  }
  absl::Status Snapshot(const SnapshotRequest&, SnapshotResponse*) override {
    return absl::UnimplementedError("Snapshot is not implemented yet");
  }
  absl::Status SnapshotStatus(const SnapshotStatusRequest&, SnapshotStatusResponse*) override {
    return absl::UnimplementedError("SnapshotStatus is not implemented yet");
  }
  absl::Status Restore(const RestoreRequest&, RestoreResponse*) override {
    return absl::UnimplementedError("Restore is not implemented yet");
  }

  void Shutdown() override {
    // Set before visiting the shards: a pull that registers under a shard's lock after this
    // shard was visited sees the flag (the store's release/acquire through the lock).
    shutdown_.store(true, std::memory_order_release);
    for (const std::shared_ptr<Shard>& shard : AllShards()) {
      std::vector<WaiterPtr> cancelled;
      {
        absl::MutexLock lock(&shard->mu());
        shard->waiters().TakeAll(&cancelled);
      }
      for (const WaiterPtr& w : cancelled) {
        timer_.Remove(*w);
        w->Finish(absl::CancelledError(absl::StrCat(
            "pull from ", QuotedShard(shard->name()), ": the ps is shutting down")));
      }
    }
  }

 private:
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

    std::vector<WaiterPtr> ready;
    {
      absl::MutexLock lock(&shard->mu());
      if (AnswerIfDuplicate(*shard, request.request_id(), response)) return absl::OkStatus();
      UpdateResult result;
      if (shard->sync()) {
        RETURN_IF_ERROR(Annotate(shard->CheckStep(request.sync().step()), what));
        result = shard->AddDense(request.sync().replica(), range, grad);
      } else {
        shard->ApplyDense(range, grad, &parallel_);
        result.applied = true;
      }
      RecordUpdate(*shard, request.request_id(), result, response, &ready);
    }
    CompleteReady(&ready);
    return absl::OkStatus();
  }

  absl::StatusOr<std::shared_ptr<Shard>> FindShard(const std::string& name,
                                                   absl::string_view what) const {
    absl::MutexLock lock(&map_mu_);
    auto it = shards_.find(name);
    if (it == shards_.end()) {
      return absl::NotFoundError(
          absl::StrCat(what, ": no such shard on ps task ", options_.task_index));
    }
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
  // completed later by an update, the timer or Shutdown. `done` runs with no store lock held.
  void FillOrWait(std::shared_ptr<Shard> shard, int64_t min_version, int64_t timeout_ms,
                  absl::FunctionRef<void()> fill_now,
                  absl::FunctionRef<std::function<void()>()> make_deferred_fill,
                  DoneCallback done) {
    absl::Status status;
    {
      absl::MutexLock lock(&shard->mu());
      if (shard->version() >= min_version) {
        fill_now();
      } else if (shutdown_.load(std::memory_order_acquire)) {
        status = absl::CancelledError(absl::StrCat("pull from ", QuotedShard(shard->name()),
                                                   ": the ps is shutting down"));
      } else {
        auto w = std::make_shared<VersionWaiter>();
        w->min_version = min_version;
        w->timeout_ms = timeout_ms;
        w->fill = make_deferred_fill();
        if (timeout_ms > 0) {
          w->on_timeout = [shard](VersionWaiter& waiter) { Expire(*shard, waiter); };
        }
        w->done = std::move(done);
        shard->waiters().Add(w);
        if (timeout_ms > 0) {
          // Lock order: the shard's, then the timer's.
          timer_.Add(w, absl::Now() + absl::Milliseconds(timeout_ms));
        }
        return;
      }
    }
    done(status);
  }

  // Calls each ready waiter's `done` (with OK); the waiters were claimed and filled under
  // their shard's lock, which the caller no longer holds.
  void CompleteReady(std::vector<WaiterPtr>* ready) {
    for (const WaiterPtr& w : *ready) {
      timer_.Remove(*w);
      w->Finish(absl::OkStatus());
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
  std::atomic<bool> shutdown_{false};
  // Helpers for large updates: one per further core, so that an update finishes sooner when
  // cores are idle (the end of a push, when the client only waits).
  ParallelFor parallel_{std::min(7, UsableCores() - 1)};

  mutable absl::Mutex map_mu_;
  std::map<std::string, std::shared_ptr<Shard>> shards_ ABSL_GUARDED_BY(map_mu_);
  int64_t total_bytes_ ABSL_GUARDED_BY(map_mu_) = 0;

  // Last: its thread is started once every other member is initialized, and stopped first.
  WaiterTimer timer_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ShardStore>> ShardStore::Create(const Options& options) {
  if (options.request_id_window < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShardStore options: request_id_window must be >= 0, got ", options.request_id_window));
  }
  return std::unique_ptr<ShardStore>(new ShardStoreImpl(options));
}

}  // namespace shardps
