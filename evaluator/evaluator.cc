#include "evaluator/evaluator.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/auc.h"
#include "common/error_detail.h"
#include "common/status_macros.h"

namespace shardps {

Evaluator::Evaluator(JobSpec job, std::unique_ptr<ModelCompute> compute,
                     std::unique_ptr<Model> model, std::shared_ptr<const DataSource> test)
    : job_(std::move(job)),
      compute_(std::move(compute)),
      model_(std::move(model)),
      test_(std::move(test)) {
  for (const VariableInfo& v : model_->variables()) {
    variable_names_.push_back(absl::StrCat(job_.name(), "/", v.name));
  }
  row_keys_.resize(model_->variables().size());
}

namespace {

constexpr int64_t kEvalBatch = 1000;

// Calls fn(step) for every batch of the test split, in order.
template <typename Fn>
absl::Status ForEachTestBatch(const Model& model, const DataSource& test, Fn fn) {
  const int64_t num_examples = test.info().num_examples;
  StepBuffers step;
  std::vector<int64_t> indices;
  for (int64_t begin = 0; begin < num_examples; begin += kEvalBatch) {
    indices.resize(static_cast<size_t>(std::min(kEvalBatch, num_examples - begin)));
    std::iota(indices.begin(), indices.end(), begin);
    RETURN_IF_ERROR(model.PrepareBatch(test, indices, &step));
    RETURN_IF_ERROR(fn(begin, step));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Evaluator::CollectRowKeys() {
  const std::vector<VariableInfo>& vars = params();
  bool any = false;
  for (const VariableInfo& v : vars) any |= v.access == VariableAccess::kRows;
  if (!any) return absl::OkStatus();
  RETURN_IF_ERROR(ForEachTestBatch(*model_, *test_, [&](int64_t, StepBuffers& step) {
    for (size_t i = 0; i < vars.size(); ++i) {
      if (vars[i].access != VariableAccess::kRows) continue;
      if (!vars[i].dynamic) {
        const int64_t rows = vars[i].shape.empty() ? 0 : vars[i].shape[0];
        for (int64_t id : step.ids[i]) {
          if (id < 0 || id >= rows) {
            return absl::InvalidArgumentError(absl::StrCat("evaluator: \"", variable_names_[i],
                                                           "\": id ", id, " of the test split is "
                                                           "outside [0, ", rows, ")"));
          }
        }
      }
      row_keys_[i].insert(row_keys_[i].end(), step.ids[i].begin(), step.ids[i].end());
      // Keep the vector near its distinct size: a large split repeats hot ids many times.
      if (row_keys_[i].size() > (size_t{1} << 22)) {
        std::sort(row_keys_[i].begin(), row_keys_[i].end());
        row_keys_[i].erase(std::unique(row_keys_[i].begin(), row_keys_[i].end()),
                           row_keys_[i].end());
      }
    }
    return absl::OkStatus();
  }));
  for (std::vector<int64_t>& keys : row_keys_) {
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Evaluator>> Evaluator::Create(const JobSpec& job,
                                                             const ComputeDevice& device,
                                                             const DataRoot& data_root) {
  RETURN_IF_ERROR(Annotate(CheckDatasetName(job.dataset()),
                           absl::StrCat("job \"", job.job_id(), "\"")));
  std::string data_dir = job.data_dir();
  if (!data_dir.empty()) {
    ASSIGN_OR_RETURN(data_dir, data_root.ResolveInput(data_dir, "evaluator: the job's data_dir"));
  }
  absl::StatusOr<std::shared_ptr<const DataSource>> test =
      LoadDataSource(job.dataset(), data_dir, Split::kTest);
  if (!test.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("evaluator: cannot load the test set from data_dir \"",
                     DatasetDir(job.dataset(), job.data_dir()),
                     "\": ", test.status().message()));
  }
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(job, (*test)->info());
  if (!model.ok()) return Annotate(model.status(), absl::StrCat("job \"", job.job_id(), "\""));
  ASSIGN_OR_RETURN(std::unique_ptr<ModelCompute> compute, (*model)->NewCompute(device));
  std::unique_ptr<Evaluator> evaluator(
      new Evaluator(job, std::move(compute), *std::move(model), *std::move(test)));
  RETURN_IF_ERROR(evaluator->CollectRowKeys());
  return evaluator;
}

size_t Evaluator::ValuesSize(size_t i) const {
  const VariableInfo& v = params()[i];
  return static_cast<size_t>(v.access == VariableAccess::kRows
                                 ? static_cast<int64_t>(row_keys_[i].size()) * v.row_width()
                                 : v.num_elements());
}

std::vector<std::vector<float>> Evaluator::NewValues() const {
  std::vector<std::vector<float>> values;
  for (size_t i = 0; i < params().size(); ++i) values.emplace_back(ValuesSize(i));
  return values;
}

absl::StatusOr<EvalMetrics> Evaluator::Evaluate(
    const std::vector<std::vector<float>>& values) const {
  const std::vector<VariableInfo>& vars = params();
  if (values.size() != vars.size()) {
    return absl::InvalidArgumentError(absl::StrCat("evaluator: ", values.size(),
                                                   " parameter values for model \"", job_.model(),
                                                   "\", which has ", vars.size()));
  }
  for (size_t i = 0; i < vars.size(); ++i) {
    if (values[i].size() != ValuesSize(i)) {
      return absl::InvalidArgumentError(absl::StrCat("evaluator: \"", variable_names_[i], "\" has ",
                                                     values[i].size(), " values, expected ",
                                                     ValuesSize(i)));
    }
  }
  // Every test example once, in order, in batches of 1000.
  double loss_sum = 0;
  int64_t correct = 0, examples = 0;
  BatchEval part;
  std::vector<float> scores, labels;  // click models: the whole split's, for the AUC
  RETURN_IF_ERROR(ForEachTestBatch(*model_, *test_, [&](int64_t begin, StepBuffers& step)
                                                        -> absl::Status {
    for (size_t i = 0; i < vars.size(); ++i) {
      if (vars[i].access == VariableAccess::kDense) {
        if (begin == 0) step.values[i] = values[i];
        continue;
      }
      const int64_t width = vars[i].row_width();
      // The batch's rows, from the rows of the split's ids.
      const std::vector<int64_t>& keys = row_keys_[i];
      for (size_t r = 0; r < step.ids[i].size(); ++r) {
        const auto it = std::lower_bound(keys.begin(), keys.end(), step.ids[i][r]);
        if (it == keys.end() || *it != step.ids[i][r]) {
          return absl::InternalError(absl::StrCat("evaluator: \"", variable_names_[i],
                                                  "\": id ", step.ids[i][r],
                                                  " was not collected from the test split"));
        }
        std::memcpy(step.values[i].data() + r * width,
                    values[i].data() + (it - keys.begin()) * width,
                    static_cast<size_t>(width) * sizeof(float));
      }
    }
    RETURN_IF_ERROR(model_->Evaluate(compute_.get(), step, &part));
    loss_sum += part.totals.loss_sum;
    correct += part.totals.correct;
    examples += part.totals.num_examples;
    scores.insert(scores.end(), part.scores.begin(), part.scores.end());
    labels.insert(labels.end(), part.labels.begin(), part.labels.end());
    return absl::OkStatus();
  }));
  EvalMetrics result;
  result.set_examples(examples);
  result.set_loss(examples > 0 ? loss_sum / examples : 0);
  result.set_accuracy(examples > 0 ? static_cast<double>(correct) / examples : 0);
  result.set_unix_time(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  if (!scores.empty()) {
    absl::StatusOr<double> auc = ExactAuc(absl::MakeConstSpan(scores), labels);
    // A test split of one class has no AUC: the metric is left out, not made up.
    if (auc.ok()) result.set_auc(*auc);
    result.set_auc_ceiling(test_->info().ceiling_auc);
  }
  return result;
}

}  // namespace shardps
