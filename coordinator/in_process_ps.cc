#include "coordinator/in_process_ps.h"

#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/local_ps_interface.h"
#include "common/status_macros.h"

namespace shardps {

absl::StatusOr<std::unique_ptr<InProcessPs>> InProcessPs::Create(Options options) {
  std::unique_ptr<InProcessPs> ps(new InProcessPs(std::move(options)));
  const Options& o = ps->options_;
  std::vector<std::unique_ptr<PsInterface>> interfaces;
  for (int k = 0; k < o.num_tasks; ++k) {
    const uint64_t incarnation = o.first_incarnation == 0 ? 0 : o.first_incarnation + k;
    ASSIGN_OR_RETURN(ShardStore * store, ps->NewStore(k, incarnation));
    ps->current_.push_back(store);
    std::unique_ptr<PsInterface> local = NewLocalPsInterface(ps->name(k), store);
    if (o.intercept) {
      auto interceptor = std::make_unique<InterceptingPsInterface>(ps->name(k), std::move(local));
      ps->interceptors_.push_back(interceptor.get());
      local = std::move(interceptor);
    }
    interfaces.push_back(std::move(local));
  }
  ASSIGN_OR_RETURN(ps->client_, PsClient::Create(std::move(interfaces), o.client));
  return ps;
}

InProcessPs::~InProcessPs() { Shutdown(); }

std::string InProcessPs::name(int k) const { return absl::StrCat(options_.name_prefix, k); }

absl::StatusOr<ShardStore*> InProcessPs::NewStore(int k, uint64_t incarnation) {
  ShardStore::Options o = options_.store;
  o.task_index = k;
  o.incarnation = incarnation;
  ASSIGN_OR_RETURN(std::unique_ptr<ShardStore> store, ShardStore::Create(o));
  stores_.push_back(std::move(store));
  return stores_.back().get();
}

void InProcessPs::Down(int k) {
  InterceptingPsInterface::Interceptor down =
      [](absl::string_view, const google::protobuf::Message&, google::protobuf::Message*,
         absl::Time) -> std::optional<absl::Status> {
    return absl::UnavailableError("connection refused");
  };
  interceptors_[k]->SetInterceptor(down);
  SetConnectedHook(k, down);
}

void InProcessPs::Up(int k) {
  interceptors_[k]->SetInterceptor(nullptr);
  SetConnectedHook(k, nullptr);
}

void InProcessPs::SetConnectedHook(int k, InterceptingPsInterface::Interceptor hook) {
  absl::MutexLock lock(&hooks_mu_);
  if (hooks_.size() <= static_cast<size_t>(k)) hooks_.resize(k + 1);
  hooks_[k] = std::move(hook);
}

absl::StatusOr<std::shared_ptr<PsClient>> InProcessPs::Connect(
    const std::vector<std::string>& names) {
  std::vector<std::unique_ptr<PsInterface>> interfaces;
  for (const std::string& n : names) {
    int k = 0;
    while (k < options_.num_tasks && name(k) != n) ++k;
    if (k == options_.num_tasks) return absl::NotFoundError(absl::StrCat("no ps task ", n));
    interfaces.push_back(std::make_unique<InterceptingPsInterface>(
        n, NewLocalPsInterface(n, current_[k]),
        [this, k](absl::string_view method, const google::protobuf::Message& request,
                  google::protobuf::Message* response,
                  absl::Time deadline) -> std::optional<absl::Status> {
          InterceptingPsInterface::Interceptor hook;
          {
            absl::MutexLock lock(&hooks_mu_);
            if (static_cast<size_t>(k) < hooks_.size()) hook = hooks_[k];
          }
          if (!hook) return std::nullopt;
          return hook(method, request, response, deadline);
        }));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client,
                   PsClient::Create(std::move(interfaces), options_.client));
  return std::shared_ptr<PsClient>(std::move(client));
}

absl::Status InProcessPs::Restart(int k, uint64_t incarnation) {
  ASSIGN_OR_RETURN(ShardStore * store, NewStore(k, incarnation));
  current_[k] = store;
  interceptors_[k]->SetInner(NewLocalPsInterface(name(k), store));
  return absl::OkStatus();
}

void InProcessPs::Shutdown() {
  for (const std::unique_ptr<ShardStore>& store : stores_) store->Shutdown();
}

}  // namespace shardps
