// PsAdmin: a PsClient's control calls, each one call to every ps task at once, waiting for
// all (PsClient::Health, ShutdownAll, HealthEach, SetGenerationAll, DropShardsAll,
// SnapshotAll, SnapshotStatusAll, RestoreAll; client/ps_client.h documents each). The *All
// calls answer OK or the failure of the lowest ps task that failed.
//
// Thread-safety: thread-safe; every call blocks until each ps has answered or failed.
#ifndef SHARDPS_CLIENT_PS_ADMIN_H_
#define SHARDPS_CLIENT_PS_ADMIN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/layout_map.h"
#include "client/ps_calls.h"
#include "proto/ps.pb.h"

namespace shardps {

class PsAdmin {
 public:
  // `calls` and `layouts` must outlive this.
  PsAdmin(PsCalls* calls, LayoutMap* layouts) : calls_(calls), layouts_(layouts) {}

  absl::Status Health(std::vector<HealthResponse>* responses);
  absl::Status ShutdownAll(const std::string& reason);
  void HealthEach(bool from_chief, absl::Duration timeout, std::vector<absl::Status>* statuses,
                  std::vector<HealthResponse>* responses);
  absl::Status SetGenerationAll(int64_t generation);
  // Also forgets the dropped variables' layouts, whatever the outcome.
  absl::Status DropShardsAll(const DropShardsRequest& request);
  absl::Status SnapshotAll(int64_t checkpoint_id, const std::vector<std::string>& path_per_ps,
                           int64_t generation, int64_t incremental_since,
                           std::optional<int64_t> held_from_step,
                           std::vector<SnapshotResponse>* responses);
  absl::Status HoldPushesAll(int64_t generation, int64_t from_step, absl::Duration timeout);
  absl::Status SnapshotStatusAll(int64_t checkpoint_id,
                                 std::vector<SnapshotStatusResponse>* responses);
  absl::Status RestoreAll(const RestoreRequest& request, std::vector<RestoreResponse>* responses);

 private:
  PsCalls* const calls_;
  LayoutMap* const layouts_;
};

}  // namespace shardps

#endif  // SHARDPS_CLIENT_PS_ADMIN_H_
