#include "common/test_files.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

void WriteMode(const std::string& path, absl::string_view bytes, std::ios::openmode mode) {
  std::ofstream out(path, std::ios::binary | mode);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  EXPECT_TRUE(out.good()) << "cannot write " << path << ": " << std::strerror(errno);
}

}  // namespace

std::string TestTmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr && *dir != '\0' ? dir : "/tmp";
}

std::string MakeTestDir(absl::string_view prefix) {
  std::string templ = absl::StrCat(TestTmpDir(), "/", prefix, "XXXXXX");
  EXPECT_NE(::mkdtemp(templ.data()), nullptr)
      << "cannot make a directory " << templ << ": " << std::strerror(errno);
  return templ;
}

std::string FreshTestDir(absl::string_view name) {
  const std::filesystem::path dir = std::filesystem::path(TestTmpDir()) / std::string(name);
  std::error_code error;
  std::filesystem::remove_all(dir, error);
  EXPECT_FALSE(error) << "cannot remove " << dir << ": " << error.message();
  std::filesystem::create_directories(dir, error);
  EXPECT_FALSE(error) << "cannot make " << dir << ": " << error.message();
  return dir.string();
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.is_open()) << "cannot read " << path << ": " << std::strerror(errno);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void WriteFileBytes(const std::string& path, absl::string_view bytes) {
  WriteMode(path, bytes, std::ios::trunc);
}

void AppendFileBytes(const std::string& path, absl::string_view bytes) {
  WriteMode(path, bytes, std::ios::app);
}

}  // namespace shardps
