// SwitchablePsClient: a PsClient whose ps set can be replaced while calls run, for a process
// that follows a job onto another number of ps tasks (the chief across shardctl scale-ps,
// docs/elastic.md). Every call goes to the client current when it starts; Switch makes later
// calls go to the new one, and the old one lives until the last call that began on it has
// returned (its done callback included). Layouts are the current client's: after a switch,
// CreateVariables or Discover again.
//
// Thread-safety: thread-safe.
#ifndef SHARDPS_CLIENT_SWITCHABLE_PS_CLIENT_H_
#define SHARDPS_CLIENT_SWITCHABLE_PS_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "client/ps_client.h"

namespace shardps {

class SwitchablePsClient final : public PsClient {
 public:
  // REQUIRES: first != nullptr.
  explicit SwitchablePsClient(std::shared_ptr<PsClient> first) : current_(std::move(first)) {}

  // Later calls go to `next` (REQUIRES: not null). Returns the client they went to before.
  std::shared_ptr<PsClient> Switch(std::shared_ptr<PsClient> next) ABSL_LOCKS_EXCLUDED(mu_);
  std::shared_ptr<PsClient> current() const ABSL_LOCKS_EXCLUDED(mu_);

  int num_ps() const override { return current()->num_ps(); }
  absl::Status CreateVariables(const std::vector<VariableDef>& defs,
                               const Partitioner& partitioner, Placer* placer) override {
    return current()->CreateVariables(defs, partitioner, placer);
  }
  absl::Status Discover() override { return current()->Discover(); }
  absl::Status ListShardsAll(const ListShardsRequest& request,
                             std::vector<ListShardsResponse>* responses) override {
    return current()->ListShardsAll(request, responses);
  }
  absl::StatusOr<VariableLayout> GetLayout(const std::string& name) const override {
    return current()->GetLayout(name);
  }
  std::vector<std::string> VariableNames() const override { return current()->VariableNames(); }

  void PullAsync(std::vector<PullTarget> targets, const PullOptions& options,
                 PullVersions* versions, StatusCallback done) override;
  void PushAsync(std::vector<PushSource> sources, const PushOptions& options,
                 StatusCallback done) override;
  void PullRowsManyAsync(std::vector<RowsPullTarget> targets, const PullOptions& options,
                         PullVersions* versions, StatusCallback done) override;
  void PushRowsManyAsync(std::vector<RowsPushSource> sources, const PushOptions& options,
                         StatusCallback done) override;
  void AssignAsync(const std::string& name, absl::Span<const float> values,
                   StatusCallback done) override;

  absl::Status Health(std::vector<HealthResponse>* responses) override {
    return current()->Health(responses);
  }
  absl::Status ShutdownAll(const std::string& reason) override {
    return current()->ShutdownAll(reason);
  }
  void HealthEach(bool from_chief, absl::Duration timeout, std::vector<absl::Status>* statuses,
                  std::vector<HealthResponse>* responses) override {
    current()->HealthEach(from_chief, timeout, statuses, responses);
  }
  absl::Status SetGenerationAll(int64_t generation) override {
    return current()->SetGenerationAll(generation);
  }
  absl::Status DropShardsAll(const DropShardsRequest& request) override {
    return current()->DropShardsAll(request);
  }
  absl::Status SnapshotAll(int64_t checkpoint_id, const std::vector<std::string>& path_per_ps,
                           int64_t generation, int64_t incremental_since,
                           std::optional<int64_t> held_from_step,
                           std::vector<SnapshotResponse>* responses) override {
    return current()->SnapshotAll(checkpoint_id, path_per_ps, generation, incremental_since,
                                  held_from_step, responses);
  }
  using PsClient::SnapshotAll;
  absl::Status HoldPushesAll(int64_t generation, int64_t from_step,
                             absl::Duration timeout) override {
    return current()->HoldPushesAll(generation, from_step, timeout);
  }
  absl::Status SnapshotStatusAll(int64_t checkpoint_id,
                                 std::vector<SnapshotStatusResponse>* responses) override {
    return current()->SnapshotStatusAll(checkpoint_id, responses);
  }
  absl::Status RestoreAll(const RestoreRequest& request,
                          std::vector<RestoreResponse>* responses) override {
    return current()->RestoreAll(request, responses);
  }
  absl::Status CreateShards(int ps, const CreateShardsRequest& request,
                            CreateShardsResponse* response) override {
    return current()->CreateShards(ps, request, response);
  }
  absl::Status MoveBuckets(int ps, const MoveBucketsRequest& request,
                           MoveBucketsResponse* response) override {
    return current()->MoveBuckets(ps, request, response);
  }

 private:
  // `done` keeping `client` alive until it has run.
  static StatusCallback Keeping(std::shared_ptr<PsClient> client, StatusCallback done);

  mutable absl::Mutex mu_;
  std::shared_ptr<PsClient> current_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardps

#endif  // SHARDPS_CLIENT_SWITCHABLE_PS_CLIENT_H_
