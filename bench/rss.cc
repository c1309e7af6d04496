#include "bench/rss.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace shardps {
namespace bench {
namespace {

// The value of a "Name:   1234 kB" line of /proc/PID/status in bytes, or -1.
int64_t KiloBytesField(const std::string& status, const char* name) {
  const std::string key = absl::StrCat("\n", name, ":");
  const size_t at = status.find(key);
  if (at == std::string::npos) return -1;
  return std::strtoll(status.c_str() + at + key.size(), nullptr, 10) * 1024;
}

}  // namespace

absl::StatusOr<ProcessRss> ReadRss(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/status");
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be read (no such process?)"));
  std::stringstream text;
  text << "\n" << in.rdbuf();
  ProcessRss rss;
  rss.rss_bytes = KiloBytesField(text.str(), "VmRSS");
  rss.peak_bytes = KiloBytesField(text.str(), "VmHWM");
  if (rss.rss_bytes < 0 || rss.peak_bytes < 0) {
    return absl::InternalError(absl::StrCat(path, ": no VmRSS or VmHWM (a zombie?)"));
  }
  return rss;
}

absl::Status ResetPeakRss(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/clear_refs");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return absl::Status(absl::ErrnoToStatusCode(err),
                        absl::StrCat("open ", path, ": ", std::strerror(err)));
  }
  const ssize_t put = ::write(fd, "5", 1);
  const int err = errno;
  ::close(fd);
  if (put != 1) {
    // EINVAL: a kernel older than 4.0 knows no "5".
    return absl::Status(err == EINVAL ? absl::StatusCode::kUnimplemented
                                      : absl::ErrnoToStatusCode(err),
                        absl::StrCat("write 5 to ", path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

RssSampler::RssSampler(std::vector<pid_t> pids, absl::Duration interval)
    : pids_(std::move(pids)), interval_(interval), max_(pids_.size(), 0), thread_([this] {
        Loop();
      }) {}

RssSampler::~RssSampler() { Stop(); }

std::vector<int64_t> RssSampler::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  return max_;
}

void RssSampler::Loop() {
  while (true) {
    Sample();
    absl::MutexLock lock(&mu_);
    auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&stopped), interval_)) break;
  }
  Sample();
}

void RssSampler::Sample() {
  std::vector<int64_t> now(pids_.size(), 0);
  for (size_t i = 0; i < pids_.size(); ++i) {
    absl::StatusOr<ProcessRss> rss = ReadRss(pids_[i]);
    if (rss.ok()) now[i] = rss->rss_bytes;
  }
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < now.size(); ++i) max_[i] = std::max(max_[i], now[i]);
}

}  // namespace bench
}  // namespace shardps
