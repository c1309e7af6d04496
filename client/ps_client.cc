#include "client/ps_client.h"

#include <functional>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/grpc_ps_interface.h"
#include "client/layout_map.h"
#include "client/ps_admin.h"
#include "client/ps_calls.h"
#include "client/ps_data_path.h"
#include "client/request_ids.h"
#include "common/fanout.h"
#include "common/status_macros.h"

namespace shardps {
namespace {

// The client: variables' layouts (CreateVariables, Discover) here; the data calls in
// PsDataPath, the control calls in PsAdmin, the calls to each ps with their retries in
// PsCalls.
class PsClientImpl : public PsClient {
 public:
  PsClientImpl(std::vector<std::unique_ptr<PsInterface>> ps, const Options& options)
      : data_(&calls_, &layouts_, &ids_),
        admin_(&calls_, &layouts_),
        calls_(std::move(ps), options) {}

  int num_ps() const override { return calls_.num_ps(); }
  using PsClient::SnapshotAll;

  absl::Status CreateVariables(const std::vector<VariableDef>& defs, const Partitioner& partitioner,
                               Placer* placer) override {
    std::vector<CreateShardsRequest> requests(static_cast<size_t>(num_ps()));
    std::vector<VariableLayout> layouts;
    for (const VariableDef& def : defs) {
      RETURN_IF_ERROR(CheckVariableDef(def));
      ASSIGN_OR_RETURN(VariableLayout layout,
                       def.dynamic.has_value()
                           ? PlaceDynamic(def, num_ps(), &requests)
                           : PlaceDense(def, partitioner, placer, num_ps(), &requests));
      layouts.push_back(std::move(layout));
    }
    for (CreateShardsRequest& request : requests) request.set_request_id(ids_.Next());
    std::vector<CreateShardsResponse> responses(static_cast<size_t>(num_ps()));
    RETURN_IF_ERROR(CallEveryPs(&PsInterface::CreateShardsAsync, requests, &responses));
    layouts_.Put(std::move(layouts));
    return absl::OkStatus();
  }

  absl::Status Discover() override {
    std::vector<ListShardsRequest> requests(static_cast<size_t>(num_ps()));
    std::vector<ListShardsResponse> responses(static_cast<size_t>(num_ps()));
    RETURN_IF_ERROR(CallEveryPs(&PsInterface::ListShardsAsync, requests, &responses));
    ASSIGN_OR_RETURN(auto found, LayoutsFromShards(responses));
    std::vector<VariableLayout> layouts;
    for (auto& [name, layout] : found) layouts.push_back(std::move(layout));
    layouts_.Put(std::move(layouts));
    return absl::OkStatus();
  }

  absl::Status ListShardsAll(const ListShardsRequest& request,
                             std::vector<ListShardsResponse>* responses) override {
    std::vector<ListShardsRequest> requests(static_cast<size_t>(num_ps()), request);
    responses->assign(static_cast<size_t>(num_ps()), ListShardsResponse());
    return CallEveryPs(&PsInterface::ListShardsAsync, requests, responses);
  }

  absl::StatusOr<VariableLayout> GetLayout(const std::string& name) const override {
    return layouts_.Get(name);
  }

  std::vector<std::string> VariableNames() const override { return layouts_.Names(); }

  void PullAsync(std::vector<PullTarget> targets, const PullOptions& options,
                 PullVersions* versions, StatusCallback done) override {
    data_.PullAsync(std::move(targets), options, versions, std::move(done));
  }

  void PushAsync(std::vector<PushSource> sources, const PushOptions& options,
                 StatusCallback done) override {
    data_.PushAsync(std::move(sources), options, std::move(done));
  }

  void PullRowsManyAsync(std::vector<RowsPullTarget> targets, const PullOptions& options,
                         PullVersions* versions, StatusCallback done) override {
    data_.PullRowsManyAsync(std::move(targets), options, versions, std::move(done));
  }

  void PushRowsManyAsync(std::vector<RowsPushSource> sources, const PushOptions& options,
                         StatusCallback done) override {
    data_.PushRowsManyAsync(std::move(sources), options, std::move(done));
  }

  void AssignAsync(const std::string& name, absl::Span<const float> values,
                   StatusCallback done) override {
    data_.AssignAsync(name, values, std::move(done));
  }

  absl::Status Health(std::vector<HealthResponse>* responses) override {
    return admin_.Health(responses);
  }

  absl::Status ShutdownAll(const std::string& reason) override {
    return admin_.ShutdownAll(reason);
  }

  void HealthEach(bool from_chief, absl::Duration timeout, std::vector<absl::Status>* statuses,
                  std::vector<HealthResponse>* responses) override {
    admin_.HealthEach(from_chief, timeout, statuses, responses);
  }

  absl::Status SetGenerationAll(int64_t generation) override {
    return admin_.SetGenerationAll(generation);
  }

  absl::Status DropShardsAll(const DropShardsRequest& request) override {
    return admin_.DropShardsAll(request);
  }

  absl::Status SnapshotAll(int64_t checkpoint_id, const std::vector<std::string>& path_per_ps,
                           int64_t generation, int64_t incremental_since,
                           std::optional<int64_t> held_from_step,
                           std::vector<SnapshotResponse>* responses) override {
    return admin_.SnapshotAll(checkpoint_id, path_per_ps, generation, incremental_since,
                              held_from_step, responses);
  }

  absl::Status HoldPushesAll(int64_t generation, int64_t from_step,
                             absl::Duration timeout) override {
    return admin_.HoldPushesAll(generation, from_step, timeout);
  }

  absl::Status SnapshotStatusAll(int64_t checkpoint_id,
                                 std::vector<SnapshotStatusResponse>* responses) override {
    return admin_.SnapshotStatusAll(checkpoint_id, responses);
  }

  absl::Status CreateShards(int ps, const CreateShardsRequest& request,
                            CreateShardsResponse* response) override {
    return CallOnePs("create shards", ps, PsCalls::Addresses::kPs, &PsInterface::CreateShardsAsync,
                     request, response);
  }

  absl::Status MoveBuckets(int ps, const MoveBucketsRequest& request,
                           MoveBucketsResponse* response) override {
    return CallOnePs("move buckets", ps, PsCalls::Addresses::kLayoutShards,
                     &PsInterface::MoveBucketsAsync, request, response);
  }

  absl::Status RestoreAll(const RestoreRequest& request,
                          std::vector<RestoreResponse>* responses) override {
    return admin_.RestoreAll(request, responses);
  }

 private:
  // Calls `method` on ps `ps` alone (with retries) and waits.
  template <typename Req, typename Resp>
  absl::Status CallOnePs(const char* what, int ps, PsCalls::Addresses addresses,
                         PsCalls::Method<Req, Resp> method, const Req& request, Resp* response) {
    if (ps < 0 || ps >= num_ps()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ps ", ps, " is not in [0, ", num_ps(), ")"));
    }
    absl::Notification done;
    absl::Status result;
    calls_.Call<Req, Resp>(ps, addresses, method, &request, response,
                           calls_.Deadline(), [&](const absl::Status& s) {
                             result = s;
                             done.Notify();
                           });
    done.WaitForNotification();
    return result;
  }

  // Calls `method` on every ps at once, requests[k] to ps k (with retries), and waits: OK, or
  // the failure the fan-out reports.
  template <typename Req, typename Resp>
  absl::Status CallEveryPs(PsCalls::Method<Req, Resp> method, const std::vector<Req>& requests,
                           std::vector<Resp>* responses) {
    absl::Notification done;
    absl::Status result;
    auto fan = Fanout::Make(num_ps(), [&](const absl::Status& s) {
      result = s;
      done.Notify();
    });
    for (int p = 0; p < num_ps(); ++p) {
      calls_.Call<Req, Resp>(p, PsCalls::Addresses::kPs, method, &requests[p], &(*responses)[p],
                             calls_.Deadline(), [fan](const absl::Status& s) { fan->Finish(s); });
    }
    done.WaitForNotification();
    return result;
  }

  LayoutMap layouts_;
  RequestIds ids_;
  PsDataPath data_;
  PsAdmin admin_;
  // Last: destroyed first, its retry queue failing the calls waiting out a backoff, whose
  // completions may still use the members above (data_'s buffers). The members above only
  // keep its address until it is constructed.
  PsCalls calls_;
};

absl::Status Wait(const std::function<void(StatusCallback)>& start) {
  absl::Notification done;
  absl::Status result;
  start([&](const absl::Status& s) {
    result = s;
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Create(
    std::vector<std::unique_ptr<PsInterface>> ps, const Options& options) {
  if (ps.empty()) return absl::InvalidArgumentError("PsClient needs at least one ps task");
  for (size_t i = 0; i < ps.size(); ++i) {
    if (ps[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("ps task ", i, " is null"));
    }
  }
  if (options.max_chunk_bytes < 4) {
    return absl::InvalidArgumentError("PsClient::Options.max_chunk_bytes must be >= 4");
  }
  if (options.max_attempts < 1) {
    return absl::InvalidArgumentError("PsClient::Options.max_attempts must be >= 1");
  }
  if (options.restore_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("PsClient::Options.restore_timeout must be positive");
  }
  return std::unique_ptr<PsClient>(new PsClientImpl(std::move(ps), options));
}

absl::Status PsClient::Pull(const std::string& name, absl::Span<float> out,
                            const PullOptions& options, PullVersions* versions) {
  return PullMany({PullTarget{name, out}}, options, versions);
}

absl::Status PsClient::PullMany(std::vector<PullTarget> targets, const PullOptions& options,
                                PullVersions* versions) {
  return Wait([&](StatusCallback done) {
    PullAsync(std::move(targets), options, versions, std::move(done));
  });
}

absl::Status PsClient::Push(const std::string& name, absl::Span<const float> grad,
                            const PushOptions& options) {
  return PushMany({PushSource{name, grad}}, options);
}

absl::Status PsClient::PushMany(std::vector<PushSource> sources, const PushOptions& options) {
  return Wait(
      [&](StatusCallback done) { PushAsync(std::move(sources), options, std::move(done)); });
}

absl::Status PsClient::PullRows(const std::string& name, absl::Span<const int64_t> ids,
                                absl::Span<float> out, const PullOptions& options,
                                PullVersions* versions) {
  return Wait([&](StatusCallback done) {
    PullRowsAsync(name, ids, out, options, versions, std::move(done));
  });
}

absl::Status PsClient::PushRows(const std::string& name, absl::Span<const int64_t> ids,
                                absl::Span<const float> grads, const PushOptions& options) {
  return Wait(
      [&](StatusCallback done) { PushRowsAsync(name, ids, grads, options, std::move(done)); });
}

absl::Status PsClient::PullRowsMany(std::vector<RowsPullTarget> targets, const PullOptions& options,
                                    PullVersions* versions) {
  return Wait([&](StatusCallback done) {
    PullRowsManyAsync(std::move(targets), options, versions, std::move(done));
  });
}

absl::Status PsClient::PushRowsMany(std::vector<RowsPushSource> sources,
                                    const PushOptions& options) {
  return Wait([&](StatusCallback done) {
    PushRowsManyAsync(std::move(sources), options, std::move(done));
  });
}

absl::Status PsClient::Assign(const std::string& name, absl::Span<const float> values) {
  return Wait([&](StatusCallback done) { AssignAsync(name, values, std::move(done)); });
}

absl::StatusOr<std::unique_ptr<PsClient>> NewGrpcPsClient(
    const std::vector<std::string>& ps_addresses, const PsClient::Options& options,
    int connections_per_ps) {
  std::vector<std::unique_ptr<PsInterface>> ps;
  for (size_t i = 0; i < ps_addresses.size(); ++i) {
    ps.push_back(NewGrpcPsInterface(absl::StrCat("ps:", i, " (", ps_addresses[i], ")"),
                                    ps_addresses[i], connections_per_ps));
  }
  return PsClient::Create(std::move(ps), options);
}

}  // namespace shardps
