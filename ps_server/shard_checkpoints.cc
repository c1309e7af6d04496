#include "ps_server/shard_checkpoints.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "checkpoint/dynamic_rows.h"
#include "common/error_detail.h"
#include "common/status_macros.h"
#include "partitioners/buckets.h"
#include "math/optimizer.h"
#include "ps_server/out_of_memory.h"
#include "ps_server/shard_info.h"
#include "ps_server/snapshot_cut.h"
#include "ps_server/version_waiters.h"

namespace shardps {
namespace {

// Threads reading one shard's tensors at a restore (ReadShardState): the parameters and
// each slot at once. A restore waits on the disk and on page faults more than it computes,
// so more than the cores help; each shard's fresh state is still built one shard at a time,
// so the memory a restore needs on top of the old state stays one shard's.
constexpr int kRestoreReadThreads = 4;

}  // namespace

absl::Status ShardCheckpoints::Snapshot(const SnapshotRequest& request,
                                        SnapshotResponse* response) {
  return Guarded(absl::StrCat("snapshot ", request.checkpoint_id()),
                 [&] { return SnapshotChecked(request, response); });
}

absl::Status ShardCheckpoints::SnapshotStatus(const SnapshotStatusRequest& request,
                                              SnapshotStatusResponse* response) {
  return Guarded("snapshot status", [&] {
    *response = writer_.Status(request.checkpoint_id());
    return absl::OkStatus();
  });
}

absl::Status ShardCheckpoints::Restore(const RestoreRequest& request, RestoreResponse* response) {
  return Guarded("restore", [&] { return RestoreChecked(request, response); });
}

absl::Status ShardCheckpoints::SnapshotChecked(const SnapshotRequest& request,
                                               SnapshotResponse* response) {
  const std::string what = absl::StrCat("snapshot ", request.checkpoint_id());
  if (request.path().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": path is empty"));
  }
  ASSIGN_OR_RETURN(const std::string path,
                   data_root_.Resolve(request.path(), absl::StrCat(what, "'s file")));
  // Held while the cut is taken, so that no Restore replaces shards (or moves the
  // generation) in the middle of it.
  if (!restore_mu_.TryLock()) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": a restore is in progress; snapshot after it"));
  }
  absl::Status status;
  try {
    status = TakeCut(request, path, what, response);
  } catch (const std::bad_alloc&) {
    status = OutOfMemory(what);
  }
  restore_mu_.Unlock();
  return status;
}

absl::Status ShardCheckpoints::TakeCut(const SnapshotRequest& request, const std::string& path,
                                       const std::string& what,
                                       SnapshotResponse* response) {
  RETURN_IF_ERROR(fence_->CheckSnapshot(request.generation(), what));
  if (writer_.InUse(request.checkpoint_id())) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": a snapshot with this checkpoint id is still being written"));
  }
  // The cut: each shard's version and references to its blocks, under its lock. Nothing
  // is copied; updates that come later copy the blocks they touch (copy-on-write).
  SnapshotWriter::Job job;
  job.checkpoint_id = request.checkpoint_id();
  job.path = path;
  SnapshotResponse answer;
  for (const std::shared_ptr<Shard>& shard : shards_->All()) {
    Shard::Snapshot snapshot;
    Shard::DynamicCut cut;
    {
      absl::MutexLock lock(&shard->mu());
      if (shard->dropped()) continue;
      if (shard->sync() && shard->step_in_progress()) {
        return absl::FailedPreconditionError(absl::StrCat(
            what, ": ", QuotedShard(shard->name()), " has SYNC step ", shard->version(),
            " partly pushed; snapshots are taken at step boundaries"));
      }
      if (shard->dynamic()) {
        cut = shard->TakeDynamicCut(request.checkpoint_id(), request.incremental_since());
      } else {
        snapshot = shard->TakeSnapshot();
      }
    }
    if (shard->dynamic()) {
      AddDynamicCut(*shard, std::move(cut), &job, answer.add_shards());
      continue;
    }
    AddDenseCut(*shard, std::move(snapshot), &job, answer.add_shards());
  }
  job.metadata = {{"format", "shardps-ps-snapshot"},
                  {"ps_task", absl::StrCat(task_index_)},
                  {"checkpoint_id", absl::StrCat(request.checkpoint_id())},
                  {"generation", absl::StrCat(request.generation())}};
  RETURN_IF_ERROR(Annotate(writer_.Submit(std::move(job)), what));
  *response = std::move(answer);
  return absl::OkStatus();
}

absl::Status ShardCheckpoints::RestoreChecked(const RestoreRequest& request,
                                              RestoreResponse* response) {
  // One restore at a time; a snapshot is refused meanwhile (it would cut a half-restored
  // ps).
  absl::MutexLock restoring(&restore_mu_);
  // 1. The generation first: from here on, an update from before the rollback is refused,
  // and one that slipped in before this point is overwritten below.
  if (request.generation() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("restore: generation must be >= 0, got ", request.generation()));
  }
  if (request.generation() != 0) {
    const int64_t current = fence_->current();
    if (request.generation() < current) {
      return fence_->Stale("restore", request.generation(), current);
    }
    fence_->Raise(request.generation());
  }
  // 2. The shards, and where each comes from; every check before anything is read.
  std::unique_ptr<CheckpointReader> reader;
  ASSIGN_OR_RETURN(RestorePlan plan, PlanRestore(request, &reader));
  // 3. Shard by shard: read into fresh blocks outside the shard's lock, then swap them in
  // under it. A failure (a corrupt file) leaves that shard and the ones after it as they
  // were; the caller restores again (from an older checkpoint).
  int64_t bytes_read = 0;
  for (auto& [shard, source] : plan) {
    if (shard->dynamic()) {
      RETURN_IF_ERROR(RestoreDynamic(reader.get(), shard, source, response, &bytes_read));
    } else {
      RETURN_IF_ERROR(RestoreDense(reader.get(), shard, source, response, &bytes_read));
    }
  }
  response->set_bytes_read(bytes_read);
  return absl::OkStatus();
}

absl::StatusOr<ShardCheckpoints::RestorePlan> ShardCheckpoints::PlanRestore(
    const RestoreRequest& request, std::unique_ptr<CheckpointReader>* reader) const {
  std::vector<std::shared_ptr<Shard>> shards;
  if (request.shards().empty()) {
    shards = shards_->All();
  } else {
    for (const std::string& name : request.shards()) {
      ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard,
                       shards_->Find(name, absl::StrCat("restore ", QuotedShard(name))));
      shards.push_back(std::move(shard));
    }
  }
  if (!request.manifest().empty()) {
    ASSIGN_OR_RETURN(const std::string manifest,
                     data_root_.Resolve(request.manifest(), "restore's manifest"));
    ASSIGN_OR_RETURN(*reader, CheckpointReader::Open(manifest));
    // What it read, and the data files it will read, are inside the root too (a directory's
    // newest checkpoint, or a symlink among them, could lead elsewhere).
    RETURN_IF_ERROR(data_root_.Resolve((*reader)->manifest_path(), "restore's manifest").status());
    const std::string dir =
        (*reader)->manifest_path().substr(0, (*reader)->manifest_path().rfind('/') + 1);
    for (const DataFileInfo& file : (*reader)->manifest().files) {
      RETURN_IF_ERROR(
          data_root_.Resolve(dir + file.file(), "the checkpoint's data file").status());
    }
  }
  RestorePlan plan;
  for (std::shared_ptr<Shard>& shard : shards) {
    ShardSource source{VariableOf(shard->spec()), request.params_only()};
    if (!request.variable_map().empty()) {
      auto it = request.variable_map().find(source.variable);
      if (it == request.variable_map().end()) continue;  // a warm start skips it
      source.variable = it->second;
    }
    if (*reader != nullptr) {
      RETURN_IF_ERROR(
          CheckRestorable((*reader)->manifest(), (*reader)->manifest_path(), *shard, source));
    }
    plan.emplace_back(std::move(shard), std::move(source));
  }
  return plan;
}

absl::Status ShardCheckpoints::RestoreDense(CheckpointReader* reader,
                                            const std::shared_ptr<Shard>& shard,
                                            const ShardSource& source, RestoreResponse* response,
                                            int64_t* bytes_read) {
  absl::StatusOr<RestoredState> restored =
      reader != nullptr ? ReadShardState(*reader, *shard, source, kRestoreReadThreads)
                        : InitialShardState(*shard);
  if (!restored.ok()) return restored.status();
  *bytes_read += restored->bytes_read;
  std::vector<WaiterPtr> ready;
  ShardInfo* info = response->add_shards();
  *info->mutable_spec() = shard->spec();
  info->set_bytes(shard->bytes());
  info->set_version(restored->version);
  {
    absl::MutexLock lock(&shard->mu());
    if (shard->dropped()) {
      return shards_->NoSuchShard(absl::StrCat("restore ", QuotedShard(shard->name())));
    }
    ready.reserve(shard->waiters().CountReady(restored->version));
    shard->ReplaceState(std::move(restored->state), restored->version);
    shard->waiters().TakeReady(shard->version(), &ready);
  }
  waits_->CompleteReady(&ready);
  return absl::OkStatus();
}

absl::Status ShardCheckpoints::RestoreDynamic(CheckpointReader* reader,
                                              const std::shared_ptr<Shard>& shard,
                                              const ShardSource& source, RestoreResponse* response,
                                              int64_t* bytes_read) {
  ASSIGN_OR_RETURN(std::unique_ptr<DynamicTable> table, shard->NewTable());
  int64_t version = 0;
  if (reader != nullptr) {
    const Optimizer& optimizer = shard->optimizer();
    const int slots = optimizer.num_slots();
    std::vector<std::string> tensors = {""};
    if (!source.params_only) {
      for (int j = 0; j < slots; ++j) tensors.emplace_back(optimizer.slot_name(j));
    }
    const DynamicSpec& d = shard->spec().dynamic();
    const BucketRange held = shard->buckets();
    const int64_t dim = shard->width();
    DynamicTableReadStats stats;
    RETURN_IF_ERROR(ReadDynamicTable(
        reader->manifest(), reader->manifest_path(), source.variable, tensors,
        [&](int64_t key) {
          const int32_t b = BucketOf(key, d.num_buckets());
          return held.Contains(b);
        },
        [&](const std::vector<int64_t>& keys) { return table->EraseKeys(keys); },
        [&](DynamicRowsPart& part) {
          RowBatch rows;
          rows.keys = std::move(part.keys);
          rows.last_steps = std::move(part.last_steps);
          const size_t n = rows.keys.size();
          rows.values.resize(n * static_cast<size_t>(dim * (1 + slots)));
          for (size_t k = 0; k < n; ++k) {
            float* row = rows.values.data() + k * dim * (1 + slots);
            for (int t = 0; t <= slots; ++t) {
              if (t < static_cast<int>(part.tensors.size())) {
                std::memcpy(row + t * dim, part.tensors[t].data() + k * dim,
                            static_cast<size_t>(dim) * sizeof(float));
              } else {  // params_only: the slot's initial value
                std::fill(row + t * dim, row + (t + 1) * dim, optimizer.initial_slot_value(t - 1));
              }
            }
          }
          return table->UpsertRows(rows);
        },
        &stats));
    version = source.params_only ? 0 : stats.version;
    *bytes_read += stats.bytes_read;
  }
  std::vector<WaiterPtr> ready;
  ShardInfo* info = response->add_shards();
  *info->mutable_spec() = shard->spec();
  info->set_version(version);
  {
    absl::MutexLock lock(&shard->mu());
    if (shard->dropped()) {
      return shards_->NoSuchShard(absl::StrCat("restore ", QuotedShard(shard->name())));
    }
    ready.reserve(shard->waiters().CountReady(version));
    shard->ReplaceTable(std::move(table), version);
    shard->waiters().TakeReady(shard->version(), &ready);
  }
  FillDynamicStats(*shard, info);
  waits_->CompleteReady(&ready);
  return absl::OkStatus();
}

}  // namespace shardps
