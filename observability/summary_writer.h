// SummaryWriter: a daemon's TensorBoard run, one directory of event files
// (observability/tfevents_writer.h), for code that must not stop for it: a chief or an
// evaluator whose disk fails keeps training and evaluating. It makes the directory and its
// event file on the first write, and again on a later write after that failed. A failure
// (to make them, or to write) is logged once, naming the file, and not again until a write
// has succeeded since (which is logged too).
//
// Thread-safety: thread-safe.
#ifndef SHARDPS_OBSERVABILITY_SUMMARY_WRITER_H_
#define SHARDPS_OBSERVABILITY_SUMMARY_WRITER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "observability/tfevents_writer.h"

namespace shardps {

class SummaryWriter {
 public:
  struct Options {
    TfEventsWriter::Options file;
    // Where a failure and the recovery after one are said. null: an error / info record of
    // the daemon's log (common/log.h).
    std::function<void(absl::string_view)> log_error;
    std::function<void(absl::string_view)> log_info;
  };

  explicit SummaryWriter(std::string dir, Options options = {});

  // Appends one point of each scalar at `step`. false when it could not (said once).
  bool Write(int64_t step, const std::vector<Scalar>& scalars);

  const std::string& dir() const { return dir_; }
  // The event file written to; "" until one was made.
  std::string path() const;

 private:
  const std::string dir_;
  Options options_;
  mutable absl::Mutex mu_;
  std::unique_ptr<TfEventsWriter> file_ ABSL_GUARDED_BY(mu_);
  bool failing_ ABSL_GUARDED_BY(mu_) = false;  // the last attempt failed, and that was said
};

}  // namespace shardps

#endif  // SHARDPS_OBSERVABILITY_SUMMARY_WRITER_H_
