#include "ps_server/shard_pulls.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "common/error_detail.h"
#include "common/fanout.h"
#include "common/status_macros.h"
#include "proto/error.pb.h"
#include "ps_server/out_of_memory.h"
#include "ps_server/param_blocks.h"
#include "ps_server/request_checks.h"
#include "ps_server/shard.h"

namespace shardps {
namespace {

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
                        PulledBytes* in_place, PullResponse* response)
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
                             std::string* data,
                             PullResponse* response) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  return CopyRange(shard, range, source, data, response);
}

// REQUIRES: data holds ids.size() * width floats.
absl::Status CopyRows(const Shard& shard, absl::Span<const int64_t> ids, PullSource source,
                      std::string* data, PullRowsResponse* response)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu()) {
  if (shard.dynamic()) {
    // A bucket may have moved since the unlocked range check.
    RETURN_IF_ERROR(shard.CheckMovedKeys(ids, /*push=*/false, 0, "pull rows"));
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

absl::Status CopyRowsLocked(const Shard& shard, absl::Span<const int64_t> ids, PullSource source,
                            std::string* data,
                            PullRowsResponse* response) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  return CopyRows(shard, ids, source, data, response);
}

}  // namespace

void ShardPulls::Pull(const PullRequest& request, PullResponse* response, PulledBytes* in_place,
                      DoneCallback done) {
  const std::string what = absl::StrCat("pull from ", QuotedShard(request.shard()));
  bool pending = false;
  const absl::Status status =
      Guarded(what, [&] { return StartPull(request, response, in_place, what, &done, &pending); });
  if (!pending) done(status);
}

void ShardPulls::PullBatch(const PullBatchRequest& request, std::vector<PullResponse>* responses,
                           std::vector<PulledBytes>* in_place, DoneCallback done) {
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
          ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard, shards_->Find(item.shard(), what));
          ASSIGN_OR_RETURN(RowRange range,
                           ResolveRange(*shard, item.row_begin(), item.row_end(), what));
          total += range.size() * shard->width() * static_cast<int64_t>(sizeof(float));
          if (max_reply_bytes_ > 0 && total > max_reply_bytes_) {
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

void ShardPulls::PullRows(const PullRowsRequest& request, PullRowsResponse* response,
                          DoneCallback done) {
  const std::string what = absl::StrCat("pull rows from ", QuotedShard(request.shard()));
  bool pending = false;
  const absl::Status status =
      Guarded(what, [&] { return StartPullRows(request, response, what, &done, &pending); });
  if (!pending) done(status);
}

void ShardPulls::PullRowsBatch(const PullRowsBatchRequest& request,
                               absl::Span<PullRowsResponse* const> responses, DoneCallback done) {
  const int items = request.pulls_size();
  if (responses.size() != static_cast<size_t>(items)) {
    return done(absl::InvalidArgumentError(
        absl::StrCat("pull rows batch of ", items, " items has ", responses.size(), " responses")));
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
          ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard, shards_->Find(item.shard(), what));
          const int64_t ids =
              item.ids_size() + static_cast<int64_t>(item.ids_bytes().size() / sizeof(int64_t));
          RETURN_IF_ERROR(CheckReplyBytes(ids, shard->width(), what));
          total += ids * shard->width() * static_cast<int64_t>(sizeof(float));
          if (max_reply_bytes_ > 0 && total > max_reply_bytes_) {
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

// Whatever runs out of memory, `done` is called exactly once: it moves into a shared holder
// only once that is allocated.
void ShardPulls::FanOut(absl::string_view what, int items,
                        const std::function<absl::Status()>& check, DoneCallback done,
                        const std::function<void(int, DoneCallback)>& start) {
  std::shared_ptr<DoneCallback> holder;
  std::shared_ptr<Fanout> fan;
  const absl::Status status = Guarded(what, [&]() -> absl::Status {
    RETURN_IF_ERROR(check());
    holder = std::make_shared<DoneCallback>(std::move(done));
    fan =
        Fanout::Make(static_cast<size_t>(items), [holder](const absl::Status& s) { (*holder)(s); });
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

absl::Status ShardPulls::StartPull(const PullRequest& request, PullResponse* response,
                                   PulledBytes* in_place, const std::string& what,
                                   DoneCallback* done, bool* pending) {
  RETURN_IF_ERROR(CheckTimeout(request.wait_timeout_ms(), what));
  ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard, shards_->Find(request.shard(), what));
  ASSIGN_OR_RETURN(RowRange range,
                   ResolveRange(*shard, request.row_begin(), request.row_end(), what));
  RETURN_IF_ERROR(CheckReplyBytes(range.size(), shard->width(), what));
  Shard* s = shard.get();
  const PullSource source{request.exact_version(), request.min_version()};
  // The fills run under the shard's lock, taken by whoever completes the wait (FillOrWait):
  // the analysis cannot follow it into a std::function.
  if (in_place != nullptr) {
    auto share = [s, range, source, response, in_place]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return ShareRange(*s, range, source, in_place, response);
    };
    return waits_->FillOrWait(
        std::move(shard), request.min_version(), request.wait_timeout_ms(), share,
        [share]() -> std::function<absl::Status()> { return share; }, done, pending);
  }
  const size_t bytes = static_cast<size_t>(range.size() * s->width()) * sizeof(float);
  std::string data = TakeBuffer(response->mutable_data(), bytes);
  return waits_->FillOrWait(
      std::move(shard), request.min_version(), request.wait_timeout_ms(),
      [s, range, source, response, &data]()
          ABSL_NO_THREAD_SAFETY_ANALYSIS { return CopyRange(*s, range, source, &data, response); },
      // A deferred fill takes the sized buffer along (only one of the two ever runs).
      [s, range, source, response, &data]() -> std::function<absl::Status()> {
        return [s, range, source, response, late = std::move(data)]() mutable {
          return CopyRangeLocked(*s, range, source, &late, response);
        };
      },
      done, pending);
}

absl::Status ShardPulls::StartPullRows(const PullRowsRequest& request, PullRowsResponse* response,
                                       const std::string& what, DoneCallback* done, bool* pending) {
  RETURN_IF_ERROR(CheckTimeout(request.wait_timeout_ms(), what));
  ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard, shards_->Find(request.shard(), what));
  std::vector<int64_t> scratch;
  ASSIGN_OR_RETURN(const absl::Span<const int64_t> ids,
                   RequestIds(request.ids(), request.ids_bytes(), what, &scratch));
  RETURN_IF_ERROR(CheckReplyBytes(static_cast<int64_t>(ids.size()), shard->width(), what));
  RETURN_IF_ERROR(CheckIds(*shard, ids, what));
  Shard* s = shard.get();
  const PullSource source{request.exact_version(), request.min_version()};
  const size_t bytes = ids.size() * static_cast<size_t>(s->width()) * sizeof(float);
  std::string data = TakeBuffer(response->mutable_data(), bytes);
  // As StartPull's fills: run under the shard's lock, where the analysis cannot follow.
  return waits_->FillOrWait(
      std::move(shard), request.min_version(), request.wait_timeout_ms(),
      [s, ids, source, response, &data]()
          ABSL_NO_THREAD_SAFETY_ANALYSIS { return CopyRows(*s, ids, source, &data, response); },
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

absl::Status ShardPulls::CheckReplyBytes(int64_t count, int64_t width,
                                         absl::string_view what) const {
  const int64_t row_bytes = width * static_cast<int64_t>(sizeof(float));
  const bool overflows = count > 0 && row_bytes > std::numeric_limits<int64_t>::max() / count;
  if (overflows) return ReplyTooLarge(what, absl::StrCat(count, " rows of ", row_bytes));
  const int64_t bytes = count * row_bytes;
  if (max_reply_bytes_ > 0 && bytes > max_reply_bytes_) {
    return ReplyTooLarge(what, absl::StrCat(bytes));
  }
  return absl::OkStatus();
}

absl::Status ShardPulls::ReplyTooLarge(absl::string_view what, absl::string_view bytes) const {
  ErrorDetail detail;
  detail.set_kind(ErrorDetail::LIMIT);
  detail.set_ps_task(task_index_);
  detail.set_limit("--max_reply_bytes");
  return WithDetail(
      absl::ResourceExhaustedError(absl::StrCat(
          what, ": the reply would be ", bytes, " bytes, more than ps task ", task_index_,
          "'s --max_reply_bytes=", max_reply_bytes_, "; pull fewer rows per call")),
      detail);
}

}  // namespace shardps
