// The chief daemon's own flags (coordinator/chief_main.cc), each with the values it takes,
// and what they mean for the Chief. The common daemon flags are rpc/daemon.h's.
//
// Thread-safety: plain data, for main().
#ifndef SHARDPS_COORDINATOR_CHIEF_OPTIONS_H_
#define SHARDPS_COORDINATOR_CHIEF_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/flags.h"
#include "common/tf_config.h"
#include "proto/coordinator.pb.h"

namespace shardps {

struct ChiefOptions {
  std::string job_file;        // run this job at once ("": wait for shardctl submit)
  std::string checkpoint_dir;  // for jobs whose job file names none
  int64_t checkpoint_every_s = 30;  // with checkpoint_dir, no schedule in the job; 0: 30
  bool resume = false;              // --job: resume, or fail
  bool fresh = false;               // --job: start over
  int64_t final_eval_timeout_s = 120;
  std::string evaluator = "auto";  // auto, yes or no
  int64_t ps_wait_s = 300;         // --job: for every ps to answer
  int64_t interrupt_timeout_s = 60;  // on SIGTERM: for the job's checkpoint
  std::string tensorboard_dir;       // TensorBoard event files of training ("": none)

  // Registers a flag for each field on `flags`, which writes the field when parsed.
  void AddFlags(FlagParser* flags);
  // What the flags' own values cannot say: INVALID_ARGUMENT for --resume with --fresh.
  absl::Status Validate() const;

  absl::Duration checkpoint_every() const;
  SubmitJobRequest::Resume resume_mode() const;
  // Whether an evaluator follows the jobs: --evaluator, or for auto whether `config`'s
  // cluster lists one.
  bool has_evaluator(const TfConfig& config) const;
};

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_CHIEF_OPTIONS_H_
