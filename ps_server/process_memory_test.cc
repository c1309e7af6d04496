#include "ps_server/process_memory.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace shardps {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

TEST(ProcessMemoryTest, ParsesMemTotalAndCgroupLimits) {
  auto total = ParseMemTotal("MemFree:  100 kB\nMemTotal:       24683656 kB\n");
  ASSERT_TRUE(total.ok()) << total.status();
  EXPECT_EQ(*total, int64_t{24683656} * 1024);
  EXPECT_FALSE(ParseMemTotal("MemFree: 1 kB\n").ok());
  EXPECT_EQ(ParseCgroupLimit("4294967296\n"), int64_t{4294967296});
  EXPECT_EQ(ParseCgroupLimit("max\n"), std::nullopt);
  EXPECT_EQ(ParseCgroupLimit("9223372036854771712\n"), std::nullopt);  // v1's "no limit"
  EXPECT_EQ(ParseCgroupLimit("junk"), std::nullopt);
}

TEST(ProcessMemoryTest, FindsTheLimitFilesOfV1AndV2) {
  const auto files = CgroupLimitFiles("4:memory:/jobs/ps0\n1:cpu,cpuacct:/\n0::/pods/ps0\n");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0], "/sys/fs/cgroup/memory/jobs/ps0/memory.limit_in_bytes");
  EXPECT_EQ(files[1], "/sys/fs/cgroup/pods/ps0/memory.max");
  EXPECT_EQ(CgroupLimitFiles("0::/\n")[0], "/sys/fs/cgroup/memory.max");
}

TEST(ProcessMemoryTest, TheSmallerOfMachineAndCgroup) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path root = fs::path(tmp != nullptr ? tmp : "/tmp") / "process_memory_root";
  fs::remove_all(root);
  Write(root / "proc/meminfo", "MemTotal: 1000 kB\n");
  Write(root / "proc/self/cgroup", "0::/pod\n");
  Write(root / "sys/fs/cgroup/pod/memory.max", "max\n");
  auto limit = ProcessMemoryLimit(root.string());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, 1000 * 1024);
  EXPECT_EQ(limit->source, "MemTotal of /proc/meminfo");

  Write(root / "sys/fs/cgroup/pod/memory.max", "512000\n");
  limit = ProcessMemoryLimit(root.string());
  ASSERT_TRUE(limit.ok());
  EXPECT_EQ(limit->bytes, 512000);
  EXPECT_EQ(limit->source, "/sys/fs/cgroup/pod/memory.max");

  // The real machine: whatever it is, positive.
  auto real = ProcessMemoryLimit();
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_GT(real->bytes, 0);
}

}  // namespace
}  // namespace shardps
