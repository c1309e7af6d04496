#include "checkpoint/checkpoint_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/crc32c.h"
#include "checkpoint/file_io.h"
#include "common/status_macros.h"

namespace shardps {
namespace {

namespace fs = std::filesystem;

constexpr char kCheckpointPrefix[] = "ckpt-";
constexpr char kJournalPrefix[] = "journal-";
constexpr char kJournalSuffix[] = ".log";
constexpr char kManifestName[] = "manifest.json";

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The number in "<prefix><digits><suffix>", or -1.
int64_t NumberIn(absl::string_view name, absl::string_view prefix, absl::string_view suffix) {
  if (!absl::ConsumePrefix(&name, prefix) || !absl::ConsumeSuffix(&name, suffix) ||
      name.empty()) {
    return -1;
  }
  for (char c : name) {
    if (c < '0' || c > '9') return -1;
  }
  int64_t n = -1;
  return absl::SimpleAtoi(name, &n) ? n : -1;
}

struct Entry {
  int64_t number;
  std::string path;
};

// The entries of `dir` named <prefix><number><suffix>, directories or not as asked.
absl::StatusOr<std::vector<Entry>> Scan(const std::string& dir, absl::string_view prefix,
                                        absl::string_view suffix, bool directories) {
  std::vector<Entry> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const int64_t n = NumberIn(name, prefix, suffix);
    if (n < 0) continue;
    std::error_code type_ec;
    if (it->is_directory(type_ec) != directories) continue;
    out.push_back({n, it->path().string()});
  }
  if (ec) {
    return absl::Status(absl::ErrnoToStatusCode(ec.value()),
                        absl::StrCat("list ", dir, ": ", ec.message()));
  }
  return out;
}

absl::Status RemoveTree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) {
    return absl::Status(absl::ErrnoToStatusCode(ec.value()),
                        absl::StrCat("remove ", path, ": ", ec.message()));
  }
  return absl::OkStatus();
}

absl::Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoError(errno, "remove", path);
  return absl::OkStatus();
}

// Removes a checkpoint's directory so that a crash midway never leaves a committed
// checkpoint with missing files: its manifest goes first (durably), then the rest.
absl::Status RemoveCheckpoint(const std::string& path) {
  RETURN_IF_ERROR(RemoveFile(path + "/" + kManifestName));
  RETURN_IF_ERROR(FsyncDirectory(path));
  return RemoveTree(path);
}

constexpr size_t kRecordBytes = 20;  // generation u64, step u64, CRC-32C of both u32 (LE)

void PutLe(uint64_t v, int bytes, char* out) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t GetLe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

bool RecordValid(const char* p) {
  return Crc32cExtend(0, p, 16) == static_cast<uint32_t>(GetLe(p + 16, 4));
}

// The journal's whole, valid records, and the byte length they end at. A bad record
// followed by a valid one is corruption, not a torn tail: DATA_LOSS.
absl::StatusOr<std::pair<std::vector<std::pair<int64_t, int64_t>>, size_t>> ParseJournal(
    const std::string& text, const std::string& path) {
  std::vector<std::pair<int64_t, int64_t>> records;
  size_t valid_end = 0;
  std::optional<size_t> first_bad;
  for (size_t at = 0; at + kRecordBytes <= text.size(); at += kRecordBytes) {
    const char* p = text.data() + at;
    if (!RecordValid(p)) {
      if (!first_bad.has_value()) first_bad = at;
      continue;
    }
    if (first_bad.has_value()) {
      return absl::DataLossError(absl::StrCat(path, ": step journal record at byte ", *first_bad,
                                              " is corrupt (a valid record follows at byte ", at,
                                              ")"));
    }
    records.emplace_back(static_cast<int64_t>(GetLe(p, 8)), static_cast<int64_t>(GetLe(p + 8, 8)));
    valid_end = at + kRecordBytes;
  }
  return std::make_pair(std::move(records), valid_end);
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  const std::string temp = path + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, "create", temp);
  absl::Status status = WriteFully(fd, contents.data(), contents.size(), temp);
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoError(errno, "fsync", temp);
  if (::close(fd) != 0 && status.ok()) status = ErrnoError(errno, "close", temp);
  if (status.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
    status = ErrnoError(errno, absl::StrCat("rename ", temp, " to"), path);
  }
  if (!status.ok()) {
    ::unlink(temp.c_str());
    return status;
  }
  return FsyncDirectory(DirName(path));
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "open", path);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buf, sizeof(buf));
    if (got < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return ErrnoError(err, "read", path);
    }
    if (got == 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  ::close(fd);
  return out;
}

absl::Status SyncDirectory(const std::string& path) { return FsyncDirectory(path); }

absl::StatusOr<CheckpointDir> CheckpointDir::Open(const std::string& path, bool create) {
  if (path.empty()) return absl::FailedPreconditionError("checkpoint directory: empty path");
  if (!PathExists(path)) {
    if (!create) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint directory ", path, " does not exist"));
    }
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create checkpoint directory ", path, ": ", ec.message()));
    }
  }
  if (!IsDirectory(path)) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint directory ", path, " is not a directory"));
  }
  if (::access(path.c_str(), W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("checkpoint directory ", path,
                                                      " is not writable: ", strerror(errno)));
  }
  return CheckpointDir(path);
}

absl::StatusOr<CheckpointDir> CheckpointDir::OpenReadOnly(const std::string& path) {
  if (!IsDirectory(path)) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint directory ", path, " does not exist or is not a directory"));
  }
  return CheckpointDir(path);
}

std::string CheckpointDir::JobFile() const { return path_ + "/job.json"; }
std::string CheckpointDir::StateFile() const { return path_ + "/state.json"; }
std::string CheckpointDir::JournalFile(int64_t generation) const {
  return absl::StrCat(path_, "/", kJournalPrefix, generation, kJournalSuffix);
}
std::string CheckpointDir::CheckpointPath(int64_t id) const {
  return absl::StrFormat("%s/%s%09d", path_, kCheckpointPrefix, id);
}
std::string CheckpointDir::DataFileName(int ps_task, int num_ps) {
  return absl::StrFormat("ps-%05d-of-%05d.safetensors", ps_task, num_ps);
}

absl::StatusOr<std::string> CheckpointDir::Prepare(int64_t id) const {
  if (id < 0) return absl::InvalidArgumentError(absl::StrCat("checkpoint id ", id, " < 0"));
  const std::string dir = CheckpointPath(id);
  if (PathExists(dir + "/" + kManifestName)) {
    return absl::AlreadyExistsError(
        absl::StrCat("checkpoint ", id, " at ", dir, " is already committed"));
  }
  if (PathExists(dir)) RETURN_IF_ERROR(RemoveTree(dir));  // an interrupted one
  if (::mkdir(dir.c_str(), 0755) != 0) return ErrnoError(errno, "create directory", dir);
  RETURN_IF_ERROR(FsyncDirectory(path_));
  return dir;
}

absl::Status CheckpointDir::Commit(const Manifest& manifest) const {
  const std::string dir = CheckpointPath(manifest.checkpoint_id);
  if (!IsDirectory(dir)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "commit checkpoint ", manifest.checkpoint_id, ": ", dir, " does not exist (Prepare it)"));
  }
  const std::string manifest_path = dir + "/" + kManifestName;
  if (PathExists(manifest_path)) {
    return absl::AlreadyExistsError(absl::StrCat("checkpoint ", manifest.checkpoint_id, " at ",
                                                 dir, " is already committed"));
  }
  for (const DataFileInfo& file : manifest.files) {
    const std::string path = dir + "/" + file.file();
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "commit checkpoint ", manifest.checkpoint_id, ": data file ", path, ": ",
          strerror(errno)));
    }
    if (st.st_size != file.bytes()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "commit checkpoint ", manifest.checkpoint_id, ": data file ", path, " has ",
          st.st_size, " bytes, the manifest says ", file.bytes()));
    }
  }
  // Never commit a manifest that no reader could use.
  const std::string text = ManifestToJson(manifest);
  absl::StatusOr<Manifest> back = ParseManifest(text, manifest_path);
  if (!back.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("commit checkpoint ", manifest.checkpoint_id,
                                                   ": the manifest is invalid: ",
                                                   back.status().message()));
  }
  return WriteFileAtomically(manifest_path, text);
}

absl::StatusOr<std::vector<CommittedCheckpoint>> CheckpointDir::List(
    std::vector<std::string>* skipped) const {
  ASSIGN_OR_RETURN(std::vector<Entry> dirs, Scan(path_, kCheckpointPrefix, "", true));
  std::vector<CommittedCheckpoint> out;
  for (const Entry& e : dirs) {
    CommittedCheckpoint c;
    c.id = e.number;
    c.path = e.path;
    c.manifest_path = e.path + "/" + kManifestName;
    absl::StatusOr<std::string> text = ReadWholeFile(c.manifest_path);
    if (absl::IsNotFound(text.status())) continue;  // interrupted: not a checkpoint
    absl::Status status = text.status();
    if (status.ok()) {
      absl::StatusOr<Manifest> manifest = ParseManifest(*text, c.manifest_path);
      status = manifest.status();
      if (status.ok() && manifest->checkpoint_id != c.id) {
        status = absl::DataLossError(absl::StrCat(c.manifest_path, ": checkpoint_id ",
                                                  manifest->checkpoint_id,
                                                  " does not match its directory"));
      }
      if (status.ok()) c.manifest = *std::move(manifest);
    }
    if (!status.ok()) {
      if (skipped != nullptr) skipped->push_back(std::string(status.message()));
      continue;
    }
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(),
            [](const CommittedCheckpoint& a, const CommittedCheckpoint& b) { return a.id > b.id; });
  return out;
}

absl::StatusOr<int64_t> CheckpointDir::NextId() const {
  ASSIGN_OR_RETURN(std::vector<Entry> dirs, Scan(path_, kCheckpointPrefix, "", true));
  int64_t highest = 0;
  for (const Entry& e : dirs) highest = std::max(highest, e.number);
  return highest + 1;
}

absl::Status CheckpointDir::Prune(int keep, std::optional<int64_t> also_keep,
                                  int64_t min_generation) const {
  if (keep < 1) return absl::InvalidArgumentError(absl::StrCat("prune: keep ", keep, " < 1"));
  ASSIGN_OR_RETURN(std::vector<CommittedCheckpoint> committed, List());
  std::set<int64_t> committed_ids;
  for (const CommittedCheckpoint& c : committed) committed_ids.insert(c.id);
  absl::Status first_error;
  auto note = [&first_error](absl::Status s) {
    if (first_error.ok()) first_error = std::move(s);
  };
  // The kept ones, and every checkpoint their dynamic tables' increments are read on top of.
  std::set<int64_t> kept;
  std::map<int64_t, const CommittedCheckpoint*> by_id;
  for (const CommittedCheckpoint& c : committed) by_id[c.id] = &c;
  std::vector<int64_t> pending;
  for (size_t i = 0; i < committed.size(); ++i) {
    if (i < static_cast<size_t>(keep) || (also_keep.has_value() && committed[i].id == *also_keep)) {
      pending.push_back(committed[i].id);
    }
  }
  while (!pending.empty()) {
    const int64_t id = pending.back();
    pending.pop_back();
    if (!kept.insert(id).second) continue;
    auto it = by_id.find(id);
    if (it == by_id.end()) continue;
    for (const ManifestVariable& v : it->second->manifest.variables) {
      for (const ManifestShard& shard : v.shards) {
        if (shard.base_checkpoint > 0) pending.push_back(shard.base_checkpoint);
      }
    }
  }
  for (const CommittedCheckpoint& c : committed) {
    if (kept.count(c.id) == 0) note(RemoveCheckpoint(c.path));
  }
  if (!committed.empty()) {
    // Interrupted checkpoints older than the newest committed one are dead; newer ones may
    // be in progress. A directory whose manifest exists but does not parse is left for a
    // person to look at.
    ASSIGN_OR_RETURN(std::vector<Entry> dirs, Scan(path_, kCheckpointPrefix, "", true));
    for (const Entry& e : dirs) {
      if (e.number >= committed.front().id || committed_ids.count(e.number) > 0) continue;
      if (PathExists(e.path + "/" + kManifestName)) continue;
      note(RemoveTree(e.path));
    }
  }
  ASSIGN_OR_RETURN(std::vector<Entry> journals, Scan(path_, kJournalPrefix, kJournalSuffix, false));
  for (const Entry& e : journals) {
    if (e.number < min_generation) note(RemoveFile(e.path));
  }
  note(FsyncDirectory(path_));
  return first_error;
}

absl::Status CheckpointDir::Clear() const {
  ASSIGN_OR_RETURN(std::vector<Entry> dirs, Scan(path_, kCheckpointPrefix, "", true));
  // Newest first: a crash midway leaves older checkpoints, never a newest without its elders.
  std::sort(dirs.begin(), dirs.end(),
            [](const Entry& a, const Entry& b) { return a.number > b.number; });
  for (const Entry& e : dirs) RETURN_IF_ERROR(RemoveCheckpoint(e.path));
  ASSIGN_OR_RETURN(std::vector<Entry> journals, Scan(path_, kJournalPrefix, kJournalSuffix, false));
  for (const Entry& e : journals) RETURN_IF_ERROR(RemoveFile(e.path));
  for (const std::string& file : {StateFile(), JobFile()}) {
    RETURN_IF_ERROR(RemoveFile(file));
    RETURN_IF_ERROR(RemoveFile(file + ".tmp"));
  }
  return FsyncDirectory(path_);
}

absl::StatusOr<std::unique_ptr<StepJournal>> StepJournal::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, "open", path);
  std::unique_ptr<StepJournal> journal(new StepJournal(fd, path));
  // Cut a torn tail, so that the records appended next start on a record boundary.
  ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  absl::StatusOr<std::pair<std::vector<std::pair<int64_t, int64_t>>, size_t>> parsed =
      ParseJournal(text, path);
  const size_t valid_end = parsed.ok() ? parsed->second : text.size() / kRecordBytes * kRecordBytes;
  if (valid_end != text.size() && ::ftruncate(fd, static_cast<off_t>(valid_end)) != 0) {
    return ErrnoError(errno, "truncate", path);
  }
  return journal;
}

StepJournal::~StepJournal() { ::close(fd_); }

absl::Status StepJournal::Append(int64_t generation, int64_t step_id) {
  char record[kRecordBytes];
  PutLe(static_cast<uint64_t>(generation), 8, record);
  PutLe(static_cast<uint64_t>(step_id), 8, record + 8);
  PutLe(Crc32cExtend(0, record, 16), 4, record + 16);
  // One write(2) of a whole record (O_APPEND): a killed chief leaves it whole or torn.
  ssize_t put;
  do {
    put = ::write(fd_, record, sizeof(record));
  } while (put < 0 && errno == EINTR);
  if (put == static_cast<ssize_t>(sizeof(record))) return absl::OkStatus();
  if (put < 0) return ErrnoError(errno, "append to", path_);
  const off_t end = ::lseek(fd_, 0, SEEK_END);
  if (end >= put) ::ftruncate(fd_, end - put);
  return ErrnoError(ENOSPC, absl::StrCat("append (", put, " of ", sizeof(record), " bytes) to"),
                    path_);
}

absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> StepJournal::Read(
    const std::string& path) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (absl::IsNotFound(text.status())) return std::vector<std::pair<int64_t, int64_t>>{};
  if (!text.ok()) return text.status();
  ASSIGN_OR_RETURN(auto parsed, ParseJournal(*text, path));
  return std::move(parsed.first);
}

}  // namespace shardps
