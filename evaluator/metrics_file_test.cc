#include "evaluator/metrics_file.h"

#include <map>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace shardps {
namespace {

EvalRecord Record(double auc) {
  EvalRecord record;
  record.job_id = "ctr-1";
  record.metrics.set_steps_done(4200);
  record.metrics.set_step(4190);
  record.metrics.set_loss(0.4375);
  record.metrics.set_accuracy(0.8125);
  record.metrics.set_auc(auc);
  record.metrics.set_examples(10000);
  return record;
}

std::map<std::string, double> ByTag(const std::vector<Scalar>& scalars) {
  std::map<std::string, double> by_tag;
  for (const Scalar& s : scalars) by_tag[s.tag] = s.value;
  return by_tag;
}

// TensorBoard's series carry the values of the metrics file's line, under its names.
TEST(MetricsFileTest, EvalScalarsAreTheLinesValues) {
  const EvalRecord click = Record(0.75);
  const nlohmann::json line = nlohmann::json::parse(EvalJsonLine(click));
  EXPECT_EQ(line["step"], 4200);
  EXPECT_EQ(ByTag(EvalScalars(click)),
            (std::map<std::string, double>{{"eval/accuracy", line["accuracy"]},
                                           {"eval/auc", line["auc"]},
                                           {"eval/loss", line["loss"]}}));
  // A model without AUC has no "auc" in its line and no eval/auc series.
  const EvalRecord mlp = Record(0);
  EXPECT_FALSE(nlohmann::json::parse(EvalJsonLine(mlp)).contains("auc"));
  EXPECT_EQ(ByTag(EvalScalars(mlp)),
            (std::map<std::string, double>{{"eval/accuracy", 0.8125}, {"eval/loss", 0.4375}}));
}

}  // namespace
}  // namespace shardps
