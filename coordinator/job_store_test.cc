#include "coordinator/job_store.h"

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "coordinator/job_spec.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/job_store_", name);
  std::system(absl::StrCat("rm -rf '", dir, "'").c_str());
  return dir;
}

JobSpec Spec(const std::string& extra = "") {
  JobSpec job = *ParseJobSpec(absl::StrCat(R"({"name": "j", "model": "mlp:16", "mode": "sync",)",
                                           R"( "checkpoint": "/ckpt")", extra, "}"),
                              2);
  job.set_job_id("j-1");
  return job;
}

TEST(JobStoreTest, IdentityRoundTrips) {
  auto store = *JobStore::Open(FreshDir("identity"));
  auto none = store->ReadIdentity();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  JobStore::Identity identity{"j-1", Spec()};
  ASSERT_TRUE(store->WriteIdentity(identity).ok());
  auto read = store->ReadIdentity();
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ((*read)->job_id, "j-1");
  EXPECT_EQ((*read)->job.job_id(), "j-1");
  EXPECT_EQ((*read)->job.SerializeAsString(), identity.job.SerializeAsString());
}

TEST(JobStoreTest, StateDefaultsAndRoundTrips) {
  auto store = *JobStore::Open(FreshDir("state"));
  JobStore::State state = *store->ReadState();
  EXPECT_EQ(state.generation, 0);
  EXPECT_FALSE(state.finished);
  state.generation = 7;
  state.generation_start_steps = 1200;
  state.total_steps = 5000;
  state.finished = true;
  state.final_checkpoint = 4;
  state.best_checkpoint = 3;
  state.best_accuracy = 0.8765;
  ASSERT_TRUE(store->WriteState(state).ok());
  JobStore::State read = *store->ReadState();
  EXPECT_EQ(read.generation, 7);
  EXPECT_EQ(read.generation_start_steps, 1200);
  EXPECT_EQ(read.total_steps, 5000);
  EXPECT_TRUE(read.finished);
  EXPECT_EQ(read.final_checkpoint, 4);
  EXPECT_EQ(read.best_checkpoint, 3);
  EXPECT_DOUBLE_EQ(read.best_accuracy, 0.8765);
  EXPECT_EQ(read.layout_version, 0);
  EXPECT_TRUE(read.ps_addresses.empty());
}

// The layout a scale-ps moved the job to is in state.json: a restarted chief follows it.
TEST(JobStoreTest, LayoutRoundTrips) {
  const std::string dir = FreshDir("layout");
  auto store = *JobStore::Open(dir);
  JobStore::State state;
  state.layout_version = 3;
  state.ps_addresses = {"ps-0:2222", "ps-1:2222", "ps-2:2222"};
  ASSERT_TRUE(store->WriteState(state).ok());
  JobStore::State read = *(*JobStore::Open(dir))->ReadState();
  EXPECT_EQ(read.layout_version, 3);
  EXPECT_EQ(read.ps_addresses, state.ps_addresses);
  std::ofstream(dir + "/state.json") << R"({"ps_addresses": ["a:1", 7]})";
  auto bad = store->ReadState();
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("ps_addresses"), std::string::npos) << bad.status();
}

// The recoveries and the steps they lost survive a chief restart in state.json (issue 23
// §5: they were forgotten), and so does a job's end other than success.
TEST(JobStoreTest, RecoveriesAndEndRoundTrip) {
  auto store = *JobStore::Open(FreshDir("recoveries"));
  JobStore::State state = *store->ReadState();
  EXPECT_TRUE(state.recoveries.empty());
  EXPECT_EQ(state.steps_lost, 0);
  EXPECT_EQ(state.ended, "");
  state.recoveries.push_back({1.5e9, "ps 1 restarted", "rolled back to checkpoint 2 (step 40)",
                              13, 0.25});
  state.recoveries.push_back({1.6e9, "ps 0 restarted", "re-initialized", 7, 1.0});
  state.steps_lost = 20;
  state.ended = "CANCELLED";
  ASSERT_TRUE(store->WriteState(state).ok());
  JobStore::State read = *store->ReadState();
  ASSERT_EQ(read.recoveries.size(), 2u);
  EXPECT_EQ(read.recoveries[0].cause, "ps 1 restarted");
  EXPECT_EQ(read.recoveries[0].action, "rolled back to checkpoint 2 (step 40)");
  EXPECT_EQ(read.recoveries[0].steps_lost, 13);
  EXPECT_DOUBLE_EQ(read.recoveries[0].unix_time, 1.5e9);
  EXPECT_DOUBLE_EQ(read.recoveries[0].seconds, 0.25);
  EXPECT_EQ(read.recoveries[1].steps_lost, 7);
  EXPECT_EQ(read.steps_lost, 20);
  EXPECT_EQ(read.ended, "CANCELLED");
}

// A chief restarted without --job resumes the job its directory records, unless that job
// finished or ended; a directory that does not exist is not created.
TEST(JobStoreTest, UnfinishedJobIsTheRecordedJobUntilItEnds) {
  const std::string missing = FreshDir("unfinished_missing");
  auto none = JobStore::UnfinishedJob(missing);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  EXPECT_FALSE(std::ifstream(missing).good()) << "UnfinishedJob created " << missing;

  const std::string dir = FreshDir("unfinished");
  auto store = *JobStore::Open(dir);
  auto empty = JobStore::UnfinishedJob(dir);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_FALSE(empty->has_value());
  ASSERT_TRUE(store->WriteIdentity({"j-1", Spec()}).ok());
  auto running = JobStore::UnfinishedJob(dir);
  ASSERT_TRUE(running.ok()) << running.status();
  ASSERT_TRUE(running->has_value());
  EXPECT_EQ((*running)->job_id, "j-1");
  EXPECT_EQ((*running)->job.name(), "j");

  JobStore::State state;
  state.ended = "CANCELLED";
  ASSERT_TRUE(store->WriteState(state).ok());
  EXPECT_FALSE(JobStore::UnfinishedJob(dir)->has_value());
  state.ended = "";
  state.finished = true;
  ASSERT_TRUE(store->WriteState(state).ok());
  EXPECT_FALSE(JobStore::UnfinishedJob(dir)->has_value());

  std::ofstream(dir + "/state.json") << "{\"recoveries\": 3}";
  auto corrupt = JobStore::UnfinishedJob(dir);
  EXPECT_EQ(corrupt.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(corrupt.status().message().find("state.json"), std::string::npos)
      << corrupt.status();
}

TEST(JobStoreTest, CorruptFilesAreDataLossNamingTheFile) {
  const std::string dir = FreshDir("corrupt");
  auto store = *JobStore::Open(dir);
  std::ofstream(dir + "/state.json") << "{\"generation\": -3}";
  auto state = store->ReadState();
  EXPECT_EQ(state.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(state.status().message().find("state.json"), std::string::npos);
  std::ofstream(dir + "/job.json") << "not json";
  auto identity = store->ReadIdentity();
  EXPECT_EQ(identity.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(identity.status().message().find("job.json"), std::string::npos);
}

TEST(JobStoreTest, JournalKeepsEachGenerationApart) {
  auto store = *JobStore::Open(FreshDir("journal"));
  EXPECT_EQ(store->Journal(1).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store->StartJournal(2).ok());
  for (int64_t s : {5, 3, 4}) ASSERT_TRUE(store->Journal(s).ok());
  ASSERT_TRUE(store->StartJournal(3).ok());
  ASSERT_TRUE(store->Journal(9).ok());
  EXPECT_EQ(*store->JournalSteps(2), (std::vector<int64_t>{5, 3, 4}));
  EXPECT_EQ(*store->JournalSteps(3), (std::vector<int64_t>{9}));
  EXPECT_TRUE(store->JournalSteps(4)->empty());
  // A reopened store (a restarted chief) reads the same and appends after.
  ASSERT_TRUE(store->StartJournal(2).ok());
  ASSERT_TRUE(store->Journal(6).ok());
  EXPECT_EQ(*store->JournalSteps(2), (std::vector<int64_t>{5, 3, 4, 6}));
}

TEST(JobStoreTest, OperationalFieldsMayChange) {
  JobSpec stored = Spec();
  JobSpec submitted = Spec(
      R"(, "epochs": 7, "eval_every_steps": 99, "step_timeout_ms": 5000, "backend": "cpu",)"
      R"( "partitioner": "fixed:3", "placement": "by_bytes")");
  submitted.set_num_ps(3);
  submitted.set_job_id("other");
  EXPECT_TRUE(CheckSameJob(stored, submitted).ok()) << CheckSameJob(stored, submitted);
}

TEST(JobStoreTest, ModelChangesAreRefusedNamingTheField) {
  JobSpec stored = Spec();
  JobSpec submitted = Spec(R"(, "batch_size": 64)");
  absl::Status s = CheckSameJob(stored, submitted);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("batch_size"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--fresh"), std::string::npos) << s;
  JobSpec moved = Spec();
  moved.mutable_checkpoint()->set_dir("/elsewhere");
  EXPECT_EQ(CheckSameJob(stored, moved).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace shardps
