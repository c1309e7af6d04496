#include "client/ps_admin.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace shardps {

absl::Status PsAdmin::Health(std::vector<HealthResponse>* responses) {
  std::vector<HealthRequest> requests(calls_->num_ps());
  return calls_->AllPs<HealthRequest, HealthResponse>(&PsInterface::HealthAsync, requests,
                                                      responses, calls_->options().rpc_timeout);
}

absl::Status PsAdmin::ShutdownAll(const std::string& reason) {
  std::vector<ShutdownRequest> requests(calls_->num_ps());
  for (auto& r : requests) r.set_reason(reason);
  std::vector<ShutdownResponse> responses;
  return calls_->AllPs<ShutdownRequest, ShutdownResponse>(
      &PsInterface::ShutdownAsync, requests, &responses, calls_->options().rpc_timeout);
}

void PsAdmin::HealthEach(bool from_chief, absl::Duration timeout,
                         std::vector<absl::Status>* statuses,
                         std::vector<HealthResponse>* responses) {
  std::vector<HealthRequest> requests(calls_->num_ps());
  for (auto& r : requests) r.set_from_chief(from_chief);
  calls_->EachPs<HealthRequest, HealthResponse>(&PsInterface::HealthAsync, requests, responses,
                                                timeout, /*max_attempts=*/1, statuses);
}

absl::Status PsAdmin::SetGenerationAll(int64_t generation) {
  std::vector<SetGenerationRequest> requests(calls_->num_ps());
  for (auto& r : requests) r.set_generation(generation);
  std::vector<SetGenerationResponse> responses;
  return calls_->AllPs<SetGenerationRequest, SetGenerationResponse>(
      &PsInterface::SetGenerationAsync, requests, &responses, calls_->options().rpc_timeout);
}

absl::Status PsAdmin::DropShardsAll(const DropShardsRequest& request) {
  std::vector<DropShardsRequest> requests(calls_->num_ps(), request);
  std::vector<DropShardsResponse> responses;
  absl::Status status = calls_->AllPs<DropShardsRequest, DropShardsResponse>(
      &PsInterface::DropShardsAsync, requests, &responses, calls_->options().rpc_timeout);
  // Whatever the outcome, some ps may have dropped them: the layouts are no longer known.
  layouts_->Forget(request);
  return status;
}

absl::Status PsAdmin::SnapshotAll(int64_t checkpoint_id,
                                  const std::vector<std::string>& path_per_ps, int64_t generation,
                                  int64_t incremental_since,
                                  std::optional<int64_t> held_from_step,
                                  std::vector<SnapshotResponse>* responses) {
  if (static_cast<int>(path_per_ps.size()) != calls_->num_ps()) {
    return absl::InvalidArgumentError(absl::StrCat("snapshot ", checkpoint_id, ": ",
                                                   path_per_ps.size(), " paths for ",
                                                   calls_->num_ps(), " ps tasks"));
  }
  std::vector<SnapshotRequest> requests(calls_->num_ps());
  for (int p = 0; p < calls_->num_ps(); ++p) {
    requests[p].set_checkpoint_id(checkpoint_id);
    requests[p].set_path(path_per_ps[p]);
    requests[p].set_generation(generation);
    requests[p].set_incremental_since(incremental_since);
    if (held_from_step.has_value()) requests[p].set_held_from_step(*held_from_step);
  }
  return calls_->AllPs<SnapshotRequest, SnapshotResponse>(&PsInterface::SnapshotAsync, requests,
                                                          responses, calls_->options().rpc_timeout);
}

absl::Status PsAdmin::HoldPushesAll(int64_t generation, int64_t from_step,
                                    absl::Duration timeout) {
  std::vector<HoldPushesRequest> requests(calls_->num_ps());
  for (HoldPushesRequest& r : requests) {
    r.set_generation(generation);
    r.set_from_step(from_step);
    r.set_timeout_ms(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout)));
  }
  std::vector<HoldPushesResponse> responses;
  return calls_->AllPs<HoldPushesRequest, HoldPushesResponse>(
      &PsInterface::HoldPushesAsync, requests, &responses, calls_->options().rpc_timeout);
}

absl::Status PsAdmin::SnapshotStatusAll(int64_t checkpoint_id,
                                        std::vector<SnapshotStatusResponse>* responses) {
  std::vector<SnapshotStatusRequest> requests(calls_->num_ps());
  for (auto& r : requests) r.set_checkpoint_id(checkpoint_id);
  return calls_->AllPs<SnapshotStatusRequest, SnapshotStatusResponse>(
      &PsInterface::SnapshotStatusAsync, requests, responses, calls_->options().rpc_timeout);
}

absl::Status PsAdmin::RestoreAll(const RestoreRequest& request,
                                 std::vector<RestoreResponse>* responses) {
  std::vector<RestoreRequest> requests(calls_->num_ps(), request);
  return calls_->AllPs<RestoreRequest, RestoreResponse>(
      &PsInterface::RestoreAsync, requests, responses, calls_->options().restore_timeout);
}

}  // namespace shardps
