// TfEventsWriter: writes a TensorBoard event file (events.out.tfevents.<unix seconds>.<host>)
// in a directory: TFRecord-framed Event records (observability/tfevents.proto), the first one
// the file's version ("brain.Event:2"), then one per WriteScalars. TensorBoard shows each
// directory as a run and each tag as a series.
//
// A TFRecord: uint64 length (little-endian), uint32 masked CRC-32C of those 8 bytes, the
// data, uint32 masked CRC-32C of the data; mask(crc) = ((crc >> 15) | (crc << 17)) +
// 0xa282ead8. Each record reaches the file in one write(2), so a reader sees it at once
// (nothing is buffered here: there is nothing to flush); a write that fails part-way is cut
// off again, so the file never holds half a record that later records would follow.
//
// Thread-safety: thread-safe.
#ifndef SHARDPS_OBSERVABILITY_TFEVENTS_WRITER_H_
#define SHARDPS_OBSERVABILITY_TFEVENTS_WRITER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "observability/tfevents.pb.h"

namespace shardps {

// The version string of the first record of every event file.
inline constexpr char kTfEventsFileVersion[] = "brain.Event:2";

// TFRecord's masked CRC-32C of `data`.
uint32_t MaskedCrc32c(absl::string_view data);
// `data` framed as one TFRecord.
std::string FrameTfRecord(absl::string_view data);

// One point of a series.
struct Scalar {
  std::string tag;  // "train/loss"
  double value;     // stored as a float, as TensorBoard's simple_value is
};

class TfEventsWriter {
 public:
  struct Options {
    std::string hostname;              // the file name's host part; "": gethostname()
    std::function<absl::Time()> now;   // the events' wall time; null: absl::Now
  };

  // Creates `dir` (with its parents) where missing and a new event file in it, and writes
  // the version record. The name is events.out.tfevents.<unix seconds>.<host>, with ".1",
  // ".2", ... appended when another writer took it in the same second, so that names sort in
  // the order the files were made (TensorBoard reads a run's files in that order).
  // UNAVAILABLE naming the directory or the file when either cannot be made or written.
  static absl::StatusOr<std::unique_ptr<TfEventsWriter>> Create(const std::string& dir,
                                                                Options options = {});
  ~TfEventsWriter();
  TfEventsWriter(const TfEventsWriter&) = delete;
  TfEventsWriter& operator=(const TfEventsWriter&) = delete;

  // Appends one Event at `step` (wall time now) with one value per scalar. UNAVAILABLE
  // naming the file when the write fails (a full disk, say); the file is then as it was
  // before the call, and later writes may succeed.
  absl::Status WriteScalars(int64_t step, const std::vector<Scalar>& scalars);
  // Appends `event` as it is.
  absl::Status WriteEvent(const tfevents::Event& event);

  const std::string& path() const { return path_; }

 private:
  TfEventsWriter(std::string path, int fd, Options options)
      : path_(std::move(path)), options_(std::move(options)), fd_(fd) {}

  const std::string path_;
  const Options options_;
  absl::Mutex mu_;
  const int fd_;                         // opened for appending; closed by the destructor
  int64_t size_ ABSL_GUARDED_BY(mu_) = 0;  // the bytes of whole records written
};

}  // namespace shardps

#endif  // SHARDPS_OBSERVABILITY_TFEVENTS_WRITER_H_
