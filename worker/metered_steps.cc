// NewMeteredStepExecutor: see metered_steps.h.
#include "worker/metered_steps.h"

#include <utility>

namespace shardps {
namespace {

class MeteredSteps : public StepExecutor {
 public:
  MeteredSteps(std::unique_ptr<StepExecutor> steps, metrics::Counter* ok,
               metrics::Counter* failed, metrics::Counter* examples, metrics::Histogram* pull,
               metrics::Histogram* compute, metrics::Histogram* push, metrics::Gauge* loss)
      : steps_(std::move(steps)),
        ok_(ok),
        failed_(failed),
        examples_(examples),
        pull_(pull),
        compute_(compute),
        push_(push),
        loss_(loss) {}

  absl::StatusOr<StartJobResponse> StartJob(const StartJobRequest& request) override {
    return steps_->StartJob(request);
  }
  absl::StatusOr<StepResponse> RunStep(const StepRequest& request) override {
    absl::StatusOr<StepResponse> step = steps_->RunStep(request);
    if (!step.ok()) {
      failed_->Add();
      return step;
    }
    ok_->Add();
    examples_->Add(static_cast<uint64_t>(step->examples()));
    pull_->Observe(step->pull_ms() / 1000);
    compute_->Observe(step->compute_ms() / 1000);
    push_->Observe(step->push_ms() / 1000);
    loss_->Set(step->loss());
    return step;
  }
  WorkerStatusResponse Status() override { return steps_->Status(); }
  std::string BackendName() override { return steps_->BackendName(); }

 private:
  const std::unique_ptr<StepExecutor> steps_;
  metrics::Counter* const ok_;
  metrics::Counter* const failed_;
  metrics::Counter* const examples_;
  metrics::Histogram* const pull_;
  metrics::Histogram* const compute_;
  metrics::Histogram* const push_;
  metrics::Gauge* const loss_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StepExecutor>> NewMeteredStepExecutor(
    std::unique_ptr<StepExecutor> steps, metrics::Registry* registry) {
  auto outcomes =
      registry->AddCounter("shardps_worker_steps_total", "Steps run, by outcome.", {"outcome"});
  auto examples = registry->AddCounter("shardps_worker_examples_total",
                                       "Training examples of the steps run (rate: examples/s).",
                                       {});
  auto phases = registry->AddHistogram("shardps_worker_step_phase_seconds",
                                       "Time of each successful step's pull, compute and push.",
                                       {"phase"}, metrics::LatencyBuckets());
  auto loss = registry->AddGauge("shardps_worker_loss", "The last step's mean loss.", {});
  for (const absl::Status& status :
       {outcomes.status(), examples.status(), phases.status(), loss.status()}) {
    if (!status.ok()) return status;
  }
  return std::unique_ptr<StepExecutor>(new MeteredSteps(
      std::move(steps), outcomes->With({"ok"}), outcomes->With({"failed"}), examples->With({}),
      phases->With({"pull"}), phases->With({"compute"}), phases->With({"push"}),
      loss->With({})));
}

}  // namespace shardps
