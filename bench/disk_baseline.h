// What the filesystem under a directory can do by itself, as baselines for writing and
// reading checkpoints there: `dd if=... bs=4M conv=fdatasync` and `dd of=/dev/null bs=4M`,
// done in this process so that several files can go at once (one thread each, as each ps
// writes and reads its own file), and the page cache dropped or kept between them.
//
// The write baseline writes 4 MiB write(2) calls of one buffer of pseudo-random bytes (not
// zeros, which a thin-provisioned or compressing virtual disk could treat specially) and
// fdatasyncs each file: seconds from the first open to the last fdatasync's return, what a
// checkpoint's data files take from the first byte to durable.
//
// Thread-safety: functions; each call uses its own threads and files.
#ifndef SHARDPS_BENCH_DISK_BASELINE_H_
#define SHARDPS_BENCH_DISK_BASELINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace shardps {
namespace bench {

struct FileToWrite {
  std::string path;
  int64_t bytes = 0;
};

struct IoTiming {
  int64_t bytes = 0;
  double seconds = 0;
  double bytes_per_s() const { return seconds > 0 ? static_cast<double>(bytes) / seconds : 0; }
};

// Writes every file at once (one thread each), as above. The files are left in place.
absl::StatusOr<IoTiming> TimeWriteFiles(const std::vector<FileToWrite>& files);

// Reads every file whole in 4 MiB read(2) calls, all at once (one thread each) when
// `parallel`, else one after another. Into one reused buffer per file (dd's way), or, with
// `into_fresh_memory`, into memory mapped fresh for each file (so the kernel supplies and
// zeroes a new page for every 4 KiB read, as for any state built in new memory: the least
// a restore into a new process costs); it is unmapped afterwards.
absl::StatusOr<IoTiming> TimeReadFiles(const std::vector<std::string>& paths, bool parallel,
                                       bool into_fresh_memory = false);

// sync(2), then drops the clean page cache, dentries and inodes (3 to
// /proc/sys/vm/drop_caches): the next read of any file comes from the disk. Needs root
// (PERMISSION_DENIED, or the error of the write, otherwise).
absl::Status DropPageCache();

}  // namespace bench
}  // namespace shardps

#endif  // SHARDPS_BENCH_DISK_BASELINE_H_
