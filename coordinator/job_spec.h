// The job file: the JSON a user writes to describe a training job, parsed and validated into
// the JobSpec proto that the chief holds and sends to workers and the evaluator.
//
//   {"name": "fashion-mlp", "model": "mlp:256,128", "dataset": "fashion_mnist",
//    "batch_size": 128, "epochs": 10,
//    "optimizer": {"type": "adam", "learning_rate": 0.001},
//    "mode": "sync", "partitioner": "min_size:262144:4", "placement": "by_bytes", "seed": 42}
//
// Every field but "model" is optional; ParseJobSpec fills the defaults, so the JobSpec it
// returns is complete and its consumers never apply defaults of their own. Unknown keys are
// rejected (a misspelt "epoch" must not silently train with the default), and every error is
// one line naming the JSON field at fault, so that the chief can hand it back to shardctl.
//
// The chief calls ParseJobSpec on the text of SubmitJob; shardctl calls it for `validate` and
// before submitting. The parser reads no files and no environment.
//
// Thread-safety: pure functions.
#ifndef SHARDPS_COORDINATOR_JOB_SPEC_H_
#define SHARDPS_COORDINATOR_JOB_SPEC_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/job.pb.h"

namespace shardps {

// Fashion-MNIST, the one dataset jobs can train on today.
inline constexpr char kFashionMnist[] = "fashion_mnist";
inline constexpr int kFashionMnistInputDim = 784;
inline constexpr int kFashionMnistNumClasses = 10;
inline constexpr char kDefaultDataDir[] = "/usr/share/datasets/fashion-mnist";

// Parses and validates a job file. `num_workers` (the cluster's worker count) is the default
// of "num_replicas" in sync mode. Defaults: name "job", dataset fashion_mnist, data_dir
// kDefaultDataDir, batch_size 128, epochs 1 (when neither epochs nor steps is given),
// optimizer adam with learning_rate 0.001 (beta1 0.9, beta2 0.999, epsilon 1e-7,
// initial_accumulator_value 0.1, momentum 0.9 for "momentum", else 0), mode async,
// staleness 2 (stale only), num_replicas num_workers (sync only), partitioner
// "min_size:262144:4", placement round_robin, seed 42, kernel_initializer glorot_uniform
// seeded with the job's seed, eval_every_steps 0, step_timeout_ms 60000, steps_in_flight 2
// (async, stale) or 1 (sync), backend auto. "steps_in_flight" (0..2, 0 meaning the default) is
// how many steps the chief keeps leased to each worker at once: with 2, a worker pulls the
// next step's parameters and pushes the last step's gradients while it computes.
// "optimizer" and "kernel_initializer" may also be given as a bare type name ("adam"). A
// JSON null counts as an absent field. The model text is stored normalized ("mlp:256,128").
//
// Every error is INVALID_ARGUMENT with one line naming the field, e.g.
//   job: "optimizer.learning_rate": must be > 0, got -1
//   job: unknown field "epoch" (did you mean "epochs"?)
absl::StatusOr<JobSpec> ParseJobSpec(absl::string_view json, int num_workers);

// The spec as a job file: ParseJobSpec(JobSpecToJson(spec), n) gives `spec` back for any spec
// ParseJobSpec returned (job_id, which the chief assigns, is not part of a job file and is
// left out). Keys in the job file's order; one line when `indent` < 0, else pretty-printed.
std::string JobSpecToJson(const JobSpec& spec, int indent = -1);

// Steps of one epoch: ceil(num_examples / batch_size); 0 when either is not positive.
int64_t StepsPerEpoch(int64_t num_examples, int batch_size);

// Steps the chief keeps leased to one worker: spec.steps_in_flight(), or the mode's default
// when it is 0 (2 for async and stale, 1 for sync).
int StepsInFlight(const JobSpec& spec);

// "async", "sync" or "stale".
std::string JobModeName(JobSpec::Mode mode);

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_JOB_SPEC_H_
