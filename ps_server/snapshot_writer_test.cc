#include "ps_server/snapshot_writer.h"

#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "checkpoint/safetensors.h"
#include "common/test_files.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

namespace fs = std::filesystem;

// A tensor of `values` whose bytes live in a block that the returned reference keeps alive.
TensorToWrite Tensor(const std::string& name, std::vector<float> values,
                     std::weak_ptr<const void>* watch = nullptr) {
  auto block = std::make_shared<const std::vector<float>>(std::move(values));
  TensorToWrite t;
  t.name = name;
  t.shape = {static_cast<int64_t>(block->size())};
  t.pieces.emplace_back(reinterpret_cast<const char*>(block->data()),
                        block->size() * sizeof(float));
  if (watch != nullptr) *watch = block;
  t.holds.push_back(std::move(block));
  return t;
}

SnapshotStatusResponse WaitFinished(const SnapshotWriter& writer, int64_t id) {
  while (true) {
    SnapshotStatusResponse s = writer.Status(id);
    if (s.state() != SnapshotStatusResponse::WRITING) return s;
    usleep(1000);
  }
}

TEST(SnapshotWriterTest, WritesTheTensorsAndReportsTheFile) {
  const std::string dir = FreshTestDir("writes");
  SnapshotWriter::Options options;
  absl::Notification release;
  absl::Notification entered;
  options.before_write = [&](int64_t id) {
    if (id == 1) {
      entered.Notify();
      release.WaitForNotification();
    }
  };
  SnapshotWriter writer(options);
  EXPECT_EQ(writer.Status(1).state(), SnapshotStatusResponse::UNKNOWN);
  SnapshotWriter::Job job;
  job.checkpoint_id = 1;
  job.path = dir + "/ps-00000-of-00001.safetensors";
  std::weak_ptr<const void> watch;
  job.tensors.push_back(Tensor("v/part_0", {1, 2, 3}, &watch));
  job.tensors.push_back(Tensor("v/part_0/adam_m", {4, 5, 6}));
  job.metadata = {{"checkpoint_id", "1"}};
  ASSERT_TRUE(writer.Submit(std::move(job)).ok());
  entered.WaitForNotification();
  // Being written: the id is in use, and the tensors' blocks are still held.
  EXPECT_EQ(writer.Status(1).state(), SnapshotStatusResponse::WRITING);
  EXPECT_TRUE(writer.InUse(1));
  SnapshotWriter::Job again;
  again.checkpoint_id = 1;
  again.path = dir + "/other.safetensors";
  const absl::Status in_use = writer.Submit(std::move(again));
  EXPECT_EQ(in_use.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(in_use.message(), "snapshot 1")) << in_use;
  EXPECT_FALSE(watch.expired());
  release.Notify();

  const SnapshotStatusResponse done = WaitFinished(writer, 1);
  ASSERT_EQ(done.state(), SnapshotStatusResponse::DONE) << done.error();
  EXPECT_TRUE(watch.expired());  // the references went with the write
  EXPECT_EQ(done.file().file(), "ps-00000-of-00001.safetensors");
  ASSERT_EQ(done.file().tensors_size(), 2);
  EXPECT_EQ(done.bytes_written(), done.file().bytes());
  EXPECT_FALSE(writer.InUse(1));
  auto file = SafetensorsFile::Open(dir + "/ps-00000-of-00001.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->metadata().at("checkpoint_id"), "1");
  const TensorInfo* m = (*file)->Find("v/part_0/adam_m");
  ASSERT_NE(m, nullptr);
  std::vector<float> read(3);
  ASSERT_TRUE((*file)->ReadRange(*m, 0, 12, reinterpret_cast<char*>(read.data())).ok());
  EXPECT_EQ(read, (std::vector<float>{4, 5, 6}));
  EXPECT_FALSE(fs::exists(dir + "/other.safetensors"));
}

TEST(SnapshotWriterTest, AnUnwritableDirectoryFailsWithAClearErrorAndNoFile) {
  // A missing directory, and (unless running as root, who writes anywhere) a read-only one.
  const std::string dir = FreshTestDir("unwritable");
  const std::string missing = dir + "/no/such/dir/ps-0.safetensors";
  const std::string locked_dir = dir + "/locked";
  fs::create_directories(locked_dir);
  chmod(locked_dir.c_str(), 0500);
  SnapshotWriter writer(SnapshotWriter::Options{});
  SnapshotWriter::Job a;
  a.checkpoint_id = 7;
  a.path = missing;
  a.tensors.push_back(Tensor("w", {1}));
  ASSERT_TRUE(writer.Submit(std::move(a)).ok());
  const SnapshotStatusResponse failed = WaitFinished(writer, 7);
  EXPECT_EQ(failed.state(), SnapshotStatusResponse::FAILED);
  EXPECT_TRUE(absl::StrContains(failed.error(), "snapshot 7")) << failed.error();
  EXPECT_TRUE(absl::StrContains(failed.error(), missing)) << failed.error();
  EXPECT_FALSE(fs::exists(missing));
  EXPECT_FALSE(fs::exists(missing + ".tmp"));

  if (geteuid() != 0) {  // root ignores the directory's permissions
    SnapshotWriter::Job b;
    b.checkpoint_id = 8;
    b.path = locked_dir + "/ps-0.safetensors";
    b.tensors.push_back(Tensor("w", {1}));
    ASSERT_TRUE(writer.Submit(std::move(b)).ok());
    const SnapshotStatusResponse locked = WaitFinished(writer, 8);
    EXPECT_EQ(locked.state(), SnapshotStatusResponse::FAILED);
    EXPECT_TRUE(absl::StrContains(locked.error(), locked_dir)) << locked.error();
    EXPECT_TRUE(fs::is_empty(locked_dir));
  }
  chmod(locked_dir.c_str(), 0700);
  // A failed id may be taken again.
  SnapshotWriter::Job c;
  c.checkpoint_id = 7;
  c.path = dir + "/ps-0.safetensors";
  c.tensors.push_back(Tensor("w", {1}));
  ASSERT_TRUE(writer.Submit(std::move(c)).ok());
  EXPECT_EQ(WaitFinished(writer, 7).state(), SnapshotStatusResponse::DONE);
}

// A full disk, as the write sees it: past RLIMIT_FSIZE a write fails (EFBIG) the way it
// fails on a full file system (ENOSPC), midway through the file.
TEST(SnapshotWriterTest, AWriteThatRunsOutOfSpaceFailsAndLeavesNoFile) {
  const std::string dir = FreshTestDir("full");
  const std::string path = dir + "/ps-0.safetensors";
  struct rlimit old_limit;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 16 << 10;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  SnapshotStatusResponse status;
  {
    SnapshotWriter writer(SnapshotWriter::Options{});
    SnapshotWriter::Job job;
    job.checkpoint_id = 4;
    job.path = path;
    job.tensors.push_back(Tensor("big", std::vector<float>(64 << 10, 1.0f)));  // 256 KiB
    ASSERT_TRUE(writer.Submit(std::move(job)).ok());
    status = WaitFinished(writer, 4);
  }
  setrlimit(RLIMIT_FSIZE, &old_limit);
  signal(SIGXFSZ, old_handler);
  EXPECT_EQ(status.state(), SnapshotStatusResponse::FAILED);
  EXPECT_TRUE(absl::StrContains(status.error(), path)) << status.error();
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(SnapshotWriterTest, KeepsTheLastFewStatuses) {
  const std::string dir = FreshTestDir("keeps");
  SnapshotWriter::Options options;
  options.keep_finished = 2;
  options.fsync = false;
  SnapshotWriter writer(options);
  for (int64_t id = 1; id <= 3; ++id) {
    SnapshotWriter::Job job;
    job.checkpoint_id = id;
    job.path = dir + "/s" + std::to_string(id) + ".safetensors";
    job.tensors.push_back(Tensor("w", {static_cast<float>(id)}));
    ASSERT_TRUE(writer.Submit(std::move(job)).ok());
  }
  EXPECT_EQ(WaitFinished(writer, 3).state(), SnapshotStatusResponse::DONE);
  EXPECT_EQ(writer.Status(1).state(), SnapshotStatusResponse::UNKNOWN);
  EXPECT_EQ(writer.Status(2).state(), SnapshotStatusResponse::DONE);
}

}  // namespace
}  // namespace shardps
