// PsDataPath: a PsClient's data calls (PsClient::PullAsync, PushAsync, PullRowsManyAsync,
// PushRowsManyAsync, AssignAsync; client/ps_client.h documents each). A call's chunks (of
// at most Options::max_chunk_bytes) are grouped by ps into batches, sent through PsCalls with
// retries, and answered once every part has; pulled bytes go from the replies straight to
// the caller's memory, pushed bytes are sent from it (row pushes from recycled buffers).
//
// Thread-safety: thread-safe. `done` runs exactly once, on some thread.
#ifndef SHARDPS_CLIENT_PS_DATA_PATH_H_
#define SHARDPS_CLIENT_PS_DATA_PATH_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
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
  PsDataPath(PsCalls* calls, const LayoutMap* layouts, RequestIds* ids)
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
  // Appends the row pushes of `source` to *items, each with its ps: one request per shard
  // chunk of at most max_chunk_bytes, or a SYNC replica's whole share of a shard as one
  // (even an empty one); duplicate ids summed here.
  absl::Status AddRowPushes(const RowsPushSource& source, const PushOptions& options,
                            std::vector<std::pair<int, PushRowsRequest>>* items);

  int64_t chunk_bytes() const { return calls_->options().max_chunk_bytes; }

  PsCalls* const calls_;
  const LayoutMap* const layouts_;
  RequestIds* const ids_;
  BufferPool buffers_;
};

}  // namespace shardps

#endif  // SHARDPS_CLIENT_PS_DATA_PATH_H_
