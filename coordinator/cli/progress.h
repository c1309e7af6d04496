// What shardctl shows of a job: the progress line redrawn on a terminal, the plain lines
// written to a log, the multi-line `status` text, the final summary and the JSON of a
// JobStatus, and a committed checkpoint. Pure functions of what the chief returns (the
// current time is passed in), so every format is unit-tested without a chief; the gRPC calls
// live in shardctl_main.cc.
//
// A RUNNING job that is not advancing (JobStatus.phase: a ps unreachable, a checkpoint cut,
// a recovery) never shows a bar, a speed or an ETA: its line says NOT ADVANCING and why, so
// that a failure never looks like progress. What is wrong with durable state (a failed
// checkpoint, a ps not up, recoveries) is shown; what is fine stays one short line or none.
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

// The workers as a table (index, address, state, backend, steps, failures; with `detail` also
// where each came from, TF_CONFIG or a join, and its joins), headed by their count and, once
// any joined or left, the chief's join and leave counts; why each failed one failed below.
std::string WorkersTable(const JobStatus& status, bool detail = false);

// Whether the job is RUNNING but not advancing (status.phase set).
bool NotAdvancing(const JobStatus& status);

// m:ss below an hour, h:mm:ss above: "0:11", "12:05", "1:02:03"; "--:--" when negative.
std::string FormatClock(double seconds);

// Compact duration for logs: "11s", "2m05s", "1h02m"; "?" when negative.
std::string FormatDuration(double seconds);

// Bytes in binary units: "512 B", "1.5 KiB", "12.3 MiB", "2.0 GiB".
std::string FormatBytes(int64_t bytes);

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
//   eval 0.852  ckpt 7  ETA 0:11
// with "CHECKPOINT FAILED" after the ETA while status.checkpoint_error is set, and
// "2 recoveries, 35 steps lost" once there were any. A job not advancing shows instead
//   1234/4690 steps  NOT ADVANCING: paused: ps 1 (10.0.0.3:2222) unreachable for 12 s: ...
// At most `max_width` characters when it is positive (a line wider than the terminal would
// wrap, and '\r' could no longer redraw it): acc, loss, speed, recoveries, ckpt, epoch,
// eval and ETA are dropped in that order, then the rest is cut.
std::string TerminalProgressLine(const JobStatus& status, int max_width = 0);

// One line for a log or a pipe:
//   step 1234/4690 epoch 3/10 steps/s 312.4 loss 0.4123 acc 0.861 eval_acc 0.852 ckpt 7
//   eta 11s
// with " recoveries 2 steps_lost 35" and " CHECKPOINT FAILED: <error>" when they apply; a job
// not advancing: "step 1234/4690 epoch 3/10 NOT ADVANCING: <phase>".
std::string PlainProgressLine(const JobStatus& status);

// `shardctl status`: the job, its progress and metrics, why it is not advancing, where it
// resumed from, its last checkpoint (its age at `now_unix_s`) or checkpoint error, its
// recoveries, a table of ps tasks (with their errors and downtime when any is not up) and
// a table of workers. Ends in a newline.
std::string StatusText(const JobStatus& status, double now_unix_s);

// What `watch` prints when the job ended, e.g.
//   job fashion-mlp-17 SUCCEEDED
//   final test accuracy: 0.8912 (loss 0.3051) after 10 epochs, 4690 steps, 95.3 s, mode sync
//   final checkpoint 12: /ckpt/fm/ckpt-12 (4690 steps)
// and lines for a checkpoint error, recoveries and a resume when there were any. Ends in a
// newline.
std::string FinalSummary(const JobStatus& status);

// A committed checkpoint in one line, as `shardctl checkpoint` prints it:
//   checkpoint 7: /ckpt/fm/ckpt-7, 1200 steps, 12.3 MiB, written in 0.84 s (paused 12 ms)
std::string CheckpointLine(const CheckpointInfo& checkpoint);

// A scale-ps outcome in one line, as `shardctl scale-ps` prints it:
//   scaled from 2 to 3 ps (layout version 2): through checkpoint 4 at step 212, 1.1 MiB moved,
//   paused 0.41 s, 0.52 s in all
// or "scale from 2 to 3 ps failed: <why>".
std::string ScaleLine(const ScalePsResponse& scale);
// "moved 8 buckets of emb from shard 0 to shard 1 (ps 0 to ps 1, routing version 8): ...",
// or the failure.
std::string BucketMoveLine(const MoveTableBucketsResponse& move);

// The JobStatus as JSON (proto field names, defaults included); one line unless `pretty`.
absl::StatusOr<std::string> StatusJson(const JobStatus& status, bool pretty);

// Decides when a plain progress line is due: the first time, every `interval_s` seconds, and
// at once when the state, the phase, the last checkpoint, the checkpoint error or the number
// of recoveries changes, or a new evaluation arrives.
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
  std::string last_phase_;
  int64_t last_checkpoint_id_ = 0;
  std::string last_checkpoint_error_;
  int last_recoveries_ = 0;
};

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_CLI_PROGRESS_H_
