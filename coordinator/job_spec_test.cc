#include "coordinator/job_spec.h"

#include <dirent.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kFullJob[] = R"({
  "name": "fashion-mlp", "model": "mlp:256,128", "dataset": "fashion_mnist",
  "data_dir": "/data/fm",
  "batch_size": 64, "epochs": 10, "steps": 0,
  "optimizer": {"type": "adam", "learning_rate": 0.002, "beta1": 0.8, "beta2": 0.99,
                "epsilon": 1e-8, "momentum": 0.5, "nesterov": true,
                "initial_accumulator_value": 0.2},
  "mode": "sync", "staleness": 3, "num_replicas": 0,
  "partitioner": "fixed:2", "placement": "by_bytes", "seed": 7,
  "kernel_initializer": {"type": "random_normal", "mean": 0.5, "stddev": 0.1},
  "eval_every_steps": 200, "step_timeout_ms": 30000, "steps_in_flight": 2, "backend": "cpu"
})";

// A minimal job with one field replaced or added: `extra` is `"key": value`.
std::string JobWith(const std::string& extra) {
  return absl::StrCat(R"({"model": "mlp:32", )", extra, "}");
}

// Parses `json`, expecting INVALID_ARGUMENT; returns the message.
std::string ErrorOf(const std::string& json, int num_workers = 2) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(json, num_workers);
  EXPECT_FALSE(spec.ok()) << json;
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << spec.status();
  EXPECT_THAT(std::string(spec.status().message()), Not(HasSubstr("\n")));
  EXPECT_TRUE(absl::StartsWith(spec.status().message(), "job: ")) << spec.status();
  return std::string(spec.status().message());
}

TEST(JobSpecTest, ParsesFullFile) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(kFullJob, 3);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->job_id(), "");
  EXPECT_EQ(spec->name(), "fashion-mlp");
  EXPECT_EQ(spec->model(), "mlp:256,128");
  EXPECT_EQ(spec->dataset(), "fashion_mnist");
  EXPECT_EQ(spec->data_dir(), "/data/fm");
  EXPECT_EQ(spec->batch_size(), 64);
  EXPECT_EQ(spec->epochs(), 10);
  EXPECT_EQ(spec->steps(), 0);
  EXPECT_EQ(spec->optimizer().type(), OptimizerSpec::ADAM);
  EXPECT_DOUBLE_EQ(spec->optimizer().learning_rate(), 0.002);
  EXPECT_DOUBLE_EQ(spec->optimizer().beta1(), 0.8);
  EXPECT_DOUBLE_EQ(spec->optimizer().beta2(), 0.99);
  EXPECT_DOUBLE_EQ(spec->optimizer().epsilon(), 1e-8);
  EXPECT_DOUBLE_EQ(spec->optimizer().momentum(), 0.5);
  EXPECT_TRUE(spec->optimizer().nesterov());
  EXPECT_DOUBLE_EQ(spec->optimizer().initial_accumulator_value(), 0.2);
  EXPECT_EQ(spec->mode(), JobSpec::SYNC);
  EXPECT_EQ(spec->staleness(), 0);     // only kept for stale
  EXPECT_EQ(spec->num_replicas(), 3);  // 0: one per worker
  EXPECT_EQ(spec->partitioner(), "fixed:2");
  EXPECT_EQ(spec->placement(), "by_bytes");
  EXPECT_EQ(spec->seed(), 7u);
  EXPECT_EQ(spec->kernel_initializer().type(), InitializerSpec::RANDOM_NORMAL);
  EXPECT_DOUBLE_EQ(spec->kernel_initializer().mean(), 0.5);
  EXPECT_DOUBLE_EQ(spec->kernel_initializer().stddev(), 0.1);
  EXPECT_EQ(spec->kernel_initializer().seed(), 7u);  // the job's seed
  EXPECT_EQ(spec->eval_every_steps(), 200);
  EXPECT_EQ(spec->step_timeout_ms(), 30000);
  EXPECT_EQ(spec->steps_in_flight(), 2);  // given, although sync defaults to 1
  EXPECT_EQ(spec->backend(), "cpu");
}

TEST(JobSpecTest, ParsesTheDocumentedExample) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(R"({"name": "fashion-mlp", "model": "mlp:256,128",
 "dataset": "fashion_mnist", "data_dir": "/usr/share/datasets/fashion-mnist",
 "batch_size": 128, "epochs": 10, "steps": 0,
 "optimizer": {"type": "adam", "learning_rate": 0.001, "beta1": 0.9, "beta2": 0.999,
   "epsilon": 1e-7, "momentum": 0.9, "nesterov": false, "initial_accumulator_value": 0.1},
 "mode": "sync", "staleness": 2, "num_replicas": 0,
 "partitioner": "min_size:262144:4", "placement": "by_bytes", "seed": 42,
 "kernel_initializer": {"type": "glorot_uniform"}, "eval_every_steps": 200,
 "step_timeout_ms": 60000, "backend": "auto"})",
                                              2);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->epochs(), 10);
  EXPECT_EQ(spec->num_replicas(), 2);
  EXPECT_EQ(spec->placement(), "by_bytes");
}

TEST(JobSpecTest, FillsDefaults) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(R"({"model": "softmax"})", 4);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "job");
  EXPECT_EQ(spec->model(), "softmax");
  EXPECT_EQ(spec->dataset(), "fashion_mnist");
  EXPECT_EQ(spec->data_dir(), "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(spec->batch_size(), 128);
  EXPECT_EQ(spec->epochs(), 1);
  EXPECT_EQ(spec->steps(), 0);
  EXPECT_EQ(spec->optimizer().type(), OptimizerSpec::ADAM);
  EXPECT_DOUBLE_EQ(spec->optimizer().learning_rate(), 0.001);
  EXPECT_DOUBLE_EQ(spec->optimizer().beta1(), 0.9);
  EXPECT_DOUBLE_EQ(spec->optimizer().beta2(), 0.999);
  EXPECT_DOUBLE_EQ(spec->optimizer().epsilon(), 1e-7);
  EXPECT_DOUBLE_EQ(spec->optimizer().initial_accumulator_value(), 0.1);
  EXPECT_DOUBLE_EQ(spec->optimizer().momentum(), 0.0);
  EXPECT_FALSE(spec->optimizer().nesterov());
  EXPECT_EQ(spec->mode(), JobSpec::ASYNC);
  EXPECT_EQ(spec->staleness(), 0);
  EXPECT_EQ(spec->num_replicas(), 0);
  EXPECT_EQ(spec->partitioner(), "min_size:262144:4");
  EXPECT_EQ(spec->placement(), "round_robin");
  EXPECT_EQ(spec->seed(), 42u);
  EXPECT_EQ(spec->kernel_initializer().type(), InitializerSpec::GLOROT_UNIFORM);
  EXPECT_EQ(spec->kernel_initializer().seed(), 42u);
  EXPECT_EQ(spec->eval_every_steps(), 0);
  EXPECT_EQ(spec->step_timeout_ms(), 60000);
  EXPECT_EQ(spec->steps_in_flight(), 1);  // async with 2 workers
  EXPECT_EQ(spec->backend(), "auto");
}

TEST(JobSpecTest, ModeDefaults) {
  absl::StatusOr<JobSpec> stale = ParseJobSpec(JobWith(R"("mode": "stale")"), 2);
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_EQ(stale->mode(), JobSpec::STALE);
  EXPECT_EQ(stale->staleness(), 2);
  EXPECT_EQ(stale->num_replicas(), 0);
  EXPECT_EQ(stale->steps_in_flight(), 1);  // 2 workers

  absl::StatusOr<JobSpec> stale0 = ParseJobSpec(JobWith(R"("mode": "stale", "staleness": 0)"), 2);
  ASSERT_TRUE(stale0.ok()) << stale0.status();
  EXPECT_EQ(stale0->staleness(), 0);

  absl::StatusOr<JobSpec> sync = ParseJobSpec(JobWith(R"("mode": "sync")"), 5);
  ASSERT_TRUE(sync.ok()) << sync.status();
  EXPECT_EQ(sync->num_replicas(), 5);
  EXPECT_EQ(sync->steps_in_flight(), 1);

  absl::StatusOr<JobSpec> sync_given =
      ParseJobSpec(JobWith(R"("mode": "sync", "num_replicas": 2)"), 5);
  ASSERT_TRUE(sync_given.ok()) << sync_given.status();
  EXPECT_EQ(sync_given->num_replicas(), 2);

  // A cluster without workers yet still gets a usable replica count.
  absl::StatusOr<JobSpec> no_workers = ParseJobSpec(JobWith(R"("mode": "sync")"), 0);
  ASSERT_TRUE(no_workers.ok()) << no_workers.status();
  EXPECT_EQ(no_workers->num_replicas(), 1);
}

TEST(JobSpecTest, StepsInFlight) {
  for (const auto& [json, want] : std::vector<std::pair<std::string, int>>{
           {JobWith(R"("steps_in_flight": 1)"), 1},
           {JobWith(R"("steps_in_flight": 0)"), 1},
           {JobWith(R"("steps_in_flight": null)"), 1},
           {JobWith(R"("steps_in_flight": 2)"), 2},
           {JobWith(R"("mode": "stale", "staleness": 0, "steps_in_flight": 0)"), 1},
           {JobWith(R"("mode": "sync", "steps_in_flight": 0)"), 1},
           {JobWith(R"("mode": "sync", "steps_in_flight": 2)"), 2}}) {
    absl::StatusOr<JobSpec> spec = ParseJobSpec(json, 2);
    ASSERT_TRUE(spec.ok()) << spec.status() << " in " << json;
    EXPECT_EQ(spec->steps_in_flight(), want) << json;
    EXPECT_EQ(StepsInFlight(*spec), want) << json;
  }
  // One worker (or an unknown number): 2 in async and stale mode, where the second step
  // computes with the worker's own last update.
  for (int workers : {0, 1}) {
    for (const auto& [json, want] : std::vector<std::pair<std::string, int>>{
             {JobWith(R"("mode": "async")"), 2},
             {JobWith(R"("mode": "stale")"), 2},
             {JobWith(R"("mode": "sync")"), 1},
             {JobWith(R"("mode": "async", "steps_in_flight": 1)"), 1}}) {
      absl::StatusOr<JobSpec> spec = ParseJobSpec(json, workers);
      ASSERT_TRUE(spec.ok()) << spec.status() << " in " << json;
      EXPECT_EQ(spec->steps_in_flight(), want) << json << " with " << workers << " workers";
    }
  }
  EXPECT_EQ(DefaultStepsInFlight(JobSpec::ASYNC, 8), 1);
  EXPECT_EQ(DefaultStepsInFlight(JobSpec::ASYNC, 1), 2);
  EXPECT_EQ(DefaultStepsInFlight(JobSpec::SYNC, 1), 1);
  // A spec not made by ParseJobSpec (0: unset) gets the mode's default.
  JobSpec spec;
  spec.set_mode(JobSpec::ASYNC);
  EXPECT_EQ(StepsInFlight(spec), 2);
  spec.set_mode(JobSpec::STALE);
  EXPECT_EQ(StepsInFlight(spec), 2);
  spec.set_mode(JobSpec::SYNC);
  EXPECT_EQ(StepsInFlight(spec), 1);
}

TEST(JobSpecTest, ApplyOwnGradient) {
  for (const auto& [json, want] : std::vector<std::pair<std::string, bool>>{
           {JobWith(R"("mode": "async")"), true},
           {JobWith(R"("mode": "stale")"), true},
           {JobWith(R"("mode": "sync")"), false},
           {JobWith(R"("apply_own_gradient": false)"), false},
           {JobWith(R"("mode": "sync", "apply_own_gradient": false)"), false}}) {
    absl::StatusOr<JobSpec> spec = ParseJobSpec(json, 2);
    ASSERT_TRUE(spec.ok()) << spec.status() << " in " << json;
    EXPECT_EQ(ApplyOwnGradient(*spec), want) << json;
    EXPECT_EQ(spec->own_gradient(),
              want ? JobSpec::OWN_GRADIENT_APPLY : JobSpec::OWN_GRADIENT_IGNORE);
    // It survives the job file round trip.
    absl::StatusOr<JobSpec> again = ParseJobSpec(JobSpecToJson(*spec), 2);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->own_gradient(), spec->own_gradient());
  }
  absl::StatusOr<JobSpec> sync = ParseJobSpec(JobWith(R"("mode": "sync", "apply_own_gradient": true)"), 2);
  EXPECT_EQ(sync.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(sync.status().message()), testing::HasSubstr("apply_own_gradient"));
  absl::StatusOr<JobSpec> typed = ParseJobSpec(JobWith(R"("apply_own_gradient": 1)"), 2);
  EXPECT_THAT(std::string(typed.status().message()), testing::HasSubstr("apply_own_gradient"));
  // Delay compensation would count the worker's own update twice: off by default with it,
  // and refused when asked for.
  absl::StatusOr<JobSpec> dc = ParseJobSpec(JobWith(R"("delay_compensation": 0.04)"), 2);
  ASSERT_TRUE(dc.ok()) << dc.status();
  EXPECT_FALSE(ApplyOwnGradient(*dc));
  absl::StatusOr<JobSpec> both =
      ParseJobSpec(JobWith(R"("delay_compensation": 0.04, "apply_own_gradient": true)"), 2);
  EXPECT_EQ(both.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(both.status().message()), testing::HasSubstr("delay_compensation"));
  // A spec not made by ParseJobSpec gets the mode's default.
  JobSpec spec;
  EXPECT_TRUE(ApplyOwnGradient(spec));
  spec.set_mode(JobSpec::SYNC);
  EXPECT_FALSE(ApplyOwnGradient(spec));
}

TEST(JobSpecTest, OptimizerAndInitializerDefaultsFollowType) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      JobWith(
          R"("optimizer": {"type": "momentum"}, "kernel_initializer": {"type": "zeros", "seed": 9})"),
      1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->optimizer().type(), OptimizerSpec::MOMENTUM);
  EXPECT_DOUBLE_EQ(spec->optimizer().momentum(), 0.9);
  EXPECT_DOUBLE_EQ(spec->optimizer().learning_rate(), 0.001);
  EXPECT_EQ(spec->kernel_initializer().type(), InitializerSpec::ZEROS);
  EXPECT_EQ(spec->kernel_initializer().seed(), 9u);
}

TEST(JobSpecTest, AcceptsTypeNamesAndNulls) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      JobWith(R"("optimizer": "sgd", "kernel_initializer": "truncated_normal", "steps": null,
                 "epochs": 3)"),
      1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->optimizer().type(), OptimizerSpec::SGD);
  EXPECT_EQ(spec->kernel_initializer().type(), InitializerSpec::TRUNCATED_NORMAL);
  EXPECT_EQ(spec->epochs(), 3);
}

TEST(JobSpecTest, StepsInsteadOfEpochs) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(JobWith(R"("steps": 1e4)"), 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->steps(), 10000);
  EXPECT_EQ(spec->epochs(), 0);
}

TEST(JobSpecTest, NormalizesModel) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(R"({"model": "mlp:0256,128"})", 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->model(), "mlp:256,128");
}

TEST(JobSpecTest, LargeSeed) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(JobWith(R"("seed": 18446744073709551615)"), 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->seed(), 18446744073709551615u);
  EXPECT_EQ(spec->kernel_initializer().seed(), 18446744073709551615u);
}

TEST(JobSpecTest, RoundTripsThroughJson) {
  for (const std::string& json :
       {std::string(kFullJob), JobWith(R"("mode": "stale", "staleness": 5, "steps": 77)"),
        JobWith(R"("optimizer": {"type": "momentum", "nesterov": true},
                   "kernel_initializer": {"type": "random_uniform", "minval": -1, "maxval": 2}, "seed": 18446744073709551615)")}) {
    absl::StatusOr<JobSpec> spec = ParseJobSpec(json, 3);
    ASSERT_TRUE(spec.ok()) << spec.status();
    const std::string text = JobSpecToJson(*spec);
    EXPECT_THAT(text, Not(HasSubstr("\n")));
    absl::StatusOr<JobSpec> again = ParseJobSpec(text, 3);
    ASSERT_TRUE(again.ok()) << again.status() << " in " << text;
    EXPECT_EQ(again->SerializeAsString(), spec->SerializeAsString()) << text;
    absl::StatusOr<JobSpec> pretty = ParseJobSpec(JobSpecToJson(*spec, 2), 0);
    ASSERT_TRUE(pretty.ok()) << pretty.status();
    EXPECT_EQ(pretty->SerializeAsString(), spec->SerializeAsString());
  }
}

TEST(JobSpecTest, JsonKeepsFileOrderAndLeavesOutJobId) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(kFullJob, 3);
  ASSERT_TRUE(spec.ok()) << spec.status();
  spec->set_job_id("job-7");
  const std::string text = JobSpecToJson(*spec);
  EXPECT_TRUE(absl::StartsWith(text, R"({"name":"fashion-mlp","model":"mlp:256,128",)")) << text;
  EXPECT_THAT(text, Not(HasSubstr("job-7")));
  EXPECT_THAT(text, HasSubstr(R"("mode":"sync","num_replicas":3,)"));
  EXPECT_THAT(text, Not(HasSubstr("staleness")));
}

TEST(JobSpecTest, InvalidJson) {
  EXPECT_THAT(ErrorOf(R"({"model": "softmax",)"), HasSubstr("job: invalid JSON: "));
  EXPECT_THAT(ErrorOf(""), HasSubstr("invalid JSON"));
  EXPECT_THAT(ErrorOf("{\"model\": \"softmax\"\n,,}"), HasSubstr("line 2"));
  EXPECT_THAT(ErrorOf(R"(["model"])"), HasSubstr("job: expected a JSON object, got an array"));
  EXPECT_THAT(ErrorOf("42"), HasSubstr("job: expected a JSON object, got number 42"));
}

TEST(JobSpecTest, UnknownFields) {
  EXPECT_EQ(ErrorOf(JobWith(R"("epoch": 3)")),
            R"(job: unknown field "epoch" (did you mean "epochs"?))");
  EXPECT_EQ(ErrorOf(JobWith(R"("batchSize": 3)")),
            R"(job: unknown field "batchSize" (did you mean "batch_size"?))");
  EXPECT_EQ(
      ErrorOf(JobWith(R"("optimizer": {"learning_rat": 0.1})")),
      R"(job: unknown field "optimizer.learning_rat" (did you mean "optimizer.learning_rate"?))");
  EXPECT_EQ(ErrorOf(JobWith(R"("optimizer": {"lr": 0.1})")),
            R"(job: unknown field "optimizer.lr" (did you mean "optimizer.learning_rate"?))");
  EXPECT_EQ(ErrorOf(JobWith(R"("initializer": "zeros")")),
            R"(job: unknown field "initializer" (did you mean "kernel_initializer"?))");
  EXPECT_EQ(ErrorOf(JobWith(R"("replicas": 2)")),
            R"(job: unknown field "replicas" (did you mean "num_replicas"?))");
  EXPECT_THAT(ErrorOf(JobWith(R"("kernel_initializer": {"kind": "zeros"})")),
              HasSubstr(R"(unknown field "kernel_initializer.kind" (expected one of type, )"));
  EXPECT_THAT(ErrorOf(JobWith(R"("job_id": "x")")), HasSubstr(R"(unknown field "job_id")"));
  EXPECT_THAT(ErrorOf(JobWith(R"("zzzzzzzz": 1)")), HasSubstr("expected one of name, model,"));
}

TEST(JobSpecTest, RejectsBadModelAndDataset) {
  EXPECT_THAT(ErrorOf(R"({"name": "x"})"), HasSubstr(R"(job: "model": is required)"));
  EXPECT_THAT(ErrorOf(R"({"model": null})"), HasSubstr(R"(job: "model": is required)"));
  EXPECT_THAT(ErrorOf(R"({"model": "cnn"})"), HasSubstr(R"(job: "model": unknown model "cnn")"));
  EXPECT_THAT(ErrorOf(R"({"model": "mlp:256,-1"})"), HasSubstr(R"(job: "model": )"));
  EXPECT_THAT(ErrorOf(R"({"model": 5})"),
              HasSubstr(R"(job: "model": expected a string, got number 5)"));
  EXPECT_EQ(ErrorOf(JobWith(R"("dataset": "mnist")")),
            R"(job: "dataset": unknown dataset "mnist": expected fashion_mnist, )"
            R"(synthetic_ctr:<spec>, criteo, movielens)");
  EXPECT_THAT(ErrorOf(JobWith(R"("data_dir": "")")), HasSubstr(R"(job: "data_dir": )"));
  EXPECT_THAT(ErrorOf(JobWith(R"("name": "")")), HasSubstr(R"(job: "name": must not be empty)"));
}

TEST(JobSpecTest, ClickLogJobsTakeTheDlrmModelOnTheirData) {
  const std::string dataset = "synthetic_ctr:examples=1000,tables=2,vocab=50|80,dense=3";
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      absl::StrCat(R"({"name": "ctr", "model": "dlrm:top=8", "dataset": ")", dataset, R"("})"), 2);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->dataset(), dataset);
  EXPECT_TRUE(absl::StartsWith(spec->model(), "dlrm:")) << spec->model();
  EXPECT_EQ(spec->data_dir(), "");

  // The MLP needs dense features; the DLRM model click logs; a bad spec names its key.
  EXPECT_THAT(ErrorOf(absl::StrCat(R"({"name": "ctr", "model": "mlp:8", "dataset": ")", dataset,
                                   R"("})")),
              HasSubstr(R"(job: "model": )"));
  EXPECT_THAT(ErrorOf(R"({"name": "x", "model": "dlrm:top=8"})"), HasSubstr(R"(job: "model": )"));
  EXPECT_THAT(ErrorOf(absl::StrCat(R"({"name": "ctr", "model": "dlrm:topp=8", "dataset": ")",
                                   dataset, R"("})")),
              HasSubstr("topp"));
  EXPECT_THAT(ErrorOf(R"({"name": "x", "model": "dlrm", "dataset": "synthetic_ctr:tables=0"})"),
              ::testing::AllOf(HasSubstr(R"(job: "dataset": )"), HasSubstr("tables")));
  // Click-log files need their directory.
  EXPECT_THAT(ErrorOf(R"({"name": "x", "model": "dlrm", "dataset": "criteo"})"),
              HasSubstr(R"(job: "data_dir": is required for dataset "criteo")"));
  // The tables' own optimizer, written back as given.
  absl::StatusOr<JobSpec> ftrl = ParseJobSpec(
      absl::StrCat(R"({"name": "ctr", "model": "dlrm:top=8", "dataset": ")", dataset,
                   R"(", "embedding_optimizer": {"type": "ftrl", "learning_rate": 0.1, "l1": 0.01}})"),
      2);
  ASSERT_TRUE(ftrl.ok()) << ftrl.status();
  EXPECT_EQ(ftrl->embedding_optimizer().type(), OptimizerSpec::FTRL);
  EXPECT_EQ(ftrl->embedding_optimizer().l1(), 0.01);
  absl::StatusOr<JobSpec> again = ParseJobSpec(JobSpecToJson(*ftrl, 0), 2);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->embedding_optimizer().DebugString(), ftrl->embedding_optimizer().DebugString());
  EXPECT_FALSE(spec->has_embedding_optimizer());
  EXPECT_THAT(ErrorOf(absl::StrCat(R"({"name": "ctr", "model": "dlrm", "dataset": ")", dataset,
                                   R"(", "embedding_optimizer": {"type": "ftrl", "l1": -1}})")),
              HasSubstr(R"(job: "embedding_optimizer.l1": must be >= 0)"));
  // Files this process cannot read are left to the chief, which reads them.
  absl::StatusOr<JobSpec> remote = ParseJobSpec(
      R"({"name": "x", "model": "dlrm:top=8", "dataset": "criteo", "data_dir": "/nonexistent"})",
      2);
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_EQ(remote->model(), "dlrm:top=8");
}

TEST(JobSpecTest, DynamicTablesAndIncrementalCheckpoints) {
  const std::string hashed = "synthetic_ctr:examples=100,dense=2,tables=2,ids=hashed";
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      absl::StrCat(R"({"name": "h", "model": "dlrm:top=8", "dataset": ")", hashed,
                   R"(", "dynamic_tables": {"num_buckets": 512, "admit_after": 2,)",
                   R"( "ttl_steps": 1000, "max_rows": 100000},)",
                   R"( "checkpoint": {"dir": "/tmp/x", "full_every": 3}})"),
      2);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->dynamic_tables().num_buckets(), 512);
  EXPECT_EQ(spec->dynamic_tables().admit_after(), 2);
  EXPECT_EQ(spec->dynamic_tables().ttl_steps(), 1000);
  EXPECT_EQ(spec->dynamic_tables().max_rows(), 100000);
  EXPECT_EQ(spec->checkpoint().full_every(), 3);
  absl::StatusOr<JobSpec> again = ParseJobSpec(JobSpecToJson(*spec, 0), 2);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->dynamic_tables().DebugString(), spec->dynamic_tables().DebugString());
  EXPECT_EQ(again->checkpoint().full_every(), 3);
  // Jobs that do not say write neither (their files stay as they were).
  const std::string plain = JobSpecToJson(*ParseJobSpec(
      R"({"name": "p", "model": "softmax", "checkpoint": {"dir": "/tmp/x"}})", 2), 0);
  EXPECT_THAT(plain, ::testing::Not(HasSubstr("full_every")));
  EXPECT_THAT(plain, ::testing::Not(HasSubstr("dynamic_tables")));

  EXPECT_THAT(ErrorOf(R"({"name": "x", "model": "softmax", "dynamic_tables": {"num_buckets": 0}})"),
              HasSubstr(R"(job: "dynamic_tables.num_buckets": must be 1..1048576)"));
  EXPECT_THAT(ErrorOf(R"({"name": "x", "model": "softmax", "dynamic_tables": {"admit_after": 300}})"),
              HasSubstr(R"(job: "dynamic_tables.admit_after": must be 0..255)"));
  EXPECT_THAT(ErrorOf(R"({"name": "x", "model": "softmax", "dynamic_tables": {"ttl": 5}})"),
              HasSubstr("ttl"));
  EXPECT_THAT(ErrorOf(R"({"name": "x", "model": "softmax", "dynamic_tables": 5})"),
              HasSubstr(R"(job: "dynamic_tables": expected an object)"));
  EXPECT_THAT(
      ErrorOf(R"({"name": "x", "model": "softmax", "checkpoint": {"dir": "/d", "full_every": 0}})"),
      HasSubstr(R"(job: "checkpoint.full_every": must be 1..)"));
}

TEST(JobSpecTest, TheCheckpointCutHoldsByDefaultOrDrains) {
  absl::StatusOr<JobSpec> held =
      ParseJobSpec(R"({"name": "c", "model": "softmax", "checkpoint": {"dir": "/tmp/x"}})", 2);
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(held->checkpoint().cut(), CheckpointSpec::HOLD);
  EXPECT_THAT(JobSpecToJson(*held, 0), ::testing::Not(HasSubstr("cut")));
  absl::StatusOr<JobSpec> drained = ParseJobSpec(
      R"({"name": "c", "model": "softmax", "checkpoint": {"dir": "/tmp/x", "cut": "drain"}})", 2);
  ASSERT_TRUE(drained.ok()) << drained.status();
  EXPECT_EQ(drained->checkpoint().cut(), CheckpointSpec::DRAIN);
  absl::StatusOr<JobSpec> again = ParseJobSpec(JobSpecToJson(*drained, 0), 2);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->checkpoint().cut(), CheckpointSpec::DRAIN);
  EXPECT_THAT(
      ErrorOf(R"({"name": "x", "model": "softmax", "checkpoint": {"dir": "/d", "cut": "pause"}})"),
      HasSubstr(R"("checkpoint.cut")"));
}

TEST(JobSpecTest, RejectsBadSchedule) {
  EXPECT_EQ(ErrorOf(JobWith(R"("batch_size": 0)")),
            R"(job: "batch_size": must be 1..65536, got 0)");
  EXPECT_EQ(ErrorOf(JobWith(R"("batch_size": 65537)")),
            R"(job: "batch_size": must be 1..65536, got 65537)");
  EXPECT_EQ(ErrorOf(JobWith(R"("batch_size": "128")")),
            R"(job: "batch_size": expected an integer, got string "128")");
  EXPECT_EQ(ErrorOf(JobWith(R"("batch_size": 12.5)")),
            R"(job: "batch_size": must be an integer, got 12.5)");
  EXPECT_EQ(ErrorOf(JobWith(R"("epochs": -1)")), R"(job: "epochs": must be 1..100000, got -1)");
  EXPECT_EQ(ErrorOf(JobWith(R"("steps": -5)")), R"(job: "steps": must be 1..1000000000, got -5)");
  EXPECT_THAT(ErrorOf(JobWith(R"("epochs": 2, "steps": 5)")),
              HasSubstr(R"(job: "steps": give either "epochs" or "steps", not both)"));
  EXPECT_THAT(ErrorOf(JobWith(R"("epochs": 3000000000)")), HasSubstr(R"(job: "epochs": )"));
  EXPECT_THAT(ErrorOf(JobWith(R"("steps": 1e30)")), HasSubstr(R"(job: "steps": is too large)"));
  EXPECT_EQ(ErrorOf(JobWith(R"("eval_every_steps": -1)")),
            R"(job: "eval_every_steps": must be >= 0, got -1)");
  EXPECT_EQ(ErrorOf(JobWith(R"("step_timeout_ms": 0)")),
            R"(job: "step_timeout_ms": must be 1000..3600000 (1 s to 1 h), got 0)");
  constexpr char kInFlightRange[] =
      R"(job: "steps_in_flight": must be 0..2 (0: the default, 2 for async and stale jobs of one worker, else 1), )";
  EXPECT_EQ(ErrorOf(JobWith(R"("steps_in_flight": 3)")), absl::StrCat(kInFlightRange, "got 3"));
  EXPECT_EQ(ErrorOf(JobWith(R"("steps_in_flight": -1)")), absl::StrCat(kInFlightRange, "got -1"));
  EXPECT_EQ(ErrorOf(JobWith(R"("steps_in_flight": "2")")),
            R"(job: "steps_in_flight": expected an integer, got string "2")");
}

TEST(JobSpecTest, RejectsBadOptimizer) {
  EXPECT_EQ(ErrorOf(JobWith(R"("optimizer": {"learning_rate": -1})")),
            R"(job: "optimizer.learning_rate": must be > 0, got -1)");
  EXPECT_EQ(ErrorOf(JobWith(R"("optimizer": {"learning_rate": 0})")),
            R"(job: "optimizer.learning_rate": must be > 0, got 0)");
  EXPECT_EQ(ErrorOf(JobWith(R"("optimizer": {"learning_rate": "fast"})")),
            R"(job: "optimizer.learning_rate": expected a number, got string "fast")");
  EXPECT_EQ(
      ErrorOf(JobWith(R"("optimizer": {"type": "rmsprop"})")),
      R"(job: "optimizer.type": unknown "rmsprop" (expected sgd, momentum, adagrad, adam or ftrl))");
  EXPECT_EQ(ErrorOf(JobWith(R"("optimizer": {"type": "momentum", "momentum": 1})")),
            R"(job: "optimizer.momentum": must be in [0, 1), got 1)");
  EXPECT_EQ(ErrorOf(JobWith(R"("optimizer": {"momentum": -0.1})")),
            R"(job: "optimizer.momentum": must be in [0, 1), got -0.1)");
  EXPECT_EQ(ErrorOf(JobWith(R"("optimizer": {"beta1": 1.0})")),
            R"(job: "optimizer.beta1": must be in (0, 1), got 1.0)");
  EXPECT_EQ(ErrorOf(JobWith(R"("optimizer": {"beta2": 1.5})")),
            R"(job: "optimizer.beta2": must be in (0, 1), got 1.5)");
  EXPECT_EQ(ErrorOf(JobWith(R"("optimizer": {"epsilon": 0})")),
            R"(job: "optimizer.epsilon": must be > 0, got 0)");
  EXPECT_EQ(ErrorOf(JobWith(R"("optimizer": {"initial_accumulator_value": -1})")),
            R"(job: "optimizer.initial_accumulator_value": must be > 0, got -1)");
  EXPECT_EQ(ErrorOf(JobWith(R"("optimizer": {"nesterov": 1})")),
            R"(job: "optimizer.nesterov": expected true or false, got number 1)");
  EXPECT_EQ(ErrorOf(JobWith(R"("optimizer": 3)")),
            R"(job: "optimizer": expected an object or a type name, got number 3)");
  EXPECT_THAT(ErrorOf(JobWith(R"("optimizer": "adamw")")),
              HasSubstr(R"(job: "optimizer.type": unknown "adamw")"));
}

// The fields a caller parses on its own (the Python package's variables) get a job file's
// defaults and checks, named by the caller's field, without the "job: " prefix.
TEST(JobSpecTest, OptimizerAndInitializerFieldsAlone) {
  absl::StatusOr<OptimizerSpec> adam = ParseOptimizerField("null", "optimizer");
  ASSERT_TRUE(adam.ok()) << adam.status();
  EXPECT_EQ(adam->type(), OptimizerSpec::ADAM);
  EXPECT_DOUBLE_EQ(adam->learning_rate(), 0.001);
  EXPECT_DOUBLE_EQ(adam->beta2(), 0.999);
  absl::StatusOr<OptimizerSpec> adagrad = ParseOptimizerField(R"("adagrad")", "opt");
  ASSERT_TRUE(adagrad.ok()) << adagrad.status();
  EXPECT_EQ(adagrad->type(), OptimizerSpec::ADAGRAD);
  EXPECT_DOUBLE_EQ(adagrad->initial_accumulator_value(), 0.1);
  EXPECT_EQ(ParseOptimizerField(R"({"learning_rate": 0})", "opt").status().message(),
            R"("opt.learning_rate": must be > 0, got 0)");
  EXPECT_EQ(ParseOptimizerField(R"({"learning_rat": 1})", "opt").status().message(),
            R"(unknown field "opt.learning_rat" (did you mean "opt.learning_rate"?))");
  EXPECT_THAT(std::string(ParseOptimizerField("{", "opt").status().message()),
              HasSubstr("opt: invalid JSON"));

  absl::StatusOr<InitializerSpec> glorot = ParseInitializerField("null", "init", 7);
  ASSERT_TRUE(glorot.ok()) << glorot.status();
  EXPECT_EQ(glorot->type(), InitializerSpec::GLOROT_UNIFORM);
  EXPECT_EQ(glorot->seed(), 7u);
  EXPECT_EQ(ParseInitializerField(R"({"type": "random_uniform", "minval": 1, "maxval": 0})",
                                  "init", 7)
                .status()
                .message(),
            R"("init.maxval": must be > minval (1), got 0)");
}

TEST(JobSpecTest, FtrlOptimizer) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(JobWith(R"("optimizer": "ftrl")"), 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->optimizer().type(), OptimizerSpec::FTRL);
  EXPECT_TRUE(spec->optimizer().has_learning_rate_power());
  EXPECT_DOUBLE_EQ(spec->optimizer().learning_rate_power(), -0.5);
  EXPECT_DOUBLE_EQ(spec->optimizer().initial_accumulator_value(), 0.1);
  EXPECT_EQ(spec->optimizer().l1(), 0);

  spec = ParseJobSpec(JobWith(R"("optimizer": {"type": "ftrl", "learning_rate": 0.05,
      "learning_rate_power": 0, "l1": 0.01, "l2": 0.1, "l2_shrinkage": 0.2, "beta": 1,
      "initial_accumulator_value": 0.5})"),
                      1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const OptimizerSpec& o = spec->optimizer();
  EXPECT_TRUE(o.has_learning_rate_power());
  EXPECT_EQ(o.learning_rate_power(), 0.0);  // an explicit 0 stays 0
  EXPECT_DOUBLE_EQ(o.l1(), 0.01);
  EXPECT_DOUBLE_EQ(o.l2(), 0.1);
  EXPECT_DOUBLE_EQ(o.l2_shrinkage(), 0.2);
  EXPECT_DOUBLE_EQ(o.beta(), 1);
  EXPECT_DOUBLE_EQ(o.initial_accumulator_value(), 0.5);
  // Round trip through the job file.
  absl::StatusOr<JobSpec> again = ParseJobSpec(JobSpecToJson(*spec), 1);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->SerializeAsString(), spec->SerializeAsString()) << JobSpecToJson(*spec);

  // Other optimizers do not get a power they were not given.
  spec = ParseJobSpec(JobWith(R"("optimizer": "adagrad")"), 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->optimizer().has_learning_rate_power());

  EXPECT_EQ(ErrorOf(JobWith(R"("optimizer": {"type": "ftrl", "learning_rate_power": 0.5})")),
            R"(job: "optimizer.learning_rate_power": must be <= 0, got 0.5)");
  EXPECT_EQ(ErrorOf(JobWith(R"("optimizer": {"type": "ftrl", "l1": -0.1})")),
            R"(job: "optimizer.l1": must be >= 0, got -0.1)");
  EXPECT_EQ(ErrorOf(JobWith(R"("optimizer": {"type": "ftrl", "l2": -1})")),
            R"(job: "optimizer.l2": must be >= 0, got -1)");
  EXPECT_EQ(ErrorOf(JobWith(R"("optimizer": {"type": "ftrl", "l2_shrinkage": -2})")),
            R"(job: "optimizer.l2_shrinkage": must be >= 0, got -2)");
  EXPECT_EQ(ErrorOf(JobWith(R"("optimizer": {"type": "ftrl", "beta": -3})")),
            R"(job: "optimizer.beta": must be >= 0, got -3)");
  EXPECT_EQ(ErrorOf(JobWith(R"("optimizer": {"type": "ftrl", "l1": "big"})")),
            R"(job: "optimizer.l1": expected a number, got string "big")");
  EXPECT_THAT(ErrorOf(JobWith(R"("optimizer": {"type": "ftrl", "l2": 1e39})")),
              HasSubstr(R"(job: "optimizer.l2": must be in [-3.4e38, 3.4e38])"));
}

TEST(JobSpecTest, RejectsBadModeAndDistribution) {
  EXPECT_EQ(ErrorOf(JobWith(R"("mode": "syncc")")),
            R"(job: "mode": unknown "syncc" (expected async, sync or stale))");
  EXPECT_EQ(ErrorOf(JobWith(R"("mode": 1)")), R"(job: "mode": expected a string, got number 1)");
  EXPECT_EQ(ErrorOf(JobWith(R"("mode": "stale", "staleness": -1)")),
            R"(job: "staleness": must be >= 0, got -1)");
  EXPECT_EQ(ErrorOf(JobWith(R"("mode": "sync", "num_replicas": -2)")),
            R"(job: "num_replicas": must be >= 1 (or 0 for one per worker), got -2)");
  EXPECT_THAT(ErrorOf(JobWith(R"("partitioner": "fixed:0")")),
              HasSubstr(R"(job: "partitioner": )"));
  EXPECT_THAT(ErrorOf(JobWith(R"("partitioner": "even")")), HasSubstr(R"(job: "partitioner": )"));
  EXPECT_THAT(ErrorOf(JobWith(R"("placement": "random")")),
              HasSubstr(R"(job: "placement": placement "random" is unknown)"));
  EXPECT_EQ(ErrorOf(JobWith(R"("seed": -1)")), R"(job: "seed": must be >= 0, got -1)");
  EXPECT_EQ(ErrorOf(JobWith(R"("seed": "42")")),
            R"(job: "seed": expected a non-negative integer, got string "42")");
  EXPECT_EQ(ErrorOf(JobWith(R"("backend": "tpu")")),
            R"(job: "backend": unknown "tpu" (expected auto, cpu or gpu))");
}

TEST(JobSpecTest, StalenessPolicy) {
  absl::StatusOr<JobSpec> none = ParseJobSpec(JobWith(R"("mode": "stale")"), 2);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->staleness_lr(), UpdateSpec::NONE);
  EXPECT_EQ(none->delay_compensation(), 0);
  EXPECT_FALSE(none->delay_compensation_adaptive());

  absl::StatusOr<JobSpec> both = ParseJobSpec(
      JobWith(R"("staleness_lr": "inverse", "delay_compensation": 0.04,
                 "delay_compensation_adaptive": true)"),
      2);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->staleness_lr(), UpdateSpec::INVERSE);
  EXPECT_EQ(both->delay_compensation(), 0.04);
  EXPECT_TRUE(both->delay_compensation_adaptive());
  const std::string text = JobSpecToJson(*both);
  EXPECT_THAT(text, HasSubstr(R"("staleness_lr":"inverse","delay_compensation":0.04,)"
                              R"("delay_compensation_adaptive":true)"));
  absl::StatusOr<JobSpec> again = ParseJobSpec(text, 2);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->SerializeAsString(), both->SerializeAsString());

  // The defaults are allowed in sync mode, anything else is not.
  EXPECT_TRUE(ParseJobSpec(JobWith(R"("mode": "sync", "staleness_lr": "none",
                                      "delay_compensation": 0,
                                      "delay_compensation_adaptive": false)"),
                           2)
                  .ok());
  EXPECT_EQ(ErrorOf(JobWith(R"("mode": "sync", "staleness_lr": "inverse")")),
            R"(job: "staleness_lr": applies in async and stale mode only, got "inverse" in )"
            R"(sync mode (a sync step is never stale))");
  EXPECT_THAT(ErrorOf(JobWith(R"("mode": "sync", "delay_compensation": 0.5)")),
              HasSubstr(R"(job: "delay_compensation": applies in async and stale mode only, )"
                        R"(got 0.5 in sync mode)"));
  EXPECT_EQ(ErrorOf(JobWith(R"("staleness_lr": "linear")")),
            R"(job: "staleness_lr": unknown "linear" (expected none or inverse))");
  EXPECT_EQ(ErrorOf(JobWith(R"("delay_compensation": -1)")),
            R"(job: "delay_compensation": must be in [0, 3.4e38] (0: off; the ps computes in )"
            R"(float32), got -1)");
  EXPECT_THAT(ErrorOf(JobWith(R"("delay_compensation": 1e39)")),
              HasSubstr(R"(job: "delay_compensation": must be in [0, 3.4e38])"));
  EXPECT_EQ(ErrorOf(JobWith(R"("delay_compensation": "0.1")")),
            R"(job: "delay_compensation": expected a number, got string "0.1")");
  EXPECT_EQ(ErrorOf(JobWith(R"("delay_compensation_adaptive": true)")),
            R"(job: "delay_compensation_adaptive": needs "delay_compensation" > 0 (the lambda )"
            R"(it adapts))");
  EXPECT_EQ(ErrorOf(JobWith(R"("delay_compensation_adaptive": 1)")),
            R"(job: "delay_compensation_adaptive": expected true or false, got number 1)");
}

TEST(JobSpecTest, RejectsBadInitializer) {
  EXPECT_EQ(ErrorOf(JobWith(R"("kernel_initializer": {"type": "he_normal"})")),
            R"(job: "kernel_initializer.type": unknown "he_normal" (expected zeros, constant, )"
            R"(random_uniform, random_normal, truncated_normal or glorot_uniform))");
  EXPECT_EQ(ErrorOf(JobWith(R"("kernel_initializer": {"type": "random_normal", "stddev": -1})")),
            R"(job: "kernel_initializer.stddev": must be >= 0, got -1)");
  EXPECT_THAT(ErrorOf(JobWith(
                  R"("kernel_initializer": {"type": "random_uniform", "minval": 1, "maxval": 1})")),
              HasSubstr(R"(job: "kernel_initializer.maxval": must be > minval)"));
  EXPECT_EQ(ErrorOf(JobWith(R"("kernel_initializer": {"seed": -3})")),
            R"(job: "kernel_initializer.seed": must be >= 0, got -3)");
  EXPECT_EQ(ErrorOf(JobWith(R"("kernel_initializer": [1])")),
            R"(job: "kernel_initializer": expected an object or a type name, got an array)");
}

TEST(JobSpecTest, MessagesStayOnOneLine) {
  const std::string message = ErrorOf(JobWith("\"mode\": \"a\\nb\""));
  EXPECT_THAT(message, HasSubstr(R"(unknown "a\nb")"));
  EXPECT_THAT(ErrorOf(JobWith("\"mode\": \"" + std::string(200, 'x') + "\"")), HasSubstr("...\""));
}

TEST(JobSpecTest, StepsPerEpoch) {
  EXPECT_EQ(StepsPerEpoch(60000, 128), 469);
  EXPECT_EQ(StepsPerEpoch(60000, 100), 600);
  EXPECT_EQ(StepsPerEpoch(1, 128), 1);
  EXPECT_EQ(StepsPerEpoch(0, 128), 0);
  EXPECT_EQ(StepsPerEpoch(100, 0), 0);
}

TEST(JobSpecTest, ModeNames) {
  EXPECT_EQ(JobModeName(JobSpec::ASYNC), "async");
  EXPECT_EQ(JobModeName(JobSpec::SYNC), "sync");
  EXPECT_EQ(JobModeName(JobSpec::STALE), "stale");
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

TEST(JobSpecDecayTest, ParsesAndValidatesLearningRateDecay) {
  auto spec = ParseJobSpec(
      R"({"model": "softmax", "optimizer": {"type": "adam", "decay_rate": 0.5,
          "decay_steps": 1000, "staircase": true}})",
      2);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_DOUBLE_EQ(spec->optimizer().decay_rate(), 0.5);
  EXPECT_EQ(spec->optimizer().decay_steps(), 1000);
  EXPECT_TRUE(spec->optimizer().staircase());
  auto round_trip = ParseJobSpec(JobSpecToJson(*spec), 2);
  ASSERT_TRUE(round_trip.ok()) << round_trip.status();
  EXPECT_EQ(round_trip->optimizer().decay_steps(), 1000);

  auto bad = ParseJobSpec(R"({"model": "softmax", "optimizer": {"decay_rate": 1.5,
                              "decay_steps": 10}})",
                          2);
  EXPECT_NE(bad.status().message().find("decay_rate"), std::string::npos) << bad.status();
  bad = ParseJobSpec(R"({"model": "softmax", "optimizer": {"decay_rate": 0.9}})", 2);
  EXPECT_NE(bad.status().message().find("decay_steps"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A minimal job with `extra` added (`"key": value, ...`).
std::string Job(const std::string& extra) {
  return absl::StrCat(R"({"name": "fm", "model": "mlp:32", )", extra, "}");
}

// Parses `json`, expecting INVALID_ARGUMENT on one line; returns the message.
std::string Error(const std::string& json, int num_workers = 2) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(json, num_workers);
  EXPECT_FALSE(spec.ok()) << json;
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << spec.status();
  EXPECT_THAT(std::string(spec.status().message()), Not(HasSubstr("\n")));
  return std::string(spec.status().message());
}

JobSpec Parsed(const std::string& json, int num_workers = 2) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(json, num_workers);
  EXPECT_TRUE(spec.ok()) << spec.status() << " in " << json;
  return spec.ok() ? *spec : JobSpec();
}

// JobSpecToJson then ParseJobSpec gives the spec back, and writes it the same way again.
void ExpectRoundTrip(const JobSpec& spec, int num_workers = 0) {
  const std::string text = JobSpecToJson(spec);
  absl::StatusOr<JobSpec> again = ParseJobSpec(text, num_workers);
  ASSERT_TRUE(again.ok()) << again.status() << " in " << text;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*again, spec))
      << text << "\nvs\n"
      << JobSpecToJson(*again);
  EXPECT_EQ(JobSpecToJson(*again), text);
  absl::StatusOr<JobSpec> pretty = ParseJobSpec(JobSpecToJson(spec, 2), num_workers);
  ASSERT_TRUE(pretty.ok()) << pretty.status();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*pretty, spec));
}

TEST(JobSpecCheckpointTest, ParsesEveryField) {
  const JobSpec spec = Parsed(Job(R"("checkpoint": {"dir": "/ckpt/fm", "every_steps": 500,
      "every_seconds": 90.5, "keep": 5, "keep_best": true})"));
  ASSERT_TRUE(spec.has_checkpoint());
  EXPECT_EQ(spec.checkpoint().dir(), "/ckpt/fm");
  EXPECT_EQ(spec.checkpoint().every_steps(), 500);
  EXPECT_DOUBLE_EQ(spec.checkpoint().every_seconds(), 90.5);
  EXPECT_EQ(spec.checkpoint().keep(), 5);
  EXPECT_TRUE(spec.checkpoint().keep_best());
  ExpectRoundTrip(spec);
}

TEST(JobSpecCheckpointTest, DefaultsAndBareDirectory) {
  for (const std::string& json :
       {Job(R"("checkpoint": "/ckpt/fm")"), Job(R"("checkpoint": {"dir": "/ckpt/fm"})"),
        Job(R"("checkpoint": {"dir": "/ckpt/fm", "keep": null})")}) {
    const JobSpec spec = Parsed(json);
    ASSERT_TRUE(spec.has_checkpoint()) << json;
    EXPECT_EQ(spec.checkpoint().dir(), "/ckpt/fm");
    EXPECT_EQ(spec.checkpoint().every_steps(), 0);
    EXPECT_EQ(spec.checkpoint().every_seconds(), 0);
    EXPECT_EQ(spec.checkpoint().keep(), 3);
    EXPECT_FALSE(spec.checkpoint().keep_best());
    ExpectRoundTrip(spec);
  }
  // No dir: no durable state, and nothing about checkpoints in the spec or its file.
  for (const std::string& json :
       {Job(R"("steps": 10)"), Job(R"("checkpoint": null)"), Job(R"("checkpoint": {})"),
        Job(R"("checkpoint": {"dir": null})")}) {
    const JobSpec spec = Parsed(json);
    EXPECT_FALSE(spec.has_checkpoint()) << json;
    EXPECT_THAT(JobSpecToJson(spec), Not(HasSubstr("checkpoint"))) << json;
    ExpectRoundTrip(spec);
  }
}

// A schedule without a dir is kept for the chief's --checkpoint_dir to complete.
TEST(JobSpecCheckpointTest, AScheduleWithoutADirIsKept) {
  absl::StatusOr<JobSpec> spec =
      ParseJobSpec(Job(R"("checkpoint": {"every_steps": 100, "keep": 2})"), 2);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(spec->has_checkpoint());
  EXPECT_EQ(spec->checkpoint().dir(), "");
  EXPECT_EQ(spec->checkpoint().every_steps(), 100);
  EXPECT_EQ(spec->checkpoint().keep(), 2);
  absl::StatusOr<JobSpec> again = ParseJobSpec(JobSpecToJson(*spec), 2);
  ASSERT_TRUE(again.ok()) << again.status() << JobSpecToJson(*spec);
  EXPECT_EQ(again->SerializeAsString(), spec->SerializeAsString());
}

TEST(JobSpecCheckpointTest, RejectsBadFields) {
  EXPECT_EQ(Error(Job(R"("checkpoint": {"dir": "/c", "keep": 0})")),
            R"(job: "checkpoint.keep": must be >= 1, got 0)");
  EXPECT_EQ(Error(Job(R"("checkpoint": {"dir": "/c", "keep": -2})")),
            R"(job: "checkpoint.keep": must be >= 1, got -2)");
  EXPECT_EQ(Error(Job(R"("checkpoint": {"dir": "/c", "keep": 1.5})")),
            R"(job: "checkpoint.keep": must be an integer, got 1.5)");
  EXPECT_THAT(Error(Job(R"("checkpoint": {"dir": "/c", "keep": 3000000000})")),
              HasSubstr(R"(job: "checkpoint.keep": must be <= 2147483647)"));
  EXPECT_EQ(Error(Job(R"("checkpoint": {"dir": "/c", "every_steps": -1})")),
            R"(job: "checkpoint.every_steps": must be 0..1000000000 (0: not by steps), got -1)");
  EXPECT_THAT(Error(Job(R"("checkpoint": {"dir": "/c", "every_steps": 9e18})")),
              HasSubstr(R"(job: "checkpoint.every_steps": must be 0..)"));
  EXPECT_EQ(Error(Job(R"("checkpoint": {"dir": "/c", "every_seconds": -0.5})")),
            R"(job: "checkpoint.every_seconds": must be 0..31536000 (0: not by time), got -0.5)");
  EXPECT_THAT(Error(Job(R"("checkpoint": {"dir": "/c", "every_seconds": 1e300})")),
              HasSubstr(R"(job: "checkpoint.every_seconds": must be 0..31536000)"));
  EXPECT_EQ(Error(Job(R"("checkpoint": {"dir": "/c", "every_seconds": "1m"})")),
            R"(job: "checkpoint.every_seconds": expected a number, got string "1m")");
  EXPECT_EQ(Error(Job(R"("checkpoint": {"dir": "/c", "keep_best": 1})")),
            R"(job: "checkpoint.keep_best": expected true or false, got number 1)");
  EXPECT_THAT(Error(Job(R"("checkpoint": {"dir": "ckpt"})")),
              HasSubstr(R"(job: "checkpoint.dir": must be an absolute path)"));
  EXPECT_THAT(Error(Job(R"("checkpoint": "ckpt")")),
              HasSubstr(R"(job: "checkpoint.dir": must be an absolute path)"));
  EXPECT_EQ(Error(Job(R"("checkpoint": "")")),
            R"(job: "checkpoint.dir": must not be empty, got "")");
  EXPECT_EQ(Error(Job(R"("checkpoint": {"dir": 3})")),
            R"(job: "checkpoint.dir": expected a string, got number 3)");
  EXPECT_EQ(Error(Job(R"("checkpoint": true)")),
            R"(job: "checkpoint": expected an object or a directory path, got boolean true)");
  EXPECT_EQ(
      Error(Job(R"("checkpoint": {"dir": "/c", "every_step": 5})")),
      R"(job: unknown field "checkpoint.every_step" (did you mean "checkpoint.every_steps"?))");
  EXPECT_EQ(Error(Job(R"("checkpoints": "/c")")),
            R"(job: unknown field "checkpoints" (did you mean "checkpoint"?))");
}

TEST(JobSpecWarmStartTest, ParsesEveryField) {
  const JobSpec spec = Parsed(Job(R"("warm_start": {"from": "/ckpt/old",
      "variables": {"fm/dense_0/kernel": "old/dense_0/kernel", "fm/dense_1/bias": "b"},
      "with_slots": true})"));
  ASSERT_TRUE(spec.has_warm_start());
  EXPECT_EQ(spec.warm_start().from(), "/ckpt/old");
  ASSERT_EQ(spec.warm_start().variables_size(), 2);
  EXPECT_EQ(spec.warm_start().variables().at("fm/dense_0/kernel"), "old/dense_0/kernel");
  EXPECT_EQ(spec.warm_start().variables().at("fm/dense_1/bias"), "b");
  EXPECT_TRUE(spec.warm_start().with_slots());
  ExpectRoundTrip(spec);
  // Written sorted by name, whatever the map's order.
  EXPECT_THAT(JobSpecToJson(spec),
              HasSubstr(R"("warm_start":{"from":"/ckpt/old","variables":{"fm/dense_0/kernel":)"
                        R"("old/dense_0/kernel","fm/dense_1/bias":"b"},"with_slots":true})"));
}

TEST(JobSpecWarmStartTest, DefaultsAndBarePath) {
  for (const std::string& json :
       {Job(R"("warm_start": "/ckpt/old")"), Job(R"("warm_start": {"from": "/ckpt/old"})"),
        Job(R"("warm_start": {"from": "/ckpt/old", "variables": {}})")}) {
    const JobSpec spec = Parsed(json);
    ASSERT_TRUE(spec.has_warm_start()) << json;
    EXPECT_EQ(spec.warm_start().from(), "/ckpt/old");
    EXPECT_EQ(spec.warm_start().variables_size(), 0);
    EXPECT_FALSE(spec.warm_start().with_slots());
    ExpectRoundTrip(spec);
  }
  EXPECT_FALSE(Parsed(Job(R"("warm_start": null)")).has_warm_start());
}

TEST(JobSpecWarmStartTest, RejectsBadFields) {
  EXPECT_EQ(Error(Job(R"("warm_start": {"with_slots": true})")),
            R"(job: "warm_start.from": is required (the checkpoint to start from))");
  EXPECT_EQ(Error(Job(R"("warm_start": {})")),
            R"(job: "warm_start.from": is required (the checkpoint to start from))");
  EXPECT_EQ(Error(Job(R"("warm_start": "")")),
            R"(job: "warm_start.from": must not be empty, got "")");
  EXPECT_THAT(Error(Job(R"("warm_start": "old/ckpt")")),
              HasSubstr(R"(job: "warm_start.from": must be an absolute path)"));
  EXPECT_EQ(Error(Job(R"("warm_start": 7)")),
            R"(job: "warm_start": expected an object or a checkpoint path, got number 7)");
  EXPECT_THAT(Error(Job(R"("warm_start": {"from": "/c", "variables": ["a"]})")),
              HasSubstr(R"(job: "warm_start.variables": expected an object)"));
  EXPECT_EQ(Error(Job(R"("warm_start": {"from": "/c", "variables": {"": "a"}})")),
            R"(job: "warm_start.variables": variable names must not be empty)");
  EXPECT_EQ(Error(Job(R"("warm_start": {"from": "/c", "variables": {"fm/dense_0/kernel": ""}})")),
            R"(job: "warm_start.variables.fm/dense_0/kernel": must not be empty)");
  EXPECT_EQ(Error(Job(R"("warm_start": {"from": "/c", "variables": {"fm/dense_0/bias": 3}})")),
            R"(job: "warm_start.variables.fm/dense_0/bias": expected the checkpoint's variable )"
            R"(name, got number 3)");
  // Keys are this job's variables: a typo is caught here, not as a silently cold variable.
  EXPECT_EQ(Error(Job(R"("warm_start": {"from": "/c", "variables": {"fm/dense_0/kernal": "k"}})")),
            R"(job: "warm_start.variables": "fm/dense_0/kernal" is not a variable of this job )"
            R"((did you mean "fm/dense_0/kernel"?))");
  EXPECT_EQ(
      Error(Job(R"("warm_start": {"from": "/c", "variables": {"emb": "k"}})")),
      R"(job: "warm_start.variables": "emb" is not a variable of this job (its )"
      R"(variables: fm/dense_0/kernel, fm/dense_0/bias, fm/dense_1/kernel, fm/dense_1/bias))");
  EXPECT_THAT(Error(R"({"name": "fm", "model": "mlp:8,8,8,8", "warm_start": {"from": "/c",
               "variables": {"zz": "k"}}})"),
              HasSubstr("fm/dense_2/kernel, fm/dense_2/bias and 4 more)"));
  EXPECT_EQ(Error(Job(R"("warm_start": {"from": "/c", "with_slots": "yes"})")),
            R"(job: "warm_start.with_slots": expected true or false, got string "yes")");
  EXPECT_EQ(Error(Job(R"("warm_start": {"from": "/c", "variable": {}})")),
            R"(job: unknown field "warm_start.variable" (did you mean "warm_start.variables"?))");
}

TEST(JobSpecBoundsTest, EpochsAndSteps) {
  // A 0 alone is an error, not one epoch trained silently.
  EXPECT_EQ(Error(Job(R"("epochs": 0)")), R"(job: "epochs": must be >= 1, got 0)");
  EXPECT_EQ(Error(Job(R"("steps": 0)")), R"(job: "steps": must be >= 1, got 0)");
  EXPECT_EQ(Error(Job(R"("epochs": 0, "steps": 0)")), R"(job: "epochs": must be >= 1, got 0)");
  // Beside the other, a 0 is a placeholder.
  EXPECT_EQ(Parsed(Job(R"("epochs": 0, "steps": 5)")).steps(), 5);
  EXPECT_EQ(Parsed(Job(R"("epochs": 3, "steps": 0)")).epochs(), 3);
  // Bounded far from the overflow of step ids and (int32) epoch numbers.
  EXPECT_EQ(Error(Job(R"("steps": 9e18)")), R"(job: "steps": must be 1..1000000000, got 9e+18)");
  EXPECT_EQ(Error(Job(R"("steps": 9000000000000000000)")),
            R"(job: "steps": must be 1..1000000000, got 9000000000000000000)");
  EXPECT_EQ(Error(Job(R"("steps": 1000000001)")),
            R"(job: "steps": must be 1..1000000000, got 1000000001)");
  EXPECT_EQ(Parsed(Job(R"("steps": 1e9)")).steps(), kMaxJobSteps);
  EXPECT_EQ(Error(Job(R"("epochs": 100001)")), R"(job: "epochs": must be 1..100000, got 100001)");
  EXPECT_EQ(Parsed(Job(R"("epochs": 100000)")).epochs(), kMaxJobEpochs);
  EXPECT_EQ(Error(Job(R"("steps": 10.5)")), R"(job: "steps": must be an integer, got 10.5)");
  EXPECT_EQ(Error(Job(R"("epochs": 2.5)")), R"(job: "epochs": must be an integer, got 2.5)");
  EXPECT_EQ(Error(Job(R"("steps": 18446744073709551615)")),
            R"(job: "steps": is too large, got 18446744073709551615)");
  EXPECT_EQ(Error(Job(R"("eval_every_steps": 1e10)")),
            R"(job: "eval_every_steps": must be <= 1000000000, got 10000000000.0)");
  EXPECT_EQ(Error(Job(R"("eval_every_steps": 0.5)")),
            R"(job: "eval_every_steps": must be an integer, got 0.5)");
}

TEST(JobSpecBoundsTest, SyncReplicasAtMostWorkers) {
  EXPECT_EQ(Error(Job(R"("mode": "sync", "num_replicas": 1000)"), 2),
            R"(job: "num_replicas": must be <= the number of workers (2) in sync mode, got 1000)");
  EXPECT_THAT(Error(Job(R"("mode": "sync", "num_replicas": 3)"), 2),
              HasSubstr("must be <= the number of workers (2)"));
  EXPECT_EQ(Parsed(Job(R"("mode": "sync", "num_replicas": 2)"), 2).num_replicas(), 2);
  EXPECT_EQ(Parsed(Job(R"("mode": "sync", "num_replicas": 1)"), 2).num_replicas(), 1);
  // Other modes ignore the field; an unknown cluster (0 workers) checks nothing.
  EXPECT_EQ(Parsed(Job(R"("mode": "async", "num_replicas": 1000)"), 2).num_replicas(), 0);
  EXPECT_EQ(Parsed(Job(R"("mode": "sync", "num_replicas": 1000)"), 0).num_replicas(), 1000);
  EXPECT_EQ(Parsed(Job(R"("mode": "sync")"), 0).num_replicas(), 1);
}

// Backup workers: opt-in (0 by default), sync only, fewer than the replicas of a step.
TEST(JobSpecBoundsTest, SyncBackupWorkers) {
  EXPECT_EQ(Parsed(Job(R"("mode": "sync")"), 3).sync_backup_workers(), 0);
  const JobSpec backup = Parsed(Job(R"("mode": "sync", "sync_backup_workers": 1)"), 3);
  EXPECT_EQ(backup.num_replicas(), 3);
  EXPECT_EQ(backup.sync_backup_workers(), 1);
  EXPECT_EQ(Parsed(Job(R"("mode": "sync", "num_replicas": 2, "sync_backup_workers": 1)"), 3)
                .sync_backup_workers(),
            1);
  EXPECT_EQ(Error(Job(R"("mode": "sync", "sync_backup_workers": 3)"), 3),
            R"(job: "sync_backup_workers": must be < num_replicas (3): a sync step needs at )"
            R"(least one gradient (num_replicas - sync_backup_workers >= 1), got 3)");
  EXPECT_THAT(Error(Job(R"("mode": "sync", "num_replicas": 2, "sync_backup_workers": 2)"), 3),
              HasSubstr(R"("sync_backup_workers": must be < num_replicas (2))"));
  EXPECT_EQ(Error(Job(R"("mode": "sync", "sync_backup_workers": -1)"), 3),
            R"(job: "sync_backup_workers": must be >= 0 (0: none), got -1)");
  EXPECT_EQ(Error(Job(R"("mode": "async", "sync_backup_workers": 1)"), 3),
            R"(job: "sync_backup_workers": is for sync mode only (0 in mode "async"), got 1)");
  EXPECT_THAT(Error(Job(R"("mode": "stale", "sync_backup_workers": 2)"), 3),
              HasSubstr(R"(is for sync mode only (0 in mode "stale"))"));
  EXPECT_EQ(Parsed(Job(R"("mode": "async", "sync_backup_workers": 0)"), 3).sync_backup_workers(),
            0);
  EXPECT_THAT(Error(Job(R"("mode": "sync", "sync_backup_workers": 1.5)"), 3),
              HasSubstr(R"("sync_backup_workers": must be an integer)"));
  // An unknown cluster (shardctl) leaves the bound to the chief, unless num_replicas is given.
  EXPECT_EQ(Parsed(Job(R"("mode": "sync", "sync_backup_workers": 2)"), 0).sync_backup_workers(),
            2);
  EXPECT_THAT(Error(Job(R"("mode": "sync", "num_replicas": 2, "sync_backup_workers": 2)"), 0),
              HasSubstr("must be < num_replicas (2)"));
  // Round trip: written when set, absent (as in older files) when 0.
  const std::string text = JobSpecToJson(backup);
  EXPECT_THAT(text, HasSubstr(R"("num_replicas":3,"sync_backup_workers":1,)"));
  EXPECT_EQ(Parsed(text, 3).SerializeAsString(), backup.SerializeAsString());
  EXPECT_THAT(JobSpecToJson(Parsed(Job(R"("mode": "sync")"), 3)),
              Not(HasSubstr("sync_backup_workers")));
}

// The ps a job starts on: the first num_ps of TF_CONFIG's (0, the default: all of them).
TEST(JobSpecBoundsTest, NumPs) {
  EXPECT_EQ(Parsed(Job(R"("steps": 10)")).num_ps(), 0);
  EXPECT_EQ(Parsed(Job(R"("num_ps": null)")).num_ps(), 0);
  EXPECT_EQ(Parsed(Job(R"("num_ps": 0)")).num_ps(), 0);
  EXPECT_EQ(Parsed(Job(R"("num_ps": 3)")).num_ps(), 3);
  EXPECT_EQ(Parsed(Job(R"("num_ps": 2e0)")).num_ps(), 2);
  EXPECT_EQ(Error(Job(R"("num_ps": -1)")),
            R"(job: "num_ps": must be >= 0 (0: every ps of TF_CONFIG), got -1)");
  EXPECT_THAT(Error(Job(R"("num_ps": 2147483648)")), HasSubstr(R"(job: "num_ps": must be >= 0)"));
  EXPECT_THAT(Error(Job(R"("num_ps": 1.5)")), HasSubstr(R"("num_ps": must be an integer)"));
  EXPECT_THAT(Error(Job(R"("num_ps": "2")")), HasSubstr(R"("num_ps")"));
  EXPECT_THAT(Error(Job(R"("num_ps": true)")), HasSubstr(R"("num_ps")"));
  // Round trip (a job's stored identity, a checkpoint's manifest): written when set, absent
  // (as in older files) when 0.
  const JobSpec three = Parsed(Job(R"("num_ps": 3)"));
  EXPECT_THAT(JobSpecToJson(three), HasSubstr(R"("placement":"round_robin","num_ps":3,"seed":)"));
  ExpectRoundTrip(three);
  ExpectRoundTrip(three, 2);
  EXPECT_THAT(JobSpecToJson(Parsed(Job(R"("num_ps": 0)"))), Not(HasSubstr("num_ps")));
}

TEST(JobSpecBoundsTest, StepTimeout) {
  constexpr char kRange[] = R"(job: "step_timeout_ms": must be 1000..3600000 (1 s to 1 h), got )";
  EXPECT_EQ(Error(Job(R"("step_timeout_ms": 1)")), absl::StrCat(kRange, "1"));
  EXPECT_EQ(Error(Job(R"("step_timeout_ms": 999)")), absl::StrCat(kRange, "999"));
  EXPECT_EQ(Error(Job(R"("step_timeout_ms": 3600001)")), absl::StrCat(kRange, "3600001"));
  EXPECT_EQ(Error(Job(R"("step_timeout_ms": -5)")), absl::StrCat(kRange, "-5"));
  EXPECT_EQ(Parsed(Job(R"("step_timeout_ms": 1000)")).step_timeout_ms(), 1000);
  EXPECT_EQ(Parsed(Job(R"("step_timeout_ms": 3600000)")).step_timeout_ms(), 3600000);
}

TEST(JobSpecBoundsTest, Name) {
  for (const char* name : {"fashion-mlp", "fm_2.v1", "A", "x-"}) {
    EXPECT_EQ(Parsed(absl::StrCat(R"({"model": "softmax", "name": ")", name, R"("})")).name(),
              name);
  }
  for (const std::string& name :
       {std::string("a b"), std::string("../x"), std::string("a/b"), std::string(".hidden"),
        std::string("caf\\u00e9"), std::string(101, 'n')}) {
    EXPECT_THAT(Error(absl::StrCat(R"({"model": "softmax", "name": ")", name, R"("})")),
                HasSubstr(R"(job: "name": must be 1..100 characters of A-Z a-z 0-9 - _ .)"))
        << name;
  }
  EXPECT_EQ(
      Parsed(absl::StrCat(R"({"model": "softmax", "name": ")", std::string(100, 'n'), R"("})"))
          .name()
          .size(),
      100u);
}

TEST(JobSpecBoundsTest, ModelSize) {
  // 784 x 2000000 weights: a typo that would exhaust the memory of a ps or worker.
  EXPECT_EQ(Error(R"({"model": "mlp:2000000"})"),
            R"(job: "model": "mlp:2000000" has 1590000010 parameters; at most 1073741824 )"
            R"((4 GiB of float32 on every worker))");
  EXPECT_EQ(Parsed(R"({"model": "mlp:1000000"})").model(), "mlp:1000000");
  const std::string deep = absl::StrCat("mlp:", absl::StrJoin(std::vector<int>(65, 4), ","));
  EXPECT_EQ(Error(absl::StrCat(R"({"model": ")", deep, R"("})")),
            R"(job: "model": has 65 hidden layers; at most 64)");
  const std::string ok = absl::StrCat("mlp:", absl::StrJoin(std::vector<int>(64, 4), ","));
  EXPECT_EQ(Parsed(absl::StrCat(R"({"model": ")", ok, R"("})")).model(), ok);
}

TEST(JobSpecBoundsTest, OptimizerValuesThePsCanUse) {
  // The ps computes in float32: these would round to 0, 1 or infinity there.
  EXPECT_EQ(Error(Job(R"("optimizer": {"learning_rate": 1e-50})")),
            R"(job: "optimizer.learning_rate": must be in [1.2e-38, 3.4e38] (the ps computes in )"
            R"(float32), got 1e-50)");
  EXPECT_THAT(Error(Job(R"("optimizer": {"learning_rate": 1e39})")),
              HasSubstr(R"("optimizer.learning_rate": must be in [1.2e-38, 3.4e38])"));
  EXPECT_THAT(Error(Job(R"("optimizer": {"epsilon": 1e-46})")),
              HasSubstr(R"("optimizer.epsilon": must be in [1.2e-38, 3.4e38])"));
  EXPECT_THAT(Error(Job(R"("optimizer": {"initial_accumulator_value": 1e40})")),
              HasSubstr(R"("optimizer.initial_accumulator_value": must be in [1.2e-38)"));
  EXPECT_EQ(Error(Job(R"("optimizer": {"beta2": 0.99999999999})")),
            R"(job: "optimizer.beta2": must be in (0, 1) in float32, as the ps computes (at )"
            R"(most 0.99999994), got 0.99999999999)");
  EXPECT_THAT(Error(Job(R"("optimizer": {"type": "momentum", "momentum": 0.999999999})")),
              HasSubstr(R"("optimizer.momentum": must be in [0, 1) in float32)"));
  // The ps reads 0 as "unset" and uses its default: a file saying 0 would train with 0.9.
  EXPECT_EQ(Error(Job(R"("optimizer": {"beta1": 0})")),
            R"(job: "optimizer.beta1": must be in (0, 1), got 0)");
  EXPECT_EQ(Error(Job(R"("optimizer": {"initial_accumulator_value": 0})")),
            R"(job: "optimizer.initial_accumulator_value": must be > 0, got 0)");
  EXPECT_DOUBLE_EQ(Parsed(Job(R"("optimizer": {"beta2": 0.9999999})")).optimizer().beta2(),
                   0.9999999);
  EXPECT_DOUBLE_EQ(
      Parsed(Job(R"("optimizer": {"type": "momentum", "momentum": 0})")).optimizer().momentum(),
      0.0);
}

TEST(JobSpecBoundsTest, InitializerValuesFitFloat32) {
  EXPECT_EQ(Error(Job(R"("kernel_initializer": {"type": "constant", "value": 1e39})")),
            R"(job: "kernel_initializer.value": must be in [-3.4e38, 3.4e38] (parameters are )"
            R"(float32), got 1e+39)");
  EXPECT_THAT(Error(Job(R"("kernel_initializer": {"type": "random_normal", "stddev": 1e300})")),
              HasSubstr(R"("kernel_initializer.stddev": must be in [-3.4e38, 3.4e38])"));
  EXPECT_THAT(Error(Job(R"("kernel_initializer": {"type": "random_uniform", "minval": -1e39,
                                                     "maxval": 1})")),
              HasSubstr(R"("kernel_initializer.minval": must be in)"));
}

TEST(JobSpecBoundsTest, FullRoundTripWithEverything) {
  const JobSpec spec =
      Parsed(Job(R"("mode": "sync", "num_replicas": 2, "steps": 1000, "step_timeout_ms": 1000,
             "checkpoint": {"dir": "/c", "every_seconds": 30}, "warm_start": "/w")"),
             2);
  ExpectRoundTrip(spec, 2);
  ExpectRoundTrip(spec, 0);
}

// Every job file shipped in deploy/jobs parses.
TEST(JobSpecDeployTest, ShippedJobFilesAreValid) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  ASSERT_NE(srcdir, nullptr);
  const std::string dir = absl::StrCat(srcdir, "/shardps/deploy/jobs");
  DIR* listing = opendir(dir.c_str());
  ASSERT_NE(listing, nullptr) << dir;
  int files = 0;
  while (dirent* entry = readdir(listing)) {
    const std::string name = entry->d_name;
    if (!absl::EndsWith(name, ".json")) continue;
    std::ifstream in(absl::StrCat(dir, "/", name));
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<JobSpec> spec = ParseJobSpec(text.str(), 2);
    EXPECT_TRUE(spec.ok()) << name << ": " << spec.status();
    ++files;
  }
  closedir(listing);
  EXPECT_GE(files, 1);
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

constexpr char kExternalJob[] = R"({
  "name": "cnn", "model": "external", "dataset": "external", "examples_per_epoch": 60000,
  "batch_size": 64, "epochs": 2, "mode": "sync", "seed": 5,
  "variables": [
    {"name": "conv1/kernel", "shape": [3, 3, 1, 32]},
    {"name": "conv1/bias", "shape": [32]},
    {"name": "users", "shape": [943, 16], "access": "rows"},
    {"name": "tags", "shape": [null, 8]},
    {"name": "out/kernel", "shape": [32, 10], "initializer": {"type": "zeros"}}
  ]
})";

TEST(JobSpecExternalTest, ParsesVariablesWithDefaultsByRole) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(kExternalJob, 2);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->model(), "external");
  EXPECT_EQ(spec->dataset(), "external");
  EXPECT_EQ(spec->data_dir(), "");
  EXPECT_EQ(spec->examples_per_epoch(), 60000);
  ASSERT_EQ(spec->variables_size(), 5);
  const ExternalVariable& kernel = spec->variables(0);
  EXPECT_EQ(kernel.name(), "conv1/kernel");
  EXPECT_THAT(kernel.shape(), ::testing::ElementsAre(3, 3, 1, 32));
  EXPECT_FALSE(kernel.rows());
  EXPECT_EQ(kernel.initializer().type(), InitializerSpec::GLOROT_UNIFORM);  // the job's
  EXPECT_EQ(kernel.initializer().seed(), 5u);
  EXPECT_EQ(spec->variables(1).initializer().type(), InitializerSpec::ZEROS);  // a bias
  EXPECT_TRUE(spec->variables(2).rows());
  EXPECT_EQ(spec->variables(2).initializer().type(), InitializerSpec::RANDOM_UNIFORM);
  EXPECT_TRUE(spec->variables(3).rows());  // [null, 8]: a dynamic table, read by rows
  EXPECT_THAT(spec->variables(3).shape(), ::testing::ElementsAre(0, 8));
  EXPECT_EQ(spec->variables(4).initializer().type(), InitializerSpec::ZEROS);

  absl::StatusOr<JobSpec> again = ParseJobSpec(JobSpecToJson(*spec), 0);
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << JobSpecToJson(*spec);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*spec, *again))
      << JobSpecToJson(*spec);
}

std::string ExternalWith(const std::string& variables, const std::string& extra = "") {
  return absl::StrCat(R"({"model": "external", "dataset": "external", )",
                      R"("examples_per_epoch": 100, "variables": )", variables, extra, "}");
}

TEST(JobSpecExternalTest, RefusesBadDeclarations) {
  EXPECT_EQ(ErrorOf(R"({"model": "external", "dataset": "external", "variables": [
                      {"name": "w", "shape": [2]}]})"),
            R"(job: "examples_per_epoch": is required for model "external": the examples of one epoch)");
  EXPECT_THAT(ErrorOf(ExternalWith("[]")),
              HasSubstr(R"(job: "variables": model "external" needs a list of 1..4096 variables)"));
  EXPECT_EQ(ErrorOf(ExternalWith(R"([{"name": "w", "shap": [2]}])")),
            R"(job: unknown field "variables[0].shap" (did you mean "variables[0].shape"?))");
  EXPECT_THAT(ErrorOf(ExternalWith(R"([{"name": "w/part_0", "shape": [2]}])")),
              HasSubstr(R"(job: "variables[0].name": must be parts of)"));
  EXPECT_THAT(ErrorOf(ExternalWith(R"([{"name": "a b", "shape": [2]}])")),
              HasSubstr(R"("variables[0].name")"));
  EXPECT_EQ(ErrorOf(ExternalWith(R"([{"name": "w", "shape": [2, 0]}])")),
            R"(job: "variables[0].shape[1]": must be an integer in 1..2^40, got number 0)");
  EXPECT_THAT(ErrorOf(ExternalWith(R"([{"name": "w", "shape": [null, 2, 3]}])")),
              HasSubstr(R"(job: "variables[0].shape": a dynamic table is [null, dim])"));
  EXPECT_THAT(ErrorOf(ExternalWith(R"([{"name": "w", "shape": [null, 2], "access": "dense"}])")),
              HasSubstr(R"(job: "variables[0].access": must be "rows" for a dynamic table)"));
  EXPECT_EQ(ErrorOf(ExternalWith(R"([{"name": "w", "shape": [2]}, {"name": "w", "shape": [3]}])")),
            R"(job: "variables[1].name": "w" is declared twice)");
  EXPECT_THAT(ErrorOf(ExternalWith(R"([{"name": "w", "shape": [2], "initializer": "ones"}])")),
              HasSubstr(R"(job: "variables[0].initializer.type": unknown "ones")"));
  EXPECT_THAT(ErrorOf(ExternalWith(R"([{"name": "w", "shape": [2]}])", R"(, "data_dir": "/d")")),
              HasSubstr(R"(job: "data_dir": dataset "external" has no files)"));
}

TEST(JobSpecExternalTest, ModelAndDatasetGoTogether) {
  EXPECT_THAT(ErrorOf(R"({"model": "external", "examples_per_epoch": 1,
                          "variables": [{"name": "w", "shape": [2]}]})"),
              HasSubstr(R"(job: "dataset": model "external" takes dataset "external")"));
  EXPECT_THAT(ErrorOf(R"({"model": "mlp:32", "dataset": "external"})"),
              HasSubstr(R"(job: "model": dataset "external" takes model "external")"));
  EXPECT_THAT(ErrorOf(JobWith(R"("variables": [{"name": "w", "shape": [2]}])")),
              HasSubstr(R"(job: "variables": is for model "external" only)"));
  EXPECT_THAT(ErrorOf(JobWith(R"("examples_per_epoch": 10)")),
              HasSubstr(R"(job: "examples_per_epoch": is for model "external" only)"));
}

}  // namespace
}  // namespace shardps
