#include "common/test_files.h"

#include <string>

#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(TestFilesTest, MakeTestDirGivesADifferentEmptyDirectoryEachCall) {
  const std::string a = MakeTestDir("files");
  const std::string b = MakeTestDir("files");
  EXPECT_NE(a, b);
  EXPECT_TRUE(PathExists(a));
  EXPECT_TRUE(PathExists(b));
  EXPECT_EQ(a.rfind(TestTmpDir(), 0), 0u) << a;
}

TEST(TestFilesTest, WriteAppendAndReadKeepEveryByte) {
  const std::string path = MakeTestDir("bytes") + "/f";
  const std::string binary("a\0b\xff", 4);
  WriteFileBytes(path, binary);
  EXPECT_EQ(ReadFileBytes(path), binary);
  AppendFileBytes(path, "tail");
  EXPECT_EQ(ReadFileBytes(path), binary + "tail");
  WriteFileBytes(path, "new");
  EXPECT_EQ(ReadFileBytes(path), "new");
}

TEST(TestFilesTest, FreshTestDirRemovesWhatWasThere) {
  const std::string dir = FreshTestDir("fresh");
  WriteFileBytes(dir + "/old", "x");
  ASSERT_TRUE(PathExists(dir + "/old"));
  EXPECT_EQ(FreshTestDir("fresh"), dir);
  EXPECT_TRUE(PathExists(dir));
  EXPECT_FALSE(PathExists(dir + "/old"));
}

TEST(TestFilesTest, PathExistsIsFalseForAMissingPath) {
  EXPECT_FALSE(PathExists(MakeTestDir("missing") + "/no-such-file"));
}

}  // namespace
}  // namespace shardps
