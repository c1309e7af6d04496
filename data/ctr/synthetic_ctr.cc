#include "data/ctr/synthetic_ctr.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/auc.h"
#include "common/status_macros.h"
#include "data/ctr/ctr_hash.h"

namespace shardps {
namespace {

constexpr uint64_t kExampleSalt = 0x4578616d706c6573ULL;
constexpr uint64_t kCalibrationSalt = 0x43616c6962726174ULL;
constexpr uint64_t kFeatureSalt = 0x4665617475726573ULL;
constexpr uint64_t kDenseSalt = 0x44656e7365446e73ULL;
constexpr int kCalibrationExamples = 16384;
constexpr int kHeadCache = 1024;  // ranks per feature whose id and hidden floats are cached
constexpr int kMaxDenseBits = 12;

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Exact mean and variance (at least 1e-12) of CriteoDenseValue(x) for the dense draw of
// `bits`: b uniform in 0..bits, then x uniform in [2^b - 1, 2^(b+1) - 1).
void DenseMoments(const std::vector<float>& log1p_table, int bits, double* mean, double* var) {
  double sum = 0;
  double sum_sq = 0;
  for (int b = 0; b <= bits; ++b) {
    const int64_t lo = (int64_t{1} << b) - 1;
    double s = 0;
    double s2 = 0;
    for (int64_t x = lo; x < lo + (int64_t{1} << b); ++x) {
      s += log1p_table[x];
      s2 += static_cast<double>(log1p_table[x]) * log1p_table[x];
    }
    sum += s / static_cast<double>(int64_t{1} << b);
    sum_sq += s2 / static_cast<double>(int64_t{1} << b);
  }
  *mean = sum / (bits + 1);
  *var = std::max(sum_sq / (bits + 1) - *mean * *mean, 1e-12);
}

// The mean and inverse standard deviation (0 when it vanishes) of `field` over `parts`.
template <typename Parts>
void Standardize(const std::vector<Parts>& parts, double Parts::*field, double* mean,
                 double* inv_std) {
  double s = 0;
  for (const Parts& p : parts) s += p.*field;
  *mean = s / kCalibrationExamples;
  double v = 0;
  for (const Parts& p : parts) v += (p.*field - *mean) * (p.*field - *mean);
  v /= kCalibrationExamples;
  *inv_std = v > 1e-18 ? 1.0 / std::sqrt(v) : 0.0;
}

// The bias b (100 bisection steps in [-40, 40]) at which the mean of sigmoid(b + z) over `z`
// is `click_rate`.
double BisectBias(const std::vector<double>& z, double click_rate) {
  double lo = -40;
  double hi = 40;
  for (int it = 0; it < 100; ++it) {
    const double mid = (lo + hi) / 2;
    double mean = 0;
    for (double v : z) mean += Sigmoid(mid + v);
    mean /= kCalibrationExamples;
    (mean < click_rate ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

}  // namespace

SyntheticCtrSource::SyntheticCtrSource(const SyntheticCtrConfig& config) : config_(config) {}

absl::StatusOr<std::unique_ptr<SyntheticCtrSource>> SyntheticCtrSource::FromSpec(
    absl::string_view spec) {
  ASSIGN_OR_RETURN(SyntheticCtrConfig config, ParseSyntheticCtrSpec(spec));
  return Create(config);
}

absl::StatusOr<std::unique_ptr<SyntheticCtrSource>> SyntheticCtrSource::Create(
    const SyntheticCtrConfig& config) {
  RETURN_IF_ERROR(ValidateSyntheticCtrConfig(config));
  std::unique_ptr<SyntheticCtrSource> source(new SyntheticCtrSource(config));
  RETURN_IF_ERROR(source->Init());
  return source;
}

void SyntheticCtrSource::Hidden(int f, int64_t id, float* out) const {
  uint64_t h = HashCombine(feature_key_[f], static_cast<uint64_t>(id));
  for (int j = 0; j <= config_.dim; ++j) {
    if (j > 0 && j % 4 == 0) h = Mix64(h);
    const int bits = static_cast<int>((h >> (16 * (j % 4))) & 0xffff);
    out[j] = static_cast<float>(bits - 32768) * (1.0f / 32768.0f);
  }
}

uint64_t SyntheticCtrSource::StreamOf(int64_t global_index) const {
  return HashCombine(config_.seed ^ kExampleSalt, static_cast<uint64_t>(global_index));
}

absl::Status SyntheticCtrSource::Init() {
  RETURN_IF_ERROR(InitFeatures());
  InitHeadCache();
  InitDense();
  Calibrate();
  return absl::OkStatus();
}

absl::Status SyntheticCtrSource::InitFeatures() {
  const SyntheticCtrConfig& c = config_;
  const int num_features = static_cast<int>(c.features.size());
  schema_.num_dense = c.num_dense;
  for (int f = 0; f < num_features; ++f) {
    const SyntheticFeatureConfig& fc = c.features[f];
    schema_.features.push_back(
        CtrFeature{absl::StrCat("C", f + 1), c.hashed_ids ? 0 : fc.vocab_size, fc.hotness});
    ASSIGN_OR_RETURN(ZipfSampler zipf, ZipfSampler::Create(fc.vocab_size, c.zipf));
    zipf_.push_back(std::move(zipf));
    const uint64_t key = HashCombine(c.seed ^ kFeatureSalt, static_cast<uint64_t>(f));
    feature_key_.push_back(key);
    perm_.emplace_back(c.hashed_ids ? 0 : fc.vocab_size, Mix64(key));
  }
  return absl::OkStatus();
}

void SyntheticCtrSource::InitHeadCache() {
  const int num_features = static_cast<int>(config_.features.size());
  head_ = kHeadCache;
  const int stride = 1 + config_.dim;
  head_ids_.resize(num_features);
  head_hidden_.resize(num_features);
  for (int f = 0; f < num_features; ++f) {
    const int64_t n = std::min<int64_t>(head_, config_.features[f].vocab_size);
    head_ids_[f].resize(static_cast<size_t>(n));
    head_hidden_[f].resize(static_cast<size_t>(n) * stride);
    for (int64_t r = 0; r < n; ++r) {
      head_ids_[f][r] = perm_[f].Apply(r);
      Hidden(f, head_ids_[f][r], &head_hidden_[f][r * stride]);
    }
  }
}

void SyntheticCtrSource::InitDense() {
  log1p_table_.resize(size_t{1} << (kMaxDenseBits + 1));
  for (size_t x = 0; x < log1p_table_.size(); ++x) {
    log1p_table_[x] = CriteoDenseValue(static_cast<int64_t>(x));
  }
  for (int d = 0; d < config_.num_dense; ++d) {
    const uint64_t h = HashCombine(config_.seed ^ kDenseSalt, static_cast<uint64_t>(d));
    const int bits = 3 + static_cast<int>(h % (kMaxDenseBits - 2));
    double mean = 0;
    double var = 0;
    DenseMoments(log1p_table_, bits, &mean, &var);
    const double a = static_cast<double>(Mix64(h) >> 11) * 0x1.0p-52 - 1.0;  // [-1, 1)
    dense_bits_.push_back(bits);
    dense_center_.push_back(mean);
    dense_weight_.push_back(a / std::sqrt(var));
  }
}

void SyntheticCtrSource::Calibrate() {
  const SyntheticCtrConfig& c = config_;
  std::vector<Parts> parts(kCalibrationExamples);
  double label_uniform = 0;
  for (int k = 0; k < kCalibrationExamples; ++k) {
    parts[k] = Generate(HashCombine(c.seed ^ kCalibrationSalt, static_cast<uint64_t>(k)),
                        nullptr, nullptr, &label_uniform);
  }
  Standardize(parts, &Parts::lin, &lin_mean_, &lin_inv_std_);
  Standardize(parts, &Parts::pair, &pair_mean_, &pair_inv_std_);
  lin_coef_ = std::sqrt(1.0 - c.interaction);
  pair_coef_ = std::sqrt(c.interaction);
  std::vector<double> z(kCalibrationExamples);
  for (int k = 0; k < kCalibrationExamples; ++k) {
    bias_ = 0;
    z[k] = Logit(parts[k]);
  }
  bias_ = BisectBias(z, c.click_rate);
}

double SyntheticCtrSource::Logit(const Parts& p) const {
  return bias_ + config_.signal * (lin_coef_ * (p.lin - lin_mean_) * lin_inv_std_ +
                                   pair_coef_ * (p.pair - pair_mean_) * pair_inv_std_);
}

SyntheticCtrSource::Parts SyntheticCtrSource::Generate(uint64_t stream, float* dense_row,
                                                       CtrBatch* out,
                                                       double* label_uniform) const {
  SplitMix64 rng(stream);
  *label_uniform = rng.Uniform();
  Parts parts;
  const int num_dense = config_.num_dense;
  for (int d = 0; d < num_dense; ++d) {
    const uint64_t r = rng.Next();
    const int b = static_cast<int>(((r >> 32) * static_cast<uint64_t>(dense_bits_[d] + 1)) >> 32);
    const uint64_t x = ((uint64_t{1} << b) - 1) + (r & ((uint64_t{1} << b) - 1));
    const float value = log1p_table_[x];
    if (dense_row != nullptr) dense_row[d] = value;
    parts.lin += dense_weight_[d] * (value - dense_center_[d]);
  }
  const int dim = config_.dim;
  const int stride = 1 + dim;
  float acc[65];
  float hidden[65];
  float sum_e[64] = {0};
  double sum_sq = 0;
  const bool has_missing = config_.missing > 0;
  for (size_t f = 0; f < zipf_.size(); ++f) {
    const SyntheticFeatureConfig& fc = config_.features[f];
    int count = fc.hotness;
    if (has_missing && rng.Uniform() < config_.missing) {
      count = 0;
    } else if (fc.variable_hotness) {
      count = 1 + static_cast<int>(rng.Below(static_cast<uint32_t>(fc.hotness)));
    }
    if (count == 0) continue;
    std::fill(acc, acc + stride, 0.0f);
    const std::vector<int64_t>& head_ids = head_ids_[f];
    for (int k = 0; k < count; ++k) {
      const int64_t rank = zipf_[f].Sample(rng);
      int64_t id;
      const float* p;
      if (rank < static_cast<int64_t>(head_ids.size())) {
        id = head_ids[rank];
        p = &head_hidden_[f][rank * stride];
      } else {
        id = perm_[f].Apply(rank);
        Hidden(static_cast<int>(f), id, hidden);
        p = hidden;
      }
      if (out != nullptr) out->features[f].ids.push_back(id);
      for (int j = 0; j < stride; ++j) acc[j] += p[j];
    }
    const float inv = 1.0f / static_cast<float>(count);
    parts.lin += acc[0] * inv;
    for (int j = 0; j < dim; ++j) {
      const float e = acc[1 + j] * inv;
      sum_e[j] += e;
      sum_sq += static_cast<double>(e) * e;
    }
  }
  double norm = 0;
  for (int j = 0; j < dim; ++j) norm += static_cast<double>(sum_e[j]) * sum_e[j];
  parts.pair = (norm - sum_sq) / 2;
  return parts;
}

absl::Status SyntheticCtrSource::Read(absl::Span<const int64_t> example_indices,
                                      CtrBatch* out) const {
  RETURN_IF_ERROR(CheckExampleIndices(example_indices, config_.num_examples));
  const int n = static_cast<int>(example_indices.size());
  out->Reset(schema_, n);
  out->labels.resize(n);
  out->dense.resize(static_cast<size_t>(n) * config_.num_dense);
  for (int j = 0; j < n; ++j) {
    double u = 0;
    const Parts parts =
        Generate(StreamOf(config_.offset + example_indices[j]),
                 out->dense.data() + static_cast<size_t>(j) * config_.num_dense, out, &u);
    out->labels[j] = u < Sigmoid(Logit(parts)) ? 1.0f : 0.0f;
    for (CtrFeatureIds& ids : out->features) {
      ids.offsets.push_back(static_cast<int64_t>(ids.ids.size()));
    }
  }
  out->size = n;
  return absl::OkStatus();
}

double SyntheticCtrSource::PlantedProbability(int64_t i) const {
  double u = 0;
  return Sigmoid(Logit(Generate(StreamOf(config_.offset + i), nullptr, nullptr, &u)));
}

int64_t SyntheticCtrSource::RawDense(int64_t i, int d) const {
  SplitMix64 rng(StreamOf(config_.offset + i));
  rng.Next();  // the label's uniform
  uint64_t r = 0;
  for (int k = 0; k <= d; ++k) r = rng.Next();
  const int b = static_cast<int>(((r >> 32) * static_cast<uint64_t>(dense_bits_[d] + 1)) >> 32);
  return static_cast<int64_t>(((uint64_t{1} << b) - 1) + (r & ((uint64_t{1} << b) - 1)));
}

absl::StatusOr<PlantedMetrics> SyntheticCtrSource::ComputePlantedMetrics(int64_t begin,
                                                                         int64_t end) const {
  if (begin < 0 || end <= begin || end > config_.num_examples) {
    return absl::InvalidArgumentError(absl::StrCat("planted metrics: example range [", begin,
                                                   ", ", end, ") outside [0, ",
                                                   config_.num_examples, ")"));
  }
  const size_t n = static_cast<size_t>(end - begin);
  std::vector<double> probs(n);
  std::vector<float> probs_f(n);
  std::vector<float> labels(n);
  PlantedMetrics m;
  m.examples = static_cast<int64_t>(n);
  double sum_p = 0;
  double sum_y = 0;
  for (size_t k = 0; k < n; ++k) {
    double u = 0;
    const double p = Sigmoid(
        Logit(Generate(StreamOf(config_.offset + begin + static_cast<int64_t>(k)), nullptr,
                       nullptr, &u)));
    probs[k] = p;
    probs_f[k] = static_cast<float>(p);
    labels[k] = u < p ? 1.0f : 0.0f;
    sum_p += p;
    sum_y += labels[k];
  }
  ASSIGN_OR_RETURN(m.auc, ExactAuc(probs, labels));
  ASSIGN_OR_RETURN(m.log_loss, MeanLogLoss(probs_f, labels));
  m.click_rate = sum_y / static_cast<double>(n);
  m.mean_probability = sum_p / static_cast<double>(n);
  return m;
}

}  // namespace shardps
