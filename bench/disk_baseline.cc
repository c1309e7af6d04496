#include "bench/disk_baseline.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "bench/file_tail.h"

namespace shardps {
namespace bench {
namespace {

constexpr size_t kIoBytes = size_t{4} << 20;

absl::Status Errno(int err, const std::string& op, const std::string& path) {
  return absl::Status(absl::ErrnoToStatusCode(err),
                      absl::StrCat(op, " ", path, ": ", std::strerror(err)));
}

absl::Status WriteOne(const FileToWrite& file, const char* buffer) {
  const int fd = ::open(file.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno(errno, "create", file.path);
  for (int64_t left = file.bytes; left > 0;) {
    const size_t n = static_cast<size_t>(std::min<int64_t>(left, kIoBytes));
    const ssize_t put = ::write(fd, buffer, n);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) {
      const int err = put < 0 ? errno : EIO;
      ::close(fd);
      return Errno(err, "write", file.path);
    }
    left -= put;
  }
  if (::fdatasync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return Errno(err, "fdatasync", file.path);
  }
  if (::close(fd) != 0) return Errno(errno, "close", file.path);
  return absl::OkStatus();
}

// Reads the file in 4 MiB calls into `buffer`, or, when it is null, each call into the next
// 4 MiB of a fresh anonymous mapping of the file's size.
absl::Status ReadOne(const std::string& path, char* buffer, int64_t* bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno(errno, "open", path);
  char* fresh = nullptr;
  size_t fresh_bytes = 0;
  if (buffer == nullptr) {
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      return Errno(err, "stat", path);
    }
    fresh_bytes = std::max<size_t>(static_cast<size_t>(st.st_size), 1);
    void* p = ::mmap(nullptr, fresh_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return Errno(err, "mmap for", path);
    }
    fresh = static_cast<char*>(p);
  }
  uint64_t sum = 0;
  while (true) {
    char* into = fresh != nullptr ? fresh + *bytes : buffer;
    const size_t want =
        fresh != nullptr ? std::min(kIoBytes, fresh_bytes - static_cast<size_t>(*bytes)) : kIoBytes;
    if (want == 0) break;  // a file that grew while read: what was there is enough
    const ssize_t got = ::read(fd, into, want);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int err = errno;
      ::close(fd);
      if (fresh != nullptr) ::munmap(fresh, fresh_bytes);
      return Errno(err, "read", path);
    }
    if (got == 0) break;
    sum += static_cast<unsigned char>(into[got - 1]);  // as dd, the bytes only pass through
    *bytes += got;
  }
  ::close(fd);
  if (fresh != nullptr) ::munmap(fresh, fresh_bytes);
  static std::atomic<uint64_t> sink{0};  // keeps the reads from being optimized away
  sink.fetch_add(sum, std::memory_order_relaxed);
  return absl::OkStatus();
}

// Runs fn(i) for i in [0, n) on one thread each, or in order on this one; the first error.
template <typename Fn>
absl::Status ForEach(size_t n, bool parallel, Fn fn) {
  std::vector<absl::Status> statuses(n);
  if (parallel) {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < n; ++i) threads.emplace_back([&, i] { statuses[i] = fn(i); });
    for (std::thread& t : threads) t.join();
  } else {
    for (size_t i = 0; i < n; ++i) statuses[i] = fn(i);
  }
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<IoTiming> TimeWriteFiles(const std::vector<FileToWrite>& files) {
  std::unique_ptr<char[]> buffer(new char[kIoBytes]);
  std::mt19937_64 rng(7);
  for (size_t i = 0; i + 8 <= kIoBytes; i += 8) {
    const uint64_t v = rng();
    std::memcpy(buffer.get() + i, &v, 8);
  }
  IoTiming timing;
  for (const FileToWrite& f : files) timing.bytes += f.bytes;
  const double start = NowSeconds();
  absl::Status status =
      ForEach(files.size(), true, [&](size_t i) { return WriteOne(files[i], buffer.get()); });
  if (!status.ok()) return status;
  timing.seconds = NowSeconds() - start;
  return timing;
}

absl::StatusOr<IoTiming> TimeReadFiles(const std::vector<std::string>& paths, bool parallel,
                                       bool into_fresh_memory) {
  const size_t buffers = into_fresh_memory ? 0 : parallel ? paths.size() : 1;
  std::vector<std::unique_ptr<char[]>> buffer;
  for (size_t i = 0; i < buffers; ++i) buffer.emplace_back(new char[kIoBytes]);
  std::vector<int64_t> bytes(paths.size(), 0);
  const double start = NowSeconds();
  absl::Status status = ForEach(paths.size(), parallel, [&](size_t i) {
    return ReadOne(paths[i], into_fresh_memory ? nullptr : buffer[parallel ? i : 0].get(),
                   &bytes[i]);
  });
  if (!status.ok()) return status;
  IoTiming timing;
  timing.seconds = NowSeconds() - start;
  for (int64_t b : bytes) timing.bytes += b;
  return timing;
}

absl::Status DropPageCache() {
  ::sync();
  const char* path = "/proc/sys/vm/drop_caches";
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Errno(errno, "open", path);
  const ssize_t put = ::write(fd, "3\n", 2);
  const int err = errno;
  ::close(fd);
  if (put != 2) return Errno(put < 0 ? err : EIO, "write 3 to", path);
  return absl::OkStatus();
}

}  // namespace bench
}  // namespace shardps
