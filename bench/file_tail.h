// FileTail: watches a file grow, on a thread of its own, and records when each growth was
// seen, for benchmarks that time events other processes write down: the chief's step journal
// (one 20-byte record per completed step, so its size counts the steps done) and daemons'
// logs (a line such as "recovered from ..." timestamped as it appears). The file is polled
// with stat(2) every `interval`; its new bytes are read only when lines are wanted.
//
// Times are this process's steady clock in seconds (bench::NowSeconds). A growth is seen at
// most `interval` after it happened, so every time is late by up to one interval; several
// writes between two polls are seen as one growth (for the journal: several steps done at
// the same time). A file that does not exist yet is waited for; one that shrinks (truncated,
// replaced) is read again from its start.
//
// Thread-safety: thread-safe.
#ifndef SHARDPS_BENCH_FILE_TAIL_H_
#define SHARDPS_BENCH_FILE_TAIL_H_

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace shardps {
namespace bench {

// Seconds on the steady clock (an arbitrary origin, the same for the whole process).
double NowSeconds();

class FileTail {
 public:
  struct Growth {
    double t = 0;      // when it was seen
    int64_t size = 0;  // the file's size then
  };
  struct Line {
    double t = 0;
    std::string text;  // without the newline
  };

  // Starts watching `path` at once. `keep_lines`: also read what is appended and record its
  // lines (a last line without its newline yet waits for it).
  FileTail(std::string path, absl::Duration interval, bool keep_lines);
  ~FileTail();  // stops watching

  FileTail(const FileTail&) = delete;
  FileTail& operator=(const FileTail&) = delete;

  const std::string& path() const { return path_; }
  // Every growth seen so far, in order.
  std::vector<Growth> Growths() const;
  // The size last seen (0 before the file exists).
  int64_t size() const;
  // When the first line containing `needle` was seen among the lines seen at or after
  // `after`, and the line; false when none has been yet.
  bool FindLine(absl::string_view needle, double after, Line* found) const;

 private:
  void Loop();
  void Poll();

  const std::string path_;
  const absl::Duration interval_;
  const bool keep_lines_;
  mutable absl::Mutex mu_;
  std::vector<Growth> growths_ ABSL_GUARDED_BY(mu_);
  std::vector<Line> lines_ ABSL_GUARDED_BY(mu_);
  int64_t size_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Owned by the polling thread.
  int64_t read_offset_ = 0;
  std::string partial_;  // the last line read, not yet ended
  std::thread thread_;   // last: started once the rest is initialized
};

}  // namespace bench
}  // namespace shardps

#endif  // SHARDPS_BENCH_FILE_TAIL_H_
