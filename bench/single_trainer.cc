#include "bench/single_trainer.h"

#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/status_macros.h"
#include "data/batcher.h"
#include "math/initializer.h"
#include "math/optimizer.h"
#include "model/mlp/mlp_compute.h"
#include "model/mlp/mlp_spec.h"

namespace shardps {
namespace bench {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// What the trainer computes with, kept out of its header.
class SingleTrainer::Parts {
 public:
  MlpSpec model;
  std::optional<ComputeDevice> device;  // the CPU
  std::unique_ptr<MlpCompute> backend;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<Batcher> batcher;
};

SingleTrainer::SingleTrainer(const JobSpec& job, const Dataset& data,
                             std::unique_ptr<Parts> parts)
    : data_(data), batch_size_(job.batch_size()), parts_(std::move(parts)) {}

SingleTrainer::~SingleTrainer() = default;

const ComputeDevice& SingleTrainer::device() const { return *parts_->device; }

absl::StatusOr<std::unique_ptr<SingleTrainer>> SingleTrainer::Create(const JobSpec& job,
                                                                     const Dataset& data,
                                                                     int threads) {
  auto parts = std::make_unique<Parts>();
  ASSIGN_OR_RETURN(parts->model, ParseMlpSpec(job.model(), static_cast<int>(data.feature_dim),
                                              data.num_classes));
  parts->device = ComputeDevice::Cpu(threads);
  ASSIGN_OR_RETURN(parts->backend, NewMlpCompute(*parts->device));
  ASSIGN_OR_RETURN(parts->optimizer, Optimizer::Create(job.optimizer()));
  parts->batcher = std::make_unique<Batcher>(data.num_examples, job.seed());
  auto trainer =
      std::unique_ptr<SingleTrainer>(new SingleTrainer(job, data, std::move(parts)));
  RETURN_IF_ERROR(trainer->Initialize(job));
  return trainer;
}

absl::Status SingleTrainer::Initialize(const JobSpec& job) {
  const std::vector<ParamInfo> infos = Params(parts_->model);
  const Optimizer& optimizer = *parts_->optimizer;
  slots_.resize(infos.size());
  slot_ptrs_.resize(infos.size());
  for (size_t i = 0; i < infos.size(); ++i) {
    const ParamInfo& info = infos[i];
    const size_t n = static_cast<size_t>(info.num_elements());
    params_.emplace_back(n, 0.0f);
    grads_.emplace_back(n, 0.0f);
    if (info.shape.size() == 2) {
      RETURN_IF_ERROR(InitializeRows(job.kernel_initializer(),
                                     absl::StrCat(job.name(), "/", info.name), info.shape, 0,
                                     absl::MakeSpan(params_.back())));
    }
    for (int s = 0; s < optimizer.num_slots(); ++s) {
      slots_[i].emplace_back(n, optimizer.initial_slot_value(s));
    }
  }
  for (size_t i = 0; i < infos.size(); ++i) {
    param_ptrs_.push_back(params_[i].data());
    grad_ptrs_.push_back(grads_[i].data());
    for (auto& slot : slots_[i]) slot_ptrs_[i].push_back(slot.data());
  }
  steps_per_epoch_ = parts_->batcher->NumBatches(batch_size_);
  features_.resize(static_cast<size_t>(batch_size_ * data_.feature_dim));
  labels_.resize(static_cast<size_t>(batch_size_));
  return absl::OkStatus();
}

absl::StatusOr<SingleTrainer::Trained> SingleTrainer::Step(int64_t step, StepTimes* times) {
  const double ta = times != nullptr ? Now() : 0;
  ASSIGN_OR_RETURN(std::vector<int64_t> indices,
                   parts_->batcher->BatchIndices(step / steps_per_epoch_,
                                                 step % steps_per_epoch_, batch_size_));
  const int batch = static_cast<int>(indices.size());
  RETURN_IF_ERROR(GatherBatch(data_, indices, features_.data(), labels_.data()));
  const double tb = times != nullptr ? Now() : 0;
  Trained trained;
  trained.examples = batch;
  RETURN_IF_ERROR(parts_->backend->ForwardBackward(parts_->model, param_ptrs_, features_.data(),
                                                   labels_.data(), batch, &trained.result,
                                                   grad_ptrs_));
  const double tc = times != nullptr ? Now() : 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    parts_->optimizer->ApplyDense(step + 1, grads_[i], params_[i].data(), slot_ptrs_[i]);
  }
  if (times != nullptr) {
    const double td = Now();
    times->gather_s = tb - ta;
    times->compute_s = tc - tb;
    times->update_s = td - tc;
  }
  return trained;
}

}  // namespace bench
}  // namespace shardps
