#include "client/local_ps_interface.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

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
    // As the ps's service: a checkpoint cut may hold it (ShardStore::AdmitPush).
    store_->AdmitPush(JobStepOf(*request), [this, request, response, done = std::move(done)] {
      done(store_->Push(*request, response));
    });
  }
  void PullRowsAsync(const PullRowsRequest* request, PullRowsResponse* response, absl::Time,
                     StatusCallback done) override {
    store_->PullRows(*request, response, std::move(done));
  }
  void PushRowsAsync(const PushRowsRequest* request, PushRowsResponse* response, absl::Time,
                     StatusCallback done) override {
    store_->AdmitPush(JobStepOf(*request), [this, request, response, done = std::move(done)] {
      done(store_->PushRows(*request, response));
    });
  }
  // The store's own batches: each item as the store's PullRows, then copied out.
  void PullRowsBatchIntoAsync(const PullRowsBatchRequest* request,
                              PullRowsBatchResponse* response,
                              absl::Span<const absl::Span<char>> outs, absl::Time,
                              StatusCallback done) override {
    int64_t rows = 0;
    for (const PullRowsRequest& item : request->pulls()) rows += RowRequestIds(item);
    if (rows != static_cast<int64_t>(outs.size())) {
      return done(absl::InvalidArgumentError(
          absl::StrCat("pull rows batch of ", request->pulls_size(), " items and ", rows,
                       " ids has ", outs.size(), " outputs")));
    }
    response->Clear();
    std::vector<PullRowsResponse*> items;
    for (int i = 0; i < request->pulls_size(); ++i) items.push_back(response->add_pulls());
    store_->PullRowsBatch(
        *request, items, [request, response, outs, done = std::move(done)](const absl::Status& s) {
          absl::Status status = s;
          size_t row = 0;
          for (int i = 0; status.ok() && i < response->pulls_size(); ++i) {
            const std::string& data = response->pulls(i).data();
            size_t expected = 0;
            const size_t count = static_cast<size_t>(RowRequestIds(request->pulls(i)));
            for (size_t r = row; r < row + count; ++r) expected += outs[r].size();
            if (data.size() != expected) {
              status = PulledRowsSizeError(request->pulls(i), static_cast<int64_t>(data.size()),
                                           static_cast<int64_t>(expected));
              break;
            }
            size_t offset = 0;
            for (size_t r = row; r < row + count; ++r) {
              std::memcpy(outs[r].data(), data.data() + offset, outs[r].size());
              offset += outs[r].size();
            }
            row += count;
          }
          for (PullRowsResponse& item : *response->mutable_pulls()) item.clear_data();
          done(status);
        });
  }
  void PushRowsBatchAsync(const PushRowsBatchRequest* request, PushRowsBatchResponse* response,
                          absl::Time, StatusCallback done) override {
    store_->AdmitPush(JobStepOf(*request), [this, request, response, done = std::move(done)] {
      done(store_->PushRowsBatch(*request, response));
    });
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
  void HoldPushesAsync(const HoldPushesRequest* request, HoldPushesResponse* response,
                       absl::Time, StatusCallback done) override {
    done(store_->HoldPushes(*request, response));
  }
  void MoveBucketsAsync(const MoveBucketsRequest* request, MoveBucketsResponse* response,
                        absl::Time, StatusCallback done) override {
    done(store_->MoveBuckets(*request, response));
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
