// SyntheticCtrSource: a synthetic click log in the spirit of the synthetic data of DLRM and
// HugeCTR, as a CtrSource. Example i is computed from (seed, offset + i) alone, in O(1) and
// with no storage, so a source of 10^8 examples costs nothing and reads in any order give
// the same examples.
//
// An example (global index g = offset + i, a SplitMix64 stream seeded from (seed, g)):
//   - dense feature d: an integer count x = 2^b - 1 + (uniform below 2^b), with b uniform in
//     0..B_d (B_d in 3..12, fixed per feature from the seed); the value is
//     CriteoDenseValue(x) = log(1 + x), so a Criteo TSV round trip (which stores x) is exact.
//   - categorical feature f: with probability `missing` no ids; else `hotness` ids (or a
//     uniform count in 1..hotness), each a popularity rank drawn from Zipf(vocab, zipf) by
//     ZipfSampler and scrambled into an id by IdPermutation (keyed per feature), so hot ids
//     are spread over the id range. Ids of one example may repeat (drawn with replacement).
//   - the label: Bernoulli(sigmoid(logit)) of a planted ground-truth model:
//       lin  = sum_d a_d (x_d - c_d) / s_d + sum_f mean_{ids} w_f(id)
//       pair = sum_{f<g} <e_f, e_g>,  e_f = mean_{ids} emb_f(id) (0 when missing)
//       logit = bias + signal * (sqrt(1-interaction) * std(lin) + sqrt(interaction) * std(pair))
//     where std() standardizes by the mean and standard deviation measured on 16384
//     calibration examples (a separate stream of the same seed), w_f(id) and emb_f(id)
//     (dim floats in [-1, 1)) are hashed from (seed, f, id) with no memory per id, a_d are
//     hashed from (seed, d), and the bias is found by bisection so that the calibration
//     examples' mean probability is click_rate.
// The planted probability is the best any model can do, so PlantedMetrics' AUC is the
// ceiling for a trained model. Held-out data: the same spec with offset = the number of
// training examples (same planted model, disjoint examples).
//
// Thread-safety: immutable after Create; Read and the planted-model functions are const and
// thread-safe.
#ifndef SHARDPS_DATA_CTR_SYNTHETIC_CTR_H_
#define SHARDPS_DATA_CTR_SYNTHETIC_CTR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "data/ctr/ctr_batch.h"
#include "data/ctr/id_permutation.h"
#include "data/ctr/synthetic_ctr_spec.h"
#include "data/ctr/zipf.h"

namespace shardps {

struct PlantedMetrics {
  int64_t examples = 0;
  double auc = 0;         // of the planted probabilities against the drawn labels
  double log_loss = 0;    // mean, clipped as common/auc.h
  double click_rate = 0;  // of the drawn labels
  double mean_probability = 0;
};

class SyntheticCtrSource : public CtrSource {
 public:
  // INVALID_ARGUMENT naming the config field at fault.
  static absl::StatusOr<std::unique_ptr<SyntheticCtrSource>> Create(
      const SyntheticCtrConfig& config);
  // Parses the spec (synthetic_ctr_spec.h) and creates the source.
  static absl::StatusOr<std::unique_ptr<SyntheticCtrSource>> FromSpec(absl::string_view spec);

  const CtrSchema& schema() const override { return schema_; }
  int64_t num_examples() const override { return config_.num_examples; }
  absl::Status Read(absl::Span<const int64_t> example_indices, CtrBatch* out) const override;

  const SyntheticCtrConfig& config() const { return config_; }

  // The planted model's click probability of example i (in [0, num_examples)).
  double PlantedProbability(int64_t i) const;

  // Planted AUC (the ceiling), log loss and click rate over examples [begin, end).
  // INVALID_ARGUMENT when the range is outside [0, num_examples) or has one class only.
  absl::StatusOr<PlantedMetrics> ComputePlantedMetrics(int64_t begin, int64_t end) const;

  // The raw integer count behind dense value d of example i (what a Criteo TSV stores).
  int64_t RawDense(int64_t i, int d) const;

  double bias() const { return bias_; }

 private:
  explicit SyntheticCtrSource(const SyntheticCtrConfig& config);
  // Builds the planted model from config_: InitFeatures, InitHeadCache, InitDense and
  // Calibrate, in that order (each reads what the ones before it set).
  absl::Status Init();
  absl::Status InitFeatures();  // schema_, zipf_, feature_key_, perm_
  void InitHeadCache();         // head_, head_ids_, head_hidden_
  void InitDense();             // log1p_table_, dense_bits_, dense_center_, dense_weight_
  void Calibrate();             // the standardization, the coefficients and bias_

  struct Parts {
    double lin = 0;
    double pair = 0;
  };
  // Generates the example of `stream`: writes its dense row to dense_row and appends its ids
  // to out->features when these are not null; returns the parts of its logit and sets the
  // uniform that draws its label.
  Parts Generate(uint64_t stream, float* dense_row, CtrBatch* out, double* label_uniform) const;
  double Logit(const Parts& parts) const;
  uint64_t StreamOf(int64_t global_index) const;
  void Hidden(int f, int64_t id, float* out) const;  // w then dim embedding floats

  SyntheticCtrConfig config_;
  CtrSchema schema_;
  std::vector<ZipfSampler> zipf_;
  std::vector<IdPermutation> perm_;
  std::vector<uint64_t> feature_key_;
  // Per feature, the ids and hidden parameters (1 + dim floats) of its hottest ranks.
  int head_ = 0;
  std::vector<std::vector<int64_t>> head_ids_;
  std::vector<std::vector<float>> head_hidden_;
  std::vector<float> log1p_table_;    // CriteoDenseValue(x) for every count x drawn
  std::vector<int> dense_bits_;      // B_d
  std::vector<double> dense_weight_;  // a_d / s_d
  std::vector<double> dense_center_;  // c_d
  double lin_mean_ = 0, lin_inv_std_ = 1, pair_mean_ = 0, pair_inv_std_ = 1;
  double lin_coef_ = 1, pair_coef_ = 0;
  double bias_ = 0;
};

}  // namespace shardps

#endif  // SHARDPS_DATA_CTR_SYNTHETIC_CTR_H_
