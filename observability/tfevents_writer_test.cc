#include "observability/tfevents_writer.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/test_files.h"
#include "gtest/gtest.h"
#include "observability/tfevents_reader.h"

namespace shardps {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1795412345) + absl::Milliseconds(250);

TfEventsWriter::Options FixedClock(absl::Time* now) {
  TfEventsWriter::Options options;
  options.hostname = "host-a";
  options.now = [now] { return *now; };
  return options;
}

// Reference values from TensorBoard's own pure-Python reader
// (tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c).
TEST(TfEventsWriterTest, FramesRecordsAsTensorBoardReadsThem) {
  EXPECT_EQ(MaskedCrc32c(""), 0xa282ead8u);
  EXPECT_EQ(MaskedCrc32c("123456789"), 0xc78ab0e5u);
  EXPECT_EQ(absl::BytesToHexString(FrameTfRecord("hello")),
            "0500000000000000eab2043e68656c6c6fbb1f1c19");
}

TEST(TfEventsWriterTest, WritesTheVersionThenOneEventPerCallReadBackWithTheirCrcs) {
  const std::string dir = MakeTestDir("tfevents") + "/runs/chief";  // made by Create
  absl::Time now = kStart;
  auto writer = TfEventsWriter::Create(dir, FixedClock(&now));
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ((*writer)->path(), dir + "/events.out.tfevents.1795412345.host-a");
  now += absl::Seconds(1);
  ASSERT_TRUE((*writer)->WriteScalars(10, {{"train/loss", 0.75}, {"train/steps_per_s", 0}}).ok());
  now += absl::Seconds(1);
  ASSERT_TRUE((*writer)->WriteScalars(20, {{"train/loss", 0.5}}).ok());

  // Each record is in the file as soon as its call returns: read it now, writer still open.
  auto events = ReadTfEvents((*writer)->path());
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 3u);
  const tfevents::Event& version = (*events)[0];
  EXPECT_EQ(version.file_version(), "brain.Event:2");
  EXPECT_DOUBLE_EQ(version.wall_time(), 1795412345.25);
  EXPECT_EQ(version.step(), 0);

  const tfevents::Event& first = (*events)[1];
  EXPECT_EQ(first.step(), 10);
  EXPECT_DOUBLE_EQ(first.wall_time(), 1795412346.25);
  ASSERT_EQ(first.what_case(), tfevents::Event::kSummary);
  ASSERT_EQ(first.summary().value_size(), 2);
  EXPECT_EQ(first.summary().value(0).tag(), "train/loss");
  EXPECT_EQ(first.summary().value(0).simple_value(), 0.75f);
  // A zero is written, not left out as proto3 leaves out a plain zero field.
  EXPECT_EQ(first.summary().value(1).tag(), "train/steps_per_s");
  EXPECT_EQ(first.summary().value(1).value_case(), tfevents::Summary::Value::kSimpleValue);
  EXPECT_EQ(first.summary().value(1).simple_value(), 0.0f);

  EXPECT_EQ((*events)[2].step(), 20);
  EXPECT_EQ((*events)[2].summary().value(0).simple_value(), 0.5f);
}

TEST(TfEventsWriterTest, WritersOfOneSecondGetNamesThatSortInTheOrderMade) {
  const std::string dir = MakeTestDir("tfevents");
  absl::Time now = kStart;
  std::vector<std::unique_ptr<TfEventsWriter>> writers;
  for (int i = 0; i < 3; ++i) {
    auto writer = TfEventsWriter::Create(dir, FixedClock(&now));
    ASSERT_TRUE(writer.ok()) << writer.status();
    writers.push_back(*std::move(writer));
  }
  const std::string base = dir + "/events.out.tfevents.1795412345.host-a";
  EXPECT_EQ(writers[0]->path(), base);
  EXPECT_EQ(writers[1]->path(), base + ".1");
  EXPECT_EQ(writers[2]->path(), base + ".2");
  EXPECT_LT(writers[0]->path(), writers[1]->path());
  EXPECT_LT(writers[1]->path(), writers[2]->path());
  // gethostname() when no host is given.
  auto plain = TfEventsWriter::Create(dir);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(absl::StartsWith((*plain)->path(), dir + "/events.out.tfevents."));
  EXPECT_FALSE(absl::EndsWith((*plain)->path(), "."));
}

TEST(TfEventsWriterTest, ReaderNamesACorruptedOrTruncatedRecord) {
  const std::string dir = MakeTestDir("tfevents");
  absl::Time now = kStart;
  std::string path;
  {
    auto writer = TfEventsWriter::Create(dir, FixedClock(&now));
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (int step = 1; step <= 3; ++step) {
      ASSERT_TRUE((*writer)->WriteScalars(step, {{"eval/accuracy", 0.1 * step}}).ok());
    }
    path = (*writer)->path();
  }
  const std::string good = ReadFileBytes(path);
  auto records = ReadTfRecords(path);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 4u);
  // Record 2 (the second scalar event) starts after the version record and record 1.
  const size_t at2 = 16 + (*records)[0].size() + 16 + (*records)[1].size();

  std::string bad = good;
  bad[at2 + 12 + 3] ^= 0x01;  // a byte of record 2's data
  WriteFileBytes(path, bad);
  auto read = ReadTfRecords(path);
  ASSERT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_TRUE(absl::StrContains(read.status().message(), path)) << read.status();
  EXPECT_TRUE(absl::StrContains(read.status().message(),
                                absl::StrCat("record 2 at byte ", at2, ": the data's CRC-32C")))
      << read.status();

  bad = good;
  bad[at2] ^= 0x01;  // record 2's length
  WriteFileBytes(path, bad);
  read = ReadTfRecords(path);
  ASSERT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_TRUE(absl::StrContains(read.status().message(), "record 2 at byte"));
  EXPECT_TRUE(absl::StrContains(read.status().message(), "length's CRC-32C")) << read.status();

  WriteFileBytes(path, good.substr(0, good.size() - 2));  // the last record cut short
  read = ReadTfRecords(path);
  ASSERT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_TRUE(absl::StrContains(read.status().message(), "record 3 at byte"));
  EXPECT_TRUE(absl::StrContains(read.status().message(), "ends inside")) << read.status();

  EXPECT_EQ(ReadTfRecords(dir + "/missing").status().code(), absl::StatusCode::kNotFound);
}

// A full disk, as the write sees it: past RLIMIT_FSIZE a write stops short, then fails
// (EFBIG), as it would with ENOSPC. The torn record is cut off again: the file keeps its
// whole records, and once there is room the next record follows them.
TEST(TfEventsWriterTest, AFailedWriteLeavesTheFileWholeAndLaterWritesSucceed) {
  const std::string dir = MakeTestDir("tfevents");
  auto writer = TfEventsWriter::Create(dir);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->WriteScalars(1, {{"train/loss", 1.0}}).ok());
  const std::string path = (*writer)->path();
  const auto size_before = std::filesystem::file_size(path);

  signal(SIGXFSZ, SIG_IGN);
  struct rlimit old_limit;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  struct rlimit small = old_limit;
  small.rlim_cur = size_before + 10;  // room for part of the next record only
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::vector<Scalar> many;
  for (int i = 0; i < 8; ++i) many.push_back({absl::StrCat("eval/metric_", i), 0.5});
  absl::Status failed = (*writer)->WriteScalars(2, many);
  const auto size_after_failure = std::filesystem::file_size(path);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old_limit), 0);

  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable) << failed;
  EXPECT_TRUE(absl::StrContains(failed.message(), path)) << failed;
  EXPECT_TRUE(absl::StrContains(failed.message(), "write failed")) << failed;
  EXPECT_EQ(size_after_failure, size_before);

  ASSERT_TRUE((*writer)->WriteScalars(3, {{"train/loss", 0.25}}).ok());
  auto events = ReadTfEvents(path);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[1].step(), 1);
  EXPECT_EQ((*events)[2].step(), 3);
  EXPECT_EQ((*events)[2].summary().value(0).simple_value(), 0.25f);
}

TEST(TfEventsWriterTest, ADirectoryThatCannotBeMadeIsNamed) {
  const std::string dir = MakeTestDir("tfevents");
  WriteFileBytes(dir + "/a_file", "x");
  auto writer = TfEventsWriter::Create(dir + "/a_file/chief");
  ASSERT_EQ(writer.status().code(), absl::StatusCode::kUnavailable) << writer.status();
  EXPECT_TRUE(absl::StrContains(writer.status().message(),
                                absl::StrCat("TensorBoard directory \"", dir, "/a_file/chief\"")))
      << writer.status();
}

}  // namespace
}  // namespace shardps
