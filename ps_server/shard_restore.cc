#include "ps_server/shard_restore.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/error_detail.h"
#include "common/status_macros.h"
#include "proto/error.pb.h"

namespace shardps {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Copies `bytes` (whole rows, starting at global row `first_row`) into `blocks`.
absl::Status CopyRows(const Shard& shard, int64_t first_row, absl::string_view bytes,
                      ParamBlocks* blocks) {
  const int64_t row_bytes = shard.width() * static_cast<int64_t>(sizeof(float));
  const int64_t row = first_row - shard.spec().row_offset();
  const int64_t rows = static_cast<int64_t>(bytes.size()) / row_bytes;
  if (static_cast<int64_t>(bytes.size()) % row_bytes != 0 || row < 0 ||
      row + rows > shard.rows()) {
    return absl::InternalError(absl::StrCat(
        QuotedShard(shard.name()), ": the checkpoint reader returned ", bytes.size(),
        " bytes at row ", first_row, ", not whole rows of the shard's rows"));
  }
  const char* src = bytes.data();
  blocks->ForEachRun(row * shard.width(), (row + rows) * shard.width(),
                     [&src](int64_t, float* dst, int64_t n) {
                       std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
                       src += n * static_cast<int64_t>(sizeof(float));
                     });
  return absl::OkStatus();
}

// Marks a DATA_LOSS as a corrupt checkpoint file, naming `file` (when the reader has not
// named one already).
absl::Status Corrupt(const absl::Status& status, const std::string& file) {
  if (status.code() != absl::StatusCode::kDataLoss) return status;
  std::optional<ErrorDetail> detail = GetDetail(status);
  if (detail.has_value() && detail->kind() == ErrorDetail::CHECKPOINT_CORRUPT &&
      !detail->file().empty()) {
    return status;
  }
  ErrorDetail corrupt;
  corrupt.set_kind(ErrorDetail::CHECKPOINT_CORRUPT);
  corrupt.set_file(file);
  return WithDetail(status, corrupt);
}

}  // namespace

absl::Status CheckRestorable(const Manifest& manifest, const std::string& manifest_path,
                             const Shard& shard, const ShardSource& source) {
  const std::string what = absl::StrCat("restore ", QuotedShard(shard.name()));
  const ManifestVariable* variable = manifest.FindVariable(source.variable);
  if (variable == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": the checkpoint ", manifest_path, " has no variable '", source.variable, "'"));
  }
  const std::vector<int64_t> shape(shard.spec().full_shape().dim().begin(),
                                   shard.spec().full_shape().dim().end());
  if (variable->shape != shape) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": the variable's shape is ", ShapeText(shape), " but checkpoint variable '",
        source.variable, "' in ", manifest_path, " has shape ", ShapeText(variable->shape)));
  }
  if (source.params_only) return absl::OkStatus();
  const Optimizer& optimizer = shard.optimizer();
  for (int s = 0; s < optimizer.num_slots(); ++s) {
    const std::string slot(optimizer.slot_name(s));
    if (std::find(variable->slots.begin(), variable->slots.end(), slot) ==
        variable->slots.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": its optimizer (", OptimizerSpec::Type_Name(shard.spec().optimizer().type()),
          ") keeps slot '", slot, "' but checkpoint variable '", source.variable, "' in ",
          manifest_path, " has slots [", absl::StrJoin(variable->slots, ", "),
          "]; restore with params_only, or with the checkpoint's optimizer"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RestoredState> ReadShardState(CheckpointReader& reader, const Shard& shard,
                                             const ShardSource& source) {
  const std::string what = absl::StrCat("restore ", QuotedShard(shard.name()));
  const ManifestVariable* variable = reader.manifest().FindVariable(source.variable);
  if (variable == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": the checkpoint has no variable '", source.variable, "'"));
  }
  RestoredState restored;
  restored.state = shard.NewState();
  const int64_t begin = shard.spec().row_offset();
  const int64_t end = begin + shard.rows();
  // The tensors to read: the parameters, and each slot unless params_only.
  std::vector<std::pair<std::string, ParamBlocks*>> tensors = {{"", &restored.state.params}};
  if (!source.params_only) {
    for (int s = 0; s < shard.optimizer().num_slots(); ++s) {
      tensors.emplace_back(std::string(shard.optimizer().slot_name(s)),
                           &restored.state.slots[static_cast<size_t>(s)]);
    }
  }
  // Source shard by source shard, so that a checksum failure names its file.
  for (const ManifestShard& from : variable->shards) {
    const int64_t lo = std::max(begin, from.row_offset);
    const int64_t hi = std::min(end, from.row_offset + from.rows);
    if (lo >= hi) continue;
    if (!source.params_only) restored.version = std::max(restored.version, from.version);
    for (auto& [slot, blocks] : tensors) {
      ParamBlocks* target = blocks;
      const absl::Status status = reader.ReadRows(
          source.variable, slot, lo, hi,
          [&](int64_t first_row, absl::string_view bytes) {
            return CopyRows(shard, first_row, bytes, target);
          },
          &restored.bytes_read);
      if (!status.ok()) {
        return Annotate(Corrupt(status, from.file),
                        absl::StrCat(what, " from '", source.variable, "'",
                                     slot.empty() ? "" : absl::StrCat(" slot '", slot, "'"),
                                     " rows [", lo, ", ", hi, ") in ", from.file));
      }
    }
  }
  return restored;
}

absl::StatusOr<RestoredState> InitialShardState(const Shard& shard) {
  RestoredState restored;
  restored.state = shard.NewState();
  RETURN_IF_ERROR(shard.InitializeParams(&restored.state.params));
  return restored;
}

}  // namespace shardps
