// What shardctl shows of a job: the progress line redrawn on a terminal, the plain lines
// written to a log, the multi-line `status` text, the final summary and the JSON of a
// JobStatus. Pure functions of the JobStatus the chief returns (times are passed in), so
// every format is unit-tested without a chief; the gRPC calls live in shardctl_main.cc.
//
// Thread-safety: free functions are pure; a PlainProgressThrottle is a plain value, used by
// one thread.
#ifndef SHARDPS_COORDINATOR_CLI_PROGRESS_H_
#define SHARDPS_COORDINATOR_CLI_PROGRESS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "proto/coordinator.pb.h"

namespace shardps {

// "NO_JOB", "RUNNING", "SUCCEEDED", "CANCELLED", "FAILED".
std::string StateName(JobStatus::State state);

// SUCCEEDED, CANCELLED or FAILED. The chief moves a job to SUCCEEDED only after the final
// evaluation was reported (or its wait for one timed out), so a watch ends here.
bool IsTerminal(JobStatus::State state);

// The exit code of `watch` for a job that ended in `status`: 0 SUCCEEDED, 4 FAILED or
// CANCELLED, 1 otherwise (no job).
int WatchExitCode(const JobStatus& status);

// The job's mode in lower case ("sync"), from status.mode or else the job spec.
std::string ModeName(const JobStatus& status);

// Seconds left at the current speed; nullopt when unknown (no speed yet, nothing left, or
// the job is not running).
std::optional<double> EtaSeconds(const JobStatus& status);

// m:ss below an hour, h:mm:ss above: "0:11", "12:05", "1:02:03"; "--:--" when negative.
std::string FormatClock(double seconds);

// Compact duration for logs: "11s", "2m05s", "1h02m"; "?" when negative.
std::string FormatDuration(double seconds);

// The 1-based epoch step `steps_done` falls in, and the number of epochs in `total_steps`;
// nullopt when steps_per_epoch is unknown.
struct EpochProgress {
  int64_t current = 0;
  int64_t total = 0;
};
std::optional<EpochProgress> Epochs(const JobStatus& status);

// "[#####.....]" with `width` cells.
std::string ProgressBar(int64_t done, int64_t total, int width);

// The single line redrawn on a terminal:
//   [#####.....] 1234/4690 steps  epoch 3/10  312.4 steps/s  loss 0.4123  acc 0.861
//   eval 0.852  ETA 0:11
// At most `max_width` characters when it is positive (a line wider than the terminal would
// wrap, and '\r' could no longer redraw it): acc, loss, speed, epoch, eval and ETA are
// dropped in that order, then the rest is cut.
std::string TerminalProgressLine(const JobStatus& status, int max_width = 0);

// One line for a log or a pipe:
//   step 1234/4690 epoch 3/10 steps/s 312.4 loss 0.4123 acc 0.861 eval_acc 0.852 eta 11s
std::string PlainProgressLine(const JobStatus& status);

// `shardctl status`: the job, its progress and metrics, and a table of workers. Ends in a
// newline.
std::string StatusText(const JobStatus& status);

// What `watch` prints when the job ended, e.g.
//   job fashion-mlp-17 SUCCEEDED
//   final test accuracy: 0.8912 (loss 0.3051) after 10 epochs, 4690 steps, 95.3 s, mode sync
// Ends in a newline.
std::string FinalSummary(const JobStatus& status);

// The JobStatus as JSON (proto field names, defaults included); one line unless `pretty`.
absl::StatusOr<std::string> StatusJson(const JobStatus& status, bool pretty);

// Decides when a plain progress line is due: the first time, every `interval_s` seconds, and
// at once when a new evaluation arrives or the state changes.
class PlainProgressThrottle {
 public:
  explicit PlainProgressThrottle(double interval_s = 2.0) : interval_s_(interval_s) {}

  // Whether to print `status`, seen at `now_s` (any monotonic clock, in seconds). Records a
  // print when it returns true.
  bool Due(const JobStatus& status, double now_s);

 private:
  double interval_s_;
  bool printed_ = false;
  double last_print_s_ = 0;
  JobStatus::State last_state_ = JobStatus::NO_JOB;
  bool last_has_eval_ = false;
  int64_t last_eval_step_ = 0;
  double last_eval_time_ = 0;
};

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_CLI_PROGRESS_H_
