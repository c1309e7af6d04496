#include "bench/model_trainer.h"

#include <chrono>
#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "client/variable_layout.h"
#include "common/status_macros.h"
#include "compute/compute_device.h"
#include "coordinator/job_preparation.h"
#include "data/batcher.h"
#include "data/dataset.h"
#include "evaluator/evaluator.h"
#include "math/initializer.h"
#include "math/optimizer.h"
#include "model/model.h"
#include "model/step_result.h"

namespace shardps {
namespace bench {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// One variable as the ps would hold it, whole: values, the optimizer's slots and its rule.
struct TrainedVariable {
  VariableInfo info;
  std::unique_ptr<Optimizer> optimizer;
  std::vector<float> values;
  std::vector<std::vector<float>> slots;
  int64_t updates = 0;  // the optimizer's 1-based step count, as a shard counts its updates
};

class ModelTrainer::Parts {
 public:
  JobSpec job;
  std::shared_ptr<const DataSource> train;
  std::optional<ComputeDevice> device;
  std::unique_ptr<Model> model;
  std::unique_ptr<ModelCompute> compute;
  std::unique_ptr<Batcher> batcher;
  std::vector<TrainedVariable> variables;
  std::vector<std::vector<float>> all_values;  // values(): refreshed when asked
  StepBuffers step;
  std::optional<ComputeDevice> eval_device;  // one thread, as the evaluator daemon's
  std::unique_ptr<Evaluator> evaluator;      // made on the first Evaluate
  std::vector<std::vector<float>> eval_values;
};

ModelTrainer::ModelTrainer(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {
  steps_per_epoch_ = parts_->batcher->NumBatches(parts_->job.batch_size());
}

ModelTrainer::~ModelTrainer() = default;

absl::StatusOr<std::unique_ptr<ModelTrainer>> ModelTrainer::Create(const JobSpec& job,
                                                                   int threads) {
  auto parts = std::make_unique<Parts>();
  parts->job = job;
  ASSIGN_OR_RETURN(parts->train, LoadDataSource(job.dataset(), job.data_dir(), Split::kTrain));
  ASSIGN_OR_RETURN(parts->model, Model::Create(job, parts->train->info()));
  parts->device = ComputeDevice::Cpu(threads);
  ASSIGN_OR_RETURN(parts->compute, parts->model->NewCompute(*parts->device));
  parts->batcher = std::make_unique<Batcher>(parts->train->info().num_examples, job.seed());
  const std::vector<VariableDef> defs = JobVariables(job, *parts->model);
  const std::vector<VariableInfo>& infos = parts->model->variables();
  for (size_t i = 0; i < infos.size(); ++i) {
    if (infos[i].dynamic) {
      return absl::InvalidArgumentError(
          absl::StrCat("model_trainer: variable \"", infos[i].name,
                       "\" is a dynamic (hashed-key) table; one process holds whole tables only"));
    }
    TrainedVariable v;
    v.info = infos[i];
    ASSIGN_OR_RETURN(v.optimizer, Optimizer::Create(defs[i].optimizer));
    v.values.resize(static_cast<size_t>(infos[i].num_elements()));
    RETURN_IF_ERROR(InitializeRows(defs[i].initializer, defs[i].name, defs[i].shape, 0,
                                   absl::MakeSpan(v.values)));
    for (int s = 0; s < v.optimizer->num_slots(); ++s) {
      v.slots.emplace_back(v.values.size(), v.optimizer->initial_slot_value(s));
    }
    parts->variables.push_back(std::move(v));
  }
  return std::unique_ptr<ModelTrainer>(new ModelTrainer(std::move(parts)));
}

int64_t ModelTrainer::total_steps() const {
  const JobSpec& job = parts_->job;
  return job.steps() > 0 ? job.steps() : steps_per_epoch_ * job.epochs();
}

int64_t ModelTrainer::ExamplesIn(int64_t steps) const {
  const int64_t n = parts_->train->info().num_examples, batch = parts_->job.batch_size();
  const int64_t epochs = steps / steps_per_epoch_, rest = steps % steps_per_epoch_;
  return epochs * n + std::min(rest * batch, n);
}

absl::StatusOr<ModelTrainer::Trained> ModelTrainer::Step(int64_t step, StepTimes* times) {
  Parts& p = *parts_;
  const double ta = times != nullptr ? Now() : 0;
  ASSIGN_OR_RETURN(std::vector<int64_t> indices,
                   p.batcher->BatchIndices(step / steps_per_epoch_, step % steps_per_epoch_,
                                           p.job.batch_size()));
  RETURN_IF_ERROR(p.model->PrepareBatch(*p.train, indices, &p.step));
  // What a worker's pull would bring: dense variables whole, a table's rows for the batch.
  for (size_t i = 0; i < p.variables.size(); ++i) {
    const TrainedVariable& v = p.variables[i];
    if (v.info.access == VariableAccess::kDense) {
      std::memcpy(p.step.values[i].data(), v.values.data(), v.values.size() * sizeof(float));
      continue;
    }
    const int64_t width = v.info.row_width();
    const std::vector<int64_t>& ids = p.step.ids[i];
    for (size_t r = 0; r < ids.size(); ++r) {
      std::memcpy(p.step.values[i].data() + r * width, v.values.data() + ids[r] * width,
                  static_cast<size_t>(width) * sizeof(float));
    }
  }
  const double tb = times != nullptr ? Now() : 0;
  StepResult result;
  RETURN_IF_ERROR(p.model->ForwardBackward(p.compute.get(), &p.step, &result));
  const double tc = times != nullptr ? Now() : 0;
  for (size_t i = 0; i < p.variables.size(); ++i) {
    TrainedVariable& v = p.variables[i];
    ++v.updates;
    if (v.info.access == VariableAccess::kDense) {
      std::vector<float*> slots;
      for (auto& s : v.slots) slots.push_back(s.data());
      v.optimizer->ApplyDense(v.updates, p.step.grads[i], v.values.data(), slots);
      continue;
    }
    // A row push: the batch's distinct ids (PrepareBatch deduplicated them), one gradient row
    // each.
    float* base = v.values.data();
    const RowBlocks params = RowBlocks::Contiguous(&base, v.info.row_width());
    std::vector<float*> slot_bases;
    for (auto& s : v.slots) slot_bases.push_back(s.data());
    std::vector<RowBlocks> slots;
    for (float*& b : slot_bases) slots.push_back(RowBlocks::Contiguous(&b, v.info.row_width()));
    v.optimizer->ApplyRows(v.updates, p.step.ids[i], p.step.grads[i].data(), params, slots);
  }
  if (times != nullptr) {
    const double td = Now();
    times->batch_s = tb - ta;
    times->compute_s = tc - tb;
    times->update_s = td - tc;
  }
  Trained trained;
  trained.loss = result.loss;
  trained.examples = p.step.batch_size;
  return trained;
}

absl::StatusOr<EvalMetrics> ModelTrainer::Evaluate() {
  RETURN_IF_ERROR(CopyForEvaluation());
  return EvaluateCopy();
}

absl::Status ModelTrainer::CopyForEvaluation() {
  Parts& p = *parts_;
  if (p.evaluator == nullptr) {
    p.eval_device = ComputeDevice::Cpu(1);
    ASSIGN_OR_RETURN(p.evaluator, Evaluator::Create(p.job, *p.eval_device));
    p.eval_values = p.evaluator->NewValues();
  }
  for (size_t i = 0; i < p.variables.size(); ++i) {
    const TrainedVariable& v = p.variables[i];
    if (v.info.access == VariableAccess::kDense) {
      p.eval_values[i] = v.values;
      continue;
    }
    const int64_t width = v.info.row_width();
    const std::vector<int64_t>& keys = p.evaluator->row_keys(i);
    for (size_t r = 0; r < keys.size(); ++r) {
      std::memcpy(p.eval_values[i].data() + r * width, v.values.data() + keys[r] * width,
                  static_cast<size_t>(width) * sizeof(float));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<EvalMetrics> ModelTrainer::EvaluateCopy() {
  Parts& p = *parts_;
  if (p.evaluator == nullptr) {
    return absl::FailedPreconditionError("model_trainer: EvaluateCopy before CopyForEvaluation");
  }
  return p.evaluator->Evaluate(p.eval_values);
}

const std::vector<std::vector<float>>& ModelTrainer::values() const {
  parts_->all_values.clear();
  for (const TrainedVariable& v : parts_->variables) parts_->all_values.push_back(v.values);
  return parts_->all_values;
}

}  // namespace bench
}  // namespace shardps
