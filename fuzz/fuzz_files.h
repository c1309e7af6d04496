// Files for the fuzz targets whose code under test reads paths (IDX, Criteo, ctrbin,
// safetensors, checkpoints): one temporary directory per process, under $TEST_TMPDIR when
// Bazel sets it, else $TMPDIR or /tmp, removed when the process exits normally.
//
// Thread-safety: FuzzTempDir is thread-safe; WriteFuzzFile writes a path the caller names,
// so two threads must not write the same name at once (the targets are single-threaded).
#ifndef SHARDPS_FUZZ_FUZZ_FILES_H_
#define SHARDPS_FUZZ_FUZZ_FILES_H_

#include <string>

#include "absl/strings/string_view.h"

namespace shardps {

// The process's temporary directory (made on first use; aborts when it cannot be made,
// which is the machine's fault, not an input's).
const std::string& FuzzTempDir();

// Writes `bytes` to FuzzTempDir()/name (replacing it) and returns the path; aborts when the
// write fails.
std::string WriteFuzzFile(absl::string_view name, absl::string_view bytes);

}  // namespace shardps

#endif  // SHARDPS_FUZZ_FUZZ_FILES_H_
