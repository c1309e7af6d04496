#include "ps_server/snapshot_cut.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ps_server/shard_info.h"

namespace shardps {

void AddDenseCut(const Shard& shard, Shard::Snapshot snapshot, SnapshotWriter::Job* job,
                 ShardInfo* info) {
  *info->mutable_spec() = shard.spec();
  info->set_version(snapshot.version);
  info->set_bytes(shard.bytes());
  const std::vector<int64_t> shape(shard.spec().shape().dim().begin(),
                                   shard.spec().shape().dim().end());
  for (Shard::Snapshot::Tensor& t : snapshot.tensors) {
    TensorToWrite tensor;
    tensor.name = t.slot.empty() ? shard.name() : absl::StrCat(shard.name(), "/", t.slot);
    tensor.shape = shape;
    tensor.pieces = std::move(t.pieces);
    tensor.holds = std::move(t.holds);
    job->tensors.push_back(std::move(tensor));
  }
}

void AddDynamicCut(const Shard& shard, Shard::DynamicCut cut, SnapshotWriter::Job* job,
                   ShardInfo* info) {
  *info->mutable_spec() = shard.spec();
  info->mutable_spec()->mutable_dynamic()->set_bucket_begin(cut.buckets.begin);
  info->mutable_spec()->mutable_dynamic()->set_bucket_end(cut.buckets.end);
  info->set_routing_version(cut.routing_version);
  info->set_version(cut.version);
  info->set_base_checkpoint(cut.base_checkpoint);
  FillDynamicStats(shard, info);
  info->mutable_dynamic()->set_rows(static_cast<int64_t>(cut.keys.size()));
  const int64_t n = static_cast<int64_t>(cut.keys.size());
  auto add = [&](std::string name, std::string dtype, std::vector<int64_t> shape, auto values) {
    auto held = std::make_shared<decltype(values)>(std::move(values));
    TensorToWrite tensor;
    tensor.name = std::move(name);
    tensor.dtype = std::move(dtype);
    tensor.shape = std::move(shape);
    tensor.pieces.emplace_back(reinterpret_cast<const char*>(held->data()),
                               held->size() * sizeof((*held)[0]));
    tensor.holds.push_back(std::move(held));
    job->tensors.push_back(std::move(tensor));
  };
  const std::string& name = shard.name();
  add(absl::StrCat(name, "/keys"), "I64", {n}, std::move(cut.keys));
  for (size_t t = 0; t < cut.tensors.size(); ++t) {
    add(t == 0 ? name
               : absl::StrCat(name, "/", shard.optimizer().slot_name(static_cast<int>(t - 1))),
        "F32", {n, shard.width()}, std::move(cut.tensors[t]));
  }
  add(absl::StrCat(name, "/last_steps"), "U32", {n}, std::move(cut.last_steps));
  const int64_t m = static_cast<int64_t>(cut.deleted.size());
  add(absl::StrCat(name, "/deleted_keys"), "I64", {m}, std::move(cut.deleted));
}

}  // namespace shardps
