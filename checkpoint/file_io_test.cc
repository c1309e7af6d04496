#include "checkpoint/file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/test_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

TEST(FileIoTest, ErrnoErrorNamesOperationPathAndText) {
  absl::Status full = ErrnoError(ENOSPC, "write", "/ckpt/ps-0.safetensors.tmp");
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(full.message(),
            "write /ckpt/ps-0.safetensors.tmp: No space left on device (the disk is full)");
  absl::Status missing = ErrnoError(ENOENT, "open", "/x");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "open /x: No such file or directory");
  EXPECT_EQ(ErrnoError(EACCES, "create", "/y").code(), absl::StatusCode::kPermissionDenied);
}

TEST(FileIoTest, PwritevWritesEveryPieceAndPreadReadsThemBack) {
  const std::string path = MakeTestDir("file_io") + "/f";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  // More pieces than IOV_MAX, some empty, of varying sizes.
  std::vector<std::string> pieces;
  std::string expected;
  for (int i = 0; i < 3000; ++i) {
    pieces.push_back(std::string(i % 7, static_cast<char>('a' + i % 26)));
    expected += pieces.back();
  }
  std::vector<struct iovec> iov;
  for (std::string& p : pieces) iov.push_back({p.data(), p.size()});
  ASSERT_TRUE(PwritevFully(fd, iov.data(), static_cast<int>(iov.size()), 5, path).ok());
  std::string back(expected.size(), '\0');
  ASSERT_TRUE(PreadFully(fd, back.data(), back.size(), 5, path).ok());
  EXPECT_EQ(back, expected);

  // Reading past the end is DATA_LOSS naming the file.
  absl::Status past = PreadFully(fd, back.data(), back.size(), 6, path);
  EXPECT_EQ(past.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(past.message(), HasSubstr(path + ": truncated"));
  ASSERT_TRUE(WriteFully(fd, "xyz", 3, path).ok());
  ::close(fd);
  EXPECT_EQ(WriteFully(fd, "xyz", 3, path).code(), absl::StatusCode::kFailedPrecondition)
      << "EBADF";
}

TEST(FileIoTest, FsyncDirectory) {
  EXPECT_TRUE(FsyncDirectory(MakeTestDir("file_io")).ok());
  absl::Status missing = FsyncDirectory("/no/such/dir");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("/no/such/dir"));
}

TEST(FileIoTest, DirNameAndBaseName) {
  EXPECT_EQ(DirName("/a/b/c.txt"), "/a/b");
  EXPECT_EQ(BaseName("/a/b/c.txt"), "c.txt");
  EXPECT_EQ(DirName("c.txt"), ".");
  EXPECT_EQ(BaseName("c.txt"), "c.txt");
  EXPECT_EQ(DirName("/c.txt"), "/");
}

}  // namespace
}  // namespace shardps
