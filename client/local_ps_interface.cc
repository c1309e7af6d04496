#include "client/local_ps_interface.h"

namespace shardps {
namespace {

class LocalPsInterface : public PsInterface {
 public:
  LocalPsInterface(const std::string& name, ShardStore* store) : name_(name), store_(store) {}

  const std::string& name() const override { return name_; }

  void CreateShardsAsync(const CreateShardsRequest* request, CreateShardsResponse* response,
                         absl::Time, StatusCallback done) override {
    done(store_->CreateShards(*request, response));
  }
  void ListShardsAsync(const ListShardsRequest* request, ListShardsResponse* response,
                       absl::Time, StatusCallback done) override {
    done(store_->ListShards(*request, response));
  }
  void PullAsync(const PullRequest* request, PullResponse* response, absl::Time,
                 StatusCallback done) override {
    store_->Pull(*request, response, std::move(done));
  }
  void PushAsync(const PushRequest* request, PushResponse* response, absl::Time,
                 StatusCallback done) override {
    done(store_->Push(*request, response));
  }
  void PullRowsAsync(const PullRowsRequest* request, PullRowsResponse* response, absl::Time,
                     StatusCallback done) override {
    store_->PullRows(*request, response, std::move(done));
  }
  void PushRowsAsync(const PushRowsRequest* request, PushRowsResponse* response, absl::Time,
                     StatusCallback done) override {
    done(store_->PushRows(*request, response));
  }
  void AssignAsync(const AssignRequest* request, AssignResponse* response, absl::Time,
                   StatusCallback done) override {
    done(store_->Assign(*request, response));
  }
  void HealthAsync(const HealthRequest*, HealthResponse* response, absl::Time,
                   StatusCallback done) override {
    store_->Health(response);
    done(absl::OkStatus());
  }
  void ShutdownAsync(const ShutdownRequest*, ShutdownResponse*, absl::Time,
                     StatusCallback done) override {
    store_->Shutdown();
    done(absl::OkStatus());
  }
  void SetGenerationAsync(const SetGenerationRequest* request, SetGenerationResponse* response,
                          absl::Time, StatusCallback done) override {
    done(store_->SetGeneration(*request, response));
  }
  void DropShardsAsync(const DropShardsRequest* request, DropShardsResponse* response,
                       absl::Time, StatusCallback done) override {
    done(store_->DropShards(*request, response));
  }
  void SnapshotAsync(const SnapshotRequest* request, SnapshotResponse* response, absl::Time,
                     StatusCallback done) override {
    done(store_->Snapshot(*request, response));
  }
  void SnapshotStatusAsync(const SnapshotStatusRequest* request,
                           SnapshotStatusResponse* response, absl::Time,
                           StatusCallback done) override {
    done(store_->SnapshotStatus(*request, response));
  }
  // Blocks the calling thread while the store reads (a test's restores run one ps at a time).
  void RestoreAsync(const RestoreRequest* request, RestoreResponse* response, absl::Time,
                    StatusCallback done) override {
    done(store_->Restore(*request, response));
  }

 private:
  const std::string name_;
  ShardStore* const store_;
};

}  // namespace

std::unique_ptr<PsInterface> NewLocalPsInterface(const std::string& name, ShardStore* store) {
  return std::make_unique<LocalPsInterface>(name, store);
}

}  // namespace shardps
