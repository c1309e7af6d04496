// POSIX file helpers of the checkpoint library: errors as statuses that name the path and
// the errno text, reads and writes that survive EINTR and short transfers, directory fsync.
// Used by the safetensors writer and reader and by the checkpoint directory.
//
// Thread-safety: pure functions (each call works on the descriptor or path it is given).
#ifndef SHARDPS_CHECKPOINT_FILE_IO_H_
#define SHARDPS_CHECKPOINT_FILE_IO_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace shardps {

// "OP PATH: <strerror>", with the code abseil gives the errno (ENOENT NOT_FOUND, EACCES
// PERMISSION_DENIED, ENOSPC RESOURCE_EXHAUSTED, ...); ENOSPC and EDQUOT add "(the disk is
// full)".
absl::Status ErrnoError(int error_number, absl::string_view op, absl::string_view path);

// Reads exactly n bytes at `offset`; fewer because the file ends is DATA_LOSS ("PATH: truncated").
absl::Status PreadFully(int fd, void* out, size_t n, int64_t offset, absl::string_view path);

// Writes all n bytes at the descriptor's position.
absl::Status WriteFully(int fd, const void* data, size_t n, absl::string_view path);

// Writes every byte of iov[0, count) at `offset`, in as few pwritev calls as the kernel
// allows. Modifies iov (the entries written are consumed).
absl::Status PwritevFully(int fd, struct iovec* iov, int count, int64_t offset,
                          absl::string_view path);

// fsyncs the directory `dir` ("" is the current directory).
absl::Status FsyncDirectory(const std::string& dir);

// The directory part of `path` ("." when it has none) and the last component.
std::string DirName(absl::string_view path);
std::string BaseName(absl::string_view path);

}  // namespace shardps

#endif  // SHARDPS_CHECKPOINT_FILE_IO_H_
