// A checkpoint directory whose disk fills up mid-job, as processes on localhost: the
// checkpoint that finds no space fails (shardctl shows why), training goes on to the end,
// and the checkpoint committed before stays whole. The final checkpoint fails too, and the
// job does not end on it (it once ended SUCCEEDED, its newest durable state far behind): it
// stays RUNNING, the ps keeping the trained state, and retries until the disk has room again
// (the test frees it), then ends SUCCEEDED with a final checkpoint of every step. The small disk is a tmpfs mounted in a
// mount namespace of this test's own (it needs CAP_SYS_ADMIN; without it the test is
// skipped, saying so), so it vanishes with the test process whatever happens. Its own binary:
// unshare(CLONE_NEWNS) needs a process that has no other thread yet.
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/checkpoint_testing.h"
#include "tests/training_cluster.h"

namespace shardps {
namespace testing {
namespace {

using ::testing::HasSubstr;

// A tmpfs of `size` mounted at `path` in this process's own mount namespace (inherited by
// the daemons it starts), unmounted when destroyed.
class SmallDisk {
 public:
  // Empty when it cannot be made here; then `why` says why.
  static std::unique_ptr<SmallDisk> Mount(const std::string& path, const std::string& size,
                                          std::string* why) {
    if (unshare(CLONE_NEWNS) != 0) {
      *why = absl::StrCat("unshare(CLONE_NEWNS): ", std::strerror(errno));
      return nullptr;
    }
    // Mounts made here must not propagate to the namespace this one was copied from.
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      *why = absl::StrCat("making / private: ", std::strerror(errno));
      return nullptr;
    }
    if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      *why = absl::StrCat("mkdir ", path, ": ", std::strerror(errno));
      return nullptr;
    }
    if (mount("tmpfs", path.c_str(), "tmpfs", 0, absl::StrCat("size=", size).c_str()) != 0) {
      *why = absl::StrCat("mount -t tmpfs ", path, ": ", std::strerror(errno));
      return nullptr;
    }
    return std::unique_ptr<SmallDisk>(new SmallDisk(path));
  }
  ~SmallDisk() { umount2(path_.c_str(), MNT_DETACH); }

  // Writes a file at `name` until the disk is full; the bytes written.
  int64_t Fill(const std::string& name) {
    const int fd = open(absl::StrCat(path_, "/", name).c_str(), O_WRONLY | O_CREAT, 0644);
    if (fd < 0) return 0;
    std::vector<char> chunk(64 << 10, 'x');
    int64_t total = 0;
    while (true) {
      const ssize_t n = write(fd, chunk.data(), chunk.size());
      if (n <= 0) break;
      total += n;
    }
    close(fd);
    return total;
  }

 private:
  explicit SmallDisk(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

TEST(CheckpointDiskFullTest, ACheckpointThatFindsNoSpaceFailsButTrainingGoesOnAndTheModelIsKept) {
  std::string why;
  std::unique_ptr<SmallDisk> disk = SmallDisk::Mount(FreshTempDir("small_disk"), "4m", &why);
  if (disk == nullptr) GTEST_SKIP() << "no small disk can be mounted here: " << why;
  const std::string dir = absl::StrCat(TempDir(), "/small_disk/ckpt");
  // Long enough that the first checkpoint is seen well before the end on a loaded machine (the
  // workers run from the job's first moment; 2500 steps once left fewer than 1000 by then).
  constexpr int64_t kSteps = 6000;
  constexpr int64_t kEverySteps = 200;
  const std::string job = WriteTempFile(
      "full.json",
      absl::StrCat(R"({"name": "df", "model": "mlp:64", "batch_size": 64, "mode": "async",)",
                   R"( "seed": 7, "backend": "cpu", "partitioner": "min_size:65536:2",)",
                   R"( "optimizer": {"type": "adam", "learning_rate": 0.002}, "steps": )",
                   kSteps, R"(, "checkpoint": {"dir": ")", dir,
                   R"(", "every_steps": )", kEverySteps, R"(, "keep": 3}})"));
  TrainingCluster::Options options;
  options.long_lived = true;  // its status is read after the job
  options.job_file = job;
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  auto first = c->WaitForStatus([](const JobStatus& s) { return s.has_checkpoint(); });
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_LT(first->steps_done(), kSteps - 1000) << "the job ran too fast to fill its disk";

  EXPECT_GT(disk->Fill("filler"), 0);
  auto failed = c->WaitForStatus([](const JobStatus& s) { return !s.checkpoint_error().empty(); });
  ASSERT_TRUE(failed.ok()) << failed.status();
  ASSERT_LT(failed->steps_done(), kSteps - 300) << "the job ended before it could go on";
  // What was committed before the disk filled (a checkpoint whose files were all written
  // before may have committed after the fill, too).
  std::vector<CommittedCheckpoint> committed = CommittedCheckpoints(dir);
  ASSERT_FALSE(committed.empty());
  const CommittedCheckpoint previous = committed[0];

  std::string out;
  auto code = RunCommand(BinaryPath("coordinator/cli/shardctl"),
                         {"status", absl::StrCat("--chief=", c->chief_address())}, {}, &out);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << out;
  EXPECT_THAT(out, HasSubstr("CHECKPOINT FAILED")) << out;

  // Every step done, and the final checkpoint failed: the job waits for it, running.
  auto unsaved = c->WaitForStatus(
      [](const JobStatus& s) {
        return s.state() != JobStatus::RUNNING ||
               (s.training_done() &&
                s.checkpoint_error().find("(final) failed") != std::string::npos);
      },
      absl::Minutes(3));
  ASSERT_TRUE(unsaved.ok()) << unsaved.status();
  EXPECT_EQ(unsaved->state(), JobStatus::RUNNING) << unsaved->DebugString();
  EXPECT_EQ(unsaved->steps_done(), kSteps);
  EXPECT_THAT(unsaved->checkpoint_error(), HasSubstr("No space left")) << c->Logs();
  EXPECT_THAT(unsaved->checkpoint_error(), HasSubstr("the ps keep the trained state"));
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(c->ps(i)->Running()) << "ps " << i;
  // Room again: the final checkpoint retried commits, and the job ends.
  ASSERT_EQ(unlink(absl::StrCat(TempDir(), "/small_disk/filler").c_str()), 0)
      << std::strerror(errno);
  auto status = c->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(3));
  ASSERT_TRUE(status.ok()) << status.status() << c->Logs();
  EXPECT_EQ(status->steps_done(), kSteps);
  EXPECT_EQ(status->checkpoint_error(), "");
  ASSERT_TRUE(status->has_checkpoint());
  EXPECT_TRUE(status->last_checkpoint().final());
  EXPECT_EQ(status->last_checkpoint().steps_done(), kSteps);
  // A failed checkpoint is retried an interval later, not at every step.
  const std::string log = c->chief()->Log();
  int failures = 0;
  for (size_t at = 0; (at = log.find("checkpoint (every_steps) failed", at)) != std::string::npos;
       ++at) {
    ++failures;
  }
  EXPECT_GE(failures, 1);
  EXPECT_LE(failures, kSteps / kEverySteps) << log;
  // The checkpoint committed before is still there, every byte as its manifest says.
  // No checkpoint committed on the full disk: the newest ones are the final one and, if not
  // pruned, the one committed before.
  committed = CommittedCheckpoints(dir);
  ASSERT_FALSE(committed.empty());
  EXPECT_EQ(committed[0].id, status->last_checkpoint().id());
  EXPECT_TRUE(committed[0].manifest.final);
  if (committed.size() > 1) {
    EXPECT_EQ(committed[1].id, previous.id) << "a checkpoint committed on a full disk";
    auto reader = CheckpointReader::Open(previous.path);
    ASSERT_TRUE(reader.ok()) << reader.status();
    absl::Status verified = (*reader)->VerifyFiles();
    EXPECT_TRUE(verified.ok()) << verified;
  }
  auto reader = CheckpointReader::Open(committed[0].path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::Status verified = (*reader)->VerifyFiles();
  EXPECT_TRUE(verified.ok()) << verified;
}

}  // namespace
}  // namespace testing
}  // namespace shardps
