// A batch of the DLRM model (dlrm_spec.h) as its compute sees it, and the helper that turns
// an example's raw ids into what the worker pulls and what compute reads.
//
// Per table, the worker deduplicates the batch's ids (DedupIds), pulls each unique row once
// from the ps (rows in unique_ids order), and hands compute the rows and, per example, the
// positions of its ids among those rows (CSR: offsets B+1, positions). Compute returns one
// gradient row per unique row, in the same order, ready to push with the same unique_ids.
//
// Every buffer is caller-owned host memory; DlrmBatch only points at it.
//
// Thread safety: plain values and pure functions.
#ifndef SHARDPS_MODEL_DLRM_DLRM_BATCH_H_
#define SHARDPS_MODEL_DLRM_DLRM_BATCH_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "model/dlrm/dlrm_spec.h"

namespace shardps {

// One table's part of a batch.
struct DlrmTableBatch {
  // The unique rows pulled for this batch, num_rows x dim row-major.
  absl::Span<const float> rows;
  int64_t num_rows = 0;
  // Example i's ids are positions[offsets[i], offsets[i+1]), each an index into rows'
  // [0, num_rows). offsets has batch + 1 entries, offsets[0] == 0, non-decreasing; an example
  // with no ids pools to zeros (mean pooling too). A position may repeat within an example
  // (the same id twice): it then counts twice.
  absl::Span<const int32_t> offsets;
  absl::Span<const int32_t> positions;
};

struct DlrmBatch {
  int batch = 0;                  // B >= 1
  absl::Span<const float> dense;  // B x num_dense row-major
  absl::Span<const float> labels; // B, each in [0, 1]
  std::vector<DlrmTableBatch> tables;  // one per spec table, in spec order
};

// INVALID_ARGUMENT naming the table, the field and the expected and actual size (or the
// example and position at fault): wrong table count, buffer sizes, malformed offsets,
// positions outside [0, num_rows), labels outside [0, 1] or dense features not finite.
absl::Status ValidateDlrmBatch(const DlrmSpec& spec, const DlrmBatch& batch);

// One table's ids for a batch, deduplicated.
struct DedupedIds {
  std::vector<int64_t> unique_ids;  // each id once, in order of first occurrence
  std::vector<int32_t> offsets;     // B + 1, a copy of the input offsets
  std::vector<int32_t> positions;   // per id, its index into unique_ids
};

// Deduplicates the raw ids of a batch for one table: example i has ids[offsets[i],
// offsets[i+1]). Fills *out (its memory is reused across calls). The order of unique_ids
// depends only on the input. INVALID_ARGUMENT when offsets is empty, does not start at 0,
// decreases, or does not end at ids.size(), or when there are 2^31 or more ids.
absl::Status DedupIds(absl::Span<const int32_t> offsets, absl::Span<const int64_t> ids,
                      DedupedIds* out);

// The view of a deduplicated table for DlrmBatch: `rows` holds unique_ids.size() x dim floats,
// pulled in unique_ids order.
DlrmTableBatch TableBatchView(const DedupedIds& ids, absl::Span<const float> rows);

}  // namespace shardps

#endif  // SHARDPS_MODEL_DLRM_DLRM_BATCH_H_
