// A job's checkpoint directory (job file field "checkpoint.dir"), shared by the chief and
// every ps (and read by the evaluator and `shardctl export`):
//
//   DIR/job.json                       the job's identity (its id and job file), written once
//   DIR/state.json                     the chief's small mutable state (generation, finished)
//   DIR/journal-<generation>.log       steps completed since the newest checkpoint (StepJournal)
//   DIR/ckpt-000000007/                one checkpoint:
//       ps-00000-of-00002.safetensors    each ps's shards (written by that ps)
//       manifest.json                    written last by the chief: the commit point
//
// A checkpoint is committed when its manifest.json exists (renamed into place after its
// data files were fsynced and renamed); a directory without one is an interrupted
// checkpoint, ignored by every reader and removed by Prune. Small files are replaced
// atomically (WriteFileAtomically).
//
// Thread-safety: a CheckpointDir is immutable (a path); its methods touch the filesystem
// and may be called from any thread. One chief writes a directory at a time.
#ifndef SHARDPS_CHECKPOINT_CHECKPOINT_DIR_H_
#define SHARDPS_CHECKPOINT_CHECKPOINT_DIR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/manifest.h"

namespace shardps {

// Writes `contents` to PATH.tmp, fsyncs it, renames it to `path` and fsyncs the directory.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);
// The whole file (NOT_FOUND when missing).
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);
// fsyncs a directory (so that a rename or create inside it is durable).
absl::Status SyncDirectory(const std::string& path);

struct CommittedCheckpoint {
  int64_t id = 0;
  std::string path;           // the checkpoint's directory
  std::string manifest_path;  // path + "/manifest.json"
  Manifest manifest;
};

class CheckpointDir {
 public:
  // `create`: make the directory (and parents) when missing. FAILED_PRECONDITION naming the
  // path when it is missing (and not created), not a directory, or not writable.
  static absl::StatusOr<CheckpointDir> Open(const std::string& path, bool create);
  // For readers only (the evaluator, export, restore): the directory must exist; it may be
  // read-only (writing methods then fail with the filesystem's error).
  static absl::StatusOr<CheckpointDir> OpenReadOnly(const std::string& path);

  const std::string& path() const { return path_; }
  std::string JobFile() const;    // DIR/job.json
  std::string StateFile() const;  // DIR/state.json
  std::string JournalFile(int64_t generation) const;
  std::string CheckpointPath(int64_t id) const;  // DIR/ckpt-000000007
  // "ps-00001-of-00003.safetensors"
  static std::string DataFileName(int ps_task, int num_ps);

  // Creates the directory of checkpoint `id` (an interrupted one of that id is emptied
  // first) and returns its path.
  absl::StatusOr<std::string> Prepare(int64_t id) const;
  // Commits `manifest` (manifest.checkpoint_id's directory must exist and hold every data
  // file it lists): writes manifest.json atomically.
  absl::Status Commit(const Manifest& manifest) const;

  // Committed checkpoints, newest (highest id) first. A checkpoint whose manifest cannot be
  // read or parsed is left out and described in `skipped` (when given): it is not used.
  absl::StatusOr<std::vector<CommittedCheckpoint>> List(
      std::vector<std::string>* skipped = nullptr) const;
  // One past the highest id of any checkpoint directory, committed or not (1 when none).
  absl::StatusOr<int64_t> NextId() const;

  // Deletes committed checkpoints beyond the newest `keep` (keep >= 1), except `also_keep`
  // (say, the best by evaluation) and the checkpoints that a kept one's dynamic tables are
  // increments on (ManifestShard::base_checkpoint, transitively), and interrupted ones older
  // than the newest committed;
  // journals of generations below `min_generation` too. Never deletes the newest committed.
  absl::Status Prune(int keep, std::optional<int64_t> also_keep, int64_t min_generation) const;

  // Removes every checkpoint, journal and state file (a job started --fresh); job.json too.
  absl::Status Clear() const;

 private:
  explicit CheckpointDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// The chief's step journal: one record per completed step (generation, step id), appended
// with write(2) as steps complete (no fsync: the page cache survives a killed chief; a lost
// tail costs only re-runs, which the ps's request-id windows turn into duplicates). A torn
// last record (a crash mid-write) is ignored when read.
class StepJournal {
 public:
  // Opens (creating, appending) the journal at `path`. A torn last record is cut off first,
  // so that new records start on a record boundary.
  static absl::StatusOr<std::unique_ptr<StepJournal>> Open(const std::string& path);
  ~StepJournal();
  // One write(2) of one 20-byte record (generation, step id, CRC-32C); may be called from
  // several threads. A short write (disk full) is undone, so the journal stays aligned.
  absl::Status Append(int64_t generation, int64_t step_id);
  // Every whole record of the journal at `path`, in order (empty when the file is missing).
  // A corrupt record followed by a valid one is DATA_LOSS naming the file and offset.
  static absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> Read(const std::string& path);

 private:
  StepJournal(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  const int fd_;
  const std::string path_;
};

}  // namespace shardps

#endif  // SHARDPS_CHECKPOINT_CHECKPOINT_DIR_H_
