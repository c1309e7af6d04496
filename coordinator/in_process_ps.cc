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
  interceptors_[k]->SetInterceptor(
      [](absl::string_view, const google::protobuf::Message&, google::protobuf::Message*,
         absl::Time) -> std::optional<absl::Status> {
        return absl::UnavailableError("connection refused");
      });
}

void InProcessPs::Up(int k) { interceptors_[k]->SetInterceptor(nullptr); }

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
