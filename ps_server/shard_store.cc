#include "ps_server/shard_store.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/config.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/error_detail.h"
#include "common/status_macros.h"
#include "ps_server/generation_fence.h"
#include "ps_server/memory_budget.h"
#include "ps_server/out_of_memory.h"
#include "compute/parallel_for.h"
#include "ps_server/pull_waits.h"
#include "ps_server/push_hold.h"
#include "ps_server/shard.h"
#include "ps_server/shard_checkpoints.h"
#include "ps_server/shard_info.h"
#include "ps_server/shard_map.h"
#include "ps_server/shard_pulls.h"
#include "ps_server/shard_pushes.h"
#include "ps_server/shard_spec_checks.h"
#include "ps_server/snapshot_writer.h"

// Tensors travel as raw little-endian float32 bytes, copied with memcpy.
#ifndef ABSL_IS_LITTLE_ENDIAN
#error "shardps' wire format (raw float32 bytes) assumes a little-endian host"
#endif

namespace shardps {
namespace {

SnapshotWriter::Options WriterOptions(const ShardStore::Options& options) {
  SnapshotWriter::Options writer;
  writer.before_write = options.before_snapshot_write;
  return writer;
}

uint64_t RandomIncarnation() {
  absl::BitGen gen;
  uint64_t incarnation = 0;
  while (incarnation == 0) incarnation = absl::Uniform<uint64_t>(gen);
  return incarnation;
}

// The store: the shards (ShardMap) and their lifecycle (CreateShards, DropShards, ListShards,
// Health) here; the data path in ShardPulls and ShardPushes, the recovery generation in
// GenerationFence, snapshots and restores in ShardCheckpoints, waiting pulls in PullWaits.
class ShardStoreImpl final : public ShardStore {
 public:
  explicit ShardStoreImpl(const Options& options)
      : options_(options),
        start_(absl::Now()),
        incarnation_(options.incarnation != 0 ? options.incarnation : RandomIncarnation()),
        budget_(options.memory_budget_bytes, options.snapshot_reserve, options.task_index),
        shards_(options.task_index),
        fence_(options.task_index, incarnation_, &shards_, &waits_),
        pulls_(&shards_, &waits_, options.task_index, options.max_reply_bytes),
        pushes_(&shards_, &fence_, &waits_, &parallel_),
        checkpoints_(options.task_index, &shards_, &fence_, &waits_, WriterOptions(options),
                     options.data_root),
        waits_(&shards_) {}

  ~ShardStoreImpl() override { Shutdown(); }

  absl::Status CreateShards(const CreateShardsRequest& request,
                            CreateShardsResponse* response) override {
    return Guarded("create shards", [&] { return CreateShardsChecked(request, response); });
  }

  absl::Status ListShards(const ListShardsRequest& request, ListShardsResponse* response) override {
    return Guarded("list shards", [&]() -> absl::Status {
      response->set_task_index(options_.task_index);
      for (const std::shared_ptr<Shard>& shard : shards_.All()) {
        if (!request.variable().empty() && request.variable() != VariableOf(shard->spec())) {
          continue;
        }
        ShardInfo* info = response->add_shards();
        *info->mutable_spec() = shard->spec();
        info->set_bytes(shard->bytes());
        FillDynamicStats(*shard, info);
        absl::MutexLock lock(&shard->mu());
        info->set_version(shard->version());
        if (shard->dynamic()) {
          // The range it holds now, which bucket moves shift from the one it was made with.
          const BucketRange held = shard->buckets();
          info->mutable_spec()->mutable_dynamic()->set_bucket_begin(held.begin);
          info->mutable_spec()->mutable_dynamic()->set_bucket_end(held.end);
          info->set_routing_version(shard->routing_version());
          const BucketRange staged = shard->staged();
          if (staged.end > staged.begin) {
            info->set_staged_begin(staged.begin);
            info->set_staged_end(staged.end);
          }
        }
      }
      return absl::OkStatus();
    });
  }

  void Pull(const PullRequest& request, PullResponse* response, DoneCallback done) override {
    pulls_.Pull(request, response, nullptr, std::move(done));
  }

  void Pull(const PullRequest& request, PullResponse* response, PulledBytes* in_place,
            DoneCallback done) override {
    pulls_.Pull(request, response, in_place, std::move(done));
  }

  void PullBatch(const PullBatchRequest& request, std::vector<PullResponse>* responses,
                 std::vector<PulledBytes>* in_place, DoneCallback done) override {
    pulls_.PullBatch(request, responses, in_place, std::move(done));
  }

  void PullRows(const PullRowsRequest& request, PullRowsResponse* response,
                DoneCallback done) override {
    pulls_.PullRows(request, response, std::move(done));
  }

  void PullRowsBatch(const PullRowsBatchRequest& request,
                     absl::Span<PullRowsResponse* const> responses, DoneCallback done) override {
    pulls_.PullRowsBatch(request, responses, std::move(done));
  }

  absl::Status Push(const PushRequest& request, PushResponse* response) override {
    return pushes_.Push(request, request.data(), response);
  }

  absl::Status Push(const PushRequest& request, absl::string_view data,
                    PushResponse* response) override {
    return pushes_.Push(request, data, response);
  }

  absl::Status PushBatch(const PushBatchRequest& request, PushBatchResponse* response) override {
    const absl::string_view data = request.data();
    return pushes_.PushBatch(request, absl::MakeConstSpan(&data, 1), response);
  }

  absl::Status PushBatch(const PushBatchRequest& request,
                         absl::Span<const absl::string_view> pieces,
                         PushBatchResponse* response) override {
    return pushes_.PushBatch(request, pieces, response);
  }

  absl::Status PushRows(const PushRowsRequest& request, PushRowsResponse* response) override {
    return pushes_.PushRows(request, response);
  }

  absl::Status PushRowsBatch(const PushRowsBatchRequest& request,
                             PushRowsBatchResponse* response) override {
    return pushes_.PushRowsBatch(request, response);
  }

  absl::Status Assign(const AssignRequest& request, AssignResponse* response) override {
    return pushes_.Assign(request, response);
  }

  void Health(HealthResponse* response) override {
    response->set_task_type("ps");
    response->set_task_index(options_.task_index);
    const ShardMap::Totals totals = shards_.Count();
    response->set_num_shards(totals.num_shards);
    response->set_bytes(totals.bytes);
    // A dynamic table holds what its rows take now (index and arena), which grows with the
    // keys pushed. A table with max_rows reserved its rows in the budget up front; one
    // without counts each row in the budget as it is made (so the available memory below
    // falls as it grows, and new keys are refused past it).
    for (const std::shared_ptr<Shard>& shard : totals.dynamic) {
      absl::MutexLock lock(&shard->mu());
      const DynamicTableStats stats = shard->table()->stats();
      response->set_bytes(response->bytes() + stats.index_bytes + stats.arena_bytes);
    }
    response->set_uptime_ms(absl::ToInt64Milliseconds(absl::Now() - start_));
    response->set_status(waits_.shutting_down() ? "SHUTTING_DOWN" : "SERVING");
    response->set_incarnation(incarnation_);
    response->set_generation(fence_.current());
    response->set_memory_budget_bytes(budget_.budget_bytes());
    response->set_memory_available_bytes(budget_.available_bytes());
    response->set_snapshot_copy_bytes(snapshot_copy_bytes_.load(std::memory_order_relaxed));
  }

  absl::Status SetGeneration(const SetGenerationRequest& request,
                             SetGenerationResponse* response) override {
    if (request.generation() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("set generation: generation must be >= 0, got ", request.generation()));
    }
    const int64_t before = fence_.current();
    response->set_generation(fence_.Raise(request.generation()));
    // A rollback ends any cut: what it held belongs to the timeline left, and is refused
    // as stale once it runs.
    if (response->generation() > before) hold_.Release();
    return absl::OkStatus();
  }

  absl::Status DropShards(const DropShardsRequest& request, DropShardsResponse* response) override {
    return Guarded("drop shards", [&] { return DropShardsChecked(request, response); });
  }

  absl::Status Snapshot(const SnapshotRequest& request, SnapshotResponse* response) override {
    if (!request.has_held_from_step()) return checkpoints_.Snapshot(request, response);
    RETURN_IF_ERROR(hold_.BeginSnapshot(request.held_from_step()));
    const absl::Status s = checkpoints_.Snapshot(request, response);
    hold_.EndSnapshot();
    return s;
  }

  absl::Status HoldPushes(const HoldPushesRequest& request,
                          HoldPushesResponse* response) override {
    const std::string what = absl::StrCat("hold pushes from step ", request.from_step());
    if (request.from_step() < -1) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": from_step must be >= 0, or -1 to release"));
    }
    if (request.from_step() == -1) {
      hold_.Release();
      response->set_held(0);
      return absl::OkStatus();
    }
    if (request.timeout_ms() <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": timeout_ms must be > 0, got ", request.timeout_ms()));
    }
    RETURN_IF_ERROR(fence_.CheckSnapshot(request.generation(), what));
    RETURN_IF_ERROR(
        hold_.Hold(request.from_step(), absl::Now() + absl::Milliseconds(request.timeout_ms())));
    response->set_held(hold_.held());
    return absl::OkStatus();
  }

  absl::Status MoveBuckets(const MoveBucketsRequest& request,
                           MoveBucketsResponse* response) override {
    return Guarded("move buckets", request.shard(), [&]() -> absl::Status {
      const std::string what = absl::StrCat("move buckets of ", QuotedShard(request.shard()));
      ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard, shards_.Find(request.shard(), what));
      if (!shard->dynamic()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": not a dynamic table (only their buckets move)"));
      }
      if (shard->spec().dynamic().max_rows() > 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            what, ": the table has a row budget (max_rows ", shard->spec().dynamic().max_rows(),
            ") fixed per shard, so its buckets cannot move; re-shard it with scale-ps"));
      }
      absl::MutexLock lock(&shard->mu());
      if (shard->dropped()) return absl::NotFoundError(absl::StrCat(what, ": dropped"));
      if (request.generation() != 0) {
        RETURN_IF_ERROR(fence_.CheckSnapshot(request.generation(), what));
      }
      return shard->MoveBuckets(request, response);
    });
  }

  void AdmitPush(std::optional<int64_t> step, std::function<void()> apply) override {
    hold_.Admit(step, std::move(apply));
  }

  absl::Status SnapshotStatus(const SnapshotStatusRequest& request,
                              SnapshotStatusResponse* response) override {
    return checkpoints_.SnapshotStatus(request, response);
  }

  absl::Status Restore(const RestoreRequest& request, RestoreResponse* response) override {
    return checkpoints_.Restore(request, response);
  }

  void Shutdown() override {
    waits_.Shutdown();
    hold_.Release();
  }

 private:
  absl::Status CreateShardsChecked(const CreateShardsRequest& request,
                                   CreateShardsResponse* response) {
    // 1. Validate every spec; a name twice in the request must carry the same spec.
    std::vector<Geometry> geometry(static_cast<size_t>(request.shards_size()));
    absl::flat_hash_map<std::string, int> first_index;
    std::vector<int> unique;
    for (int i = 0; i < request.shards_size(); ++i) {
      const ShardSpec& spec = request.shards(i);
      ASSIGN_OR_RETURN(geometry[i], ValidateShardSpec(spec));
      auto [it, inserted] = first_index.emplace(spec.name(), i);
      if (!inserted) {
        const std::string diff = FirstSpecDifference(request.shards(it->second), spec);
        if (!diff.empty()) {
          return absl::InvalidArgumentError(absl::StrCat(
              QuotedShard(spec.name()), " appears twice in the request with different ",
              "specs (shards[", it->second, "] vs shards[", i, "]: ", diff, ")"));
        }
        continue;
      }
      unique.push_back(i);
    }
    // A shard added to a running table starts where the table's other shards are.
    const bool started = request.start_version() != 0 || request.routing_version() != 0;
    if (request.start_version() < 0 || request.routing_version() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "create shards: start_version ", request.start_version(), " and routing_version ",
          request.routing_version(), " must be >= 0"));
    }
    for (int i = 0; started && i < request.shards_size(); ++i) {
      if (!request.shards(i).has_dynamic()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "create shards: start_version and routing_version are for shards added to a "
            "dynamic table; ",
            QuotedShard(request.shards(i).name()), " is dense"));
      }
    }
    // 2. Conflicts with existing shards fail early, before any allocation.
    ASSIGN_OR_RETURN(const std::vector<int> fresh, shards_.Absent(request, unique));
    // 3. The memory budget, before any allocation: every new shard's bytes are reserved,
    // or none (the reservation is returned unless the shards are inserted).
    BudgetReservation reservation(&budget_);
    for (int i : fresh) {
      const ShardSpec& spec = request.shards(i);
      ASSIGN_OR_RETURN(const int64_t bytes, Shard::BytesFor(spec, geometry[i]));
      RETURN_IF_ERROR(reservation.Add(bytes, absl::StrCat("create ", VariableAndShard(spec))));
    }
    // 4. Allocate and initialize outside the map lock (a large table takes a while).
    std::vector<std::shared_ptr<Shard>> built;
    for (int i : fresh) {
      ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard,
                       Shard::Create(request.shards(i), geometry[i], options_.request_id_window,
                                     &snapshot_copy_bytes_, &budget_));
      if (started) {
        absl::MutexLock lock(&shard->mu());
        shard->StartAt(request.start_version(), request.routing_version());
      }
      built.push_back(std::move(shard));
    }
    // 5. Insert all or nothing; a concurrent CreateShards may have inserted some meanwhile.
    ASSIGN_OR_RETURN(const int created, shards_.InsertNew(std::move(built), [&](int64_t bytes) {
      reservation.Keep(bytes);
    }));
    response->set_created(created);
    return absl::OkStatus();
  }

  absl::Status DropShardsChecked(const DropShardsRequest& request, DropShardsResponse* response) {
    if (request.variables().empty() && !request.all()) {
      return absl::InvalidArgumentError(
          "drop shards: list the variables to drop, or set all to drop every shard");
    }
    const absl::flat_hash_set<std::string> variables(request.variables().begin(),
                                                     request.variables().end());
    const std::vector<std::shared_ptr<Shard>> dropped = shards_.Remove([&](const ShardSpec& spec) {
      return request.all() || variables.contains(VariableOf(spec));
    });
    for (const std::shared_ptr<Shard>& shard : dropped) {
      budget_.Release(shard->bytes());
      {
        absl::MutexLock lock(&shard->mu());
        shard->MarkDropped();
      }
      waits_.CancelWaiters(*shard, "the shard was dropped");
    }
    response->set_dropped(static_cast<int32_t>(dropped.size()));
    return absl::OkStatus();
  }

  const Options options_;
  const absl::Time start_;
  const uint64_t incarnation_;
  // Bytes of blocks that updates copied because a snapshot held them (Health). Outlives
  // every shard's updates: the shards are used only within the store's calls.
  std::atomic<int64_t> snapshot_copy_bytes_{0};
  MemoryBudget budget_;
  // Helpers for large updates: one per further core, so that an update finishes sooner when
  // cores are idle (the end of a push, when the client only waits).
  ParallelFor parallel_{std::min(7, UsableCores() - 1)};

  ShardMap shards_;
  // The parts below hold pointers to the members above and to waits_ (constructed last:
  // they only keep its address until then).
  GenerationFence fence_;
  ShardPulls pulls_;
  ShardPushes pushes_;
  // Owns the snapshot writer; destroyed before the shards' map (it holds only references to
  // blocks, never to shards).
  ShardCheckpoints checkpoints_;
  // Last: its timer thread is started once every other member is initialized, and stopped
  // first.
  PullWaits waits_;
  // Last: destroyed first, it runs what it still holds while everything it calls lives.
  PushHold hold_{options_.task_index};
};

}  // namespace

absl::StatusOr<std::unique_ptr<ShardStore>> ShardStore::Create(const Options& options) {
  if (options.request_id_window < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShardStore options: request_id_window must be >= 0, got ", options.request_id_window));
  }
  RETURN_IF_ERROR(
      Annotate(MemoryBudget::Validate(options.memory_budget_bytes, options.snapshot_reserve),
               "ShardStore options"));
  if (options.max_reply_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ShardStore options: max_reply_bytes must be >= 0 (0: no limit), got ",
                     options.max_reply_bytes));
  }
  return std::unique_ptr<ShardStore>(new ShardStoreImpl(options));
}

namespace {

template <typename Push>
std::optional<int64_t> StepOf(const Push& push) {
  return push.has_step() ? std::optional<int64_t>(push.step()) : std::nullopt;
}

template <typename Push>
std::optional<int64_t> HighestStep(const google::protobuf::RepeatedPtrField<Push>& pushes) {
  std::optional<int64_t> step;
  for (const Push& push : pushes) {
    if (push.has_step()) step = std::max(step.value_or(push.step()), push.step());
  }
  return step;
}

}  // namespace

std::optional<int64_t> JobStepOf(const PushRequest& push) { return StepOf(push); }
std::optional<int64_t> JobStepOf(const PushRowsRequest& push) { return StepOf(push); }
std::optional<int64_t> JobStepOf(const PushBatchRequest& batch) {
  return HighestStep(batch.pushes());
}
std::optional<int64_t> JobStepOf(const PushRowsBatchRequest& batch) {
  return HighestStep(batch.pushes());
}

}  // namespace shardps
