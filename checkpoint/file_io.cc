#include "checkpoint/file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace shardps {

absl::Status ErrnoError(int error_number, absl::string_view op, absl::string_view path) {
  const bool full = error_number == ENOSPC || error_number == EDQUOT;
  char buf[256];
  // GNU strerror_r returns the message (possibly not in buf).
  const char* text = strerror_r(error_number, buf, sizeof(buf));
  return absl::Status(absl::ErrnoToStatusCode(error_number),
                      absl::StrCat(op, " ", path, ": ", text, full ? " (the disk is full)" : ""));
}

absl::Status PreadFully(int fd, void* out, size_t n, int64_t offset, absl::string_view path) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, offset);
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, "read", path);
    }
    if (got == 0) {
      return absl::DataLossError(absl::StrCat(path, ": truncated: ", n,
                                              " bytes missing at offset ", offset));
    }
    p += got;
    n -= static_cast<size_t>(got);
    offset += got;
  }
  return absl::OkStatus();
}

absl::Status WriteFully(int fd, const void* data, size_t n, absl::string_view path) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t put = ::write(fd, p, n);
    if (put < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, "write", path);
    }
    p += put;
    n -= static_cast<size_t>(put);
  }
  return absl::OkStatus();
}

absl::Status PwritevFully(int fd, struct iovec* iov, int count, int64_t offset,
                          absl::string_view path) {
  while (count > 0) {
    if (iov->iov_len == 0) {
      ++iov;
      --count;
      continue;
    }
    const ssize_t put = ::pwritev(fd, iov, std::min(count, IOV_MAX), offset);
    if (put < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, "write", path);
    }
    if (put == 0) return ErrnoError(EIO, "write", path);  // no progress: never loop forever
    offset += put;
    size_t left = static_cast<size_t>(put);
    while (count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --count;
    }
    if (left > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return absl::OkStatus();
}

absl::Status FsyncDirectory(const std::string& dir) {
  const std::string path = dir.empty() ? "." : dir;
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "open directory", path);
  absl::Status status;
  if (::fsync(fd) != 0) status = ErrnoError(errno, "fsync directory", path);
  ::close(fd);
  return status;
}

std::string DirName(absl::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash == absl::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

std::string BaseName(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path : path.substr(slash + 1));
}

}  // namespace shardps
