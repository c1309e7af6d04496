#include "client/intercepting_ps_interface.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace shardps {

InterceptingPsInterface::InterceptingPsInterface(std::string name,
                                                 std::unique_ptr<PsInterface> inner,
                                                 Interceptor interceptor)
    : name_(std::move(name)), inner_(std::move(inner)) {
  SetInterceptor(std::move(interceptor));
}

void InterceptingPsInterface::SetInterceptor(Interceptor interceptor) {
  auto shared = interceptor ? std::make_shared<const Interceptor>(std::move(interceptor)) : nullptr;
  absl::MutexLock lock(&mu_);
  interceptor_ = std::move(shared);
}

void InterceptingPsInterface::SetInner(std::unique_ptr<PsInterface> inner) {
  std::shared_ptr<PsInterface> old;
  absl::MutexLock lock(&mu_);
  old = std::move(inner_);  // freed after the lock, once its calls are done
  inner_ = std::move(inner);
}

void InterceptingPsInterface::Intercept(
    absl::string_view method, const google::protobuf::Message& request,
    google::protobuf::Message* response, absl::Time deadline, StatusCallback done,
    const std::function<void(PsInterface* inner, StatusCallback done)>& go) {
  std::shared_ptr<const Interceptor> interceptor;
  std::shared_ptr<PsInterface> inner;
  {
    absl::MutexLock lock(&mu_);
    interceptor = interceptor_;
    inner = inner_;
  }
  if (interceptor != nullptr) {
    std::optional<absl::Status> answer = (*interceptor)(method, request, response, deadline);
    if (answer.has_value()) return done(*answer);
  }
  if (inner == nullptr) {
    return done(
        absl::UnimplementedError(absl::StrCat(name_, ": ", method, " has no interface behind it")));
  }
  PsInterface* target = inner.get();
  go(target,
     [inner = std::move(inner), done = std::move(done)](const absl::Status& s) { done(s); });
}

#define SHARDPS_INTERCEPT(Method)                                                              \
  void InterceptingPsInterface::Method##Async(const Method##Request* request,                  \
                                              Method##Response* response, absl::Time deadline, \
                                              StatusCallback done) {                           \
    Intercept(#Method, *request, response, deadline, std::move(done),                          \
              [=](PsInterface* inner, StatusCallback done) {                                   \
                inner->Method##Async(request, response, deadline, std::move(done));            \
              });                                                                              \
  }

SHARDPS_INTERCEPT(CreateShards)
SHARDPS_INTERCEPT(ListShards)
SHARDPS_INTERCEPT(Pull)
SHARDPS_INTERCEPT(Push)
SHARDPS_INTERCEPT(PullRows)
SHARDPS_INTERCEPT(PushRows)
SHARDPS_INTERCEPT(Assign)
SHARDPS_INTERCEPT(Health)
SHARDPS_INTERCEPT(Shutdown)
SHARDPS_INTERCEPT(SetGeneration)
SHARDPS_INTERCEPT(DropShards)
SHARDPS_INTERCEPT(Snapshot)
SHARDPS_INTERCEPT(HoldPushes)
SHARDPS_INTERCEPT(MoveBuckets)
SHARDPS_INTERCEPT(SnapshotStatus)
SHARDPS_INTERCEPT(Restore)
#undef SHARDPS_INTERCEPT

void InterceptingPsInterface::PullBatchAsync(const PullBatchRequest* request,
                                             PullBatchResponse* response,
                                             absl::Span<const absl::Span<char>> outs,
                                             absl::Time deadline, StatusCallback done) {
  Intercept("PullBatch", *request, response, deadline, std::move(done),
            [=](PsInterface* inner, StatusCallback done) {
              inner->PullBatchAsync(request, response, outs, deadline, std::move(done));
            });
}

void InterceptingPsInterface::PushBatchAsync(const PushBatchRequest* request,
                                             absl::Span<const absl::Span<const char>> data,
                                             PushBatchResponse* response, absl::Time deadline,
                                             StatusCallback done) {
  Intercept("PushBatch", *request, response, deadline, std::move(done),
            [=](PsInterface* inner, StatusCallback done) {
              inner->PushBatchAsync(request, data, response, deadline, std::move(done));
            });
}

}  // namespace shardps
