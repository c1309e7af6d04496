// SnapshotWriter: writes the files of checkpoint snapshots on a thread of its own, one at a
// time in the order they were taken, so that no thread serving requests ever waits on disk;
// and remembers how each went, for SnapshotStatus.
//
// A snapshot arrives as tensors whose bytes are views of a shard's copy-on-write blocks, with
// the references that keep them unchanged (ps_server/param_blocks.h): taking it cost the
// store only references, and updates that come meanwhile copy the blocks they touch. The
// file is written with WriteSafetensors (checkpoint/safetensors.h): a temporary name, fsync,
// rename; a failure (directory not writable, disk full) leaves no file and is reported
// FAILED with the error. The references are dropped tensor by tensor as they are written.
//
// Thread-safety: thread-safe.
#ifndef SHARDPS_PS_SERVER_SNAPSHOT_WRITER_H_
#define SHARDPS_PS_SERVER_SNAPSHOT_WRITER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "checkpoint/safetensors.h"
#include "proto/ps.pb.h"

namespace shardps {

class SnapshotWriter {
 public:
  struct Options {
    // Statuses of finished snapshots kept (the oldest finished are forgotten first; those
    // queued or being written are always kept).
    int keep_finished = 16;
    // fsync the file and its directory (tests of many small files may turn it off).
    bool fsync = true;
    // Tests only: called on the writer's thread before each file is written.
    std::function<void(int64_t checkpoint_id)> before_write;
  };

  struct Job {
    int64_t checkpoint_id = 0;
    std::string path;
    std::vector<TensorToWrite> tensors;
    std::map<std::string, std::string> metadata;
  };

  explicit SnapshotWriter(Options options);
  // Finishes the file being written; snapshots still queued are dropped (with their
  // references).
  ~SnapshotWriter();

  SnapshotWriter(const SnapshotWriter&) = delete;
  SnapshotWriter& operator=(const SnapshotWriter&) = delete;

  // Whether a snapshot with this id is queued or being written.
  bool InUse(int64_t checkpoint_id) const;
  // Queues `job` (its status WRITING at once), or fails with FAILED_PRECONDITION when the id
  // is in use. An id whose snapshot has finished may be taken again (a new status replaces
  // the old one).
  absl::Status Submit(Job job);
  // The snapshot's state: WRITING, DONE (with the file's DataFileInfo), FAILED (with the
  // error), or UNKNOWN when this writer has no record of the id.
  SnapshotStatusResponse Status(int64_t checkpoint_id) const;

 private:
  void Loop();
  void Write(Job& job);

  const Options options_;
  mutable absl::Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, SnapshotStatusResponse> statuses_ ABSL_GUARDED_BY(mu_);
  std::deque<int64_t> finished_ ABSL_GUARDED_BY(mu_);  // ids of finished statuses, oldest first
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the rest is initialized
};

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_SNAPSHOT_WRITER_H_
