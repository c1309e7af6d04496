// PsDataPath: a PsClient's data calls (PsClient::PullAsync, PushAsync, PullRowsManyAsync,
// PushRowsManyAsync, AssignAsync; client/ps_client.h documents each). A call's chunks (of
// at most Options::max_chunk_bytes) are grouped by ps into batches, sent through PsCalls with
// retries, and answered once every part has; pulled bytes go from the replies straight to
// the caller's memory, pushed bytes are sent from it (row pushes from recycled buffers).
//
// Thread-safety: thread-safe. `done` runs exactly once, on some thread.
#ifndef SHARDPS_CLIENT_PS_DATA_PATH_H_
#define SHARDPS_CLIENT_PS_DATA_PATH_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/buffer_pool.h"
#include "client/layout_map.h"
#include "client/ps_calls.h"
#include "client/ps_client_types.h"
#include "client/ps_interface.h"
#include "client/request_ids.h"
#include "proto/ps.pb.h"

namespace shardps {

class PsDataPath {
 public:
  // Every pointer must outlive this; `calls` must also outlive the calls made through it.
  PsDataPath(PsCalls* calls, LayoutMap* layouts, RequestIds* ids)
      : calls_(calls), layouts_(layouts), ids_(ids) {}

  void PullAsync(std::vector<PullTarget> targets, const PullOptions& options,
                 PullVersions* versions, StatusCallback done);
  void PushAsync(std::vector<PushSource> sources, const PushOptions& options, StatusCallback done);
  void PullRowsManyAsync(std::vector<RowsPullTarget> targets, const PullOptions& options,
                         PullVersions* versions, StatusCallback done);
  void PushRowsManyAsync(std::vector<RowsPushSource> sources, const PushOptions& options,
                         StatusCallback done);
  void AssignAsync(const std::string& name, absl::Span<const float> values, StatusCallback done);

 private:
  // A row push on its way: the ps it goes to and the table it belongs to.
  struct RowPushItem {
    int ps = 0;
    std::string variable;
    PushRowsRequest request;
  };
  using RowPushItems = std::vector<RowPushItem>;

  // A row pull's attempt: on BUCKET_MOVED (a bucket of a table moved), the layouts are
  // rebuilt and the whole pull is made again, `reroutes` counting, until `give_up`.
  void PullRowsAttempt(std::shared_ptr<std::vector<RowsPullTarget>> targets,
                       const PullOptions& options, PullVersions* versions, int reroutes,
                       absl::Time give_up, StatusCallback done);
  // Sends row pushes, batched per ps. The requests a ps refused with BUCKET_MOVED (the
  // refused batch item and those after it) are routed again by the rebuilt layouts
  // (client/bucket_reroute.h) and sent again; those applied are not.
  void SendRowPushes(std::shared_ptr<RowPushItems> items, const PushOptions& options,
                     int reroutes, absl::Time give_up, StatusCallback done);
  void RerouteRowPushesAsync(std::shared_ptr<RowPushItems> unapplied, absl::Status why,
                             const PushOptions& options, int reroutes, absl::Time give_up,
                             StatusCallback done);
  // Rebuilds the layout of `variable` (empty: of every variable) from what the ps tasks hold
  // (PsClient::Discover, without blocking), then `done`.
  void RefreshLayoutsAsync(const std::string& variable, StatusCallback done);
  // After a BUCKET_MOVED: waits (a bucket being handed over comes back within its freeze),
  // rebuilds the layouts, and calls `then` with the outcome; a layout that cannot be built
  // yet (a bucket between two shards) is tried again until `give_up`.
  void AfterBucketMoved(const absl::Status& why, int reroutes, absl::Time give_up,
                        StatusCallback then);

  // Appends the row pushes of `source` to *items, each with its ps: one request per shard
  // chunk of at most max_chunk_bytes, or a SYNC replica's whole share of a shard as one
  // (even an empty one); duplicate ids summed here.
  absl::Status AddRowPushes(const RowsPushSource& source, const PushOptions& options,
                            std::vector<std::pair<int, PushRowsRequest>>* items);

  int64_t chunk_bytes() const { return calls_->options().max_chunk_bytes; }

  PsCalls* const calls_;
  LayoutMap* const layouts_;
  RequestIds* const ids_;
  BufferPool buffers_;
};

}  // namespace shardps

#endif  // SHARDPS_CLIENT_PS_DATA_PATH_H_
