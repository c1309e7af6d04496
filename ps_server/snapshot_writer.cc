#include "ps_server/snapshot_writer.h"

#include <algorithm>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"

namespace shardps {

SnapshotWriter::SnapshotWriter(Options options)
    : options_(std::move(options)), thread_([this] { Loop(); }) {}

SnapshotWriter::~SnapshotWriter() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

bool SnapshotWriter::InUse(int64_t checkpoint_id) const {
  absl::MutexLock lock(&mu_);
  auto it = statuses_.find(checkpoint_id);
  return it != statuses_.end() && it->second.state() == SnapshotStatusResponse::WRITING;
}

absl::Status SnapshotWriter::Submit(Job job) {
  absl::MutexLock lock(&mu_);
  auto it = statuses_.find(job.checkpoint_id);
  if (it != statuses_.end() && it->second.state() == SnapshotStatusResponse::WRITING) {
    return absl::FailedPreconditionError(absl::StrCat(
        "snapshot ", job.checkpoint_id, " is already being written (to ", job.path,
        "); wait for it (SnapshotStatus) or use another checkpoint id"));
  }
  SnapshotStatusResponse status;
  status.set_state(SnapshotStatusResponse::WRITING);
  if (it != statuses_.end()) {
    finished_.erase(std::remove(finished_.begin(), finished_.end(), job.checkpoint_id),
                    finished_.end());
  }
  // Both insertions may throw std::bad_alloc; the queue's first, so that a failure leaves
  // no WRITING status without a job behind it.
  queue_.push_back(std::move(job));
  try {
    statuses_[queue_.back().checkpoint_id] = status;
  } catch (const std::bad_alloc&) {
    queue_.pop_back();
    throw;
  }
  return absl::OkStatus();
}

SnapshotStatusResponse SnapshotWriter::Status(int64_t checkpoint_id) const {
  absl::MutexLock lock(&mu_);
  auto it = statuses_.find(checkpoint_id);
  if (it == statuses_.end()) {
    SnapshotStatusResponse unknown;
    unknown.set_state(SnapshotStatusResponse::UNKNOWN);
    return unknown;
  }
  return it->second;
}

void SnapshotWriter::Loop() {
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    Write(job);
  }
}

void SnapshotWriter::Write(Job& job) {
  const int64_t id = job.checkpoint_id;
  if (options_.before_write) options_.before_write(id);
  SnapshotStatusResponse status;
  SafetensorsWriteOptions write_options;
  write_options.fsync = options_.fsync;
  SafetensorsWriteStats stats;
  absl::StatusOr<DataFileInfo> info = absl::UnknownError("not written");
  try {
    write_options.metadata = std::move(job.metadata);
    info = WriteSafetensors(job.path, std::move(job.tensors), write_options, &stats);
  } catch (const std::bad_alloc&) {
    info = absl::ResourceExhaustedError(
        absl::StrCat(job.path, ": the ps ran out of memory while writing it"));
  }
  job.tensors.clear();  // every reference to the shards' blocks goes now
  if (info.ok()) {
    status.set_state(SnapshotStatusResponse::DONE);
    *status.mutable_file() = *std::move(info);
    status.set_bytes_written(stats.bytes);
    status.set_write_seconds(stats.seconds);
  } else {
    status.set_state(SnapshotStatusResponse::FAILED);
    status.set_error(absl::StrCat("snapshot ", id, " failed: ", info.status().ToString()));
    status.set_write_seconds(stats.seconds);
  }
  absl::MutexLock lock(&mu_);
  statuses_[id] = std::move(status);  // present (WRITING) since Submit: no allocation
  try {
    finished_.push_back(id);
  } catch (const std::bad_alloc&) {
    return;  // the status is kept, never evicted
  }
  while (static_cast<int>(finished_.size()) > std::max(options_.keep_finished, 1)) {
    statuses_.erase(finished_.front());
    finished_.pop_front();
  }
}

}  // namespace shardps
