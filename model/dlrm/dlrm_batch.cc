#include "model/dlrm/dlrm_batch.h"

#include <cmath>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace shardps {
namespace {

absl::Status CheckOffsets(absl::string_view what, absl::Span<const int32_t> offsets,
                          size_t expected_entries, size_t num_ids) {
  if (offsets.size() != expected_entries) {
    return absl::InvalidArgumentError(absl::StrCat(what, " offsets has ", offsets.size(),
                                                   " entries, expected ", expected_entries,
                                                   " (batch + 1)"));
  }
  if (offsets[0] != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " offsets[0] = ", offsets[0], ", expected 0"));
  }
  for (size_t i = 1; i < offsets.size(); ++i) {
    if (offsets[i] < offsets[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(what, " offsets[", i, "] = ", offsets[i],
                                                     " < offsets[", i - 1, "] = ",
                                                     offsets[i - 1]));
    }
  }
  if (static_cast<size_t>(offsets.back()) != num_ids) {
    return absl::InvalidArgumentError(absl::StrCat(what, " offsets end at ", offsets.back(),
                                                   " but there are ", num_ids, " ids"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateDlrmBatch(const DlrmSpec& spec, const DlrmBatch& batch) {
  const int64_t b = batch.batch;
  if (b < 1) {
    return absl::InvalidArgumentError(absl::StrCat("dlrm batch: batch = ", b, ", must be >= 1"));
  }
  const int64_t dense_size = b * spec.num_dense;
  if (static_cast<int64_t>(batch.dense.size()) != dense_size ||
      (dense_size > 0 && batch.dense.data() == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("dlrm batch: dense has ", batch.dense.size(),
                                                   " floats, expected batch x num_dense = ", b,
                                                   " x ", spec.num_dense));
  }
  for (int64_t k = 0; k < dense_size; ++k) {
    if (!std::isfinite(batch.dense[k])) {
      return absl::InvalidArgumentError(absl::StrCat("dlrm batch: dense feature ",
                                                     k % spec.num_dense, " of example ",
                                                     k / spec.num_dense, " is not finite"));
    }
  }
  if (static_cast<int64_t>(batch.labels.size()) != b || batch.labels.data() == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dlrm batch: labels has ", batch.labels.size(), " floats, expected batch = ", b));
  }
  for (int64_t i = 0; i < b; ++i) {
    const float y = batch.labels[i];
    if (!(y >= 0.0f && y <= 1.0f)) {
      return absl::InvalidArgumentError(
          absl::StrCat("dlrm batch: label ", y, " of example ", i, " is outside [0, 1]"));
    }
  }
  if (batch.tables.size() != spec.tables.size()) {
    return absl::InvalidArgumentError(absl::StrCat("dlrm batch: ", batch.tables.size(),
                                                   " tables, the spec has ",
                                                   spec.tables.size()));
  }
  for (size_t t = 0; t < spec.tables.size(); ++t) {
    const DlrmTableSpec& ts = spec.tables[t];
    const DlrmTableBatch& tb = batch.tables[t];
    const std::string what = absl::StrCat("dlrm batch: table \"", ts.name, "\"");
    if (tb.num_rows < 0 || tb.num_rows > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " num_rows = ", tb.num_rows, " is outside [0, 2^31)"));
    }
    if (static_cast<int64_t>(tb.rows.size()) != tb.num_rows * ts.dim ||
        (tb.num_rows > 0 && tb.rows.data() == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat(what, " rows has ", tb.rows.size(),
                                                     " floats, expected num_rows x dim = ",
                                                     tb.num_rows, " x ", ts.dim));
    }
    RETURN_IF_ERROR(CheckOffsets(what, tb.offsets, static_cast<size_t>(b) + 1,
                                 tb.positions.size()));
    for (size_t k = 0; k < tb.positions.size(); ++k) {
      const int32_t p = tb.positions[k];
      if (p < 0 || p >= tb.num_rows) {
        return absl::InvalidArgumentError(absl::StrCat(what, " positions[", k, "] = ", p,
                                                       " is outside [0, ", tb.num_rows,
                                                       ") (num_rows)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status DedupIds(absl::Span<const int32_t> offsets, absl::Span<const int64_t> ids,
                      DedupedIds* out) {
  if (offsets.empty()) {
    return absl::InvalidArgumentError("DedupIds: offsets is empty, expected batch + 1 entries");
  }
  if (ids.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat("DedupIds: ", ids.size(), " ids, at most 2^31 - 1 per table and batch"));
  }
  RETURN_IF_ERROR(CheckOffsets("DedupIds:", offsets, offsets.size(), ids.size()));
  out->unique_ids.clear();
  out->offsets.assign(offsets.begin(), offsets.end());
  out->positions.resize(ids.size());
  absl::flat_hash_map<int64_t, int32_t> index;
  index.reserve(ids.size());
  for (size_t k = 0; k < ids.size(); ++k) {
    auto [it, inserted] = index.try_emplace(ids[k], static_cast<int32_t>(out->unique_ids.size()));
    if (inserted) out->unique_ids.push_back(ids[k]);
    out->positions[k] = it->second;
  }
  return absl::OkStatus();
}

DlrmTableBatch TableBatchView(const DedupedIds& ids, absl::Span<const float> rows) {
  DlrmTableBatch view;
  view.rows = rows;
  view.num_rows = static_cast<int64_t>(ids.unique_ids.size());
  view.offsets = ids.offsets;
  view.positions = ids.positions;
  return view;
}

}  // namespace shardps
