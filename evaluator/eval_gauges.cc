// EvalGauges: see eval_gauges.h.
#include "evaluator/eval_gauges.h"

namespace shardps {

absl::StatusOr<std::unique_ptr<EvalGauges>> EvalGauges::Create(metrics::Registry* registry) {
  std::unique_ptr<EvalGauges> gauges(new EvalGauges());
  struct GaugeName {
    const char* name;
    const char* help;
    metrics::Gauge** target;
  };
  for (const GaugeName& g :
       {GaugeName{"shardps_evaluator_accuracy", "Accuracy of the last evaluation.",
                  &gauges->accuracy_},
        GaugeName{"shardps_evaluator_loss", "Loss of the last evaluation.", &gauges->loss_},
        GaugeName{"shardps_evaluator_auc",
                  "ROC AUC of the last evaluation (click models; 0 for others).", &gauges->auc_},
        GaugeName{"shardps_evaluator_evaluated_step",
                  "Parameter version the last evaluation read.", &gauges->step_}}) {
    auto family = registry->AddGauge(g.name, g.help, {});
    if (!family.ok()) return family.status();
    *g.target = family->With({});
  }
  auto evaluations =
      registry->AddCounter("shardps_evaluator_evaluations_total", "Evaluations done.", {});
  if (!evaluations.ok()) return evaluations.status();
  gauges->evaluations_ = evaluations->With({});
  auto examples = registry->AddCounter("shardps_evaluator_examples_total",
                                       "Held-out examples evaluated.", {});
  if (!examples.ok()) return examples.status();
  gauges->examples_ = examples->With({});
  return gauges;
}

void EvalGauges::Record(const EvalRecord& record) {
  accuracy_->Set(record.metrics.accuracy());
  loss_->Set(record.metrics.loss());
  auc_->Set(record.metrics.auc());
  step_->Set(static_cast<double>(record.metrics.step()));
  evaluations_->Add();
  examples_->Add(static_cast<uint64_t>(record.metrics.examples()));
}

}  // namespace shardps
