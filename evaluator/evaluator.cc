#include "evaluator/evaluator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/error_detail.h"
#include "common/status_macros.h"

namespace shardps {

Evaluator::Evaluator(JobSpec job, ComputeBackend* backend, MlpSpec model, Dataset test)
    : job_(std::move(job)),
      backend_(backend),
      model_(std::move(model)),
      test_(std::move(test)),
      params_(Params(model_)) {
  for (const ParamInfo& p : params_)
    variable_names_.push_back(absl::StrCat(job_.name(), "/", p.name));
}

absl::StatusOr<std::unique_ptr<Evaluator>> Evaluator::Create(const JobSpec& job,
                                                             ComputeBackend* backend) {
  const std::string dir =
      job.data_dir().empty() ? std::string(kDefaultFashionMnistDir) : job.data_dir();
  absl::StatusOr<Dataset> test = LoadFashionMnist(dir, Split::kTest);
  if (!test.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("evaluator: cannot load the test set from data_dir \"", dir,
                     "\": ", test.status().message()));
  }
  absl::StatusOr<MlpSpec> model =
      ParseMlpSpec(job.model(), static_cast<int>(test->feature_dim), test->num_classes);
  if (!model.ok())
    return Annotate(model.status(), absl::StrCat("job \"", job.job_id(), "\": model"));
  return std::unique_ptr<Evaluator>(
      new Evaluator(job, backend, *std::move(model), *std::move(test)));
}

std::vector<std::vector<float>> Evaluator::NewValues() const {
  std::vector<std::vector<float>> values;
  for (const ParamInfo& p : params_) values.emplace_back(static_cast<size_t>(p.num_elements()));
  return values;
}

absl::StatusOr<EvalMetrics> Evaluator::Evaluate(
    const std::vector<std::vector<float>>& values) const {
  if (values.size() != params_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("evaluator: ", values.size(),
                                                   " parameter values for model \"", job_.model(),
                                                   "\", which has ", params_.size()));
  }
  std::vector<const float*> params;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (static_cast<int64_t>(values[i].size()) != params_[i].num_elements()) {
      return absl::InvalidArgumentError(absl::StrCat("evaluator: \"", variable_names_[i], "\" has ",
                                                     values[i].size(), " values, expected ",
                                                     params_[i].num_elements()));
    }
    params.push_back(values[i].data());
  }
  const int64_t batch = 1000;
  double loss_sum = 0;
  int64_t correct = 0, examples = 0;
  for (int64_t begin = 0; begin < test_.num_examples; begin += batch) {
    const int n = static_cast<int>(std::min(batch, test_.num_examples - begin));
    EvalResult part;
    RETURN_IF_ERROR(backend_->Evaluate(model_, params,
                                       test_.features.data() + begin * test_.feature_dim,
                                       test_.labels.data() + begin, n, &part));
    loss_sum += part.loss_sum;
    correct += part.correct;
    examples += part.num_examples;
  }
  EvalMetrics result;
  result.set_examples(examples);
  result.set_loss(examples > 0 ? loss_sum / examples : 0);
  result.set_accuracy(examples > 0 ? static_cast<double>(correct) / examples : 0);
  result.set_unix_time(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  return result;
}

}  // namespace shardps
