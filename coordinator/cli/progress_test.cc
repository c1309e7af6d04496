#include "coordinator/cli/progress.h"

#include <string>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kNow = 1.8e9;  // "now", as unix time, for ages in the status text

// A sync job of 10 epochs of 469 steps, a quarter through, with an evaluation.
JobStatus RunningJob() {
  JobStatus s;
  s.set_state(JobStatus::RUNNING);
  s.set_job_id("fashion-mlp-17");
  s.set_name("fashion-mlp");
  s.set_steps_done(1234);
  s.set_total_steps(4690);
  s.set_steps_per_epoch(469);
  s.set_elapsed_s(62.4);
  s.set_steps_per_sec(312.4);
  s.set_examples_per_sec(39987.2);
  s.set_loss(0.41234);
  s.set_accuracy(0.8614);
  s.set_has_eval(true);
  s.mutable_last_eval()->set_step(1200);
  s.mutable_last_eval()->set_accuracy(0.8521);
  s.mutable_last_eval()->set_loss(0.41);
  s.mutable_last_eval()->set_examples(10000);
  s.set_mode("SYNC");
  s.mutable_job()->set_mode(JobSpec::SYNC);
  s.mutable_job()->set_num_replicas(2);
  s.mutable_job()->set_model("mlp:256,128");
  s.mutable_job()->set_batch_size(128);
  s.mutable_job()->set_dataset("fashion_mnist");
  s.mutable_job()->set_backend("auto");
  s.mutable_job()->mutable_optimizer()->set_type(OptimizerSpec::ADAM);
  s.mutable_job()->mutable_optimizer()->set_learning_rate(0.001);
  WorkerInfo* w0 = s.add_workers();
  w0->set_index(0);
  w0->set_address("localhost:2223");
  w0->set_state("busy");
  w0->set_backend("cpu");
  w0->set_steps_done(617);
  WorkerInfo* w1 = s.add_workers();
  w1->set_index(1);
  w1->set_address("worker-1.shardps.svc.cluster.local:2223");
  w1->set_state("failed");
  w1->set_steps_done(617);
  w1->set_failures(2);
  return s;
}

JobStatus SucceededJob() {
  JobStatus s = RunningJob();
  s.set_state(JobStatus::SUCCEEDED);
  s.set_training_done(true);
  s.set_steps_done(4690);
  s.set_elapsed_s(95.34);
  s.mutable_last_eval()->set_step(2345);
  s.mutable_last_eval()->set_accuracy(0.89123);
  s.mutable_last_eval()->set_loss(0.30512);
  return s;
}

TEST(ProgressTest, StatesAndExitCodes) {
  EXPECT_EQ(StateName(JobStatus::RUNNING), "RUNNING");
  EXPECT_FALSE(IsTerminal(JobStatus::NO_JOB));
  EXPECT_FALSE(IsTerminal(JobStatus::RUNNING));
  EXPECT_TRUE(IsTerminal(JobStatus::SUCCEEDED));
  EXPECT_TRUE(IsTerminal(JobStatus::CANCELLED));
  EXPECT_TRUE(IsTerminal(JobStatus::FAILED));
  JobStatus s;
  EXPECT_EQ(WatchExitCode(s), 1);
  s.set_state(JobStatus::SUCCEEDED);
  EXPECT_EQ(WatchExitCode(s), 0);
  s.set_state(JobStatus::FAILED);
  EXPECT_EQ(WatchExitCode(s), 4);
  s.set_state(JobStatus::CANCELLED);
  EXPECT_EQ(WatchExitCode(s), 4);
}

TEST(ProgressTest, ModeName) {
  JobStatus s = RunningJob();
  EXPECT_EQ(ModeName(s), "sync");
  s.clear_mode();
  s.mutable_job()->set_mode(JobSpec::STALE);
  EXPECT_EQ(ModeName(s), "stale");
  EXPECT_EQ(ModeName(JobStatus()), "");
}

TEST(ProgressTest, Clock) {
  EXPECT_EQ(FormatClock(0), "0:00");
  EXPECT_EQ(FormatClock(11.4), "0:11");
  EXPECT_EQ(FormatClock(725), "12:05");
  EXPECT_EQ(FormatClock(3723), "1:02:03");
  EXPECT_EQ(FormatClock(-1), "--:--");
  EXPECT_EQ(FormatDuration(11), "11s");
  EXPECT_EQ(FormatDuration(125), "2m05s");
  EXPECT_EQ(FormatDuration(3723), "1h02m");
  EXPECT_EQ(FormatDuration(-3), "?");
}

TEST(ProgressTest, Eta) {
  JobStatus s = RunningJob();
  ASSERT_TRUE(EtaSeconds(s).has_value());
  EXPECT_NEAR(*EtaSeconds(s), (4690 - 1234) / 312.4, 1e-9);
  s.set_steps_per_sec(0);
  EXPECT_FALSE(EtaSeconds(s).has_value());
  s.set_steps_done(4690);
  EXPECT_EQ(EtaSeconds(s), 0.0);
  EXPECT_FALSE(EtaSeconds(SucceededJob()).has_value());
}

TEST(ProgressTest, Epochs) {
  JobStatus s = RunningJob();
  ASSERT_TRUE(Epochs(s).has_value());
  EXPECT_EQ(Epochs(s)->current, 3);
  EXPECT_EQ(Epochs(s)->total, 10);
  s.set_steps_done(0);
  EXPECT_EQ(Epochs(s)->current, 1);
  s.set_steps_done(4690);  // done: the last epoch, not an 11th
  EXPECT_EQ(Epochs(s)->current, 10);
  s.set_total_steps(4700);  // AddSteps: a partial 11th epoch
  EXPECT_EQ(Epochs(s)->total, 11);
  s.set_steps_per_epoch(0);
  EXPECT_FALSE(Epochs(s).has_value());
}

TEST(ProgressTest, Bar) {
  EXPECT_EQ(ProgressBar(0, 100, 10), "[..........]");
  EXPECT_EQ(ProgressBar(50, 100, 10), "[#####.....]");
  EXPECT_EQ(ProgressBar(99, 100, 10), "[#########.]");
  EXPECT_EQ(ProgressBar(100, 100, 10), "[##########]");
  EXPECT_EQ(ProgressBar(150, 100, 10), "[##########]");
  EXPECT_EQ(ProgressBar(5, 0, 4), "[....]");
}

TEST(ProgressTest, TerminalLine) {
  EXPECT_EQ(TerminalProgressLine(RunningJob()),
            "[##........] 1234/4690 steps  epoch 3/10  312.4 steps/s  loss 0.4123  acc 0.861  "
            "eval 0.852  ETA 0:11");
  JobStatus fresh = RunningJob();
  fresh.set_steps_done(0);
  fresh.set_steps_per_sec(0);
  fresh.set_has_eval(false);
  EXPECT_EQ(TerminalProgressLine(fresh), "[..........] 0/4690 steps  epoch 1/10  ETA --:--");
  JobStatus awaiting = RunningJob();
  awaiting.set_steps_done(4690);
  awaiting.set_training_done(true);
  EXPECT_THAT(TerminalProgressLine(awaiting), HasSubstr("final eval..."));
  EXPECT_THAT(TerminalProgressLine(SucceededJob()), HasSubstr("SUCCEEDED"));
}

TEST(ProgressTest, TerminalLineFitsWidth) {
  const std::string line = TerminalProgressLine(RunningJob(), 60);
  EXPECT_LE(line.size(), 60u);
  EXPECT_THAT(line, HasSubstr("1234/4690 steps"));
  EXPECT_THAT(line, HasSubstr("ETA 0:11"));
  EXPECT_THAT(line, HasSubstr("eval 0.852"));
  EXPECT_THAT(line, Not(HasSubstr("acc 0.861")));
  EXPECT_EQ(TerminalProgressLine(RunningJob(), 10).size(), 10u);
}

TEST(ProgressTest, PlainLine) {
  EXPECT_EQ(PlainProgressLine(RunningJob()),
            "step 1234/4690 epoch 3/10 steps/s 312.4 loss 0.4123 acc 0.861 eval_acc 0.852 "
            "eta 11s");
  EXPECT_EQ(PlainProgressLine(SucceededJob()),
            "step 4690/4690 epoch 10/10 steps/s 312.4 loss 0.4123 acc 0.861 eval_acc 0.891 "
            "state SUCCEEDED");
}

TEST(ProgressTest, StatusText) {
  const std::string text = StatusText(RunningJob(), kNow);
  EXPECT_THAT(text, HasSubstr("job        fashion-mlp-17 (\"fashion-mlp\")\n"));
  EXPECT_THAT(text, HasSubstr("state      RUNNING\n"));
  EXPECT_THAT(text, HasSubstr("mode       sync, 2 replicas per step\n"));
  JobStatus backups = RunningJob();
  backups.mutable_job()->set_num_replicas(3);
  backups.mutable_job()->set_sync_backup_workers(1);
  EXPECT_THAT(StatusText(backups, kNow),
              HasSubstr("mode       sync, 3 replicas per step, the first 2 applied\n"));
  EXPECT_THAT(text, HasSubstr("mlp:256,128, batch 128, adam lr 0.001"));
  EXPECT_THAT(text, HasSubstr("1234/4690 steps (26.3%), epoch 3/10 (469 steps each)"));
  EXPECT_THAT(text, HasSubstr("312.4 steps/s"));
  EXPECT_THAT(text, HasSubstr("1:02 elapsed, ETA 0:11"));
  EXPECT_THAT(text, HasSubstr("accuracy 0.8521, loss 0.4100 at step 1200"));
  EXPECT_THAT(text, HasSubstr("workers    2\n"));
  EXPECT_THAT(text, HasSubstr("INDEX  ADDRESS"));
  EXPECT_THAT(text, HasSubstr("FAILURES"));
  // Rows: index, address, state, backend, steps, failures; columns sized to the widest.
  EXPECT_THAT(text, HasSubstr("      1  worker-1.shardps.svc.cluster.local:2223  failed  -"));
  EXPECT_THAT(text, HasSubstr("      0  localhost:2223                           busy    cpu"));
  EXPECT_TRUE(absl::EndsWith(text, "\n"));
  // A failed worker's error, under the table.
  JobStatus with_error = RunningJob();
  with_error.mutable_workers(1)->set_error("incompatible shardps protocol: ...");
  with_error.mutable_workers(0)->set_error("ignored while not failed");
  const std::string error_text = StatusText(with_error, kNow);
  EXPECT_THAT(error_text, HasSubstr("\n  worker 1: incompatible shardps protocol: ...\n"));
  EXPECT_THAT(error_text, Not(HasSubstr("ignored while not failed")));
  // So is an unreachable one's (not up yet, say).
  JobStatus unreachable = RunningJob();
  unreachable.mutable_workers(1)->set_state("unreachable");
  unreachable.mutable_workers(1)->set_error("failed to connect: Connection refused");
  EXPECT_THAT(StatusText(unreachable, kNow),
              HasSubstr("\n  worker 1: failed to connect: Connection refused\n"));

  JobStatus failed = RunningJob();
  failed.set_state(JobStatus::FAILED);
  failed.set_error("worker 1 failed 3 times");
  failed.set_steps_requeued(4);
  const std::string failed_text = StatusText(failed, kNow);
  EXPECT_THAT(failed_text, HasSubstr("error      worker 1 failed 3 times\n"));
  EXPECT_THAT(failed_text, HasSubstr("requeued   4 steps"));
  EXPECT_THAT(failed_text, Not(HasSubstr("ETA")));
}

TEST(ProgressTest, StatusTextWithoutJob) {
  JobStatus s;
  WorkerInfo* w = s.add_workers();
  w->set_address("localhost:2223");
  w->set_state("idle");
  const std::string text = StatusText(s, kNow);
  EXPECT_THAT(text, HasSubstr("NO_JOB"));
  EXPECT_THAT(text, HasSubstr("localhost:2223"));
  EXPECT_THAT(StatusText(JobStatus(), kNow), HasSubstr("workers    none"));
}

// Elastic workers: the count of joins and leaves heads the table once there are any;
// `shardctl workers` (detail) adds where each came from and its joins.
TEST(ProgressTest, WorkersTableShowsJoinsLeavesAndSources) {
  JobStatus s;
  WorkerInfo* w0 = s.add_workers();
  w0->set_index(0);
  w0->set_address("w0:1");
  w0->set_state("busy");
  w0->set_source("tf_config");
  w0->set_joins(1);
  WorkerInfo* w3 = s.add_workers();
  w3->set_index(3);
  w3->set_address("w3:1");
  w3->set_state("left");
  w3->set_source("joined");
  w3->set_left(true);
  w3->set_joins(2);
  EXPECT_THAT(WorkersTable(s), HasSubstr("workers    2\n"));
  EXPECT_THAT(WorkersTable(s), Not(HasSubstr("SOURCE")));
  s.set_worker_joins(3);
  s.set_worker_leaves(1);
  const std::string detail = WorkersTable(s, /*detail=*/true);
  EXPECT_THAT(detail, HasSubstr("workers    2 (3 joins, 1 leaves)\n"));
  EXPECT_THAT(detail, HasSubstr("SOURCE     JOINS"));
  EXPECT_THAT(detail,
              HasSubstr("      3  w3:1     left   -                 0         0  joined         2"));
  EXPECT_THAT(detail, HasSubstr("tf_config      1"));
}

TEST(ProgressTest, FinalSummary) {
  EXPECT_EQ(FinalSummary(SucceededJob()),
            "job fashion-mlp-17 SUCCEEDED\n"
            "final test accuracy: 0.8912 (loss 0.3051) after 10 epochs, 4690 steps, 95.3 s, "
            "mode sync\n");

  // A click model's summary adds its AUC and, where known, the ceiling.
  JobStatus ctr = SucceededJob();
  ctr.mutable_last_eval()->set_auc(0.8512);
  ctr.mutable_last_eval()->set_auc_ceiling(0.8756);
  EXPECT_THAT(FinalSummary(ctr),
              HasSubstr("final test accuracy: 0.8912 (loss 0.3051, AUC 0.8512 (ceiling 0.8756)) "));

  JobStatus no_eval = SucceededJob();
  no_eval.set_has_eval(false);
  no_eval.clear_last_eval();
  EXPECT_THAT(FinalSummary(no_eval), HasSubstr("no final evaluation reported"));

  JobStatus cancelled = RunningJob();
  cancelled.set_state(JobStatus::CANCELLED);
  EXPECT_EQ(FinalSummary(cancelled),
            "job fashion-mlp-17 CANCELLED\n"
            "stopped after 2.63 epochs, 1234/4690 steps, 62.4 s, mode sync\n"
            "last test accuracy: 0.8521 (loss 0.4100) at step 1200\n");

  JobStatus failed = RunningJob();
  failed.set_state(JobStatus::FAILED);
  failed.set_error("no workers left");
  EXPECT_THAT(FinalSummary(failed), HasSubstr("job fashion-mlp-17 FAILED: no workers left\n"));
}

TEST(ProgressTest, Json) {
  absl::StatusOr<std::string> json = StatusJson(RunningJob(), /*pretty=*/false);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"state\":\"RUNNING\""));
  EXPECT_THAT(*json, HasSubstr("\"job_id\":\"fashion-mlp-17\""));
  EXPECT_THAT(*json, HasSubstr("\"training_done\":false"));  // defaults are printed too
  EXPECT_THAT(*json, Not(HasSubstr("\n")));
  absl::StatusOr<std::string> pretty = StatusJson(RunningJob(), /*pretty=*/true);
  ASSERT_TRUE(pretty.ok()) << pretty.status();
  EXPECT_THAT(*pretty, HasSubstr("\n"));
  EXPECT_FALSE(absl::EndsWith(*pretty, "\n"));
}

TEST(ProgressTest, Throttle) {
  PlainProgressThrottle throttle(2.0);
  JobStatus s = RunningJob();
  EXPECT_TRUE(throttle.Due(s, 100.0));  // first
  EXPECT_FALSE(throttle.Due(s, 100.5));
  EXPECT_FALSE(throttle.Due(s, 101.9));
  EXPECT_TRUE(throttle.Due(s, 102.0));  // interval
  s.mutable_last_eval()->set_step(1300);
  EXPECT_TRUE(throttle.Due(s, 102.5));  // new evaluation
  EXPECT_FALSE(throttle.Due(s, 103.0));
  s.set_state(JobStatus::SUCCEEDED);
  EXPECT_TRUE(throttle.Due(s, 103.1));  // state change
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

TEST(ProgressEpochsTest, SyncRoundingDoesNotAddAnEpoch) {
  JobStatus status;
  status.set_steps_per_epoch(469);
  status.set_total_steps(7036);  // 15 epochs of 469, rounded up to whole sync steps of 2
  status.set_steps_done(7036);
  status.mutable_job()->set_epochs(15);
  status.mutable_job()->set_num_replicas(2);
  auto epochs = Epochs(status);
  ASSERT_TRUE(epochs.has_value());
  EXPECT_EQ(epochs->total, 15);
  EXPECT_EQ(epochs->current, 15);
  status.set_total_steps(7036 + 469 * 2);  // steps added: the real count shows
  EXPECT_EQ(Epochs(status)->total, 18);    // 17 epochs and one step
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

TEST(StatusTextTest, ShowsStepPhases) {
  JobStatus status;
  status.set_state(JobStatus::RUNNING);
  status.set_steps_done(10);
  status.set_total_steps(100);
  status.set_pull_ms(1.25);
  status.set_compute_ms(3.5);
  status.set_push_ms(0.75);
  std::string text = StatusText(status, kNow);
  EXPECT_NE(text.find("pull 1.25 ms, compute 3.50 ms, push 0.75 ms"), std::string::npos) << text;
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

constexpr char kPsDown[] =
    "paused: ps 1 (10.0.0.3:2222) unreachable for 12 s: failed to connect to all addresses";

// RunningJob with checkpoints and two ps tasks, all well.
JobStatus DurableJob() {
  JobStatus s = RunningJob();
  s.mutable_job()->mutable_checkpoint()->set_dir("/ckpt/fm");
  s.set_has_checkpoint(true);
  CheckpointInfo* c = s.mutable_last_checkpoint();
  c->set_id(7);
  c->set_path("/ckpt/fm/ckpt-7");
  c->set_steps_done(1200);
  c->set_unix_time(kNow - 125);
  c->set_bytes(12897484);  // 12.3 MiB
  c->set_write_seconds(0.8412);
  c->set_pause_ms(12.4);
  for (int i = 0; i < 2; ++i) {
    PsInfo* ps = s.add_ps();
    ps->set_index(i);
    ps->set_address(absl::StrCat("ps-", i, ":2222"));
    ps->set_state("up");
    ps->set_incarnation(0x5f3a + i);
    ps->set_generation(0);
    ps->set_bytes(2048 + i);
  }
  return s;
}

// DurableJob with everything going wrong at once.
JobStatus TroubledJob() {
  JobStatus s = DurableJob();
  s.set_phase(kPsDown);
  s.set_generation(3);
  PsInfo* ps1 = s.mutable_ps(1);
  ps1->set_state("unreachable");
  ps1->set_error("failed to connect to all addresses");
  ps1->set_down_s(12.2);
  s.set_checkpoint_error("checkpoint 8: ps 1: UNAVAILABLE: failed to connect");
  for (int i = 0; i < 7; ++i) {
    RecoveryInfo* r = s.add_recoveries();
    r->set_unix_time(kNow - 600 + i * 60);
    r->set_cause(absl::StrCat("ps 1 restarted (incarnation 5f3", i, ")"));
    r->set_action("rolled back to checkpoint 7");
    r->set_steps_lost(5);
    r->set_seconds(3.25);
  }
  s.set_steps_lost(35);
  s.set_resumed_from("checkpoint 6 (/ckpt/fm/ckpt-6)");
  return s;
}

TEST(DurableProgressTest, FormatBytes) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(12897484), "12.3 MiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 30), "3.0 GiB");
}

TEST(DurableProgressTest, NotAdvancingIsNeverABar) {
  JobStatus s = RunningJob();
  EXPECT_FALSE(NotAdvancing(s));
  s.set_phase(kPsDown);
  EXPECT_TRUE(NotAdvancing(s));
  const std::string line = TerminalProgressLine(s);
  EXPECT_EQ(line, absl::StrCat("1234/4690 steps  NOT ADVANCING: ", kPsDown));
  // No bar, speed, loss or ETA that could pass for progress.
  for (const char* moving : {"[", "steps/s", "ETA", "loss", "acc"}) {
    EXPECT_THAT(line, Not(HasSubstr(moving))) << moving;
  }
  // Cut to the width, the reason survives before anything else.
  const std::string narrow = TerminalProgressLine(s, 50);
  EXPECT_EQ(narrow, "1234/4690 steps  NOT ADVANCING: paused: ps 1 (10.0");
  EXPECT_EQ(PlainProgressLine(s),
            absl::StrCat("step 1234/4690 epoch 3/10 NOT ADVANCING: ", kPsDown));

  s.set_phase("checkpointing");
  EXPECT_EQ(TerminalProgressLine(s), "1234/4690 steps  NOT ADVANCING: checkpointing");
  s.set_training_done(true);
  s.set_steps_done(4690);
  EXPECT_EQ(TerminalProgressLine(s), "4690/4690 steps  training done: checkpointing");
  EXPECT_EQ(PlainProgressLine(s), "step 4690/4690 epoch 10/10 training done: checkpointing");

  // A phase left on an ended job is not shown as one.
  s.set_state(JobStatus::SUCCEEDED);
  EXPECT_FALSE(NotAdvancing(s));
  EXPECT_THAT(TerminalProgressLine(s), HasSubstr("SUCCEEDED"));
}

TEST(DurableProgressTest, LinesShowCheckpointsAndWhatWentWrong) {
  EXPECT_EQ(TerminalProgressLine(DurableJob()),
            "[##........] 1234/4690 steps  epoch 3/10  312.4 steps/s  loss 0.4123  acc 0.861  "
            "eval 0.852  ckpt 7  ETA 0:11");
  EXPECT_EQ(PlainProgressLine(DurableJob()),
            "step 1234/4690 epoch 3/10 steps/s 312.4 loss 0.4123 acc 0.861 eval_acc 0.852 "
            "ckpt 7 eta 11s");

  JobStatus s = TroubledJob();
  s.clear_phase();  // advancing again, with a failed checkpoint and past recoveries
  EXPECT_EQ(TerminalProgressLine(s),
            "[##........] 1234/4690 steps  epoch 3/10  312.4 steps/s  loss 0.4123  acc 0.861  "
            "eval 0.852  ckpt 7  7 recoveries, 35 steps lost  ETA 0:11  CHECKPOINT FAILED");
  const std::string narrow = TerminalProgressLine(s, 70);
  EXPECT_LE(narrow.size(), 70u);
  EXPECT_THAT(narrow, HasSubstr("CHECKPOINT FAILED"));
  EXPECT_THAT(narrow, HasSubstr("ETA 0:11"));
  EXPECT_THAT(narrow, Not(HasSubstr("recoveries")));
  EXPECT_EQ(PlainProgressLine(s),
            "step 1234/4690 epoch 3/10 steps/s 312.4 loss 0.4123 acc 0.861 eval_acc 0.852 "
            "ckpt 7 recoveries 7 steps_lost 35 eta 11s CHECKPOINT FAILED: checkpoint 8: ps 1: "
            "UNAVAILABLE: failed to connect");
}

TEST(DurableProgressTest, StatusTextIsCompactWhenAllIsWell) {
  const std::string text = StatusText(DurableJob(), kNow);
  EXPECT_THAT(text, HasSubstr("state      RUNNING\n"));
  EXPECT_THAT(text, HasSubstr("checkpoint 7 at 1200 steps, 2m05s ago, 12.3 MiB, written in "
                              "0.84 s\n"));
  EXPECT_THAT(text, HasSubstr("ps         2\n"));
  EXPECT_THAT(text, HasSubstr("  INDEX  ADDRESS    STATE       INCARNATION  GENERATION       "
                              "BYTES\n"));
  EXPECT_THAT(text, HasSubstr("      1  ps-1:2222  up                 5f3b           0     "
                              "2.0 KiB\n"));
  for (const char* absent :
       {"NOT ADVANCING", "DOWN", "ERROR", "recoveries", "ckpt error", "resumed", "generation"}) {
    EXPECT_THAT(text, Not(HasSubstr(absent))) << absent;
  }

  JobStatus none = DurableJob();
  none.set_has_checkpoint(false);
  none.clear_last_checkpoint();
  EXPECT_THAT(StatusText(none, kNow), HasSubstr("checkpoint none yet (to /ckpt/fm)\n"));
  none.mutable_job()->clear_checkpoint();
  EXPECT_THAT(StatusText(none, kNow), Not(HasSubstr("checkpoint")));
}

TEST(DurableProgressTest, StatusTextShowsEverythingWrong) {
  const std::string text = StatusText(TroubledJob(), kNow);
  EXPECT_THAT(text, HasSubstr(absl::StrCat("state      RUNNING, NOT ADVANCING: ", kPsDown, "\n")));
  EXPECT_THAT(text, HasSubstr("resumed    from checkpoint 6 (/ckpt/fm/ckpt-6)\n"));
  EXPECT_THAT(text, HasSubstr("ckpt error CHECKPOINT FAILED: checkpoint 8: ps 1: UNAVAILABLE: "
                              "failed to connect\n"));
  EXPECT_THAT(text, HasSubstr("recoveries 7 recoveries, 35 steps lost\n"
                              "  (2 earlier not shown)\n"
                              "  8m00s ago: ps 1 restarted (incarnation 5f32): rolled back to "
                              "checkpoint 7, 5 steps lost, 3.2 s\n"));
  EXPECT_THAT(text, HasSubstr("  4m00s ago: ps 1 restarted (incarnation 5f36)"));
  EXPECT_THAT(text, Not(HasSubstr("5f31)")));
  EXPECT_THAT(text, HasSubstr("ps         2 (generation 3)\n"));
  EXPECT_THAT(text, HasSubstr("DOWN  ERROR\n"));
  EXPECT_THAT(text, HasSubstr("      1  ps-1:2222  unreachable              5f3b"));
  EXPECT_THAT(text, HasSubstr("12s  failed to connect to all addresses\n"));
  // The ps that is up has no error and no downtime.
  EXPECT_THAT(text, HasSubstr("2.0 KiB       -\n"));
}

TEST(DurableProgressTest, FinalSummaryNamesTheModelAndTheTrouble) {
  JobStatus done = DurableJob();
  done.set_state(JobStatus::SUCCEEDED);
  done.set_steps_done(4690);
  done.mutable_last_checkpoint()->set_id(12);
  done.mutable_last_checkpoint()->set_final(true);
  done.mutable_last_checkpoint()->set_path("/ckpt/fm/ckpt-12");
  done.mutable_last_checkpoint()->set_steps_done(4690);
  EXPECT_THAT(FinalSummary(done),
              HasSubstr("final checkpoint 12: /ckpt/fm/ckpt-12 (4690 steps)\n"));
  EXPECT_THAT(FinalSummary(done), Not(HasSubstr("recover")));

  JobStatus failed = TroubledJob();
  failed.set_state(JobStatus::FAILED);
  const std::string text = FinalSummary(failed);
  EXPECT_THAT(text, HasSubstr("last checkpoint 7: /ckpt/fm/ckpt-7 (1200 steps)\n"));
  EXPECT_THAT(text, HasSubstr("CHECKPOINT FAILED: checkpoint 8: ps 1"));
  EXPECT_THAT(text, HasSubstr("7 recoveries, 35 steps lost\n"));
  EXPECT_THAT(text, HasSubstr("resumed from checkpoint 6 (/ckpt/fm/ckpt-6)\n"));
}

TEST(DurableProgressTest, CheckpointLine) {
  EXPECT_EQ(CheckpointLine(DurableJob().last_checkpoint()),
            "checkpoint 7: /ckpt/fm/ckpt-7, 1200 steps, 12.3 MiB, written in 0.84 s (paused "
            "12 ms)");
}

// scale-ps: its outcome line, and the layout and scales in `shardctl status`.
TEST(DurableProgressTest, ScalesAndTheLayoutVersionAreShown) {
  ScalePsResponse up;
  up.set_from_ps(2);
  up.set_to_ps(3);
  up.set_layout_version(2);
  up.set_checkpoint_id(4);
  up.set_steps_done(212);
  up.set_bytes_moved(3 << 20);
  up.set_pause_s(0.414);
  up.set_seconds(0.52);
  EXPECT_EQ(ScaleLine(up),
            "scaled from 2 to 3 ps (layout version 2): through checkpoint 4 at step 212, "
            "3.0 MiB moved, paused 0.41 s, 0.52 s in all");
  ScalePsResponse live;
  live.set_live(true);
  live.set_from_ps(2);
  live.set_to_ps(3);
  live.set_layout_version(2);
  live.set_steps_done(110);
  live.set_pause_s(0.008);
  live.set_tables(4);
  live.set_buckets_moved(7685);
  live.set_rows_moved(1606);
  live.set_bytes_moved(173475);
  live.set_balance_s(3.38);
  live.set_seconds(3.4);
  EXPECT_EQ(ScaleLine(live),
            "added 1 ps live: 2 to 3 ps (layout version 2) at step 110, paused 0.01 s; 4 dynamic "
            "tables balanced onto the new ps: 7685 buckets, 1606 rows, 169.4 KiB in 3.38 s; "
            "3.40 s in all");
  live.set_from_ps(3);
  live.set_to_ps(2);
  live.set_layout_version(3);
  EXPECT_EQ(ScaleLine(live),
            "removed 1 ps live: 3 to 2 ps (layout version 3) at step 110, paused 0.01 s; 4 "
            "dynamic tables moved off it and balanced: 7685 buckets, 1606 rows, 169.4 KiB in "
            "3.38 s; 3.40 s in all");
  ScalePsResponse failed;
  failed.set_from_ps(3);
  failed.set_to_ps(4);
  failed.set_error("ps 3 (ps-3:2222) did not answer within 1m");
  EXPECT_EQ(ScaleLine(failed),
            "scale from 3 to 4 ps failed: ps 3 (ps-3:2222) did not answer within 1m");

  JobStatus status = DurableJob();
  EXPECT_THAT(StatusText(status, kNow), Not(HasSubstr("scales")));
  EXPECT_THAT(StatusText(status, kNow), Not(HasSubstr("layout version")));
  status.set_layout_version(2);
  status.set_ps_scales(1);
  status.set_ps_scales_failed(1);
  *status.mutable_last_scale() = failed;
  const std::string text = StatusText(status, kNow);
  EXPECT_THAT(text, HasSubstr("scales     1 done, 1 failed; last: scale from 3 to 4 ps failed"));
  EXPECT_THAT(text, HasSubstr("(layout version 2)\n"));
}

TEST(DurableProgressTest, JsonHasTheNewFields) {
  absl::StatusOr<std::string> json = StatusJson(TroubledJob(), /*pretty=*/false);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr(absl::StrCat("\"phase\":\"", kPsDown, "\"")));
  EXPECT_THAT(*json, HasSubstr("\"generation\":\"3\""));
  EXPECT_THAT(*json, HasSubstr("\"last_checkpoint\":{\"id\":\"7\""));
  EXPECT_THAT(*json, HasSubstr("\"state\":\"unreachable\""));
  EXPECT_THAT(*json, HasSubstr("\"steps_lost\":\"35\""));
}

TEST(DurableProgressTest, ThrottlePrintsDurableStateChangesAtOnce) {
  PlainProgressThrottle throttle(2.0);
  JobStatus s = DurableJob();
  EXPECT_TRUE(throttle.Due(s, 100.0));
  EXPECT_FALSE(throttle.Due(s, 100.1));
  s.set_phase("checkpointing");
  EXPECT_TRUE(throttle.Due(s, 100.2));
  EXPECT_FALSE(throttle.Due(s, 100.3));
  s.clear_phase();
  EXPECT_TRUE(throttle.Due(s, 100.4));
  s.mutable_last_checkpoint()->set_id(8);
  EXPECT_TRUE(throttle.Due(s, 100.5));
  s.set_checkpoint_error("disk full");
  EXPECT_TRUE(throttle.Due(s, 100.6));
  s.add_recoveries()->set_cause("ps 0 restarted");
  EXPECT_TRUE(throttle.Due(s, 100.7));
  EXPECT_FALSE(throttle.Due(s, 100.8));
}

}  // namespace
}  // namespace shardps
