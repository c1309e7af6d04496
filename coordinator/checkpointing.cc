#include "coordinator/checkpointing.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error_detail.h"
#include "common/status_macros.h"
#include "coordinator/job_spec.h"

namespace shardps {
namespace {

// The optimizer's slots, named as the ps names their tensors ("<shard>/<slot>").
std::vector<std::string> SlotNames(const OptimizerSpec& optimizer) {
  switch (optimizer.type()) {
    case OptimizerSpec::MOMENTUM:
      return {"momentum"};
    case OptimizerSpec::ADAGRAD:
      return {"accumulator"};
    case OptimizerSpec::ADAM:
      return {"adam_m", "adam_v"};
    case OptimizerSpec::FTRL:
      return {"accumulator", "linear"};
    default:
      return {};
  }
}

// A manifest's indexes of what the ps sent: shard versions at the cut (and dynamic shards'
// infos), and the tensor names of each ps's file, by ps and name.
struct ManifestSources {
  explicit ManifestSources(const CheckpointContents& contents)
      : versions(contents.snapshots.size()),
        infos(contents.snapshots.size()),
        tensors(contents.files.size()) {
    for (size_t ps = 0; ps < contents.snapshots.size(); ++ps) {
      for (const ShardInfo& info : contents.snapshots[ps].shards()) {
        versions[ps][info.spec().name()] = info.version();
        infos[ps][info.spec().name()] = &info;
      }
    }
    for (size_t ps = 0; ps < contents.files.size(); ++ps) {
      for (const TensorInfo& t : contents.files[ps].tensors()) tensors[ps][t.name()] = &t;
    }
  }
  std::vector<std::map<std::string, int64_t>> versions;
  std::vector<std::map<std::string, const ShardInfo*>> infos;
  std::vector<std::map<std::string, const TensorInfo*>> tensors;
};

// One shard of `layout` as the manifest lists it: in its ps's snapshot and file, with the
// tensors of its slots (and a dynamic table's extra tensors).
absl::StatusOr<ManifestShard> BuildManifestShard(const CheckpointContents& contents,
                                                 const ManifestSources& sources,
                                                 const VariableLayout& layout,
                                                 const VariableLayout::Shard& shard,
                                                 const std::vector<std::string>& slots) {
  const std::string& name = shard.spec.name();
  const size_t ps = static_cast<size_t>(shard.ps);
  if (ps >= sources.versions.size() || ps >= sources.tensors.size()) {
    return absl::InternalError(absl::StrCat("shard \"", name, "\" is on ps ", shard.ps,
                                            ", which sent no snapshot or file"));
  }
  auto version = sources.versions[ps].find(name);
  if (version == sources.versions[ps].end()) {
    return absl::InternalError(
        absl::StrCat("shard \"", name, "\" is not in ps ", shard.ps, "'s snapshot"));
  }
  const std::map<std::string, const TensorInfo*>& tensors = sources.tensors[ps];
  const std::string& file = contents.files[ps].file();
  if (tensors.count(name) == 0) {
    return absl::InternalError(
        absl::StrCat("shard \"", name, "\" is not in ps ", shard.ps, "'s file ", file));
  }
  ManifestShard s;
  s.name = name;
  s.part = shard.spec.part();
  s.num_parts = std::max(1, shard.spec.num_parts());
  s.row_offset = shard.row_offset;
  s.rows = shard.rows;
  s.ps = shard.ps;
  s.version = version->second;
  s.file = file;
  s.tensors[""] = name;
  // The shard's tensor "<name>/<suffix>" under key `suffix`; it must be in the ps's file.
  auto add = [&](const std::string& suffix) -> absl::Status {
    const std::string tensor = absl::StrCat(name, "/", suffix);
    if (tensors.count(tensor) == 0) {
      return absl::InternalError(
          absl::StrCat("tensor \"", tensor, "\" is not in ps ", shard.ps, "'s file ", file));
    }
    s.tensors[suffix] = tensor;
    return absl::OkStatus();
  };
  for (const std::string& slot : slots) RETURN_IF_ERROR(add(slot));
  if (layout.dynamic) {
    const ShardInfo& info = *sources.infos[ps].at(name);
    s.rows = info.dynamic().rows();
    s.bucket_begin = shard.buckets.begin;
    s.bucket_end = shard.buckets.end;
    s.base_checkpoint = info.base_checkpoint();
    for (const char* extra : {kKeysTensor, kLastStepsTensor, kDeletedKeysTensor}) {
      RETURN_IF_ERROR(add(extra));
    }
  }
  return s;
}

absl::StatusOr<ManifestVariable> BuildManifestVariable(const CheckpointContents& contents,
                                                       const ManifestSources& sources,
                                                       const VariableLayout& layout) {
  ManifestVariable v;
  v.name = layout.name;
  v.shape = layout.shape;
  v.partitioner = contents.job.partitioner();
  if (layout.shards.empty()) {
    return absl::InternalError(absl::StrCat("variable \"", layout.name, "\" has no shards"));
  }
  const ShardSpec& first = layout.shards.front().spec;
  v.optimizer = first.optimizer();
  v.initializer = first.initializer();
  v.update = first.update();
  v.slots = SlotNames(v.optimizer);
  if (layout.dynamic) v.num_buckets = layout.num_buckets;
  for (const VariableLayout::Shard& shard : layout.shards) {
    ASSIGN_OR_RETURN(ManifestShard s,
                     BuildManifestShard(contents, sources, layout, shard, v.slots));
    v.shards.push_back(std::move(s));
  }
  return v;
}

double UnixSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

}  // namespace

absl::StatusOr<Manifest> BuildManifest(const CheckpointContents& contents, double unix_time) {
  Manifest m;
  m.checkpoint_id = contents.checkpoint_id;
  m.job_id = contents.job_id;
  m.generation = contents.generation;
  m.unix_time = unix_time;
  m.final = contents.final;
  m.job_json = JobSpecToJson(contents.job);
  m.progress.steps_done = contents.steps_done;
  m.progress.total_steps = contents.total_steps;
  m.progress.steps_per_epoch = contents.steps_per_epoch;
  if (contents.steps_per_epoch > 0) {
    m.progress.epoch = contents.steps_done / contents.steps_per_epoch;
    m.progress.batch_index = contents.steps_done % contents.steps_per_epoch;
  }
  m.files = contents.files;
  m.eval = contents.eval;
  const ManifestSources sources(contents);
  for (const VariableLayout& layout : contents.variables) {
    ASSIGN_OR_RETURN(ManifestVariable v, BuildManifestVariable(contents, sources, layout));
    m.variables.push_back(std::move(v));
  }
  return m;
}

absl::StatusOr<CheckpointCut> SnapshotEveryPs(PsClient& ps, const CheckpointDir& dir,
                                              int64_t generation, int64_t incremental_since) {
  CheckpointCut cut;
  ASSIGN_OR_RETURN(cut.id, dir.NextId());
  ASSIGN_OR_RETURN(cut.path, dir.Prepare(cut.id));
  std::vector<std::string> files;
  for (int k = 0; k < ps.num_ps(); ++k) {
    files.push_back(absl::StrCat(cut.path, "/", CheckpointDir::DataFileName(k, ps.num_ps())));
  }
  RETURN_IF_ERROR(
      ps.SnapshotAll(cut.id, files, generation, incremental_since, &cut.snapshots));
  return cut;
}

namespace {

// Waits until every ps has written its file of checkpoint `id`; returns their statuses.
absl::StatusOr<std::vector<SnapshotStatusResponse>> WaitForFiles(
    PsClient& ps, int64_t id, const std::function<bool()>& stopping) {
  std::vector<SnapshotStatusResponse> statuses;
  while (true) {
    RETURN_IF_ERROR(ps.SnapshotStatusAll(id, &statuses));
    bool all_done = true;
    for (int k = 0; k < ps.num_ps(); ++k) {
      const SnapshotStatusResponse& r = statuses[k];
      switch (r.state()) {
        case SnapshotStatusResponse::DONE:
          break;
        case SnapshotStatusResponse::WRITING:
          all_done = false;
          break;
        case SnapshotStatusResponse::FAILED:
          return absl::InternalError(
              absl::StrCat("ps ", k, " could not write its file: ", r.error()));
        default:
          return WithDetail(absl::AbortedError(absl::StrCat("ps ", k,
                                                            " no longer knows checkpoint ", id,
                                                            " (it restarted)")),
                            ErrorDetail::PS_STATE_LOST, k);
      }
    }
    if (all_done) return statuses;
    if (stopping && stopping()) return absl::CancelledError("the chief is stopping");
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace

absl::StatusOr<CheckpointInfo> CommitCheckpoint(PsClient& ps, const CheckpointDir& dir,
                                                const CheckpointCut& cut,
                                                CheckpointContents contents,
                                                const std::vector<std::string>& variables,
                                                const CommitOptions& options) {
  ASSIGN_OR_RETURN(std::vector<SnapshotStatusResponse> statuses,
                   WaitForFiles(ps, cut.id, options.stopping));
  contents.checkpoint_id = cut.id;
  contents.snapshots = cut.snapshots;
  int64_t bytes = 0;
  for (const SnapshotStatusResponse& r : statuses) {
    contents.files.push_back(r.file());
    bytes += r.file().bytes();
  }
  for (const std::string& name : variables) {
    ASSIGN_OR_RETURN(VariableLayout layout, ps.GetLayout(name));
    contents.variables.push_back(std::move(layout));
  }
  const absl::Time now = absl::Now();
  ASSIGN_OR_RETURN(Manifest manifest, BuildManifest(contents, UnixSeconds(now)));
  RETURN_IF_ERROR(dir.Commit(manifest));
  absl::Status pruned = dir.Prune(options.keep, options.keep_also, contents.generation);
  if (!pruned.ok()) std::cerr << "chief: pruning old checkpoints: " << pruned << "\n";
  CheckpointInfo info;
  info.set_id(cut.id);
  info.set_path(cut.path);
  info.set_steps_done(contents.steps_done);
  info.set_unix_time(UnixSeconds(now));
  info.set_bytes(bytes);
  info.set_write_seconds(absl::ToDoubleSeconds(now - options.started));
  info.set_pause_ms(options.pause_ms);
  info.set_final(contents.final);
  return info;
}

}  // namespace shardps
