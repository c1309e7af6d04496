// InterceptingPsInterface: a PsInterface for tests that sees every call before it goes on to
// another PsInterface. It can record the request, answer the call itself (a scripted reply,
// or an injected failure: a ps that is down, slow or restarted) or let it through, and the
// interface behind it can be replaced mid-test (a ps that restarted with nothing).
//
// Thread-safety: thread-safe. The interceptor runs on the calling thread, possibly on
// several at once.
#ifndef SHARDPS_CLIENT_INTERCEPTING_PS_INTERFACE_H_
#define SHARDPS_CLIENT_INTERCEPTING_PS_INTERFACE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "client/ps_interface.h"
#include "google/protobuf/message.h"

namespace shardps {

class InterceptingPsInterface : public PsInterface {
 public:
  // Sees a call of `method` ("Push", "PushBatch", "Health", "Restore": the PsService method
  // name) with its request, response and deadline before it goes on. Returning a status
  // answers the call with it (the response as the interceptor left it); nullopt lets the
  // call through. PullBatch and PushBatch calls show their request only, not the bytes.
  using Interceptor = std::function<std::optional<absl::Status>(
      absl::string_view method, const google::protobuf::Message& request,
      google::protobuf::Message* response, absl::Time deadline)>;

  // `inner` may be null: a call let through then fails UNIMPLEMENTED. No interceptor: every
  // call goes through.
  InterceptingPsInterface(std::string name, std::unique_ptr<PsInterface> inner,
                          Interceptor interceptor = nullptr);

  void SetInterceptor(Interceptor interceptor);
  // Later calls go on to `inner`; calls already on the old one finish there (it is kept
  // alive until they have).
  void SetInner(std::unique_ptr<PsInterface> inner);

  const std::string& name() const override { return name_; }

  void CreateShardsAsync(const CreateShardsRequest* request, CreateShardsResponse* response,
                         absl::Time deadline, StatusCallback done) override;
  void ListShardsAsync(const ListShardsRequest* request, ListShardsResponse* response,
                       absl::Time deadline, StatusCallback done) override;
  void PullAsync(const PullRequest* request, PullResponse* response, absl::Time deadline,
                 StatusCallback done) override;
  void PushAsync(const PushRequest* request, PushResponse* response, absl::Time deadline,
                 StatusCallback done) override;
  void PullRowsAsync(const PullRowsRequest* request, PullRowsResponse* response,
                     absl::Time deadline, StatusCallback done) override;
  void PushRowsAsync(const PushRowsRequest* request, PushRowsResponse* response,
                     absl::Time deadline, StatusCallback done) override;
  void AssignAsync(const AssignRequest* request, AssignResponse* response, absl::Time deadline,
                   StatusCallback done) override;
  void HealthAsync(const HealthRequest* request, HealthResponse* response, absl::Time deadline,
                   StatusCallback done) override;
  void ShutdownAsync(const ShutdownRequest* request, ShutdownResponse* response,
                     absl::Time deadline, StatusCallback done) override;
  void SetGenerationAsync(const SetGenerationRequest* request, SetGenerationResponse* response,
                          absl::Time deadline, StatusCallback done) override;
  void DropShardsAsync(const DropShardsRequest* request, DropShardsResponse* response,
                       absl::Time deadline, StatusCallback done) override;
  void SnapshotAsync(const SnapshotRequest* request, SnapshotResponse* response,
                     absl::Time deadline, StatusCallback done) override;
  void HoldPushesAsync(const HoldPushesRequest* request, HoldPushesResponse* response,
                       absl::Time deadline, StatusCallback done) override;
  void MoveBucketsAsync(const MoveBucketsRequest* request, MoveBucketsResponse* response,
                        absl::Time deadline, StatusCallback done) override;
  void SnapshotStatusAsync(const SnapshotStatusRequest* request, SnapshotStatusResponse* response,
                           absl::Time deadline, StatusCallback done) override;
  void RestoreAsync(const RestoreRequest* request, RestoreResponse* response, absl::Time deadline,
                    StatusCallback done) override;
  void PullBatchAsync(const PullBatchRequest* request, PullBatchResponse* response,
                      absl::Span<const absl::Span<char>> outs, absl::Time deadline,
                      StatusCallback done) override;
  void PushBatchAsync(const PushBatchRequest* request,
                      absl::Span<const absl::Span<const char>> data, PushBatchResponse* response,
                      absl::Time deadline, StatusCallback done) override;

 private:
  // Runs the interceptor; when it lets the call through, calls go(inner, done) with the
  // current inner interface, kept alive until `done` has run.
  void Intercept(absl::string_view method, const google::protobuf::Message& request,
                 google::protobuf::Message* response, absl::Time deadline, StatusCallback done,
                 const std::function<void(PsInterface* inner, StatusCallback done)>& go);

  const std::string name_;
  absl::Mutex mu_;
  std::shared_ptr<PsInterface> inner_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Interceptor> interceptor_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardps

#endif  // SHARDPS_CLIENT_INTERCEPTING_PS_INTERFACE_H_
