#include "coordinator/scheduler.h"

#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

Scheduler Make(Scheduler::Mode mode, int64_t total, int replicas = 1, int staleness = 0) {
  Scheduler::Plan plan;
  plan.mode = mode;
  plan.num_replicas = replicas;
  plan.staleness = staleness;
  plan.steps_per_epoch = 4;
  plan.total_steps = total;
  return *Scheduler::Create(plan);
}

TEST(SchedulerTest, AsyncLeasesInOrderAndNamesBatches) {
  Scheduler s = Make(Scheduler::Mode::kAsync, 6);
  for (int i = 0; i < 6; ++i) {
    auto task = s.Lease(i % 2, kT0);
    ASSERT_TRUE(task.has_value());
    EXPECT_EQ(task->step_id, i);
    EXPECT_EQ(task->epoch, i / 4);
    EXPECT_EQ(task->batch_index, i % 4);
    EXPECT_FALSE(task->sync);
  }
  EXPECT_FALSE(s.Lease(0, kT0).has_value());
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(s.Complete(i, i % 2));
  EXPECT_TRUE(s.Finished());
}

TEST(SchedulerTest, EachStepCountedOnceAfterRequeue) {
  Scheduler s = Make(Scheduler::Mode::kAsync, 3);
  auto a = s.Lease(0, kT0 + absl::Seconds(1));
  auto b = s.Lease(1, kT0 + absl::Seconds(100));
  ASSERT_TRUE(a && b);
  // Worker 0's lease expires: step 0 goes back to the front of the queue.
  auto expired = s.ExpireLeases(kT0 + absl::Seconds(2));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0], std::make_pair(int64_t{0}, 0));
  auto c = s.Lease(1, kT0 + absl::Seconds(100));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->step_id, 0);
  EXPECT_TRUE(s.Complete(0, 1));
  // The slow worker finishes too: a duplicate, not counted.
  EXPECT_FALSE(s.Complete(0, 0));
  EXPECT_TRUE(s.Complete(1, 1));
  EXPECT_EQ(s.done_steps(), 2);
  EXPECT_EQ(s.requeued(), 1);
}

// The chief's dispatcher sleeps until the earliest lease deadline when nothing else happens.
TEST(SchedulerTest, NextLeaseDeadlineIsTheEarliestHeld) {
  Scheduler s = Make(Scheduler::Mode::kAsync, 3);
  EXPECT_EQ(s.NextLeaseDeadline(), absl::InfiniteFuture());
  ASSERT_TRUE(s.Lease(0, kT0 + absl::Seconds(5)));
  ASSERT_TRUE(s.Lease(1, kT0 + absl::Seconds(2)));
  EXPECT_EQ(s.NextLeaseDeadline(), kT0 + absl::Seconds(2));
  EXPECT_TRUE(s.Complete(1, 1));
  EXPECT_EQ(s.NextLeaseDeadline(), kT0 + absl::Seconds(5));
  EXPECT_EQ(s.ExpireLeases(kT0 + absl::Seconds(6)).size(), 1u);
  EXPECT_EQ(s.NextLeaseDeadline(), absl::InfiniteFuture());
}

TEST(SchedulerTest, FailedStepIsRetriedBeforeNewOnes) {
  Scheduler s = Make(Scheduler::Mode::kAsync, 5);
  auto a = s.Lease(0, kT0);
  auto b = s.Lease(1, kT0);
  s.Requeue(a->step_id, 0);
  s.Requeue(a->step_id, 0);  // twice: no effect
  auto c = s.Lease(1, kT0);
  EXPECT_EQ(c->step_id, 0);
  EXPECT_EQ(s.requeued(), 1);
  s.Requeue(b->step_id, 0);  // wrong worker: ignored
  EXPECT_EQ(s.leased(), 2);
}

TEST(SchedulerTest, SyncGatesOnCompletedSyncSteps) {
  Scheduler s = Make(Scheduler::Mode::kSync, 5, /*replicas=*/2);
  EXPECT_EQ(s.total_steps(), 6);  // rounded up to whole sync steps
  auto r0 = s.Lease(0, kT0);
  auto r1 = s.Lease(1, kT0);
  ASSERT_TRUE(r0 && r1);
  EXPECT_EQ(r0->sync_step, 0);
  EXPECT_EQ(r1->replica, 1);
  EXPECT_TRUE(r1->sync);
  EXPECT_TRUE(s.Complete(0, 0));
  // Sync step 1 needs version 1: not before replica 1 of step 0 is done.
  EXPECT_FALSE(s.Lease(0, kT0).has_value());
  EXPECT_TRUE(s.Complete(1, 1));
  auto next = s.Lease(0, kT0);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->sync_step, 1);
  EXPECT_EQ(next->min_version, 1);
  EXPECT_EQ(s.KnownVersion(), 1);
}

TEST(SchedulerTest, SyncRequeuedReplicaIsNotBlocked) {
  Scheduler s = Make(Scheduler::Mode::kSync, 4, 2);
  auto r0 = s.Lease(0, kT0);
  auto r1 = s.Lease(1, kT0);
  EXPECT_TRUE(s.Complete(r0->step_id, 0));
  s.Requeue(r1->step_id, 1);  // worker 1 died
  auto again = s.Lease(0, kT0);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->step_id, 1);
  EXPECT_EQ(again->replica, 1);
}

TEST(SchedulerTest, StaleBoundsVersionsInFlight) {
  Scheduler s = Make(Scheduler::Mode::kStale, 10, 1, /*staleness=*/2);
  auto a = s.Lease(0, kT0);  // step 0, needs 0
  auto b = s.Lease(1, kT0);  // step 1
  auto c = s.Lease(2, kT0);  // step 2, needs 0
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(c->min_version, 0);
  EXPECT_FALSE(s.Lease(3, kT0).has_value());  // step 3 needs version 1
  EXPECT_TRUE(s.Complete(0, 0));
  auto d = s.Lease(3, kT0);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->min_version, 1);
}

// A worker holding two leases at once (steps_in_flight 2) that fails gives both back; each is
// re-leased once and counted once, and a late completion by the failed worker is a duplicate.
TEST(SchedulerTest, WorkerWithTwoLeasesRequeuesBothOnFailure) {
  Scheduler s = Make(Scheduler::Mode::kAsync, 6);
  auto a = s.Lease(0, kT0);
  auto b = s.Lease(0, kT0);
  auto c = s.Lease(1, kT0);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->step_id, 0);
  EXPECT_EQ(b->step_id, 1);
  EXPECT_EQ(s.LeasedTo(0), 2);
  EXPECT_EQ(s.LeasedTo(1), 1);

  EXPECT_EQ(s.RequeueWorker(0), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(s.LeasedTo(0), 0);
  EXPECT_EQ(s.requeued(), 2);
  EXPECT_TRUE(s.RequeueWorker(0).empty());  // nothing left: no effect
  EXPECT_EQ(s.requeued(), 2);
  // Re-queued steps go first, lowest first.
  auto d = s.Lease(1, kT0);
  auto e = s.Lease(1, kT0);
  ASSERT_TRUE(d && e);
  EXPECT_EQ(d->step_id, 0);
  EXPECT_EQ(e->step_id, 1);
  // The failed worker's calls return late: the step it finished first counts, the other
  // worker's run of it is then a duplicate.
  EXPECT_TRUE(s.Complete(1, 0));
  EXPECT_FALSE(s.Complete(1, 1));
  EXPECT_TRUE(s.Complete(0, 1));
  EXPECT_FALSE(s.Complete(0, 0));
  EXPECT_TRUE(s.Complete(2, 1));
  EXPECT_EQ(s.done_steps(), 3);
  EXPECT_EQ(s.leased(), 0);
  for (int i = 3; i < 6; ++i) {
    auto t = s.Lease(i % 2, kT0);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->step_id, i);
    EXPECT_TRUE(s.Complete(i, i % 2));
  }
  EXPECT_TRUE(s.Finished());
  EXPECT_EQ(s.done_steps(), 6);
}

// Both leases of one worker expire: both are re-queued and reported with their worker.
TEST(SchedulerTest, TwoLeasesOfOneWorkerExpire) {
  Scheduler s = Make(Scheduler::Mode::kAsync, 4);
  ASSERT_TRUE(s.Lease(0, kT0 + absl::Seconds(1)));
  ASSERT_TRUE(s.Lease(0, kT0 + absl::Seconds(2)));
  ASSERT_TRUE(s.Lease(1, kT0 + absl::Seconds(100)));
  auto expired = s.ExpireLeases(kT0 + absl::Seconds(3));
  ASSERT_EQ(expired.size(), 2u);
  EXPECT_EQ(expired[0], std::make_pair(int64_t{0}, 0));
  EXPECT_EQ(expired[1], std::make_pair(int64_t{1}, 0));
  EXPECT_EQ(s.LeasedTo(0), 0);
  EXPECT_EQ(s.Lease(1, kT0)->step_id, 0);
  EXPECT_EQ(s.Lease(1, kT0)->step_id, 1);
}

// Two leases per worker do not loosen the version gates: sync step g+1 and stale step s (bound
// k) are still leased only once the version they need is reached.
TEST(SchedulerTest, SecondLeaseStillWaitsForItsVersion) {
  Scheduler sync = Make(Scheduler::Mode::kSync, 4, /*replicas=*/1);
  ASSERT_TRUE(sync.Lease(0, kT0));
  EXPECT_FALSE(sync.Lease(0, kT0).has_value());  // sync step 1 needs version 1
  EXPECT_TRUE(sync.Complete(0, 0));
  EXPECT_TRUE(sync.Lease(0, kT0).has_value());

  Scheduler stale0 = Make(Scheduler::Mode::kStale, 4, 1, /*staleness=*/0);
  ASSERT_TRUE(stale0.Lease(0, kT0));
  EXPECT_FALSE(stale0.Lease(0, kT0).has_value());

  Scheduler stale1 = Make(Scheduler::Mode::kStale, 4, 1, /*staleness=*/1);
  ASSERT_TRUE(stale1.Lease(0, kT0));
  ASSERT_TRUE(stale1.Lease(0, kT0));  // step 1 needs version 0
  EXPECT_FALSE(stale1.Lease(0, kT0).has_value());
}

TEST(SchedulerTest, AddStepsAndCancel) {
  Scheduler s = Make(Scheduler::Mode::kSync, 2, 2);
  EXPECT_EQ(s.AddSteps(3), 6);
  s.Cancel();
  EXPECT_FALSE(s.Lease(0, kT0).has_value());
  EXPECT_EQ(s.AddSteps(4), 6);
}

TEST(SchedulerTest, InvalidPlans) {
  Scheduler::Plan plan;
  plan.steps_per_epoch = 0;
  EXPECT_FALSE(Scheduler::Create(plan).ok());
  plan.steps_per_epoch = 1;
  plan.mode = Scheduler::Mode::kSync;
  plan.num_replicas = 0;
  EXPECT_FALSE(Scheduler::Create(plan).ok());
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

TEST(SchedulerBarrierTest, NoStepAtOrAboveTheBarrierIsLeased) {
  Scheduler s = Make(Scheduler::Mode::kAsync, 10);
  auto a = s.Lease(0, kT0);
  auto b = s.Lease(1, kT0);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(s.NextNew(), 2);
  s.SetBarrier(s.NextNew());
  EXPECT_FALSE(s.Lease(0, kT0).has_value());
  // A step below the barrier that fails is still re-run: the cut waits for it.
  s.Requeue(a->step_id, 0);
  auto c = s.Lease(1, kT0);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->step_id, 0);
  EXPECT_TRUE(s.Complete(1, 1));
  EXPECT_EQ(s.DonePrefix(), 0);
  EXPECT_TRUE(s.Complete(0, 1));
  EXPECT_EQ(s.DonePrefix(), 2);  // the cut: [0, 2) done, nothing above
  EXPECT_EQ(s.done_steps(), 2);
  s.ClearBarrier();
  auto d = s.Lease(0, kT0);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->step_id, 2);
}

TEST(SchedulerBarrierTest, SyncBarrierIsAWholeSyncStep) {
  Scheduler s = Make(Scheduler::Mode::kSync, 8, /*replicas=*/2);
  auto a = s.Lease(0, kT0);
  ASSERT_TRUE(a);
  const int64_t barrier = s.RoundUp(s.NextNew());
  EXPECT_EQ(barrier, 2);
  s.SetBarrier(barrier);
  auto b = s.Lease(1, kT0);  // the other replica of sync step 0 is below the barrier
  ASSERT_TRUE(b);
  EXPECT_EQ(b->step_id, 1);
  EXPECT_FALSE(s.Lease(0, kT0).has_value());
  EXPECT_TRUE(s.Complete(0, 0));
  EXPECT_TRUE(s.Complete(1, 1));
  EXPECT_EQ(s.DonePrefix(), 2);
  EXPECT_EQ(s.KnownVersion(), 1);
}

TEST(SchedulerRestoreTest, RollbackForgetsLeasesAndStepsAfterTheCut) {
  Scheduler s = Make(Scheduler::Mode::kAsync, 10);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(s.Lease(i % 2, kT0));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(s.Complete(i, i % 2));
  EXPECT_EQ(s.done_steps(), 5);
  ASSERT_TRUE(s.Restore(3, {}, 10).ok());
  EXPECT_EQ(s.done_steps(), 3);
  EXPECT_EQ(s.leased(), 0);
  auto t = s.Lease(0, kT0);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->step_id, 3);
  // A completion from before the rollback of a step not leased now is still counted by the
  // scheduler if passed on: the chief must not pass it on (generation check).
  EXPECT_FALSE(s.Finished());
}

TEST(SchedulerRestoreTest, JournalledStepsAreNotLeasedAgain) {
  Scheduler s = Make(Scheduler::Mode::kAsync, 8);
  ASSERT_TRUE(s.Restore(2, {3, 5, 1}, 8).ok());
  EXPECT_EQ(s.DonePrefix(), 2);
  EXPECT_EQ(s.done_steps(), 4);  // 0, 1, 3, 5
  std::vector<int64_t> leased;
  while (auto t = s.Lease(0, kT0)) leased.push_back(t->step_id);
  EXPECT_EQ(leased, (std::vector<int64_t>{2, 4, 6, 7}));
  for (int64_t id : leased) EXPECT_TRUE(s.Complete(id, 0));
  EXPECT_TRUE(s.Finished());
  EXPECT_FALSE(s.Complete(3, 0));  // restored as done: a duplicate
}

TEST(SchedulerRestoreTest, SyncResumeRunsOnlyTheMissingReplicas) {
  Scheduler s = Make(Scheduler::Mode::kSync, 6, /*replicas=*/2);
  // Sync step 1's replica 0 (step 2) completed before the chief restarted; step 3 did not.
  ASSERT_TRUE(s.Restore(2, {2}, 6).ok());
  auto t = s.Lease(0, kT0);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->step_id, 3);
  EXPECT_EQ(t->sync_step, 1);
  EXPECT_EQ(t->replica, 1);
  EXPECT_FALSE(s.Lease(1, kT0).has_value());  // step 4 needs version 2
}

TEST(SchedulerRestoreTest, RejectsOutOfRange) {
  Scheduler s = Make(Scheduler::Mode::kAsync, 4);
  EXPECT_EQ(s.Restore(5, {}, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Restore(1, {4}, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Restore(0, {-1}, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.done_steps(), 0);  // unchanged by a refused restore
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

Scheduler MakeBackup(int64_t total, int replicas, int aggregate) {
  Scheduler::Plan plan;
  plan.mode = Scheduler::Mode::kSync;
  plan.num_replicas = replicas;
  plan.replicas_to_aggregate = aggregate;
  plan.steps_per_epoch = 4;
  plan.total_steps = total;
  return *Scheduler::Create(plan);
}

// 2 of 3: sync step 0 is done with replicas 0 and 2; the straggler (replica 1) does not hold
// it up, and sync step 1's steps are leased at once.
TEST(SchedulerBackupTest, ASyncStepIsDoneWithKOfItsReplicas) {
  Scheduler s = MakeBackup(6, /*replicas=*/3, /*aggregate=*/2);
  EXPECT_TRUE(s.has_backups());
  std::vector<StepTask> tasks;
  for (int w = 0; w < 3; ++w) tasks.push_back(*s.Lease(w, kT0 + absl::Seconds(10)));
  EXPECT_FALSE(s.Lease(0, kT0).has_value());  // sync step 1 needs version 1
  std::vector<int64_t> superseded;
  EXPECT_TRUE(s.Complete(0, 0, &superseded));
  EXPECT_TRUE(superseded.empty());
  EXPECT_EQ(s.KnownVersion(), 0);
  EXPECT_TRUE(s.Complete(2, 2, &superseded));
  EXPECT_EQ(superseded, (std::vector<int64_t>{1}));
  EXPECT_TRUE(s.IsDone(1));
  EXPECT_EQ(s.KnownVersion(), 1);
  EXPECT_EQ(s.DonePrefix(), 3);
  EXPECT_EQ(s.superseded(), 1);
  auto next = s.Lease(0, kT0 + absl::Seconds(10));
  ASSERT_TRUE(next);
  EXPECT_EQ(next->step_id, 3);
  EXPECT_EQ(next->sync_step, 1);
  // The straggler's step is still leased (its call is out); it returns: a duplicate.
  EXPECT_EQ(s.LeasedTo(1), 1);
  EXPECT_FALSE(s.Complete(1, 1));
  EXPECT_EQ(s.LeasedTo(1), 0);
  EXPECT_EQ(s.done_steps(), 3);
}

// Steps of a sync step not yet leased (or re-queued) when k are done never run.
TEST(SchedulerBackupTest, SupersededStepsAreNeverLeased) {
  Scheduler s = MakeBackup(6, /*replicas=*/3, /*aggregate=*/2);
  auto a = s.Lease(0, kT0);
  auto b = s.Lease(1, kT0);
  auto c = s.Lease(2, kT0);
  ASSERT_TRUE(a && b && c);
  s.Requeue(b->step_id, 1);  // replica 1 failed and waits to run again
  EXPECT_TRUE(s.Complete(a->step_id, 0));
  EXPECT_TRUE(s.Complete(c->step_id, 2));
  // Sync step 1: two workers finish replicas 0 and 1; replica 2 is never leased.
  auto d = s.Lease(0, kT0);
  auto e = s.Lease(1, kT0);
  ASSERT_TRUE(d && e);
  EXPECT_EQ(d->step_id, 3);  // not the re-queued step 1
  EXPECT_EQ(e->step_id, 4);
  EXPECT_TRUE(s.Complete(3, 0));
  EXPECT_TRUE(s.Complete(4, 1));
  EXPECT_TRUE(s.Finished());
  EXPECT_FALSE(s.Lease(2, kT0).has_value());
  EXPECT_EQ(s.superseded(), 2);
}

// A straggler that hangs past its deadline is still noticed, though its step is done.
TEST(SchedulerBackupTest, ASupersededLeaseStillExpires) {
  Scheduler s = MakeBackup(3, /*replicas=*/3, /*aggregate=*/2);
  for (int w = 0; w < 3; ++w) ASSERT_TRUE(s.Lease(w, kT0 + absl::Seconds(w == 1 ? 1 : 100)));
  EXPECT_TRUE(s.Complete(0, 0));
  EXPECT_TRUE(s.Complete(2, 2));
  EXPECT_TRUE(s.Finished());
  auto expired = s.ExpireLeases(kT0 + absl::Seconds(2));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0], std::make_pair(int64_t{1}, 1));
  EXPECT_TRUE(s.Finished());
  EXPECT_FALSE(s.Lease(1, kT0).has_value());  // nothing re-queued
}

// A journal holds completions only; a restore supersedes the rest of a sync step again.
TEST(SchedulerBackupTest, RestoreSupersedesTheStepsOfAggregatedSyncSteps) {
  Scheduler s = MakeBackup(9, /*replicas=*/3, /*aggregate=*/2);
  // Sync step 1 (steps 3-5): 3 and 5 completed; sync step 2: only 6.
  ASSERT_TRUE(s.Restore(3, {3, 5, 6}, 9).ok());
  EXPECT_TRUE(s.IsDone(4));
  EXPECT_EQ(s.DonePrefix(), 7);
  EXPECT_EQ(s.KnownVersion(), 2);
  EXPECT_EQ(s.done_steps(), 7);
  auto t = s.Lease(0, kT0);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->step_id, 7);
  EXPECT_TRUE(s.Complete(7, 0));
  EXPECT_TRUE(s.Finished());
}

// Without backups (0 or k = n) every replica is needed, as before.
TEST(SchedulerBackupTest, AggregatingEveryReplicaNeedsThemAll) {
  for (int aggregate : {0, 3}) {
    Scheduler s = MakeBackup(3, /*replicas=*/3, aggregate);
    EXPECT_FALSE(s.has_backups());
    for (int w = 0; w < 3; ++w) ASSERT_TRUE(s.Lease(w, kT0));
    EXPECT_TRUE(s.Complete(0, 0));
    EXPECT_TRUE(s.Complete(2, 2));
    EXPECT_FALSE(s.Finished());
    EXPECT_EQ(s.KnownVersion(), 0);
    EXPECT_TRUE(s.Complete(1, 1));
    EXPECT_TRUE(s.Finished());
    EXPECT_EQ(s.superseded(), 0);
  }
}

TEST(SchedulerBackupTest, InvalidAggregates) {
  Scheduler::Plan plan;
  plan.mode = Scheduler::Mode::kSync;
  plan.num_replicas = 2;
  plan.replicas_to_aggregate = 3;
  EXPECT_EQ(Scheduler::Create(plan).status().code(), absl::StatusCode::kInvalidArgument);
  plan.replicas_to_aggregate = -1;
  EXPECT_EQ(Scheduler::Create(plan).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace shardps
