#include "evaluator/checkpoint_params.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/error_detail.h"
#include "checkpoint/dynamic_rows.h"
#include "common/status_macros.h"
#include "math/initializer.h"

namespace shardps {
namespace {

// `keys` (sorted) of dynamic table `name` into *out (keys.size() rows): their initial values,
// then the rows the checkpoint holds.
absl::Status ReadDynamicKeys(const CheckpointReader& reader, const std::string& name,
                             const std::vector<int64_t>& keys, const VariableInfo& info,
                             std::vector<float>* out) {
  const int64_t dim = info.row_width();
  ASSIGN_OR_RETURN(KeyedRowInitializer initial,
                   KeyedRowInitializer::Create(info.initializer, name, dim));
  for (size_t k = 0; k < keys.size(); ++k) initial.Fill(keys[k], out->data() + k * dim);
  auto position = [&](int64_t key) -> int64_t {
    auto it = std::lower_bound(keys.begin(), keys.end(), key);
    return it != keys.end() && *it == key ? it - keys.begin() : -1;
  };
  DynamicTableReadStats stats;
  return ReadDynamicTable(
      reader.manifest(), reader.manifest_path(), name, {""},
      [&](int64_t key) { return position(key) >= 0; },
      [&](const std::vector<int64_t>& deleted) {
        for (int64_t key : deleted) initial.Fill(key, out->data() + position(key) * dim);
        return absl::OkStatus();
      },
      [&](DynamicRowsPart& part) {
        for (size_t k = 0; k < part.keys.size(); ++k) {
          std::copy(part.tensors[0].begin() + k * dim, part.tensors[0].begin() + (k + 1) * dim,
                    out->begin() + position(part.keys[k]) * dim);
        }
        return absl::OkStatus();
      },
      &stats);
}

// Rows `ids` (sorted, distinct, each in the table) of fixed table `name` into *out
// (ids.size() rows): the ranges of rows that hold them, read in pieces of at most
// kReadRowsPiece rows, so a table of 10^7 rows costs the memory of one piece.
absl::Status ReadFixedRows(CheckpointReader* reader, const std::string& name,
                           const std::vector<int64_t>& ids, const VariableInfo& info,
                           std::vector<float>* out) {
  constexpr int64_t kReadRowsPiece = 1 << 16;
  const int64_t width = info.row_width();
  std::vector<float> piece;
  size_t k = 0;
  while (k < ids.size()) {
    const int64_t begin = ids[k];
    size_t last = k;  // the last id of this piece
    while (last + 1 < ids.size() && ids[last + 1] - begin < kReadRowsPiece) ++last;
    const int64_t end = ids[last] + 1;
    piece.resize(static_cast<size_t>((end - begin) * width));
    RETURN_IF_ERROR(reader->ReadRows(name, "", begin, end, absl::MakeSpan(piece)));
    for (; k <= last; ++k) {
      std::copy(piece.begin() + (ids[k] - begin) * width,
                piece.begin() + (ids[k] - begin + 1) * width, out->begin() + k * width);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadCheckpointParams(CheckpointReader* reader, const Evaluator& evaluator,
                                  std::vector<std::vector<float>>* values, int64_t* version) {
  const Manifest& manifest = reader->manifest();
  int64_t lowest = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < evaluator.params().size(); ++i) {
    const std::string& name = evaluator.variable_names()[i];
    const std::vector<int64_t>& shape = evaluator.params()[i].shape;
    const ManifestVariable* variable = manifest.FindVariable(name);
    if (variable == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(reader->manifest_path(), ": no variable \"",
                                                        name, "\" (model \"",
                                                        evaluator.job().model(), "\")"));
    }
    if (variable->shape != shape) {
      return absl::FailedPreconditionError(
          absl::StrCat(reader->manifest_path(), ": variable \"", name, "\" has shape [",
                       absl::StrJoin(variable->shape, ","), "]; model \"", evaluator.job().model(),
                       "\" needs [", absl::StrJoin(shape, ","), "]"));
    }
    for (const ManifestShard& shard : variable->shards) lowest = std::min(lowest, shard.version);
    if (evaluator.params()[i].dynamic) {
      // A dynamic table: the rows of the test split's keys, read on the checkpoint's chain
      // (increments on their bases); keys without a row keep their initial value.
      RETURN_IF_ERROR(ReadDynamicKeys(*reader, name, evaluator.row_keys(i),
                                      evaluator.params()[i], &(*values)[i]));
      continue;
    }
    if (evaluator.params()[i].access == VariableAccess::kRows) {
      RETURN_IF_ERROR(
          ReadFixedRows(reader, name, evaluator.row_keys(i), evaluator.params()[i], &(*values)[i]));
      continue;
    }
    const int64_t rows = shape.empty() ? 1 : shape[0];
    RETURN_IF_ERROR(reader->ReadRows(name, "", 0, rows, absl::MakeSpan((*values)[i])));
  }
  if (version != nullptr) *version = lowest == std::numeric_limits<int64_t>::max() ? 0 : lowest;
  return absl::OkStatus();
}

}  // namespace shardps
