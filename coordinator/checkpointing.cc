#include "coordinator/checkpointing.h"

#include <map>

#include "absl/strings/str_cat.h"
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

  // Shard versions at the cut (and dynamic shards' rows and bases), by ps and shard name.
  std::vector<std::map<std::string, int64_t>> versions(contents.snapshots.size());
  std::vector<std::map<std::string, const ShardInfo*>> infos(contents.snapshots.size());
  for (size_t ps = 0; ps < contents.snapshots.size(); ++ps) {
    for (const ShardInfo& info : contents.snapshots[ps].shards()) {
      versions[ps][info.spec().name()] = info.version();
      infos[ps][info.spec().name()] = &info;
    }
  }
  // Tensor names of each ps's file.
  std::vector<std::map<std::string, const TensorInfo*>> tensors(contents.files.size());
  for (size_t ps = 0; ps < contents.files.size(); ++ps) {
    for (const TensorInfo& t : contents.files[ps].tensors()) tensors[ps][t.name()] = &t;
  }

  for (const VariableLayout& layout : contents.variables) {
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
      const std::string& name = shard.spec.name();
      const size_t ps = static_cast<size_t>(shard.ps);
      if (ps >= versions.size() || ps >= tensors.size()) {
        return absl::InternalError(absl::StrCat("shard \"", name, "\" is on ps ", shard.ps,
                                                ", which sent no snapshot or file"));
      }
      auto version = versions[ps].find(name);
      if (version == versions[ps].end()) {
        return absl::InternalError(
            absl::StrCat("shard \"", name, "\" is not in ps ", shard.ps, "'s snapshot"));
      }
      if (tensors[ps].count(name) == 0) {
        return absl::InternalError(absl::StrCat("shard \"", name, "\" is not in ps ", shard.ps,
                                                "'s file ", contents.files[ps].file()));
      }
      ManifestShard s;
      s.name = name;
      s.part = shard.spec.part();
      s.num_parts = std::max(1, shard.spec.num_parts());
      s.row_offset = shard.row_offset;
      s.rows = shard.rows;
      s.ps = shard.ps;
      s.version = version->second;
      s.file = contents.files[ps].file();
      s.tensors[""] = name;
      // The shard's tensor "<name>/<suffix>" under key `suffix`; it must be in the ps's file.
      auto add = [&](const std::string& suffix) -> absl::Status {
        const std::string tensor = absl::StrCat(name, "/", suffix);
        if (tensors[ps].count(tensor) == 0) {
          return absl::InternalError(absl::StrCat("tensor \"", tensor, "\" is not in ps ",
                                                  shard.ps, "'s file ",
                                                  contents.files[ps].file()));
        }
        s.tensors[suffix] = tensor;
        return absl::OkStatus();
      };
      for (const std::string& slot : v.slots) RETURN_IF_ERROR(add(slot));
      if (layout.dynamic) {
        const ShardInfo& info = *infos[ps][name];
        s.rows = info.dynamic().rows();
        s.bucket_begin = shard.buckets.begin;
        s.bucket_end = shard.buckets.end;
        s.base_checkpoint = info.base_checkpoint();
        for (const char* extra : {kKeysTensor, kLastStepsTensor, kDeletedKeysTensor}) {
          RETURN_IF_ERROR(add(extra));
        }
      }
      v.shards.push_back(std::move(s));
    }
    m.variables.push_back(std::move(v));
  }
  return m;
}

}  // namespace shardps
