// Files for tests: fresh directories under the test's scratch space ($TEST_TMPDIR, which
// Bazel empties for every test run) and whole-file reads and writes, so that a test states
// the bytes it expects rather than the stream plumbing around them.
//
// Failures (a directory that cannot be made, a file that cannot be read or written) are
// reported as gtest failures of the calling test, not as statuses: a test has no better use
// for them. Thread-safe (each call touches only its own paths).

#ifndef SHARDPS_COMMON_TEST_FILES_H_
#define SHARDPS_COMMON_TEST_FILES_H_

#include <string>

#include "absl/strings/string_view.h"

namespace shardps {

// $TEST_TMPDIR, or /tmp outside Bazel.
std::string TestTmpDir();

// A new directory that no other call returned, named `prefix` plus a unique suffix.
std::string MakeTestDir(absl::string_view prefix);

// TestTmpDir()/name, emptied: removed with its contents if it exists, then made again.
std::string FreshTestDir(absl::string_view name);

bool PathExists(const std::string& path);

// The whole file; "" (and a test failure) when it cannot be read.
std::string ReadFileBytes(const std::string& path);

// Replaces the file's contents with `bytes` (creating it); a test failure when it cannot.
void WriteFileBytes(const std::string& path, absl::string_view bytes);

// Adds `bytes` at the end of the file (creating it); a test failure when it cannot.
void AppendFileBytes(const std::string& path, absl::string_view bytes);

}  // namespace shardps

#endif  // SHARDPS_COMMON_TEST_FILES_H_
