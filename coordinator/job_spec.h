// The job file: the JSON a user writes to describe a training job, parsed and validated into
// the JobSpec proto that the chief holds and sends to workers and the evaluator.
//
//   {"name": "fashion-mlp", "model": "mlp:256,128", "dataset": "fashion_mnist",
//    "batch_size": 128, "epochs": 10,
//    "optimizer": {"type": "adam", "learning_rate": 0.001},
//    "mode": "sync", "partitioner": "min_size:262144:4", "placement": "by_bytes", "seed": 42}
//
// ParseJobSpec fills every default, so its consumers never apply defaults of their own. It
// reads no files and no environment.
//
// Thread-safety: pure functions.
#ifndef SHARDPS_COORDINATOR_JOB_SPEC_H_
#define SHARDPS_COORDINATOR_JOB_SPEC_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/dataset.h"
#include "proto/job.pb.h"

namespace shardps {

// Fashion-MNIST (data/dataset.h's kFashionMnist), the one dataset jobs can train on today.
inline constexpr int kFashionMnistInputDim = 784;
inline constexpr int kFashionMnistNumClasses = 10;
inline constexpr char kDefaultDataDir[] = "/usr/share/datasets/fashion-mnist";

// Bounds of a job's length, far inside every counter derived from it: step ids (int64),
// epoch numbers (int32: epoch = step / steps per epoch, and an epoch may be a single step),
// and times. The parser reads no data, so it cannot bound epochs x steps per epoch; with
// kMaxJobEpochs the epoch numbers stay within int32 whatever the data.
inline constexpr int64_t kMaxJobSteps = 1000000000;
// Every kDefaultFullEvery-th checkpoint of a job with dynamic tables is full, the others
// increments (CheckpointSpec.full_every when unset).
inline constexpr int kDefaultFullEvery = 5;
inline constexpr int64_t kMaxJobEpochs = 100000;

// Parses and validates a job file. `num_workers` is the cluster's worker count: the default
// of "num_replicas" in sync mode, and its upper bound; 0 (or less) when unknown (shardctl
// before it reaches a chief), which checks num_replicas against no cluster and defaults it
// to 1.
//
// Fields and defaults:
//   name             1..100 characters of A-Z a-z 0-9 - _ . ("job"); it names the job's
//                    variables, "{name}/dense_{k}/kernel" and "/bias"
//   model            "mlp:256,128" or "softmax" (required), at most 64 hidden layers and
//                    2^30 parameters
//   dataset          fashion_mnist;  data_dir  kDefaultDataDir
//   batch_size       1..65536 (128)
//   epochs | steps   1..kMaxJobEpochs | 1..kMaxJobSteps; one of them (1 epoch). A 0 counts
//                    as absent when the other is given, and is an error on its own.
//   optimizer        adam with learning_rate 0.001 (beta1 0.9, beta2 0.999, epsilon 1e-7,
//                    initial_accumulator_value 0.1, momentum 0.9 for "momentum", else 0),
//                    each within what float32 holds (the ps computes in float32); beta1 and
//                    beta2 in (0, 1), momentum in [0, 1)
//   mode             async (sync, stale);  staleness  2 (stale only)
//   num_replicas     sync only: 1..num_workers (num_workers)
//   sync_backup_workers  sync only: 0..num_replicas-1 (0): b backup workers, each sync step
//                    applied with the first num_replicas - b gradients to arrive (opt-in:
//                    runs are then not bit-identical); > 0 in another mode is an error
//   partitioner      "min_size:262144:4";  placement  round_robin
//   seed             42;  kernel_initializer  glorot_uniform seeded with the job's seed
//   eval_every_steps 0..kMaxJobSteps (0)
//   step_timeout_ms  1000..3600000 (60000)
//   steps_in_flight  0..2, 0 meaning the default: 2 in async or stale mode with one worker
//                    (or num_workers unknown), else 1: how many steps the chief keeps
//                    leased to each worker at once; with 2, a worker pulls the next step's
//                    parameters and pushes the last step's gradients while it computes
//   backend          auto (cpu, gpu)
//   staleness_lr     "none" ("inverse": the ps divides a push's learning rate by its
//                    staleness); async and stale mode only
//   delay_compensation  0 (off), or DC-ASGD's lambda in (0, 3.4e38]; async and stale only
//   delay_compensation_adaptive  false; true (DC-ASGD-a) needs delay_compensation > 0
//                    (the three: ps_server/staleness.h; in sync mode any value but the
//                    default is an error)
//   checkpoint       {"dir": "/abs/dir", "every_steps": N, "every_seconds": T, "keep": K,
//                    "keep_best": B}, or just "/abs/dir" (CheckpointSpec). dir: absolute (the
//                    chief and every ps open it); every_steps 0..kMaxJobSteps (0: not by
//                    steps); every_seconds 0..31536000 (0: not by time); keep >= 1 (3);
//                    keep_best false. The other fields without a dir are an error. Absent
//                    (or without a dir): no checkpoints, and the spec's checkpoint is unset.
//   warm_start       {"from": "/abs/ckpt", "variables": {"this job's": "checkpoint's", ...},
//                    "with_slots": B}, or just "/abs/ckpt" (WarmStartSpec). from: required,
//                    absolute; the keys of variables must be variables of this job, the
//                    names non-empty; with_slots false. Absent: the spec's warm_start is unset.
//   model "external", dataset "external": a model the user's code computes (shardps'
//                    Python package), with "examples_per_epoch" 1..2^40 (required) and
//                    "variables" (required, 1..4096): [{"name": "conv/kernel", "shape": [3, 3,
//                    1, 8], "access": "dense"|"rows", "initializer": ...}], names of A-Z a-z
//                    0-9 _ - . joined by "/", dimensions 1..2^40 ([null, dim]: a dynamic table,
//                    read by rows), access dense (rows for a dynamic table), initializer by
//                    role (rows: random_uniform [-0.05, 0.05); 2 or more dimensions:
//                    kernel_initializer; else zeros). Both fields are errors for another model.
// "optimizer" and "kernel_initializer" may also be given as a bare type name ("adam"). A
// JSON null counts as an absent field. The model text is stored normalized ("mlp:256,128").
// Integers may be written as integral floats (1e4), never as fractions.
//
// Every error is INVALID_ARGUMENT with one line naming the field, e.g.
//   job: "optimizer.learning_rate": must be > 0, got -1
//   job: "checkpoint.keep": must be >= 1, got 0
//   job: unknown field "epoch" (did you mean "epochs"?)
absl::StatusOr<JobSpec> ParseJobSpec(absl::string_view json, int num_workers);

// One field of a job file, parsed as ParseJobSpec parses "optimizer" and "kernel_initializer"
// (defaults filled, every value checked), for callers that declare variables themselves (the
// Python package): `json` is the field's value (an object, a bare type name as a JSON string,
// or null for the defaults), `field` its name in messages ("optimizer.learning_rate": must
// be > 0, got 0), which lack the "job: " of a job file's. `seed`: the initializer's default.
absl::StatusOr<OptimizerSpec> ParseOptimizerField(absl::string_view json, absl::string_view field);
absl::StatusOr<InitializerSpec> ParseInitializerField(absl::string_view json,
                                                      absl::string_view field, uint64_t seed);

// num_workers for ParseJobSpec of a job file that JobSpecToJson wrote (a job's stored identity,
// a checkpoint's manifest): such a file states every field, so the worker count only matters
// to the checks against the cluster (num_replicas <= workers), done when it was submitted.
inline constexpr int kStoredJobWorkers = 1 << 20;

// The spec as a job file: ParseJobSpec(JobSpecToJson(spec), n) gives `spec` back for any spec
// ParseJobSpec returned, with n unknown (0) or at least its num_replicas (job_id, which the
// chief assigns, is not part of a job file and is left out). Every field is written, so the
// file means the same under later defaults. Keys in the job file's order; one line when `indent` < 0, else pretty-printed.
std::string JobSpecToJson(const JobSpec& spec, int indent = -1);

// Steps of one epoch: ceil(num_examples / batch_size); 0 when either is not positive.
int64_t StepsPerEpoch(int64_t num_examples, int batch_size);

// The steps_in_flight a job file without one gets, chosen by time to accuracy
// (docs/design.md#async-defaults-chosen-by-time-to-accuracy has why): 2 for an async or stale
// job of one worker (or an unknown number, 0), whose second step in flight computes with the
// worker's own last update (apply_own_gradient), so it costs no accuracy; 1 with several
// workers, where a second step in flight also makes every gradient one of the other workers'
// steps staler, and 1 in sync mode. Resolved when the job is parsed, with the cluster's workers
// at that time.
int DefaultStepsInFlight(JobSpec::Mode mode, int num_workers);

// Steps the chief keeps leased to one worker: spec.steps_in_flight(), or, when it is 0 (a
// spec not made by ParseJobSpec), 2 for async and stale and 1 for sync.
int StepsInFlight(const JobSpec& spec);

// Whether workers apply their own previous gradient to parameters pulled without it
// (JobSpec.own_gradient; when unset, the mode's default: yes in async and stale mode).
bool ApplyOwnGradient(const JobSpec& spec);

// "async", "sync" or "stale".
std::string JobModeName(JobSpec::Mode mode);

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_JOB_SPEC_H_
