#include "checkpoint/dynamic_rows.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/file_io.h"
#include "checkpoint/safetensors.h"
#include "common/status_macros.h"

namespace shardps {
namespace {

// The manifests of the chain, by checkpoint id, read once.
class Chain {
 public:
  Chain(const Manifest& top, std::string top_path)
      : top_(top), root_(DirName(DirName(top_path))) {
    paths_[top.checkpoint_id] = std::move(top_path);
  }

  absl::StatusOr<const Manifest*> Get(int64_t id, int64_t needed_by) {
    if (id == top_.checkpoint_id) return &top_;
    auto it = manifests_.find(id);
    if (it != manifests_.end()) return it->second.get();
    ASSIGN_OR_RETURN(CheckpointDir dir, CheckpointDir::OpenReadOnly(root_));
    const std::string path = absl::StrCat(dir.CheckpointPath(id), "/manifest.json");
    absl::StatusOr<std::string> text = ReadWholeFile(path);
    if (!text.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint ", needed_by, " is an increment on checkpoint ", id, ", whose manifest ",
          path, " cannot be read (", text.status().message(),
          "); restore from a full checkpoint"));
    }
    ASSIGN_OR_RETURN(Manifest manifest, ParseManifest(*text, path));
    paths_[id] = path;
    auto owned = std::make_unique<Manifest>(std::move(manifest));
    const Manifest* out = owned.get();
    manifests_[id] = std::move(owned);
    return out;
  }
  const std::string& PathOf(int64_t id) const { return paths_.at(id); }

 private:
  const Manifest& top_;
  const std::string root_;
  std::map<int64_t, std::unique_ptr<Manifest>> manifests_;
  std::map<int64_t, std::string> paths_;
};

struct Reading {
  const std::string& variable;
  const std::vector<std::string>& tensors;
  absl::FunctionRef<bool(int64_t)> keep;
  absl::FunctionRef<absl::Status(const std::vector<int64_t>&)> erase;
  absl::FunctionRef<absl::Status(DynamicRowsPart&)> upsert;
  DynamicTableReadStats* stats;
};

// One tensor of a shard's file, whole, checked against the manifest's CRC-32C.
template <typename T>
absl::Status ReadTensor(const SafetensorsFile& file, const DataFileInfo& info,
                        const std::string& name, std::vector<T>* out, int64_t* bytes_read) {
  const TensorInfo* tensor = file.Find(name);
  const TensorInfo* listed = nullptr;
  for (const TensorInfo& t : info.tensors()) {
    if (t.name() == name) listed = &t;
  }
  if (tensor == nullptr || listed == nullptr) {
    return absl::DataLossError(absl::StrCat(file.path(), ": tensor '", name, "' is missing"));
  }
  const int64_t bytes = tensor->data_end() - tensor->data_begin();
  if (bytes % static_cast<int64_t>(sizeof(T)) != 0) {
    return absl::DataLossError(absl::StrCat(file.path(), ": tensor '", name, "' has ", bytes,
                                            " bytes, not whole elements"));
  }
  out->resize(static_cast<size_t>(bytes) / sizeof(T));
  TensorReadTarget target{reinterpret_cast<char*>(out->data()), bytes};
  RETURN_IF_ERROR(file.ReadTensorInto(*tensor, listed->crc32c(), absl::MakeConstSpan(&target, 1)));
  *bytes_read += bytes;
  return absl::OkStatus();
}

absl::Status ReadShard(Chain& chain, const Manifest& manifest, const ManifestVariable& v,
                       const ManifestShard& shard, Reading& r);

// Every shard of the variable at checkpoint `id`, restricted to buckets [begin, end).
absl::Status ReadCheckpoint(Chain& chain, int64_t id, int64_t needed_by, int32_t begin,
                            int32_t end, Reading& r) {
  ASSIGN_OR_RETURN(const Manifest* manifest, chain.Get(id, needed_by));
  const ManifestVariable* v = manifest->FindVariable(r.variable);
  if (v == nullptr || v->num_buckets <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        chain.PathOf(id), ": has no dynamic table \"", r.variable, "\""));
  }
  ++r.stats->checkpoints;
  for (const ManifestShard& shard : v->shards) {
    if (shard.bucket_end <= begin || shard.bucket_begin >= end) continue;
    RETURN_IF_ERROR(ReadShard(chain, *manifest, *v, shard, r));
  }
  return absl::OkStatus();
}

absl::Status ReadShard(Chain& chain, const Manifest& manifest, const ManifestVariable& v,
                       const ManifestShard& shard, Reading& r) {
  if (shard.base_checkpoint > 0) {
    if (shard.base_checkpoint >= manifest.checkpoint_id) {
      return absl::DataLossError(absl::StrCat(
          chain.PathOf(manifest.checkpoint_id), ": shard ", shard.name,
          " is an increment on checkpoint ", shard.base_checkpoint, ", which is not older"));
    }
    RETURN_IF_ERROR(ReadCheckpoint(chain, shard.base_checkpoint, manifest.checkpoint_id,
                                   shard.bucket_begin, shard.bucket_end, r));
  }
  const DataFileInfo* info = manifest.FindFile(shard.file);
  const std::string path =
      absl::StrCat(DirName(chain.PathOf(manifest.checkpoint_id)), "/", shard.file);
  if (info == nullptr) {
    return absl::DataLossError(absl::StrCat(path, ": not listed in its manifest"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(path));
  int64_t* bytes = &r.stats->bytes_read;
  std::vector<int64_t> deleted;
  RETURN_IF_ERROR(ReadTensor(*file, *info, shard.tensors.at(kDeletedKeysTensor), &deleted, bytes));
  deleted.erase(std::remove_if(deleted.begin(), deleted.end(),
                               [&](int64_t key) { return !r.keep(key); }),
                deleted.end());
  if (!deleted.empty()) RETURN_IF_ERROR(r.erase(deleted));

  DynamicRowsPart all;
  RETURN_IF_ERROR(ReadTensor(*file, *info, shard.tensors.at(kKeysTensor), &all.keys, bytes));
  RETURN_IF_ERROR(
      ReadTensor(*file, *info, shard.tensors.at(kLastStepsTensor), &all.last_steps, bytes));
  const int64_t dim = v.shape[1];
  const size_t n = all.keys.size();
  if (all.last_steps.size() != n) {
    return absl::DataLossError(absl::StrCat(path, ": shard ", shard.name, " has ", n,
                                            " keys and ", all.last_steps.size(), " last steps"));
  }
  for (const std::string& name : r.tensors) {
    auto it = shard.tensors.find(name);
    if (it == shard.tensors.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, ": shard ", shard.name, " has no tensor \"", name, "\""));
    }
    all.tensors.emplace_back();
    RETURN_IF_ERROR(ReadTensor(*file, *info, it->second, &all.tensors.back(), bytes));
    if (all.tensors.back().size() != n * static_cast<size_t>(dim)) {
      return absl::DataLossError(absl::StrCat(path, ": tensor '", it->second, "' holds ",
                                              all.tensors.back().size(), " floats for ", n,
                                              " rows of ", dim));
    }
  }
  // Only the rows kept.
  DynamicRowsPart part;
  part.tensors.resize(all.tensors.size());
  for (size_t k = 0; k < n; ++k) {
    if (!r.keep(all.keys[k])) continue;
    part.keys.push_back(all.keys[k]);
    part.last_steps.push_back(all.last_steps[k]);
    for (size_t t = 0; t < all.tensors.size(); ++t) {
      const float* row = all.tensors[t].data() + k * dim;
      part.tensors[t].insert(part.tensors[t].end(), row, row + dim);
    }
  }
  if (!part.keys.empty()) RETURN_IF_ERROR(r.upsert(part));
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadDynamicTable(
    const Manifest& manifest, const std::string& manifest_path, const std::string& variable,
    const std::vector<std::string>& tensors, absl::FunctionRef<bool(int64_t)> keep,
    absl::FunctionRef<absl::Status(const std::vector<int64_t>&)> erase,
    absl::FunctionRef<absl::Status(DynamicRowsPart&)> upsert, DynamicTableReadStats* stats) {
  *stats = DynamicTableReadStats();
  const ManifestVariable* v = manifest.FindVariable(variable);
  if (v == nullptr || v->num_buckets <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        manifest_path, ": has no dynamic table \"", variable, "\""));
  }
  for (const ManifestShard& shard : v->shards) stats->version = std::max(stats->version, shard.version);
  Chain chain(manifest, manifest_path);
  Reading r{variable, tensors, keep, erase, upsert, stats};
  RETURN_IF_ERROR(ReadCheckpoint(chain, manifest.checkpoint_id, manifest.checkpoint_id, 0,
                                 v->num_buckets, r));
  return absl::OkStatus();
}

}  // namespace shardps
