#include "checkpoint/checkpoint_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/safetensors.h"
#include "common/test_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// A one-variable manifest for checkpoint `id` whose data file has been written into `dir`.
absl::StatusOr<Manifest> WriteData(const CheckpointDir& dir, int64_t id) {
  const std::string file = CheckpointDir::DataFileName(0, 1);
  auto values = std::make_shared<std::vector<float>>(std::vector<float>{1.5f, static_cast<float>(id)});
  TensorToWrite t;
  t.name = "v";
  t.shape = {2};
  t.pieces.emplace_back(reinterpret_cast<const char*>(values->data()), 8);
  t.holds.push_back(values);
  std::vector<TensorToWrite> tensors;
  tensors.push_back(std::move(t));
  absl::StatusOr<DataFileInfo> info =
      WriteSafetensors(dir.CheckpointPath(id) + "/" + file, std::move(tensors));
  if (!info.ok()) return info.status();
  Manifest m;
  m.checkpoint_id = id;
  m.job_id = "job-1";
  m.generation = 1;
  m.progress.steps_done = id * 10;
  ManifestVariable v;
  v.name = "v";
  v.shape = {2};
  ManifestShard s;
  s.name = "v";
  s.rows = 2;
  s.file = file;
  s.tensors = {{"", "v"}};
  v.shards.push_back(s);
  m.variables.push_back(v);
  m.files.push_back(*info);
  return m;
}

absl::Status Committed(const CheckpointDir& dir, int64_t id) {
  absl::StatusOr<std::string> path = dir.Prepare(id);
  if (!path.ok()) return path.status();
  absl::StatusOr<Manifest> m = WriteData(dir, id);
  if (!m.ok()) return m.status();
  return dir.Commit(*m);
}

std::vector<int64_t> Ids(const std::vector<CommittedCheckpoint>& list) {
  std::vector<int64_t> ids;
  for (const CommittedCheckpoint& c : list) ids.push_back(c.id);
  return ids;
}

class CheckpointDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = MakeTestDir("ckptdir");
    absl::StatusOr<CheckpointDir> dir = CheckpointDir::Open(root_ + "/job", true);
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::make_unique<CheckpointDir>(*dir);
  }
  std::vector<int64_t> ListedIds() {
    absl::StatusOr<std::vector<CommittedCheckpoint>> list = dir_->List();
    EXPECT_TRUE(list.ok()) << list.status();
    return list.ok() ? Ids(*list) : std::vector<int64_t>{};
  }
  std::string root_;
  std::unique_ptr<CheckpointDir> dir_;
};

TEST_F(CheckpointDirTest, OpenChecksThePath) {
  absl::StatusOr<CheckpointDir> missing = CheckpointDir::Open(root_ + "/nope", false);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(missing.status().message(), HasSubstr(root_ + "/nope"));
  EXPECT_FALSE(PathExists(root_ + "/nope"));
  absl::StatusOr<CheckpointDir> created = CheckpointDir::Open(root_ + "/a/b/c", true);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->path(), root_ + "/a/b/c");
  WriteFileBytes(root_ + "/file", "x");
  absl::StatusOr<CheckpointDir> file = CheckpointDir::Open(root_ + "/file", true);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(file.status().message(), HasSubstr("is not a directory"));
  EXPECT_EQ(CheckpointDir::OpenReadOnly(root_ + "/nope").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(CheckpointDir::OpenReadOnly(root_ + "/a/b/c").ok());
}

TEST_F(CheckpointDirTest, PathsAndNames) {
  const std::string p = root_ + "/job";
  EXPECT_EQ(dir_->JobFile(), p + "/job.json");
  EXPECT_EQ(dir_->StateFile(), p + "/state.json");
  EXPECT_EQ(dir_->JournalFile(2), p + "/journal-2.log");
  EXPECT_EQ(dir_->CheckpointPath(7), p + "/ckpt-000000007");
  EXPECT_EQ(dir_->CheckpointPath(1234567890), p + "/ckpt-1234567890");
  EXPECT_EQ(CheckpointDir::DataFileName(1, 3), "ps-00001-of-00003.safetensors");
}

TEST_F(CheckpointDirTest, SmallFilesAreReplacedAtomically) {
  const std::string path = dir_->StateFile();
  EXPECT_EQ(ReadWholeFile(path).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(WriteFileAtomically(path, "{\"generation\": 1}").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "{\"generation\": 2}").ok());
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "{\"generation\": 2}");
  EXPECT_FALSE(PathExists(path + ".tmp"));
  absl::Status bad = WriteFileAtomically(root_ + "/missing/state.json", "x");
  EXPECT_EQ(bad.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(bad.message(), HasSubstr(root_ + "/missing/state.json.tmp"));
  EXPECT_TRUE(SyncDirectory(dir_->path()).ok());
}

TEST_F(CheckpointDirTest, CommitThenListNewestFirst) {
  EXPECT_THAT(ListedIds(), IsEmpty());
  EXPECT_EQ(*dir_->NextId(), 1);
  ASSERT_TRUE(Committed(*dir_, 1).ok());
  ASSERT_TRUE(Committed(*dir_, 2).ok());
  ASSERT_TRUE(Committed(*dir_, 10).ok());
  absl::StatusOr<std::vector<CommittedCheckpoint>> list = dir_->List();
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_THAT(Ids(*list), ElementsAre(10, 2, 1));
  EXPECT_EQ((*list)[0].path, dir_->CheckpointPath(10));
  EXPECT_EQ((*list)[0].manifest_path, dir_->CheckpointPath(10) + "/manifest.json");
  EXPECT_EQ((*list)[0].manifest.progress.steps_done, 100);
  EXPECT_EQ(*dir_->NextId(), 11);
  EXPECT_FALSE(PathExists(dir_->CheckpointPath(10) + "/manifest.json.tmp"));
}

TEST_F(CheckpointDirTest, CommitRefusesWhatNoReaderCouldUse) {
  ASSERT_TRUE(dir_->Prepare(3).ok());
  absl::StatusOr<Manifest> m = WriteData(*dir_, 3);
  ASSERT_TRUE(m.ok()) << m.status();

  Manifest unprepared = *m;
  unprepared.checkpoint_id = 4;
  EXPECT_EQ(dir_->Commit(unprepared).code(), absl::StatusCode::kFailedPrecondition);

  Manifest wrong_size = *m;
  wrong_size.files[0].set_bytes(m->files[0].bytes() + 1);
  absl::Status s = dir_->Commit(wrong_size);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("ps-00000-of-00001.safetensors has"));

  Manifest missing_file = *m;
  missing_file.files[0].set_file("ps-00000-of-00002.safetensors");
  missing_file.variables[0].shards[0].file = "ps-00000-of-00002.safetensors";
  s = dir_->Commit(missing_file);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("ps-00000-of-00002.safetensors: No such file"));

  Manifest invalid = *m;
  invalid.variables[0].shape = {3};  // the shards cover 2 of 3 rows
  s = dir_->Commit(invalid);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("variables[0].shards"));
  EXPECT_FALSE(PathExists(dir_->CheckpointPath(3) + "/manifest.json"));
  EXPECT_THAT(ListedIds(), IsEmpty());

  ASSERT_TRUE(dir_->Commit(*m).ok());
  EXPECT_EQ(dir_->Commit(*m).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(dir_->Prepare(3).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(ListedIds(), ElementsAre(3));
}

TEST_F(CheckpointDirTest, PrepareEmptiesAnInterruptedCheckpoint) {
  absl::StatusOr<std::string> path = dir_->Prepare(5);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, dir_->CheckpointPath(5));
  WriteFileBytes(*path + "/ps-00000-of-00001.safetensors.tmp", "half");
  ASSERT_TRUE(dir_->Prepare(5).ok());
  EXPECT_FALSE(PathExists(*path + "/ps-00000-of-00001.safetensors.tmp"));
  EXPECT_TRUE(PathExists(*path));
}

TEST_F(CheckpointDirTest, InterruptedCheckpointsAreIgnoredCountedAndPruned) {
  ASSERT_TRUE(Committed(*dir_, 1).ok());
  ASSERT_TRUE(Committed(*dir_, 2).ok());
  ASSERT_TRUE(dir_->Prepare(3).ok());  // data written, never committed
  ASSERT_TRUE(WriteData(*dir_, 3).ok());
  ASSERT_TRUE(dir_->Prepare(4).ok());  // the manifest's rename never happened
  ASSERT_TRUE(WriteData(*dir_, 4).ok());
  WriteFileBytes(dir_->CheckpointPath(4) + "/manifest.json.tmp", "{\"format\": \"shardps-chec");
  ASSERT_TRUE(Committed(*dir_, 5).ok());
  ASSERT_TRUE(dir_->Prepare(6).ok());  // newer than every committed one: maybe in progress
  EXPECT_THAT(ListedIds(), ElementsAre(5, 2, 1));
  EXPECT_EQ(*dir_->NextId(), 7);

  ASSERT_TRUE(dir_->Prune(1, std::nullopt, 0).ok());
  EXPECT_THAT(ListedIds(), ElementsAre(5));
  for (int64_t gone : {1, 2, 3, 4}) EXPECT_FALSE(PathExists(dir_->CheckpointPath(gone))) << gone;
  EXPECT_TRUE(PathExists(dir_->CheckpointPath(6)));
  EXPECT_EQ(*dir_->NextId(), 7);
}

TEST_F(CheckpointDirTest, UnreadableManifestIsSkippedReportedAndKept) {
  ASSERT_TRUE(Committed(*dir_, 1).ok());
  ASSERT_TRUE(Committed(*dir_, 2).ok());
  ASSERT_TRUE(Committed(*dir_, 3).ok());
  WriteFileBytes(dir_->CheckpointPath(3) + "/manifest.json", "{\"format\": 17}");
  // A manifest copied from another checkpoint's directory does not belong here.
  ASSERT_TRUE(dir_->Prepare(4).ok());
  absl::StatusOr<std::string> one = ReadWholeFile(dir_->CheckpointPath(1) + "/manifest.json");
  ASSERT_TRUE(one.ok());
  WriteFileBytes(dir_->CheckpointPath(4) + "/manifest.json", *one);

  std::vector<std::string> skipped;
  absl::StatusOr<std::vector<CommittedCheckpoint>> list = dir_->List(&skipped);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_THAT(Ids(*list), ElementsAre(2, 1));
  ASSERT_THAT(skipped, SizeIs(2));
  const std::string all = skipped[0] + "\n" + skipped[1];
  EXPECT_THAT(all, HasSubstr(dir_->CheckpointPath(3) + "/manifest.json: format: not a string"));
  EXPECT_THAT(all, HasSubstr(dir_->CheckpointPath(4) +
                             "/manifest.json: checkpoint_id 1 does not match its directory"));

  ASSERT_TRUE(dir_->Prune(1, std::nullopt, 0).ok());
  EXPECT_THAT(ListedIds(), ElementsAre(2));
  EXPECT_TRUE(PathExists(dir_->CheckpointPath(3) + "/manifest.json")) << "evidence kept";
  EXPECT_TRUE(PathExists(dir_->CheckpointPath(4) + "/manifest.json"));
}

TEST_F(CheckpointDirTest, PruneKeepsTheNewestAndTheBest) {
  for (int64_t id = 1; id <= 5; ++id) ASSERT_TRUE(Committed(*dir_, id).ok());
  EXPECT_EQ(dir_->Prune(0, std::nullopt, 0).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(dir_->Prune(2, 1, 0).ok());
  EXPECT_THAT(ListedIds(), ElementsAre(5, 4, 1));
  ASSERT_TRUE(dir_->Prune(1, std::nullopt, 0).ok());
  EXPECT_THAT(ListedIds(), ElementsAre(5));
  ASSERT_TRUE(dir_->Prune(1, std::nullopt, 0).ok());
  EXPECT_THAT(ListedIds(), ElementsAre(5));
}

TEST_F(CheckpointDirTest, PruneRemovesOldJournalsOnly) {
  for (int g = 1; g <= 3; ++g) WriteFileBytes(dir_->JournalFile(g), "");
  WriteFileBytes(dir_->path() + "/journal-x.log", "");
  ASSERT_TRUE(dir_->Prune(1, std::nullopt, 2).ok());
  EXPECT_FALSE(PathExists(dir_->JournalFile(1)));
  EXPECT_TRUE(PathExists(dir_->JournalFile(2)));
  EXPECT_TRUE(PathExists(dir_->JournalFile(3)));
  EXPECT_TRUE(PathExists(dir_->path() + "/journal-x.log"));
}

TEST_F(CheckpointDirTest, ClearRemovesTheJobsStateOnly) {
  ASSERT_TRUE(Committed(*dir_, 1).ok());
  ASSERT_TRUE(dir_->Prepare(2).ok());
  ASSERT_TRUE(WriteFileAtomically(dir_->JobFile(), "{}").ok());
  ASSERT_TRUE(WriteFileAtomically(dir_->StateFile(), "{}").ok());
  WriteFileBytes(dir_->JournalFile(1), "");
  WriteFileBytes(dir_->path() + "/notes.txt", "mine");
  ASSERT_TRUE(dir_->Clear().ok());
  EXPECT_FALSE(PathExists(dir_->CheckpointPath(1)));
  EXPECT_FALSE(PathExists(dir_->CheckpointPath(2)));
  EXPECT_FALSE(PathExists(dir_->JobFile()));
  EXPECT_FALSE(PathExists(dir_->StateFile()));
  EXPECT_FALSE(PathExists(dir_->JournalFile(1)));
  EXPECT_TRUE(PathExists(dir_->path() + "/notes.txt"));
  EXPECT_EQ(*dir_->NextId(), 1);
}

using Records = std::vector<std::pair<int64_t, int64_t>>;

TEST_F(CheckpointDirTest, JournalRoundTripsAndIgnoresATornLastRecord) {
  const std::string path = dir_->JournalFile(2);
  EXPECT_THAT(*StepJournal::Read(path), IsEmpty()) << "missing file: no records";
  {
    absl::StatusOr<std::unique_ptr<StepJournal>> journal = StepJournal::Open(path);
    ASSERT_TRUE(journal.ok()) << journal.status();
    ASSERT_TRUE((*journal)->Append(2, 100).ok());
    ASSERT_TRUE((*journal)->Append(2, 101).ok());
    ASSERT_TRUE((*journal)->Append(2, int64_t{1} << 40).ok());
  }
  EXPECT_EQ(*StepJournal::Read(path), (Records{{2, 100}, {2, 101}, {2, int64_t{1} << 40}}));

  // A chief killed mid-write: part of a record, by hand.
  AppendFileBytes(path, std::string("\x02\x00\x00\x00\x00\x00\x00\x00\x66\x00", 10));
  EXPECT_EQ(*StepJournal::Read(path), (Records{{2, 100}, {2, 101}, {2, int64_t{1} << 40}}));

  // Reopening cuts the torn tail, so that new records stay aligned.
  {
    absl::StatusOr<std::unique_ptr<StepJournal>> journal = StepJournal::Open(path);
    ASSERT_TRUE(journal.ok()) << journal.status();
    ASSERT_TRUE((*journal)->Append(2, 102).ok());
  }
  EXPECT_EQ(*StepJournal::Read(path),
            (Records{{2, 100}, {2, 101}, {2, int64_t{1} << 40}, {2, 102}}));

  // A machine crash can leave zeros past the end: a whole-sized but invalid tail.
  AppendFileBytes(path, std::string(40, '\0'));
  EXPECT_THAT(*StepJournal::Read(path), SizeIs(4));
}

TEST_F(CheckpointDirTest, JournalCorruptionBeforeAValidRecordIsDataLoss) {
  const std::string path = dir_->JournalFile(1);
  {
    absl::StatusOr<std::unique_ptr<StepJournal>> journal = StepJournal::Open(path);
    ASSERT_TRUE(journal.ok());
    for (int step = 0; step < 3; ++step) ASSERT_TRUE((*journal)->Append(1, step).ok());
  }
  absl::StatusOr<std::string> bytes = ReadWholeFile(path);
  ASSERT_TRUE(bytes.ok());
  std::string bad = *bytes;
  bad[25] ^= 0x40;  // inside the second record
  WriteFileBytes(path, bad);
  absl::StatusOr<Records> records = StepJournal::Read(path);
  EXPECT_EQ(records.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(records.status().message(), HasSubstr(path + ": step journal record at byte 20"));
}

}  // namespace
}  // namespace shardps
