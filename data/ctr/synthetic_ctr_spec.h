// The configuration of the synthetic click-log generator (synthetic_ctr.h) and its spec
// text, as job files and ctr_tool take it.
//
// Grammar: "synthetic_ctr:" followed by comma-separated key=value pairs (the prefix may be
// left out; keys may come in any order, each at most once; whitespace is not allowed):
//
//   examples=N        examples in the source (>= 1; default 1000000)
//   offset=N          example j of the source is global example offset + j (default 0).
//                     A held-out set is the same spec with offset = the training examples:
//                     same planted model, disjoint examples.
//   dense=D           dense features, 0..1024 (default 13)
//   tables=F          categorical features, 1..4096 (default: the length of a vocab or hot
//                     list, else 26)
//   vocab=V           rows per table: one size for all ("100000"), a list of F sizes
//                     "V1|V2|...|VF", or "criteo_like" (26 Criteo-like sizes from 3 to 6x10^6,
//                     about 2x10^7 rows in all). Each size >= 1, at most 2^62. Default 100000.
//   scale=X           multiplies every vocab size (rounded, at least 1); default 1
//   hot=H             ids per example: "N" exactly N, "1..N" a uniform count in 1..N; one
//                     for all tables or a list "H1|...|HF". Default 1 (one-hot).
//   missing=P         probability that a categorical feature has no ids in an example
//                     (default 0)
//   zipf=S            power-law exponent of id popularity, >= 0 (0: uniform; default 1.1)
//   ids=range|hashed  range: ids in [0, vocab) (the schema's vocab_size is the vocab);
//                     hashed: 64-bit keys, possibly negative (schema vocab_size 0). Either
//                     way popularity ranks are scrambled over the id space. Default range.
//   seed=N            uint64 (default 1): every example is a function of (seed, index)
//   click_rate=P      target mean click rate, 0.01..0.99 (default 0.2)
//   signal=X          standard deviation of the planted logit around its bias, 0..20
//                     (default 2; larger gives a higher planted AUC)
//   interaction=X     share of the logit's variance from pairwise dot products of the hidden
//                     embeddings, 0..1 (default 0.3)
//   dim=K             hidden embedding dimension of the planted model, 1..64 (default 4)
//   preset=criteo_like  dense=13, tables=26, vocab=criteo_like, applied before other keys
//
// Example: "synthetic_ctr:preset=criteo_like,examples=1000000,scale=0.1,seed=7".
// Errors are INVALID_ARGUMENT naming the key.
//
// Thread-safety: pure functions.
#ifndef SHARDPS_DATA_CTR_SYNTHETIC_CTR_SPEC_H_
#define SHARDPS_DATA_CTR_SYNTHETIC_CTR_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardps {

struct SyntheticFeatureConfig {
  int64_t vocab_size = 100000;
  int hotness = 1;                // ids per example (or the most, when variable)
  bool variable_hotness = false;  // a uniform count in 1..hotness
};

struct SyntheticCtrConfig {
  int64_t num_examples = 1000000;
  int64_t offset = 0;
  int num_dense = 13;
  std::vector<SyntheticFeatureConfig> features;
  double missing = 0;
  double zipf = 1.1;
  bool hashed_ids = false;
  uint64_t seed = 1;
  double click_rate = 0.2;
  double signal = 2.0;
  double interaction = 0.3;
  int dim = 4;
};

inline constexpr char kSyntheticCtrPrefix[] = "synthetic_ctr:";

// The 26 table sizes of the criteo_like preset, each multiplied by `scale` (at least 1).
std::vector<int64_t> CriteoLikeVocabSizes(double scale = 1.0);

// Parses the spec text above. INVALID_ARGUMENT naming the key at fault.
absl::StatusOr<SyntheticCtrConfig> ParseSyntheticCtrSpec(absl::string_view spec);

// INVALID_ARGUMENT naming the field out of range (the checks the parser makes).
absl::Status ValidateSyntheticCtrConfig(const SyntheticCtrConfig& config);

// The canonical spec of `config` (every key, lists spelled out);
// ParseSyntheticCtrSpec(FormatSyntheticCtrSpec(c)) gives c back.
std::string FormatSyntheticCtrSpec(const SyntheticCtrConfig& config);

}  // namespace shardps

#endif  // SHARDPS_DATA_CTR_SYNTHETIC_CTR_SPEC_H_
