// Click-log (CTR) examples: the schema of a dataset of dense features plus categorical
// features with 64-bit ids, a batch of examples in CSR form, and the CtrSource interface
// that every click-log dataset implements (the synthetic generator, the mmapped binary file).
//
// Batches are named by (epoch, batch index) elsewhere (data/batcher.h turns them into example
// indices from a permutation), so a source is read at random, by example index.
//
// Ids are int64_t everywhere: a 64-bit key, its bit pattern (hashed ids may be negative as
// int64). A feature with vocab_size > 0 has ids in [0, vocab_size); vocab_size 0 means
// unbounded hashed ids.
//
// Thread-safety: CtrSchema and CtrBatch are plain values. CtrSource::Read is thread-safe
// (every implementation is const after construction).
#ifndef SHARDPS_DATA_CTR_CTR_BATCH_H_
#define SHARDPS_DATA_CTR_CTR_BATCH_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace shardps {

struct CtrFeature {
  std::string name;
  int64_t vocab_size = 0;  // 0: unbounded hashed ids; else ids in [0, vocab_size)
  int max_hotness = 1;     // at most this many ids per example (>= 1); 0 ids = missing
};

struct CtrSchema {
  int num_dense = 0;
  std::vector<CtrFeature> features;
};

bool operator==(const CtrFeature& a, const CtrFeature& b);
bool operator==(const CtrSchema& a, const CtrSchema& b);
inline bool operator!=(const CtrSchema& a, const CtrSchema& b) { return !(a == b); }

// INVALID_ARGUMENT naming the field: num_dense < 0, a feature with an empty or duplicate
// name, a negative vocab_size, max_hotness < 1.
absl::Status ValidateSchema(const CtrSchema& schema);

// The ids of one categorical feature for a batch, CSR: the ids of example j are
// ids[offsets[j] .. offsets[j+1]); offsets has size+1 entries, offsets[0] == 0.
struct CtrFeatureIds {
  std::vector<int64_t> offsets;
  std::vector<int64_t> ids;
};

struct CtrBatch {
  int size = 0;
  std::vector<float> dense;   // size x num_dense, row-major
  std::vector<float> labels;  // size entries, 0 or 1
  std::vector<CtrFeatureIds> features;  // one per schema feature

  // Makes this an empty batch of `schema`'s shape with room for `capacity` examples, keeping
  // the vectors' memory (so a reused batch allocates nothing in steady state).
  void Reset(const CtrSchema& schema, int capacity = 0);

  // Appends one example: its label, its dense row (num_dense floats) and, for feature f, the
  // ids set afterwards with AddId(f, id); Finish the example with EndExample().
  // (Sources build batches this way; see synthetic_ctr.cc.)
  void BeginExample(float label, const float* dense_row, int num_dense);
  void AddId(int feature, int64_t id) { features[feature].ids.push_back(id); }
  void EndExample();
};

bool operator==(const CtrFeatureIds& a, const CtrFeatureIds& b);
bool operator==(const CtrBatch& a, const CtrBatch& b);

// INVALID_ARGUMENT naming what is wrong when `batch` is not a well-formed batch of `schema`:
// vector sizes, offsets not starting at 0 or decreasing, a label not 0 or 1, a non-finite
// dense value, more ids than max_hotness, an id outside [0, vocab_size).
absl::Status ValidateBatch(const CtrSchema& schema, const CtrBatch& batch);

// A click-log dataset read at random by example index.
class CtrSource {
 public:
  virtual ~CtrSource() = default;

  virtual const CtrSchema& schema() const = 0;
  virtual int64_t num_examples() const = 0;

  // Replaces *out with the examples `example_indices`, in that order (out->size is their
  // count). Reuses out's vectors. INVALID_ARGUMENT naming the first index outside
  // [0, num_examples()); DATA_LOSS naming the file and example when stored data is corrupt.
  // On error *out is unspecified. Thread-safe.
  virtual absl::Status Read(absl::Span<const int64_t> example_indices, CtrBatch* out) const = 0;
};

// INVALID_ARGUMENT naming the position and value of the first index outside
// [0, num_examples).
absl::Status CheckExampleIndices(absl::Span<const int64_t> example_indices,
                                 int64_t num_examples);

// Reads examples [begin, end) of `source` into *out (a convenience for tools and tests).
absl::Status ReadRange(const CtrSource& source, int64_t begin, int64_t end, CtrBatch* out);

// The dense transform of Criteo-style integer counts that DLRM uses: log(1 + max(x, 0)).
// The synthetic generator draws integer counts and applies this, so that a Criteo TSV round
// trip (which stores the integers) reproduces its batches bit for bit.
inline float CriteoDenseValue(int64_t x) {
  return x <= 0 ? 0.0f : static_cast<float>(std::log1p(static_cast<double>(x)));
}

}  // namespace shardps

#endif  // SHARDPS_DATA_CTR_CTR_BATCH_H_
