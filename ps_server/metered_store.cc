// MeteredStore: see metered_store.h.
#include "ps_server/metered_store.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/synchronization/mutex.h"

namespace shardps {

std::string VariableOfShard(const std::string& name) {
  const size_t slash = name.rfind("/part_");
  if (slash == std::string::npos || slash + 6 == name.size()) return name;
  for (size_t i = slash + 6; i < name.size(); ++i) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(name[i]))) return name;
  }
  return name.substr(0, slash);
}

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct VariableCounters {
  metrics::Counter* pulls;
  metrics::Counter* pushes;
  metrics::Counter* applied;
  metrics::Counter* rejected;
  metrics::Histogram* staleness;
};

// The RPCs timed, in the order of kRpcNames.
enum Rpc {
  kCreateShards, kListShards, kPull, kPullBatch, kPullRows, kPullRowsBatch, kPush, kPushBatch,
  kPushRows, kPushRowsBatch, kAssign, kSetGeneration, kDropShards, kSnapshot, kRestore, kNumRpcs
};
constexpr const char* kRpcNames[kNumRpcs] = {
    "CreateShards", "ListShards", "Pull", "PullBatch", "PullRows", "PullRowsBatch", "Push",
    "PushBatch", "PushRows", "PushRowsBatch", "Assign", "SetGeneration", "DropShards",
    "Snapshot", "Restore"};

// Updates applied to the shard between the version a gradient was computed at and the push's
// own: a push at base version b that made version v saw v - 1 - b others land first. -1: not
// known (no base version, or nothing applied now).
template <typename Response>
int64_t Staleness(int64_t base_version, const Response& response) {
  if (base_version <= 0 || response.duplicate() || response.dropped() || response.version() <= 0) {
    return -1;
  }
  return std::max<int64_t>(0, response.version() - 1 - base_version);
}

// Every MeteredStore has its own id, so a thread's cache never serves a dead store's entries.
std::atomic<uint64_t> next_store_id{1};

struct ThreadCache {
  uint64_t store_id = 0;
  absl::flat_hash_map<std::string, const VariableCounters*> shards;
};

class MeteredStore : public ShardStore {
 public:
  MeteredStore(std::unique_ptr<ShardStore> store,
               metrics::Registry::Family<metrics::Counter> pulls,
               metrics::Registry::Family<metrics::Counter> pushes,
               metrics::Registry::Family<metrics::Counter> applied,
               metrics::Registry::Family<metrics::Counter> rejected,
               metrics::Registry::Family<metrics::Histogram> staleness,
               metrics::Registry::Family<metrics::Histogram> latency,
               metrics::Registry::Family<metrics::Counter> bucket_moves)
      : store_(std::move(store)),
        buckets_in_(bucket_moves.With({"in"})),
        buckets_out_(bucket_moves.With({"out"})),
        pulls_(pulls),
        pushes_(pushes),
        applied_(applied),
        rejected_(rejected),
        staleness_(staleness) {
    for (int rpc = 0; rpc < kNumRpcs; ++rpc) latency_[rpc] = latency.With({kRpcNames[rpc]});
  }

  absl::Status CreateShards(const CreateShardsRequest& request,
                            CreateShardsResponse* response) override {
    return Timed(kCreateShards, [&] { return store_->CreateShards(request, response); });
  }
  absl::Status ListShards(const ListShardsRequest& request,
                          ListShardsResponse* response) override {
    return Timed(kListShards, [&] { return store_->ListShards(request, response); });
  }

  void Pull(const PullRequest& request, PullResponse* response, DoneCallback done) override {
    For(request.shard()).pulls->Add();
    store_->Pull(request, response, TimedDone(kPull, std::move(done)));
  }
  void Pull(const PullRequest& request, PullResponse* response, PulledBytes* in_place,
            DoneCallback done) override {
    For(request.shard()).pulls->Add();
    store_->Pull(request, response, in_place, TimedDone(kPull, std::move(done)));
  }
  void PullBatch(const PullBatchRequest& request, std::vector<PullResponse>* responses,
                 std::vector<PulledBytes>* in_place, DoneCallback done) override {
    for (const PullRequest& item : request.pulls()) For(item.shard()).pulls->Add();
    store_->PullBatch(request, responses, in_place, TimedDone(kPullBatch, std::move(done)));
  }
  void PullRows(const PullRowsRequest& request, PullRowsResponse* response,
                DoneCallback done) override {
    For(request.shard()).pulls->Add();
    store_->PullRows(request, response, TimedDone(kPullRows, std::move(done)));
  }
  void PullRowsBatch(const PullRowsBatchRequest& request,
                     absl::Span<PullRowsResponse* const> responses, DoneCallback done) override {
    for (const PullRowsRequest& item : request.pulls()) For(item.shard()).pulls->Add();
    store_->PullRowsBatch(request, responses, TimedDone(kPullRowsBatch, std::move(done)));
  }

  absl::Status Push(const PushRequest& request, PushResponse* response) override {
    return Pushed(
        kPush, {&request.shard()}, [&] { return store_->Push(request, response); },
        [&](size_t) { return Staleness(request.base_version(), *response); });
  }
  absl::Status Push(const PushRequest& request, absl::string_view data,
                    PushResponse* response) override {
    return Pushed(
        kPush, {&request.shard()}, [&] { return store_->Push(request, data, response); },
        [&](size_t) { return Staleness(request.base_version(), *response); });
  }
  absl::Status PushBatch(const PushBatchRequest& request, PushBatchResponse* response) override {
    return Pushed(
        kPushBatch, ShardsOf(request.pushes()),
        [&] { return store_->PushBatch(request, response); },
        [&](size_t i) { return BatchStaleness(request.pushes(), response->pushes(), i); });
  }
  absl::Status PushBatch(const PushBatchRequest& request,
                         absl::Span<const absl::string_view> data,
                         PushBatchResponse* response) override {
    return Pushed(
        kPushBatch, ShardsOf(request.pushes()),
        [&] { return store_->PushBatch(request, data, response); },
        [&](size_t i) { return BatchStaleness(request.pushes(), response->pushes(), i); });
  }
  absl::Status PushRows(const PushRowsRequest& request, PushRowsResponse* response) override {
    return Pushed(
        kPushRows, {&request.shard()}, [&] { return store_->PushRows(request, response); },
        [&](size_t) { return Staleness(request.base_version(), *response); });
  }
  absl::Status PushRowsBatch(const PushRowsBatchRequest& request,
                             PushRowsBatchResponse* response) override {
    return Pushed(
        kPushRowsBatch, ShardsOf(request.pushes()),
        [&] { return store_->PushRowsBatch(request, response); },
        [&](size_t i) { return BatchStaleness(request.pushes(), response->pushes(), i); });
  }
  absl::Status Assign(const AssignRequest& request, AssignResponse* response) override {
    return Timed(kAssign, [&] { return store_->Assign(request, response); });
  }

  void Health(HealthResponse* response) override { store_->Health(response); }
  absl::Status SetGeneration(const SetGenerationRequest& request,
                             SetGenerationResponse* response) override {
    return Timed(kSetGeneration, [&] { return store_->SetGeneration(request, response); });
  }
  absl::Status DropShards(const DropShardsRequest& request,
                          DropShardsResponse* response) override {
    return Timed(kDropShards, [&] { return store_->DropShards(request, response); });
  }
  absl::Status Snapshot(const SnapshotRequest& request, SnapshotResponse* response) override {
    return Timed(kSnapshot, [&] { return store_->Snapshot(request, response); });
  }
  absl::Status SnapshotStatus(const SnapshotStatusRequest& request,
                              SnapshotStatusResponse* response) override {
    return store_->SnapshotStatus(request, response);
  }
  absl::Status Restore(const RestoreRequest& request, RestoreResponse* response) override {
    return Timed(kRestore, [&] { return store_->Restore(request, response); });
  }
  absl::Status HoldPushes(const HoldPushesRequest& request,
                          HoldPushesResponse* response) override {
    return store_->HoldPushes(request, response);
  }
  absl::Status MoveBuckets(const MoveBucketsRequest& request,
                           MoveBucketsResponse* response) override {
    absl::Status status = store_->MoveBuckets(request, response);
    if (status.ok() && request.op() == MoveBucketsRequest::ACTIVATE) {
      buckets_in_->Add(static_cast<uint64_t>(request.buckets_size()));
    }
    if (status.ok() && request.op() == MoveBucketsRequest::DROP) {
      buckets_out_->Add(static_cast<uint64_t>(request.buckets_size()));
    }
    return status;
  }
  void AdmitPush(std::optional<int64_t> step, std::function<void()> apply) override {
    store_->AdmitPush(step, std::move(apply));
  }
  void Shutdown() override { store_->Shutdown(); }

 private:
  template <typename Requests, typename Responses>
  static int64_t BatchStaleness(const Requests& requests, const Responses& responses, size_t i) {
    if (i >= static_cast<size_t>(responses.size())) return -1;
    return Staleness(requests[static_cast<int>(i)].base_version(),
                     responses[static_cast<int>(i)]);
  }

  template <typename Items>
  static std::vector<const std::string*> ShardsOf(const Items& items) {
    std::vector<const std::string*> shards;
    shards.reserve(items.size());
    for (const auto& item : items) shards.push_back(&item.shard());
    return shards;
  }

  // The counters of `shard`'s variable: from the calling thread's cache, else (once per shard
  // and thread) from the store's table.
  const VariableCounters& For(const std::string& shard) {
    thread_local ThreadCache cache;
    if (cache.store_id != id_) {
      cache.shards.clear();
      cache.store_id = id_;
    }
    auto it = cache.shards.find(shard);
    if (it != cache.shards.end()) return *it->second;
    const VariableCounters* counters = Lookup(shard);
    cache.shards.emplace(shard, counters);
    return *counters;
  }

  const VariableCounters* Lookup(const std::string& shard) {
    absl::MutexLock lock(&mu_);
    std::unique_ptr<VariableCounters>& slot = by_shard_[shard];
    if (slot == nullptr) {
      const std::vector<std::string> labels = {VariableOfShard(shard)};
      slot = std::make_unique<VariableCounters>(
          VariableCounters{pulls_.With(labels), pushes_.With(labels), applied_.With(labels),
                           rejected_.With(labels), staleness_.With(labels)});
    }
    return slot.get();
  }

  template <typename F>
  absl::Status Timed(Rpc rpc, F call) {
    const Clock::time_point start = Clock::now();
    absl::Status status = call();
    latency_[rpc]->Observe(SecondsSince(start));
    return status;
  }

  // `staleness(i)`: item i's staleness once the call returned (-1: unknown).
  template <typename F, typename S>
  absl::Status Pushed(Rpc rpc, const std::vector<const std::string*>& shards, F call,
                      S staleness) {
    std::vector<const VariableCounters*> counters;
    counters.reserve(shards.size());
    for (const std::string* shard : shards) {
      counters.push_back(&For(*shard));
      counters.back()->pushes->Add();
    }
    absl::Status status = Timed(rpc, call);
    for (size_t i = 0; i < counters.size(); ++i) {
      const VariableCounters* c = counters[i];
      (status.ok() ? c->applied : c->rejected)->Add();
      if (!status.ok()) continue;
      const int64_t stale = staleness(i);
      if (stale >= 0) c->staleness->Observe(static_cast<double>(stale));
    }
    return status;
  }

  DoneCallback TimedDone(Rpc rpc, DoneCallback done) {
    return [histogram = latency_[rpc], start = Clock::now(),
            done = std::move(done)](const absl::Status& status) {
      histogram->Observe(SecondsSince(start));
      done(status);
    };
  }

  const std::unique_ptr<ShardStore> store_;
  metrics::Counter* const buckets_in_;
  metrics::Counter* const buckets_out_;
  const uint64_t id_ = next_store_id.fetch_add(1);
  metrics::Registry::Family<metrics::Counter> pulls_;
  metrics::Registry::Family<metrics::Counter> pushes_;
  metrics::Registry::Family<metrics::Counter> applied_;
  metrics::Registry::Family<metrics::Counter> rejected_;
  metrics::Registry::Family<metrics::Histogram> staleness_;
  metrics::Histogram* latency_[kNumRpcs];  // set in the constructor only
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<VariableCounters>> by_shard_ ABSL_GUARDED_BY(mu_);
};

// Per variable, from ListShards.
struct VariableState {
  double bytes = 0;
  double rows = 0;
  double version = 0;
};

std::map<std::string, VariableState> Variables(ShardStore* store) {
  ListShardsResponse shards;
  std::map<std::string, VariableState> variables;
  if (!store->ListShards(ListShardsRequest(), &shards).ok()) return variables;
  for (const ShardInfo& shard : shards.shards()) {
    VariableState& state = variables[shard.spec().variable().empty()
                                         ? VariableOfShard(shard.spec().name())
                                         : shard.spec().variable()];
    state.bytes += static_cast<double>(shard.bytes());
    state.rows += static_cast<double>(shard.spec().has_dynamic()
                                          ? shard.dynamic().rows()
                                          : (shard.spec().shape().dim_size() > 0
                                                 ? shard.spec().shape().dim(0)
                                                 : 1));
    state.version = std::max(state.version, static_cast<double>(shard.version()));
  }
  return variables;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardStore>> NewMeteredStore(std::unique_ptr<ShardStore> store,
                                                            metrics::Registry* registry) {
  auto pulls = registry->AddCounter("shardps_ps_pulls_total",
                                    "Pulls of each variable (a batch's items each count).",
                                    {"variable"});
  auto pushes = registry->AddCounter("shardps_ps_pushes_total",
                                     "Pushes to each variable (a batch's items each count).",
                                     {"variable"});
  auto applied = registry->AddCounter("shardps_ps_updates_applied_total",
                                      "Pushes to each variable that the ps applied.",
                                      {"variable"});
  auto rejected = registry->AddCounter(
      "shardps_ps_updates_rejected_total",
      "Pushes to each variable that the ps refused (stale generation, duplicate, bad shape).",
      {"variable"});
  auto staleness = registry->AddHistogram(
      "shardps_ps_push_staleness",
      "Updates applied to a shard between the version a push's gradient was computed at and "
      "the push (pushes that name their base version).",
      {"variable"}, {0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024});
  auto latency = registry->AddHistogram("shardps_ps_request_seconds",
                                        "Time of each request in the ps's store, by RPC.",
                                        {"rpc"}, metrics::LatencyBuckets());
  auto bucket_moves = registry->AddCounter(
      "shardps_ps_buckets_moved_total",
      "Dynamic-table buckets this ps took over (in) or handed over (out) in bucket moves.",
      {"direction"});
  for (const absl::Status& status : {pulls.status(), pushes.status(), applied.status(),
                                     rejected.status(), staleness.status(),
                                     latency.status(), bucket_moves.status()}) {
    if (!status.ok()) return status;
  }
  ShardStore* inner = store.get();
  struct Gauge {
    const char* name;
    const char* help;
    double VariableState::*field;
  };
  for (const Gauge& gauge :
       {Gauge{"shardps_ps_variable_bytes", "Bytes of each variable's parameters and slots.",
              &VariableState::bytes},
        Gauge{"shardps_ps_variable_rows", "Rows of each variable held by this ps.",
              &VariableState::rows},
        Gauge{"shardps_ps_variable_version",
              "Version (updates applied) of each variable, the highest of its shards'.",
              &VariableState::version}}) {
    absl::Status added = registry->AddCallbackGauge(
        gauge.name, gauge.help, {"variable"},
        [inner, field = gauge.field](metrics::Sink* sink) {
          for (const auto& [variable, state] : Variables(inner)) {
            sink->Add({variable}, state.*field);
          }
        });
    if (!added.ok()) return added;
  }
  struct HealthGauge {
    const char* name;
    const char* help;
    double (*read)(const HealthResponse&);
  };
  for (const HealthGauge& gauge :
       {HealthGauge{"shardps_ps_shards", "Shards this ps holds.",
                    [](const HealthResponse& h) { return static_cast<double>(h.num_shards()); }},
        HealthGauge{"shardps_ps_memory_budget_bytes",
                    "The ps's memory budget (--memory_budget_bytes; 0: none).",
                    [](const HealthResponse& h) {
                      return static_cast<double>(h.memory_budget_bytes());
                    }},
        HealthGauge{"shardps_ps_memory_used_bytes",
                    "Bytes the shards' parameters and slots hold (against the budget).",
                    [](const HealthResponse& h) { return static_cast<double>(h.bytes()); }},
        HealthGauge{"shardps_ps_memory_available_bytes",
                    "What CreateShards may still allocate: the budget less the snapshot "
                    "reserve and the shards' bytes.",
                    [](const HealthResponse& h) {
                      return static_cast<double>(h.memory_available_bytes());
                    }}}) {
    absl::Status added =
        registry->AddCallbackGauge(gauge.name, gauge.help, {}, [inner, read = gauge.read](
                                                                   metrics::Sink* sink) {
          HealthResponse health;
          inner->Health(&health);
          sink->Add({}, read(health));
        });
    if (!added.ok()) return added;
  }
  return std::unique_ptr<ShardStore>(new MeteredStore(std::move(store), *pulls,
                                                      *pushes, *applied, *rejected, *staleness,
                                                      *latency, *bucket_moves));
}

}  // namespace shardps
