// DlrmSpec: the shape of a DLRM-style CTR model (Naumov et al., 2019), as a job file names it,
// and the list of its dense parameters. The model: one embedding table per categorical
// feature, whose rows an example's ids select and pool (an example without ids pools to
// zeros); a bottom MLP (ReLU on every layer, the last included, as in DLRM) over the
// num_dense dense features; an interaction of the bottom output with the pooled embeddings; a
// top MLP (ReLU on the hidden layers) ending in one logit; sigmoid; mean binary log loss.
//
// Thread safety: plain values and pure functions.
#ifndef SHARDPS_MODEL_DLRM_DLRM_SPEC_H_
#define SHARDPS_MODEL_DLRM_DLRM_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace shardps {

enum class DlrmPooling { kSum, kMean };
// Over the "vectors" [bottom output, pooled table 0, ..., pooled table T-1] (the bottom output
// is absent when num_dense == 0):
//   kConcat  the vectors concatenated;
//   kDot     the bottom output, then the dot products of every pair of distinct vectors
//            (i, j), i < j, in row-major order of the upper triangle; every vector must then
//            have one dimension.
enum class DlrmInteraction { kConcat, kDot };

// Limits that keep a spec's buffers within reason; a spec beyond them is INVALID_ARGUMENT.
inline constexpr int kDlrmMaxWidth = 1 << 16;   // of an MLP layer
inline constexpr int kDlrmMaxDim = 1 << 12;     // of an embedding table
inline constexpr int kDlrmMaxTables = 1 << 12;
inline constexpr int kDlrmMaxLayers = 64;       // per MLP

// One categorical feature as the data defines it.
struct DlrmTableSchema {
  std::string name;        // unique, non-empty, no "=", ";", "," or whitespace
  int64_t vocab_size = 0;  // rows of the table; 0: unbounded (hashed 64-bit ids)
};

struct DlrmTableSpec {
  std::string name;
  int64_t vocab_size = 0;
  int dim = 16;
  DlrmPooling pooling = DlrmPooling::kSum;

  bool operator==(const DlrmTableSpec& o) const {
    return name == o.name && vocab_size == o.vocab_size && dim == o.dim && pooling == o.pooling;
  }
};

struct DlrmSpec {
  int num_dense = 0;
  std::vector<DlrmTableSpec> tables;
  std::vector<int> bottom;  // bottom MLP widths (may be empty)
  std::vector<int> top;     // top MLP hidden widths (may be empty); the logit layer is implicit
  DlrmInteraction interaction = DlrmInteraction::kConcat;

  bool operator==(const DlrmSpec& o) const {
    return num_dense == o.num_dense && tables == o.tables && bottom == o.bottom &&
           top == o.top && interaction == o.interaction;
  }

  // Width of the bottom output: bottom.back(), or num_dense without a bottom MLP.
  int BottomOutputWidth() const;
  // Width of [bottom output, pooled tables...] (the concat features).
  int VectorsWidth() const;
  // Number of vectors (the bottom output counts when num_dense > 0).
  int NumVectors() const;
  // Width of the top MLP's input.
  int InteractionWidth() const;
  // Column of table t's pooled embedding within the vectors (after the bottom output).
  int TableColumn(int t) const;
};

// Parses the text form of a job file, "dlrm:" then ';'-separated key=value pairs, every key
// optional:
//   bottom=64,16          bottom MLP widths; empty or absent: none (the dense features go to
//                         the interaction as they are; with num_dense == 0 it must be empty)
//   top=64,32             top MLP hidden widths; the final layer of width 1 is implicit
//   interaction=concat    concat (default) or dot
//   pooling=sum           sum (default) or mean, for every table
//   dim=16                embedding dimension for every table (default 16)
//   dim.<table>=8         one table's dimension, overriding dim
//   pooling.<table>=mean  one table's pooling, overriding pooling
// The tables themselves (count, names, vocabulary sizes) are `tables`, from the data's schema.
// INVALID_ARGUMENT naming the key (and value) for an unknown key or table, a malformed or
// out-of-range value, a repeated key, and for whatever ValidateDlrmSpec refuses.
absl::StatusOr<DlrmSpec> ParseDlrmSpec(absl::string_view text, int num_dense,
                                       absl::Span<const DlrmTableSchema> tables);

// The text form; ParseDlrmSpec(ToString(s), s.num_dense, <s's tables>) == s. dim and pooling
// are table 0's, with per-table keys for the tables that differ.
std::string DlrmSpecToString(const DlrmSpec& spec);

// INVALID_ARGUMENT naming the field: widths, dims or counts out of range, duplicate or bad
// table names, no input to the top MLP, a dot interaction whose vectors differ in dimension
// (naming the table and both dimensions).
absl::Status ValidateDlrmSpec(const DlrmSpec& spec);

// One dense parameter: "bottom_<l>/kernel" {in, out}, "bottom_<l>/bias" {out}, then the same
// for "top_<l>", the last top layer being the logit layer (out 1).
struct DlrmParamInfo {
  std::string name;
  std::vector<int64_t> shape;
  int64_t num_elements() const;
};

// The dense parameters in their fixed order: bottom layers, then top layers, kernel before
// bias. The spec must be valid.
std::vector<DlrmParamInfo> DlrmDenseParams(const DlrmSpec& spec);

// INVALID_ARGUMENT naming the parameter and both sizes unless params has one entry per
// DlrmDenseParams(spec) entry, each of its num_elements(), none null.
absl::Status CheckDlrmDenseParams(const DlrmSpec& spec,
                                  absl::Span<const absl::Span<const float>> params);

}  // namespace shardps

#endif  // SHARDPS_MODEL_DLRM_DLRM_SPEC_H_
