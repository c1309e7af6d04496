#include "bench/file_tail.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <utility>

namespace shardps {
namespace bench {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

FileTail::FileTail(std::string path, absl::Duration interval, bool keep_lines)
    : path_(std::move(path)),
      interval_(interval),
      keep_lines_(keep_lines),
      thread_([this] { Loop(); }) {}

FileTail::~FileTail() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

std::vector<FileTail::Growth> FileTail::Growths() const {
  absl::MutexLock lock(&mu_);
  return growths_;
}

int64_t FileTail::size() const {
  absl::MutexLock lock(&mu_);
  return size_;
}

bool FileTail::FindLine(absl::string_view needle, double after, Line* found) const {
  absl::MutexLock lock(&mu_);
  for (const Line& line : lines_) {
    if (line.t >= after && absl::string_view(line.text).find(needle) != absl::string_view::npos) {
      *found = line;
      return true;
    }
  }
  return false;
}

void FileTail::Loop() {
  while (true) {
    Poll();
    absl::MutexLock lock(&mu_);
    auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&stopped), interval_)) break;
  }
  Poll();  // what was written up to the stop
}

void FileTail::Poll() {
  struct stat st;
  if (::stat(path_.c_str(), &st) != 0) return;  // not there (yet)
  const double t = NowSeconds();
  const int64_t size = static_cast<int64_t>(st.st_size);
  std::vector<Line> lines;
  if (keep_lines_) {
    if (size < read_offset_) {  // replaced or truncated: from its start again
      read_offset_ = 0;
      partial_.clear();
    }
    if (size > read_offset_) {
      const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        std::string text(static_cast<size_t>(size - read_offset_), '\0');
        const ssize_t got = ::pread(fd, text.data(), text.size(), read_offset_);
        ::close(fd);
        if (got > 0) {
          text.resize(static_cast<size_t>(got));
          read_offset_ += got;
          partial_ += text;
          size_t start = 0;
          for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos;
               start = nl + 1) {
            lines.push_back({t, partial_.substr(start, nl - start)});
          }
          partial_.erase(0, start);
        }
      }
    }
  }
  absl::MutexLock lock(&mu_);
  if (size != size_) {
    growths_.push_back({t, size});
    size_ = size;
  }
  for (Line& line : lines) lines_.push_back(std::move(line));
}

}  // namespace bench
}  // namespace shardps
