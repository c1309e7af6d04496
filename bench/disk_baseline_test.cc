#include "bench/disk_baseline.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "gtest/gtest.h"

namespace shardps {
namespace bench {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

int64_t FileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

TEST(DiskBaselineTest, WritesEveryFileWholeAndReadsThemBack) {
  // Not a multiple of the 4 MiB writes, and one file empty.
  const std::vector<FileToWrite> files = {{TempPath("a"), (int64_t{9} << 20) + 5},
                                          {TempPath("b"), 4096},
                                          {TempPath("c"), 0}};
  absl::StatusOr<IoTiming> wrote = TimeWriteFiles(files);
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  EXPECT_EQ(wrote->bytes, files[0].bytes + files[1].bytes);
  EXPECT_GT(wrote->seconds, 0);
  for (const FileToWrite& f : files) EXPECT_EQ(FileSize(f.path), f.bytes) << f.path;
  // Not all zeros: the bytes written are pseudo-random.
  std::ifstream in(files[1].path, std::ios::binary);
  const std::string head((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(head.find_first_not_of('\0'), std::string::npos);

  const std::vector<std::string> paths = {files[0].path, files[1].path, files[2].path};
  for (bool parallel : {false, true}) {
    for (bool fresh : {false, true}) {
      absl::StatusOr<IoTiming> read = TimeReadFiles(paths, parallel, fresh);
      ASSERT_TRUE(read.ok()) << read.status();
      EXPECT_EQ(read->bytes, wrote->bytes) << "parallel " << parallel << ", fresh " << fresh;
    }
  }
}

TEST(DiskBaselineTest, NamesTheFileThatCannotBeWrittenOrRead) {
  absl::StatusOr<IoTiming> wrote = TimeWriteFiles({{TempPath("no/such/dir/f"), 10}});
  ASSERT_FALSE(wrote.ok());
  EXPECT_NE(wrote.status().message().find("no/such/dir/f"), std::string::npos);
  absl::StatusOr<IoTiming> read = TimeReadFiles({TempPath("missing")}, true);
  ASSERT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(read.status().message().find("missing"), std::string::npos);
}

// DropPageCache is left to the benchmark: a test must not empty the page cache of a machine
// that other tests share.

}  // namespace
}  // namespace bench
}  // namespace shardps
