#include "data/ctr/ctr_batch.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"

namespace shardps {

bool operator==(const CtrFeature& a, const CtrFeature& b) {
  return a.name == b.name && a.vocab_size == b.vocab_size && a.max_hotness == b.max_hotness;
}

bool operator==(const CtrSchema& a, const CtrSchema& b) {
  return a.num_dense == b.num_dense && a.features == b.features;
}

bool operator==(const CtrFeatureIds& a, const CtrFeatureIds& b) {
  return a.offsets == b.offsets && a.ids == b.ids;
}

bool operator==(const CtrBatch& a, const CtrBatch& b) {
  return a.size == b.size && a.dense == b.dense && a.labels == b.labels &&
         a.features == b.features;
}

absl::Status ValidateSchema(const CtrSchema& schema) {
  if (schema.num_dense < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("schema: num_dense must be >= 0, got ", schema.num_dense));
  }
  std::set<std::string> names;
  for (size_t f = 0; f < schema.features.size(); ++f) {
    const CtrFeature& feature = schema.features[f];
    if (feature.name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("schema: feature ", f, " has no name"));
    }
    if (!names.insert(feature.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("schema: duplicate feature name \"", feature.name, "\""));
    }
    if (feature.vocab_size < 0) {
      return absl::InvalidArgumentError(absl::StrCat("schema: feature ", feature.name,
                                                     ": vocab_size must be >= 0, got ",
                                                     feature.vocab_size));
    }
    if (feature.max_hotness < 1) {
      return absl::InvalidArgumentError(absl::StrCat("schema: feature ", feature.name,
                                                     ": max_hotness must be >= 1, got ",
                                                     feature.max_hotness));
    }
  }
  return absl::OkStatus();
}

namespace {
constexpr int kReservedHotness = 64;
}  // namespace

void CtrBatch::Reset(const CtrSchema& schema, int capacity) {
  size = 0;
  dense.clear();
  labels.clear();
  dense.reserve(static_cast<size_t>(capacity) * schema.num_dense);
  labels.reserve(capacity);
  features.resize(schema.features.size());
  for (size_t f = 0; f < features.size(); ++f) {
    CtrFeatureIds& ids = features[f];
    ids.offsets.clear();
    ids.offsets.reserve(static_cast<size_t>(capacity) + 1);
    ids.offsets.push_back(0);
    ids.ids.clear();
    // max_hotness bounds an example's ids, it does not size them (a file's schema may say
    // 2^31 - 1): reserve for a few ids an example; more grow as they come.
    const int hotness = std::min(schema.features[f].max_hotness, kReservedHotness);
    ids.ids.reserve(static_cast<size_t>(capacity) * static_cast<size_t>(hotness));
  }
}

void CtrBatch::BeginExample(float label, const float* dense_row, int num_dense) {
  labels.push_back(label);
  dense.insert(dense.end(), dense_row, dense_row + num_dense);
}

void CtrBatch::EndExample() {
  ++size;
  for (CtrFeatureIds& ids : features) {
    ids.offsets.push_back(static_cast<int64_t>(ids.ids.size()));
  }
}

absl::Status ValidateBatch(const CtrSchema& schema, const CtrBatch& batch) {
  if (batch.size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("batch: negative size ", batch.size));
  }
  const size_t n = static_cast<size_t>(batch.size);
  if (batch.labels.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("batch: ", batch.labels.size(),
                                                   " labels for ", n, " examples"));
  }
  if (batch.dense.size() != n * schema.num_dense) {
    return absl::InvalidArgumentError(absl::StrCat("batch: ", batch.dense.size(),
                                                   " dense values, expected ", n, " x ",
                                                   schema.num_dense));
  }
  if (batch.features.size() != schema.features.size()) {
    return absl::InvalidArgumentError(absl::StrCat("batch: ", batch.features.size(),
                                                   " features, schema has ",
                                                   schema.features.size()));
  }
  for (size_t j = 0; j < n; ++j) {
    if (batch.labels[j] != 0.0f && batch.labels[j] != 1.0f) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch: example ", j, ": label ", batch.labels[j], " is not 0 or 1"));
    }
  }
  for (size_t k = 0; k < batch.dense.size(); ++k) {
    if (!std::isfinite(batch.dense[k])) {
      return absl::InvalidArgumentError(absl::StrCat("batch: example ", k / schema.num_dense,
                                                     ": dense value ", k % schema.num_dense,
                                                     " is not finite"));
    }
  }
  for (size_t f = 0; f < schema.features.size(); ++f) {
    const CtrFeature& feature = schema.features[f];
    const CtrFeatureIds& ids = batch.features[f];
    if (ids.offsets.size() != n + 1 || ids.offsets[0] != 0 ||
        ids.offsets[n] != static_cast<int64_t>(ids.ids.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch: feature ", feature.name, ": offsets must have ", n + 1,
                       " entries from 0 to the id count ", ids.ids.size()));
    }
    for (size_t j = 0; j < n; ++j) {
      const int64_t count = ids.offsets[j + 1] - ids.offsets[j];
      if (count < 0 || count > feature.max_hotness) {
        return absl::InvalidArgumentError(
            absl::StrCat("batch: feature ", feature.name, ": example ", j, " has ", count,
                         " ids, max_hotness is ", feature.max_hotness));
      }
    }
    if (feature.vocab_size > 0) {
      for (size_t k = 0; k < ids.ids.size(); ++k) {
        if (ids.ids[k] < 0 || ids.ids[k] >= feature.vocab_size) {
          return absl::InvalidArgumentError(
              absl::StrCat("batch: feature ", feature.name, ": id ", ids.ids[k],
                           " outside [0, ", feature.vocab_size, ")"));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckExampleIndices(absl::Span<const int64_t> example_indices,
                                 int64_t num_examples) {
  for (size_t k = 0; k < example_indices.size(); ++k) {
    const int64_t i = example_indices[k];
    if (i < 0 || i >= num_examples) {
      return absl::InvalidArgumentError(absl::StrCat("example index ", i, " (position ", k,
                                                     ") outside [0, ", num_examples, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadRange(const CtrSource& source, int64_t begin, int64_t end, CtrBatch* out) {
  if (begin < 0 || end < begin || end > source.num_examples()) {
    return absl::InvalidArgumentError(absl::StrCat("example range [", begin, ", ", end,
                                                   ") outside [0, ", source.num_examples(),
                                                   ")"));
  }
  std::vector<int64_t> indices(static_cast<size_t>(end - begin));
  for (size_t k = 0; k < indices.size(); ++k) indices[k] = begin + static_cast<int64_t>(k);
  return source.Read(indices, out);
}

}  // namespace shardps
