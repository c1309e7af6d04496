#include "ps_server/shard_pushes.h"

#include <cstdint>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/error_detail.h"
#include "common/status_macros.h"
#include "ps_server/out_of_memory.h"
#include "ps_server/request_checks.h"
#include "ps_server/row_sums.h"
#include "ps_server/version_waiters.h"

namespace shardps {
namespace {

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
void RecordUpdate(Shard& shard, uint64_t request_id, const UpdateResult& result, Response* response,
                  std::vector<WaiterPtr>* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu()) {
  shard.RememberRequest(request_id);
  response->set_version(shard.version());
  response->set_duplicate(result.duplicate);
  response->set_applied(result.applied);
  response->set_dropped(result.dropped);
  if (result.applied) shard.waiters().TakeReady(shard.version(), ready);
}

// Before an update changes anything: room for its request id and for the pulls its
// version may release, so that what follows the change cannot fail (RecordUpdate).
void PrepareUpdate(Shard& shard, std::vector<WaiterPtr>* ready)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu()) {
  shard.ReserveRequest();
  ready->reserve(shard.waiters().CountReady(shard.version() + 1));
}

}  // namespace

absl::Status ShardPushes::Push(const PushRequest& request, absl::string_view data,
                               PushResponse* response) {
  return Guarded("push to", request.shard(),
                 [&] { return PushDense(request, GradientBytes(data), response); });
}

absl::Status ShardPushes::PushBatch(const PushBatchRequest& request,
                                    absl::Span<const absl::string_view> pieces,
                                    PushBatchResponse* response) {
  return Guarded("push batch", [&] { return PushBatchChecked(request, pieces, response); });
}

absl::Status ShardPushes::PushRows(const PushRowsRequest& request, PushRowsResponse* response) {
  return Guarded("push rows to", request.shard(),
                 [&] { return PushRowsChecked(request, response); });
}

absl::Status ShardPushes::PushRowsBatch(const PushRowsBatchRequest& request,
                                        PushRowsBatchResponse* response) {
  response->Clear();
  for (int i = 0; i < request.pushes_size(); ++i) {
    absl::Status status = PushRows(request.pushes(i), response->add_pushes());
    if (status.ok()) continue;
    if (std::optional<ErrorDetail> detail = GetDetail(status);
        detail.has_value() && detail->kind() == ErrorDetail::BUCKET_MOVED) {
      // Tells the client which items to route again: this one and those after it.
      detail->set_batch_item(i);
      status = WithDetail(std::move(status), *detail);
    }
    return status;
  }
  return absl::OkStatus();
}

absl::Status ShardPushes::Assign(const AssignRequest& request, AssignResponse* response) {
  return Guarded("assign to", request.shard(), [&] { return AssignChecked(request, response); });
}

template <typename Request, typename Response, typename Apply>
absl::Status ShardPushes::ApplyGradient(Shard& shard, const Request& request,
                                        const std::string& what, Response* response, Apply apply) {
  std::vector<WaiterPtr> ready;
  absl::Status refused;
  {
    absl::MutexLock lock(&shard.mu());
    RETURN_IF_ERROR(fence_->CheckUpdate(shard, request.generation(), what));
    if (AnswerIfDuplicate(shard, request.request_id(), response)) return absl::OkStatus();
    if (shard.sync() && shard.AppliedStep(request.sync().step())) {
      // A straggler's push for a step applied without it, or a re-run's for a step applied
      // with it: nothing changes, and its request id is not remembered (a retry is answered
      // the same way).
      if (shard.has_backups()) {
        response->set_dropped(true);
      } else {
        response->set_duplicate(true);
      }
      return absl::OkStatus();
    }
    if (shard.sync()) {
      RETURN_IF_ERROR(Annotate(shard.CheckStep(request.sync().step()), what));
      // A refused step stays refused: a re-run's push fails as the first did.
      RETURN_IF_ERROR(Annotate(shard.refused_step(), what));
    }
    RETURN_IF_ERROR(Annotate(shard.CheckBaseVersion(request.base_version()), what));
    PrepareUpdate(shard, &ready);
    absl::StatusOr<UpdateResult> result = apply();
    if (result.ok()) {
      RecordUpdate(shard, request.request_id(), *result, response, &ready);
    } else if (shard.sync() && !shard.refused_step().ok()) {
      refused = shard.refused_step();  // this push completed the step, which was refused
    } else {
      return result.status();
    }
  }
  if (!refused.ok()) {
    // The step fails for all its replicas: the pulls waiting for the version after it (the
    // other replicas' next steps) fail with its error too.
    waits_->FailWaiters(shard, [&] { return refused; });
    return Annotate(refused, what);
  }
  waits_->CompleteReady(&ready);
  return absl::OkStatus();
}

absl::Status ShardPushes::PushBatchChecked(const PushBatchRequest& request,
                                           absl::Span<const absl::string_view> pieces,
                                           PushBatchResponse* response) {
  const GradientBytes data(pieces);
  if (request.data_bytes_size() != request.pushes_size()) {
    return absl::InvalidArgumentError(absl::StrCat("push batch: data_bytes has ",
                                                   request.data_bytes_size(), " entries for ",
                                                   request.pushes_size(), " pushes"));
  }
  int64_t total = 0;
  for (int i = 0; i < request.pushes_size(); ++i) {
    const int64_t bytes = request.data_bytes(i);
    if (bytes < 0 || bytes > data.size_bytes() - total) {
      return absl::InvalidArgumentError(
          absl::StrCat("push batch: data_bytes[", i, "] = ", bytes, " overruns data (",
                       data.size_bytes(), " bytes, ", total, " used by the items before)"));
    }
    if (!request.pushes(i).data().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("push batch: pushes[", i, "].data must be empty (the bytes go in data)"));
    }
    total += bytes;
  }
  if (total != data.size_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("push batch: data_bytes sum to ", total,
                                                   ", data has ", data.size_bytes(), " bytes"));
  }
  response->Clear();
  int64_t offset = 0;
  for (int i = 0; i < request.pushes_size(); ++i) {
    const int64_t bytes = request.data_bytes(i);
    RETURN_IF_ERROR(PushDense(request.pushes(i), data.Sub(offset, bytes), response->add_pushes()));
    offset += bytes;
  }
  return absl::OkStatus();
}

absl::Status ShardPushes::PushDense(const PushRequest& request, const GradientBytes& grad,
                                    PushResponse* response) {
  const std::string what = absl::StrCat("push to ", QuotedShard(request.shard()));
  RETURN_IF_ERROR(CheckRequestId(request.request_id(), what));
  ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard, shards_->Find(request.shard(), what));
  ASSIGN_OR_RETURN(RowRange range,
                   ResolveRange(*shard, request.row_begin(), request.row_end(), what));
  float max_abs = 0;
  RETURN_IF_ERROR(CheckGradient(grad, range.size() * shard->width(), what, "data", &max_abs));
  if (shard->sync()) RETURN_IF_ERROR(CheckReplica(*shard, request.sync(), what));

  return ApplyGradient(*shard, request, what, response, [&]() -> absl::StatusOr<UpdateResult> {
    // ApplyGradient holds it, as `shard`: the analysis cannot tell that is the same lock.
    shard->mu().AssertHeld();
    UpdateResult result;
    if (shard->sync()) return shard->AddDense(request.sync().replica(), range, grad);
    RETURN_IF_ERROR(
        shard->ApplyDense(range, grad, parallel_, request.base_version(), max_abs));
    result.applied = true;
    return result;
  });
}

absl::Status ShardPushes::PushRowsChecked(const PushRowsRequest& request,
                                          PushRowsResponse* response) {
  const std::string what = absl::StrCat("push rows to ", QuotedShard(request.shard()));
  RETURN_IF_ERROR(CheckRequestId(request.request_id(), what));
  ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard, shards_->Find(request.shard(), what));
  std::vector<int64_t> id_scratch;
  ASSIGN_OR_RETURN(const absl::Span<const int64_t> ids,
                   RequestIds(request.ids(), request.ids_bytes(), what, &id_scratch));
  RETURN_IF_ERROR(CheckIds(*shard, ids, what));
  const int64_t width = shard->width();
  std::vector<float> scratch;
  ASSIGN_OR_RETURN(const float* grad,
                   CheckedFloats(request.data(), static_cast<int64_t>(ids.size()) * width, what,
                                 "data", &scratch));
  if (shard->sync()) RETURN_IF_ERROR(CheckReplica(*shard, request.sync(), what));

  // Sum duplicate ids in order of appearance. Without duplicates (the usual case) an ASYNC
  // update reads the request's bytes in place.
  std::vector<int64_t> unique_ids;
  std::vector<float> summed;
  const bool has_duplicates =
      SumDuplicateRows(ids, shard->rows(), grad, width, shard->sync(), &unique_ids, &summed);

  return ApplyGradient(*shard, request, what, response, [&]() -> absl::StatusOr<UpdateResult> {
    // ApplyGradient holds it, as `shard`: the analysis cannot tell that is the same lock.
    shard->mu().AssertHeld();
    if (shard->dynamic()) {
      RETURN_IF_ERROR(shard->CheckMovedKeys(ids, /*push=*/true, request.routing_version(), what));
    }
    if (shard->sync()) {
      return shard->AddRows(request.sync().replica(), std::move(unique_ids), std::move(summed));
    }
    UpdateResult result;
    if (!ids.empty() && shard->dynamic()) {
      RETURN_IF_ERROR(shard->ApplyKeys(has_duplicates ? absl::MakeConstSpan(unique_ids) : ids,
                                       has_duplicates ? summed.data() : grad));
      result.applied = true;
    } else if (!ids.empty()) {
      if (has_duplicates) {
        RETURN_IF_ERROR(
            shard->ApplyRows(unique_ids, summed.data(), parallel_, request.base_version()));
      } else {
        RETURN_IF_ERROR(shard->ApplyRows(ids, grad, parallel_, request.base_version()));
      }
      result.applied = true;
    }
    return result;
  });
}

absl::Status ShardPushes::AssignChecked(const AssignRequest& request, AssignResponse* response) {
  const std::string what = absl::StrCat("assign to ", QuotedShard(request.shard()));
  RETURN_IF_ERROR(CheckRequestId(request.request_id(), what));
  ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard, shards_->Find(request.shard(), what));
  ASSIGN_OR_RETURN(RowRange range,
                   ResolveRange(*shard, request.row_begin(), request.row_end(), what));
  std::vector<float> scratch;
  ASSIGN_OR_RETURN(const float* values, CheckedFloats(request.data(), range.size() * shard->width(),
                                                      what, "data", &scratch));
  absl::MutexLock lock(&shard->mu());
  RETURN_IF_ERROR(fence_->CheckUpdate(*shard, request.generation(), what));
  if (AnswerIfDuplicate(*shard, request.request_id(), response)) return absl::OkStatus();
  shard->ReserveRequest();
  shard->Assign(range, values, request.reset_slots());
  shard->RememberRequest(request.request_id());
  return absl::OkStatus();
}

}  // namespace shardps
