#include "evaluator/evaluator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace shardps {

Evaluator::Evaluator(JobSpec job, PsClient* ps, ComputeBackend* backend, ModelSpec model,
                     Dataset test)
    : job_(std::move(job)),
      ps_(ps),
      backend_(backend),
      model_(std::move(model)),
      test_(std::move(test)),
      params_(Params(model_)) {
  for (const ParamInfo& p : params_) values_.emplace_back(p.num_elements());
}

absl::StatusOr<std::unique_ptr<Evaluator>> Evaluator::Create(const JobSpec& job, PsClient* ps,
                                                             ComputeBackend* backend) {
  absl::StatusOr<Dataset> test = LoadFashionMnist(job.data_dir(), Split::kTest);
  if (!test.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("evaluator: cannot load the test set: ", test.status().message()));
  }
  ASSIGN_OR_RETURN(ModelSpec model,
                   ParseModelSpec(job.model(), test->feature_dim, test->num_classes));
  RETURN_IF_ERROR(ps->Discover());
  for (const ParamInfo& p : Params(model)) {
    std::string name = absl::StrCat(job.name(), "/", p.name);
    absl::StatusOr<VariableLayout> layout = ps->GetLayout(name);
    if (!layout.ok() || layout->shape != p.shape) {
      return absl::FailedPreconditionError(
          absl::StrCat("evaluator: variable \"", name, "\" is missing on the ps or has another shape"));
    }
  }
  return std::unique_ptr<Evaluator>(
      new Evaluator(job, ps, backend, std::move(model), std::move(*test)));
}

absl::StatusOr<EvalMetrics> Evaluator::Evaluate(int max_attempts, bool* consistent) {
  std::vector<PsClient::PullTarget> targets;
  for (size_t i = 0; i < params_.size(); ++i) {
    targets.push_back({absl::StrCat(job_.name(), "/", params_[i].name),
                       absl::MakeSpan(values_[i])});
  }
  PullVersions versions;
  bool ok = false;
  for (int attempt = 0; attempt < std::max(1, max_attempts); ++attempt) {
    RETURN_IF_ERROR(ps_->PullMany(targets, {}, &versions));
    if (versions.min_version == versions.max_version) {
      ok = true;
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (consistent != nullptr) *consistent = ok;
  std::vector<const float*> params;
  for (const auto& v : values_) params.push_back(v.data());
  const int64_t batch = 1000;
  double loss_sum = 0;
  int64_t correct = 0, examples = 0;
  for (int64_t begin = 0; begin < test_.num_examples; begin += batch) {
    int n = static_cast<int>(std::min(batch, test_.num_examples - begin));
    EvalResult part;
    RETURN_IF_ERROR(backend_->Evaluate(model_, params,
                                       test_.features.data() + begin * test_.feature_dim,
                                       test_.labels.data() + begin, n, &part));
    loss_sum += part.loss_sum;
    correct += part.correct;
    examples += part.num_examples;
  }
  EvalMetrics result;
  result.set_step(versions.min_version);
  result.set_examples(examples);
  result.set_loss(examples > 0 ? loss_sum / examples : 0);
  result.set_accuracy(examples > 0 ? static_cast<double>(correct) / examples : 0);
  result.set_unix_time(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  return result;
}

std::string EvalJsonLine(const std::string& job_id, const EvalMetrics& result, int64_t steps_done,
                         bool consistent, bool final) {
  return absl::StrFormat(
      "{\"job_id\": \"%s\", \"step\": %d, \"version\": %d, \"time\": %.3f, \"loss\": %.6f, "
      "\"accuracy\": %.6f, \"examples\": %d, \"consistent\": %s, \"final\": %s}",
      job_id, steps_done, result.step(), result.unix_time(), result.loss(), result.accuracy(),
      result.examples(), consistent ? "true" : "false", final ? "true" : "false");
}

}  // namespace shardps
