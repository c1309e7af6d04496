// Moving a dynamic table's buckets between ps while a job trains, as processes on localhost
// (docs/elastic.md): the sparse click model on hashed ids (its embedding tables are dynamic
// tables on 2 ps), `shardctl move-buckets` moves buckets from ps 0 to ps 1 and some back
// mid-job. A sync job ends bit-identical to an unmoved run (every table at the keys training
// touched, and every dense layer); a ps killed after the moves comes back from a checkpoint
// whose manifest has the moved ranges, and the job still ends bit-identical; an async job
// trains on through the moves. Refused moves change nothing. A chief killed mid-move comes
// back, finishes or aborts the cut-off switch and leaves nothing staged. A ps added live
// (scale-ps --live) takes a share of every table and is removed live again, and a chief
// restarted after that resumes without a rollback: the job still ends bit-identical.
#include <signal.h>

#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/bucket_move_testing.h"
#include "data/ctr/ctr_batch.h"
#include "data/dataset.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/process.h"
#include "tests/training_cluster.h"

namespace shardps {
namespace testing {
namespace {

using ::testing::HasSubstr;

constexpr char kDataset[] =
    "synthetic_ctr:examples=200000,test=10000,dense=4,tables=4,vocab=50|300|2000|1000,"
    "hot=1|1|1..3|1,seed=11,ids=hashed";
constexpr int64_t kSyncSteps = 600;  // worker steps: 300 sync steps of 2 replicas
constexpr char kStepDelay[] = "--test_only_delay_before_push_ms=3";

std::string Job(const std::string& name, const std::string& mode, const std::string& extra) {
  return WriteTempFile(
      name + ".json",
      absl::StrCat(R"({"name": ")", name,
                   R"(", "model": "dlrm:bottom=16,8;top=32;dim=8;interaction=dot;pooling=mean", )",
                   R"("dataset": ")", kDataset, R"(", "batch_size": 256, )",
                   R"("optimizer": {"type": "adam", "learning_rate": 0.005}, "mode": ")", mode,
                   R"(", "partitioner": "fixed:2", "seed": 5, "backend": "cpu")", extra, "}"));
}

// Keys of the first examples: those training touched, and others.
std::vector<int64_t> Keys() {
  auto data = LoadDataSource(kDataset, "", Split::kTrain);
  EXPECT_TRUE(data.ok()) << data.status();
  if (!data.ok()) return {};
  std::vector<int64_t> indices(2000);
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(i) * 97;
  CtrBatch batch;
  EXPECT_TRUE((*data)->ctr()->Read(indices, &batch).ok());
  std::vector<int64_t> keys;
  for (const CtrFeatureIds& feature : batch.features) {
    keys.insert(keys.end(), feature.ids.begin(), feature.ids.end());
  }
  return keys;
}

int Shardctl(TrainingCluster* c, std::vector<std::string> args, std::string* out) {
  args.push_back("--chief=" + c->chief_address());
  absl::StatusOr<int> code = RunCommand(BinaryPath("coordinator/cli/shardctl"), args, {}, out,
                                        absl::Minutes(2));
  if (!code.ok()) {
    *out = code.status().ToString();
    return -1;
  }
  return *code;
}

// The dynamic tables the job made, by name, and a dense variable's name.
void Tables(TrainingCluster* c, std::vector<std::string>* dynamic, std::string* dense) {
  auto client = c->NewPsClient();
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Discover().ok());
  for (const std::string& name : (*client)->VariableNames()) {
    if ((*client)->GetLayout(name)->dynamic) {
      dynamic->push_back(name);
    } else {
      *dense = name;
    }
  }
  ASSERT_EQ(dynamic->size(), 4u);
}

struct SyncRun {
  std::vector<std::vector<float>> variables;
  JobStatus end;
};

// Staged buckets on the ps (a move under way or cut off), one line each.
std::vector<std::string> Staged(TrainingCluster* c) {
  std::vector<std::string> staged;
  auto client = c->NewPsClient();
  EXPECT_TRUE(client.ok()) << client.status();
  if (!client.ok()) return {"no client"};
  std::vector<ListShardsResponse> listed;
  const absl::Status s = (*client)->ListShardsAll(ListShardsRequest(), &listed);
  EXPECT_TRUE(s.ok()) << s;
  for (const ListShardsResponse& ps : listed) {
    for (const ShardInfo& info : ps.shards()) {
      if (info.staged_end() > info.staged_begin()) staged.push_back(info.ShortDebugString());
    }
  }
  return staged;
}

// The chief killed while `shardctl move-buckets` runs (wherever the move then is) and started
// again: the new chief finishes or aborts the cut-off switch before the job goes on, and
// leaves nothing staged.
void KillChiefMidMove(TrainingCluster* c) {
  std::vector<std::string> tables;
  std::string dense;
  Tables(c, &tables, &dense);
  int code = -2;
  std::string out;
  std::thread mover([&] {
    code = Shardctl(c, {"move-buckets", tables[1], "1500", "--from_shard=0", "--to_shard=1"},
                    &out);
  });
  absl::SleepFor(absl::Milliseconds(1500));
  auto restarted = c->KillAndRestartChief();
  mover.join();
  EXPECT_TRUE(restarted.ok()) << restarted.status() << c->Logs();
  EXPECT_NE(code, 0) << "the move ended before the chief was killed: " << out;
  std::cout << "shardctl, its chief killed: " << out << "\n";
  if (!restarted.ok()) return;
  const int64_t at = restarted->steps_done();
  EXPECT_TRUE(c->WaitForStatus([at](const JobStatus& s) { return s.steps_done() > at; }).ok());
  EXPECT_THAT(Staged(c), ::testing::IsEmpty());
}

enum class Disruption {
  kNone,
  kMoves,
  kMovesThenKillPs,
  kKillChiefMidMove,
  kAddPsLiveThenRestartChief,  // and then removed live
};

// ps 2 of TF_CONFIG's 3 (the job runs on 2) added live: `shardctl scale-ps 3 --live` gives every
// table a shard on it and a third of its rows, without a checkpoint; the chief is killed and
// started again (it follows the journal and resumes from the ps' live state, no rollback);
// `scale-ps 2 --live` takes the buckets back and removes the ps, which exits 0.
void AddPsLiveThenRestartChief(TrainingCluster* c) {
  std::string out;
  EXPECT_EQ(Shardctl(c, {"scale-ps", "3", "--live", "--pause=0", "--json"}, &out), 0)
      << out << c->Logs();
  std::cout << "scale-ps 3 --live: " << out;
  EXPECT_THAT(out, HasSubstr("\"live\":true"));
  EXPECT_THAT(out, HasSubstr("\"tables\":4"));
  EXPECT_THAT(out, HasSubstr("\"checkpoint_id\":0"));
  // Refused, changing nothing: the same count; live below the ps that hold dense variables.
  EXPECT_EQ(Shardctl(c, {"scale-ps", "3", "--live"}, &out), 2) << out;
  EXPECT_EQ(Shardctl(c, {"scale-ps", "1", "--live"}, &out), 1) << out;
  EXPECT_THAT(out, HasSubstr("has dense variables on ps 1"));
  auto client = c->NewPsClient();
  ASSERT_TRUE(client.ok() && (*client)->Discover().ok());
  std::vector<std::string> tables;
  std::string dense;
  Tables(c, &tables, &dense);
  for (const std::string& table : tables) {
    const VariableLayout layout = *(*client)->GetLayout(table);
    ASSERT_EQ(layout.shards.size(), 3u) << table;
    EXPECT_EQ(layout.shards[2].ps, 2) << table;
    EXPECT_GT(layout.shards[2].buckets.end - layout.shards[2].buckets.begin, 1200) << table;
  }
  const VariableLayout dense_layout = *(*client)->GetLayout(dense);
  for (const VariableLayout::Shard& s : dense_layout.shards) EXPECT_LT(s.ps, 2);
  const JobStatus added = *c->WaitForStatus([](const JobStatus&) { return true; });
  EXPECT_EQ(added.layout_version(), 2);
  EXPECT_EQ(added.ps_size(), 3);
  // The chief killed and started again: it follows the journal (3 ps, the dense variables on
  // the first 2) and resumes from the ps' live state, without a rollback.
  auto restarted = c->KillAndRestartChief();
  ASSERT_TRUE(restarted.ok()) << restarted.status() << c->Logs();
  EXPECT_EQ(restarted->recoveries_size(), 0) << restarted->ShortDebugString();
  EXPECT_THAT(restarted->resumed_from(), ::testing::Not(HasSubstr("checkpoint")))
      << restarted->ShortDebugString();
  EXPECT_EQ(restarted->layout_version(), 2);
  EXPECT_EQ(restarted->ps_size(), 3);
  // Removed live again: its buckets move back, and it leaves the job.
  EXPECT_EQ(Shardctl(c, {"scale-ps", "2", "--live", "--pause=0"}, &out), 0)
      << out << c->Logs();
  std::cout << "scale-ps 2 --live: " << out;
  EXPECT_THAT(out, HasSubstr("removed 1 ps live: 3 to 2 ps (layout version 3)"));
  // The removed ps exits 0; started again (as its StatefulSet would), it holds nothing and
  // the job does not use it.
  auto exited = c->ps(2)->Wait(absl::Seconds(30));
  ASSERT_TRUE(exited.ok()) << exited.status() << "\n" << c->Logs();
  EXPECT_EQ(*exited, 0) << c->ps(2)->Log();
  ASSERT_TRUE(c->RestartPs(2).ok());
  ASSERT_TRUE((*client)->Discover().ok());
  for (const std::string& table : tables) {
    EXPECT_EQ((*client)->GetLayout(table)->shards.size(), 2u) << table;
  }
  const JobStatus removed = *c->WaitForStatus([](const JobStatus&) { return true; });
  EXPECT_EQ(removed.ps_size(), 2);
  EXPECT_EQ(removed.layout_version(), 3);
}

// A sync run of the hashed click model. kMoves: buckets move mid-job (and with
// kMovesThenKillPs, ps 1 is killed after a checkpoint taken past the moves, and started
// again); kKillChiefMidMove: the chief is killed during a move.
SyncRun RunSync(const std::string& name, Disruption disruption) {
  const bool move =
      disruption == Disruption::kMoves || disruption == Disruption::kMovesThenKillPs;
  const bool kill_ps = disruption == Disruption::kMovesThenKillPs;
  const bool add_ps = disruption == Disruption::kAddPsLiveThenRestartChief;
  SyncRun run;
  TrainingCluster::Options options;
  options.long_lived = true;
  options.worker_flags = {kStepDelay};
  if (add_ps) options.num_ps = 3;
  const std::string dir = FreshTempDir(name);
  // One job name for every run: a dynamic table's initial rows are keyed by its name.
  options.job_file =
      Job("moves", "sync",
          absl::StrCat(R"(, "steps": )", kSyncSteps, R"(, "checkpoint": {"dir": ")", dir,
                       R"(", "every_steps": 200, "keep": 3})", add_ps ? R"(, "num_ps": 2)" : ""));
  auto cluster = TrainingCluster::Start(options);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  if (!cluster.ok()) return run;
  TrainingCluster* c = cluster->get();
  if (disruption == Disruption::kKillChiefMidMove) {
    EXPECT_TRUE(c->WaitForStatus([](const JobStatus& s) { return s.steps_done() >= 60; }).ok());
    KillChiefMidMove(c);
  }
  if (add_ps) {
    EXPECT_TRUE(c->WaitForStatus([](const JobStatus& s) { return s.steps_done() >= 60; }).ok());
    AddPsLiveThenRestartChief(c);
  }
  if (move) {
    EXPECT_TRUE(c->WaitForStatus([](const JobStatus& s) { return s.steps_done() >= 60; }).ok());
    std::vector<std::string> tables;
    std::string dense;
    Tables(c, &tables, &dense);
    std::string out;
    // Refused, changing nothing: a dense variable, shards that are not neighbours, a count
    // that leaves the source nothing, an unknown table.
    EXPECT_EQ(Shardctl(c, {"move-buckets", dense, "4", "--from_shard=0", "--to_shard=1"}, &out),
              2)
        << out;
    EXPECT_THAT(out, HasSubstr("not a dynamic table"));
    EXPECT_EQ(Shardctl(c, {"move-buckets", tables[0], "4", "--from_shard=0", "--to_shard=2"},
                       &out),
              2)
        << out;
    EXPECT_THAT(out, HasSubstr("neighbouring"));
    EXPECT_EQ(Shardctl(c, {"move-buckets", tables[0], "2048", "--from_shard=0", "--to_shard=1"},
                       &out),
              2)
        << out;
    EXPECT_THAT(out, HasSubstr("must keep at least one"));
    EXPECT_EQ(Shardctl(c, {"move-buckets", "nope", "1", "--from_shard=0", "--to_shard=1"}, &out),
              2)
        << out;
    const JobStatus before = *c->WaitForStatus([](const JobStatus&) { return true; });
    EXPECT_LT(before.steps_done(), kSyncSteps - 200) << "the job ran too fast to move mid-job";
    EXPECT_EQ(before.bucket_moves(), 0);
    // ps 0 hands 48 buckets of each of two tables to ps 1; ps 1 hands 16 of one back.
    for (const std::string& table : {tables[1], tables[2]}) {
      EXPECT_EQ(Shardctl(c, {"move-buckets", table, "48", "--from_shard=0", "--to_shard=1",
                             "--pause=0"},
                         &out),
                0)
          << out << c->Logs();
      EXPECT_THAT(out, HasSubstr("moved 48 buckets of " + table + " from shard 0 to shard 1"));
      std::cout << out;
    }
    EXPECT_EQ(Shardctl(c, {"move-buckets", tables[2], "16", "--from_shard=1", "--to_shard=0",
                           "--pause=0"},
                       &out),
              0)
        << out;
    EXPECT_EQ(Shardctl(c, {"status"}, &out), 0);
    // The three refusals that reached the chief count as failed moves (nothing moved).
    EXPECT_THAT(out, HasSubstr("bucket moves 3 done (112 buckets), 3 failed"));
    auto client = c->NewPsClient();
    EXPECT_TRUE(client.ok() && (*client)->Discover().ok());
    const VariableLayout moved = *(*client)->GetLayout(tables[2]);
    EXPECT_EQ(moved.shards[0].buckets.end, 2048 - 48 + 16);
    EXPECT_EQ(moved.routing_version, 64);
    if (kill_ps) {
      // A checkpoint past the moves, then ps 1 lost: it comes back from that checkpoint.
      auto checkpointed = c->WaitForStatus([](const JobStatus& s) {
        return s.has_checkpoint() && s.last_checkpoint().steps_done() >= 400;
      });
      EXPECT_TRUE(checkpointed.ok()) << checkpointed.status() << c->Logs();
      EXPECT_EQ(*c->StopPs(1, SIGKILL), 128 + SIGKILL);
      EXPECT_TRUE(c->RestartPs(1).ok());
    }
  }
  auto done = c->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(5));
  EXPECT_TRUE(done.ok()) << done.status() << c->Logs();
  if (!done.ok()) return run;
  run.end = *done;
  static const std::vector<int64_t>* keys = new std::vector<int64_t>(Keys());
  auto all = c->PullAllVariables(*keys);
  EXPECT_TRUE(all.ok()) << all.status();
  if (all.ok()) run.variables = *std::move(all);
  return run;
}

void ExpectSame(const SyncRun& a, const SyncRun& b) {
  ASSERT_EQ(a.variables.size(), b.variables.size());
  ASSERT_GE(a.variables.size(), 4u + 6u);
  for (size_t v = 0; v < a.variables.size(); ++v) {
    ASSERT_EQ(a.variables[v].size(), b.variables[v].size()) << "variable " << v;
    size_t differ = 0;
    for (size_t i = 0; i < a.variables[v].size(); ++i) {
      differ += a.variables[v][i] != b.variables[v][i];
    }
    EXPECT_EQ(differ, 0u) << "variable " << v;
  }
}

const SyncRun& Reference() {
  static const SyncRun* reference = new SyncRun(RunSync("moves_reference", Disruption::kNone));
  return *reference;
}

TEST(BucketMovesTest, SyncJobWithBucketsMovedMidJobEndsBitIdenticalToAnUnmovedRun) {
  const SyncRun moved = RunSync("moves_sync", Disruption::kMoves);
  EXPECT_EQ(moved.end.steps_done(), kSyncSteps);
  EXPECT_EQ(moved.end.bucket_moves(), 3);
  EXPECT_EQ(moved.end.buckets_moved(), 112);
  EXPECT_EQ(moved.end.steps_lost(), 0);
  EXPECT_EQ(moved.end.recoveries_size(), 0) << moved.end.ShortDebugString();
  ExpectSame(Reference(), moved);
}

TEST(BucketMovesTest, APsKilledAfterMovesComesBackFromTheirCheckpointBitIdentical) {
  const SyncRun recovered = RunSync("moves_kill", Disruption::kMovesThenKillPs);
  EXPECT_EQ(recovered.end.steps_done(), kSyncSteps);
  EXPECT_GE(recovered.end.recoveries_size(), 1) << recovered.end.ShortDebugString();
  ExpectSame(Reference(), recovered);
}

TEST(BucketMovesTest, AChiefKilledMidMoveLeavesNothingStagedAndTheJobEndsBitIdentical) {
  const SyncRun cut = RunSync("moves_chief", Disruption::kKillChiefMidMove);
  EXPECT_EQ(cut.end.steps_done(), kSyncSteps);
  ExpectSame(Reference(), cut);
}

TEST(BucketMovesTest, APsAddedAndRemovedLiveAndAChiefRestartedAfterEndBitIdentical) {
  const SyncRun added = RunSync("moves_live_ps", Disruption::kAddPsLiveThenRestartChief);
  EXPECT_EQ(added.end.steps_done(), kSyncSteps);
  EXPECT_EQ(added.end.ps_size(), 2);
  ExpectSame(Reference(), added);
}

// An async job on 2 of 3 ps: the third added live takes its share of every table while the
// job trains; then it is killed and started again, empty: the job rolls back to a checkpoint
// taken after the add (the tables on 3 ps, the dense variables on 2) and ends with every step
// done once.
TEST(BucketMovesTest, AnAsyncJobTakesAPsAddedLiveAndComesBackWhenItIsLost) {
  TrainingCluster::Options options;
  options.worker_flags = {kStepDelay};
  options.long_lived = true;
  options.num_ps = 3;
  const std::string dir = FreshTempDir("moves_live_async");
  options.job_file =
      Job("moves_live_async", "async",
          absl::StrCat(R"(, "steps": 5000, "num_ps": 2, "checkpoint": {"dir": ")", dir,
                       R"(", "every_steps": 400})"));
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  ASSERT_TRUE(c->WaitForStatus([](const JobStatus& s) { return s.steps_done() >= 100; }).ok());
  std::string out;
  ASSERT_EQ(Shardctl(c, {"scale-ps", "3", "--live"}, &out), 0) << out << c->Logs();
  std::cout << out;
  EXPECT_THAT(out, HasSubstr("added 1 ps live: 2 to 3 ps (layout version 2)"));
  EXPECT_THAT(out, HasSubstr("4 dynamic tables balanced onto the new ps"));
  const JobStatus added = *c->WaitForStatus([](const JobStatus&) { return true; });
  EXPECT_TRUE(added.last_scale().live());
  EXPECT_GT(added.last_scale().buckets_moved(), 4 * 1300);
  const int64_t at = added.steps_done();
  ASSERT_TRUE(c->WaitForStatus([at](const JobStatus& s) {
                   return s.has_checkpoint() && s.last_checkpoint().steps_done() > at;
                 }).ok())
      << c->Logs();
  EXPECT_LT(c->WaitForStatus([](const JobStatus&) { return true; })->steps_done(), 4000)
      << "the job ran too fast to lose a ps mid-job";
  ASSERT_EQ(*c->StopPs(2, SIGKILL), 128 + SIGKILL);
  ASSERT_TRUE(c->RestartPs(2).ok());
  auto done = c->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(5));
  ASSERT_TRUE(done.ok()) << done.status() << c->Logs();
  EXPECT_EQ(done->steps_done(), done->total_steps());
  EXPECT_GE(done->recoveries_size(), 1) << done->ShortDebugString();
  EXPECT_EQ(done->ps_size(), 3);
  // After the rollback every ps holds a shard of each table (placed by the partitioner for
  // 3); the dense variables stay on ps 0 and 1.
  std::vector<std::string> tables;
  std::string dense;
  Tables(c, &tables, &dense);
  auto client = c->NewPsClient();
  ASSERT_TRUE(client.ok() && (*client)->Discover().ok());
  for (const std::string& table : tables) {
    EXPECT_EQ((*client)->GetLayout(table)->shards.size(), 3u) << table;
  }
  const VariableLayout dense_layout = *(*client)->GetLayout(dense);
  for (const VariableLayout::Shard& s : dense_layout.shards) EXPECT_LT(s.ps, 2);
}

TEST(BucketMovesTest, AsyncJobTrainsOnThroughMoves) {
  TrainingCluster::Options options;
  options.worker_flags = {kStepDelay};
  options.long_lived = true;
  options.job_file = Job("moves_async", "async", R"(, "steps": 1200)");
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  ASSERT_TRUE(c->WaitForStatus([](const JobStatus& s) { return s.steps_done() >= 100; }).ok());
  std::vector<std::string> tables;
  std::string dense;
  Tables(c, &tables, &dense);
  std::string out;
  // At shardctl's pace (--pause 25 ms between switches).
  ASSERT_EQ(Shardctl(c, {"move-buckets", tables[2], "64", "--from_shard=0", "--to_shard=1",
                         "--per_switch=4", "--json"},
                     &out),
            0)
      << out << c->Logs();
  EXPECT_THAT(out, HasSubstr("\"buckets\":64"));
  const JobStatus moved = *c->WaitForStatus([](const JobStatus&) { return true; });
  EXPECT_EQ(moved.buckets_moved(), 64);
  const MoveTableBucketsResponse& m = moved.last_bucket_move();
  std::cout << "async move: " << m.ShortDebugString() << "\n";
  EXPECT_GT(m.rows(), 0);
  EXPECT_EQ(m.routing_version(), 16);  // runs of 4
  // ps 1 made hot (3072 of the 4096 buckets), then evened out by --balance.
  ASSERT_EQ(Shardctl(c, {"move-buckets", tables[2], "960", "--from_shard=0", "--to_shard=1",
                         "--per_switch=64", "--pause=0"},
                     &out),
            0)
      << out;
  ASSERT_EQ(Shardctl(c, {"move-buckets", tables[2], "--from_shard=0", "--balance"}, &out), 2);
  EXPECT_THAT(out, HasSubstr("give the VARIABLE only"));
  ASSERT_EQ(Shardctl(c, {"move-buckets", tables[2], "--balance", "--tolerance=0.05",
                         "--per_switch=64", "--pause=0"},
                     &out),
            0)
      << out << c->Logs();
  std::cout << out;
  EXPECT_THAT(out, HasSubstr("buckets from shard 1 to shard 0"));
  const MoveTableBucketsResponse b =
      c->WaitForStatus([](const JobStatus&) { return true; })->last_bucket_move();
  EXPECT_GT(b.imbalance_before(), 1.3) << b.ShortDebugString();
  EXPECT_LT(b.imbalance_after(), 1.15) << b.ShortDebugString();
  EXPECT_GT(b.buckets(), 700) << b.ShortDebugString();
  // The chief lost between a switch's drop and its activation (made here by hand while it is
  // down): the next chief finishes the switch, and the job goes on without a rollback.
  ASSERT_EQ(*c->StopChief(SIGKILL), 128 + SIGKILL);
  {
    auto client = c->NewPsClient();
    ASSERT_TRUE(client.ok() && (*client)->Discover().ok());
    const VariableLayout layout = *(*client)->GetLayout(tables[3]);
    const absl::Status cut = testing::CutOffMove(client->get(), layout, 0, 1,
                                                 layout.shards[0].buckets.end - 1, true);
    ASSERT_TRUE(cut.ok()) << cut;
    EXPECT_EQ((*client)->Discover().code(), absl::StatusCode::kFailedPrecondition);
  }
  ASSERT_TRUE(c->RestartChief().ok()) << c->Logs();
  auto done = c->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(5));
  ASSERT_TRUE(done.ok()) << done.status() << c->Logs();
  EXPECT_EQ(done->steps_done(), done->total_steps());
  const std::string logs = c->Logs();
  EXPECT_THAT(logs, HasSubstr("a bucket move was cut off: finished the move of buckets ["));
  // Hundreds of audited MoveBuckets calls on each ps, a run of them folded into a line and a
  // count (rpc/audit_lines.h).
  size_t audit_lines = 0;
  for (size_t at = logs.find("audit: PsService.MoveBuckets"); at != std::string::npos;
       at = logs.find("audit: PsService.MoveBuckets", at + 1)) {
    ++audit_lines;
  }
  EXPECT_GE(audit_lines, 2u);
  EXPECT_LE(audit_lines, 24u);
  EXPECT_EQ(done->recoveries_size(), 0) << done->ShortDebugString();
  EXPECT_THAT(Staged(c), ::testing::IsEmpty());
  auto client = c->NewPsClient();
  ASSERT_TRUE(client.ok() && (*client)->Discover().ok());
  EXPECT_EQ((*client)->GetLayout(tables[3])->shards[0].buckets.end, 2047);
}

}  // namespace
}  // namespace testing
}  // namespace shardps
