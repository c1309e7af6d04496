#include "checkpoint/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/crc32c.h"
#include "checkpoint/file_io.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace shardps {
namespace {

// The reference implementation refuses headers above 100 MB; so do we (a flipped high byte
// of the length must not make us allocate gigabytes).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// Bytes handed to one pwritev, and the most pieces in it.
constexpr size_t kBatchBytes = 4 << 20;
constexpr int kBatchPieces = 1024;
// Dirty bytes after which the writer asks the kernel to start writing them back, so that
// the disk works while we copy and the final fsync has little left to wait for.
constexpr int64_t kWritebackBytes = 16 << 20;
// Bytes read per call when streaming.
constexpr int64_t kReadChunkBytes = 4 << 20;
// How far ahead of the reader the kernel is asked to read (ReadAhead), and in what steps.
constexpr int64_t kReadAheadBytes = 32 << 20;
constexpr int64_t kReadAheadStep = 8 << 20;

struct DtypeEntry {
  const char* name;
  int size;
};
constexpr DtypeEntry kDtypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},   {"F8_E5M2", 1}, {"F8_E4M3", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2},  {"BF16", 2},    {"I32", 4},
    {"U32", 4},  {"F32", 4}, {"I64", 8},  {"U64", 8},     {"F64", 8},
};

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// prod(shape) * size, or -1 when a dimension is negative or the product overflows int64.
int64_t ShapeBytes(const std::vector<int64_t>& shape, int size) {
  int64_t n = size;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The temporary file of one write: removed unless the write succeeds.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {}
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!kept_) ::unlink(path_.c_str());
  }
  absl::Status Create() {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) return ErrnoError(errno, "create", path_);
    kept_ = false;  // ours now: removed unless Keep()
    return absl::OkStatus();
  }
  absl::Status Close() {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return ErrnoError(errno, "close", path_);
    return absl::OkStatus();
  }
  void Keep() { kept_ = true; }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool kept_ = true;  // nothing to remove until Create succeeds
};

// Gathers pieces into pwritev batches of a few MiB and writes them in order.
class BatchWriter {
 public:
  explicit BatchWriter(TempFile* file) : file_(file) { iov_.reserve(kBatchPieces); }

  bool full() const {
    return batch_bytes_ >= kBatchBytes || static_cast<int>(iov_.size()) >= kBatchPieces;
  }
  size_t room() const { return kBatchBytes - std::min(batch_bytes_, kBatchBytes); }
  void Add(const char* p, size_t n) {
    iov_.push_back({const_cast<char*>(p), n});
    batch_bytes_ += n;
  }
  absl::Status Flush() {
    if (iov_.empty()) return absl::OkStatus();
    RETURN_IF_ERROR(PwritevFully(file_->fd(), iov_.data(), static_cast<int>(iov_.size()),
                                 written_, file_->path()));
    written_ += static_cast<int64_t>(batch_bytes_);
    iov_.clear();
    batch_bytes_ = 0;
    if (written_ - writeback_from_ >= kWritebackBytes) {
      // Advisory: an error here shows up again at fsync, where it is reported.
      ::sync_file_range(file_->fd(), writeback_from_, written_ - writeback_from_,
                        SYNC_FILE_RANGE_WRITE);
      writeback_from_ = written_;
    }
    return absl::OkStatus();
  }
  int64_t written() const { return written_; }

 private:
  TempFile* file_;
  std::vector<struct iovec> iov_;
  size_t batch_bytes_ = 0;
  int64_t written_ = 0;
  int64_t writeback_from_ = 0;
};

// Keeps the kernel reading a window ahead of a sequential reader (POSIX_FADV_WILLNEED starts
// the reads and returns), so that the disk works while the reader checksums and copies what
// it has: the kernel's own readahead only runs when the reader reads. Advisory: errors are
// ignored (the reads that follow report any).
class ReadAhead {
 public:
  ReadAhead(int fd, int64_t end) : fd_(fd), end_(end) {}
  // Called before reading at `at`: asks for [at, at + window) unless most of it was asked for.
  void Before(int64_t at) {
    if (issued_ < at) issued_ = at;
    const int64_t want = std::min(end_, at + kReadAheadBytes);
    if (want - issued_ < kReadAheadStep && want < end_) return;
    if (want > issued_) ::posix_fadvise(fd_, issued_, want - issued_, POSIX_FADV_WILLNEED);
    issued_ = want;
  }

 private:
  const int fd_;
  const int64_t end_;
  int64_t issued_ = 0;
};

// Faults in the pages of [data, data + n) writable before a read into them
// (MADV_POPULATE_WRITE, Linux 5.14): the kernel then maps fresh pages in one pass instead of
// taking a fault per 4 KiB page in the middle of the read's copy. The range is widened to
// whole pages: each page it touches holds some of the caller's bytes, so it is mapped, and
// populating a page changes no byte. Advisory: an older kernel (EINVAL) or any error just
// leaves the faults to the read.
void Prefault(char* data, int64_t n) {
#ifdef MADV_POPULATE_WRITE
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + static_cast<uintptr_t>(n) + page - 1) &
                        ~(page - 1);
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#else
  (void)data;
  (void)n;
#endif
}

absl::Status HeaderError(const std::string& path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(path, ": safetensors header: ", what));
}

absl::Status TensorError(const std::string& path, absl::string_view name,
                         absl::string_view what) {
  return absl::DataLossError(absl::StrCat(path, ": tensor '", name, "': ", what));
}

// A JSON integer in [0, int64 max], or -1.
int64_t NonNegativeInt(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    return u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
               ? static_cast<int64_t>(u)
               : -1;
  }
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    return i >= 0 ? i : -1;
  }
  return -1;
}

absl::Status ParseTensorEntry(const std::string& path, const std::string& name,
                              const nlohmann::json& entry, TensorInfo* info) {
  if (!entry.is_object()) return TensorError(path, name, "entry is not a JSON object");
  for (const auto& [key, value] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return TensorError(path, name, absl::StrCat("unknown field '", key, "'"));
    }
  }
  info->set_name(name);
  const auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) {
    return TensorError(path, name, "dtype: missing or not a string");
  }
  info->set_dtype(dtype->get<std::string>());
  const int size = DtypeSize(info->dtype());
  if (size == 0) return TensorError(path, name, absl::StrCat("unknown dtype '", info->dtype(), "'"));
  const auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) {
    return TensorError(path, name, "shape: missing or not an array");
  }
  std::vector<int64_t> dims;
  for (const auto& d : *shape) {
    const int64_t v = NonNegativeInt(d);
    if (v < 0) {
      return TensorError(path, name,
                         absl::StrCat("shape: ", d.dump(), " is not a non-negative integer"));
    }
    dims.push_back(v);
    info->add_shape(v);
  }
  const auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2) {
    return TensorError(path, name, "data_offsets: missing or not an array of two integers");
  }
  const int64_t begin = NonNegativeInt((*offsets)[0]);
  const int64_t end = NonNegativeInt((*offsets)[1]);
  if (begin < 0 || end < 0) {
    return TensorError(path, name, absl::StrCat("data_offsets ", offsets->dump(),
                                                ": not non-negative integers"));
  }
  if (end < begin) {
    return TensorError(path, name,
                       absl::StrCat("data_offsets ", offsets->dump(), ": end before begin"));
  }
  const int64_t bytes = ShapeBytes(dims, size);
  if (bytes < 0) return TensorError(path, name, absl::StrCat("shape ", ShapeText(dims), " overflows"));
  if (end - begin != bytes) {
    return TensorError(path, name,
                       absl::StrCat("shape ", ShapeText(dims), " of ", info->dtype(), " needs ",
                                    bytes, " bytes but data_offsets ", offsets->dump(), " hold ",
                                    end - begin));
  }
  info->set_data_begin(begin);
  info->set_data_end(end);
  return absl::OkStatus();
}

// Checks `t` (name, dtype, shape against its pieces' bytes) and adds it at `offset` of the
// data section to `header` and to info's tensors. Returns its bytes; INVALID_ARGUMENT naming
// `path` and the tensor.
absl::StatusOr<int64_t> AddTensorToHeader(const std::string& path, const TensorToWrite& t,
                                          int64_t offset, absl::flat_hash_set<std::string>* names,
                                          nlohmann::ordered_json* header, DataFileInfo* info) {
  const auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", t.name, "': ", what));
  };
  if (t.name.empty() || t.name == "__metadata__") return bad("not a valid tensor name");
  if (!names->insert(t.name).second) return bad("written twice");
  const int size = DtypeSize(t.dtype);
  if (size == 0) return bad(absl::StrCat("unknown dtype '", t.dtype, "'"));
  const int64_t bytes = ShapeBytes(t.shape, size);
  if (bytes < 0) return bad(absl::StrCat("invalid shape ", ShapeText(t.shape)));
  int64_t given = 0;
  for (absl::string_view piece : t.pieces) given += static_cast<int64_t>(piece.size());
  if (given != bytes) {
    return bad(absl::StrCat("shape ", ShapeText(t.shape), " of ", t.dtype, " is ", bytes,
                            " bytes but its pieces hold ", given));
  }
  (*header)[t.name] = {{"dtype", t.dtype},
                       {"shape", t.shape},
                       {"data_offsets", {offset, offset + bytes}}};
  TensorInfo* ti = info->add_tensors();
  ti->set_name(t.name);
  ti->set_dtype(t.dtype);
  for (int64_t d : t.shape) ti->add_shape(d);
  ti->set_data_begin(offset);
  ti->set_data_end(offset + bytes);
  return bytes;
}

// The file's first bytes: the 8-byte little-endian length and the JSON header (metadata,
// then the tensors in order, padded with spaces so that the data section starts 8-aligned).
// Adds the tensors to info (without CRCs) and sets its header_crc32c.
absl::StatusOr<std::string> EncodeHeader(const std::string& path,
                                         const std::vector<TensorToWrite>& tensors,
                                         const SafetensorsWriteOptions& options,
                                         DataFileInfo* info) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!options.metadata.empty()) {
    nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
    for (const auto& [key, value] : options.metadata) metadata[key] = value;
    header["__metadata__"] = std::move(metadata);
  }
  absl::flat_hash_set<std::string> names;
  int64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    ASSIGN_OR_RETURN(const int64_t bytes, AddTensorToHeader(path, t, offset, &names, &header, info));
    offset += bytes;
  }
  std::string json;
  try {
    json = header.dump();
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": tensor names and metadata must be UTF-8: ", e.what()));
  }
  // Pad so that the data section starts 8-aligned (8 + header length, a multiple of 8).
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string head(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) head[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  head += json;
  info->set_header_crc32c(Crc32c(head));
  return head;
}

// Writes the tensors' bytes through `writer` (which holds the header), dropping each
// tensor's pieces and holds once they are written. Sets each tensor's crc32c in *info and
// returns the file's CRC-32C, extended from `header_crc`.
absl::StatusOr<uint32_t> WriteTensorData(std::vector<TensorToWrite>* tensors, BatchWriter* writer,
                                         uint32_t header_crc, DataFileInfo* info) {
  uint32_t file_crc = header_crc;
  size_t done = 0;  // tensors [0, done) are wholly written and their holds dropped
  auto drop_written = [&](size_t upto) {
    for (; done < upto; ++done) {
      (*tensors)[done].pieces.clear();
      (*tensors)[done].holds.clear();
    }
  };
  for (size_t i = 0; i < tensors->size(); ++i) {
    uint32_t crc = 0;
    for (absl::string_view piece : (*tensors)[i].pieces) {
      while (!piece.empty()) {
        if (writer->full()) {
          RETURN_IF_ERROR(writer->Flush());
          drop_written(i);
        }
        const size_t take = std::min(piece.size(), writer->room());
        crc = Crc32cExtend(crc, piece.data(), take);
        writer->Add(piece.data(), take);
        piece.remove_prefix(take);
      }
    }
    TensorInfo* ti = info->mutable_tensors(static_cast<int>(i));
    ti->set_crc32c(crc);
    file_crc = Crc32cCombine(file_crc, crc, ti->data_end() - ti->data_begin());
  }
  RETURN_IF_ERROR(writer->Flush());
  drop_written(tensors->size());
  return file_crc;
}

// Makes the written `temp` the file at `path`: fsync (when asked), close, rename, and fsync
// of the directory, after whose failure `path` is removed (not durable, so not published).
absl::Status Publish(TempFile* temp, const std::string& path, bool fsync) {
  if (fsync && ::fdatasync(temp->fd()) != 0) {
    return ErrnoError(errno, "fsync", temp->path());
  }
  RETURN_IF_ERROR(temp->Close());
  if (::rename(temp->path().c_str(), path.c_str()) != 0) {
    return ErrnoError(errno, absl::StrCat("rename ", temp->path(), " to"), path);
  }
  temp->Keep();
  if (fsync) {
    absl::Status synced = FsyncDirectory(DirName(path));
    if (!synced.ok()) {
      ::unlink(path.c_str());  // not durable: leave nothing that looks published
      return absl::Status(synced.code(), absl::StrCat(path, ": ", synced.message()));
    }
  }
  return absl::OkStatus();
}

// The size of the regular file open as `fd` (FAILED_PRECONDITION for anything else).
absl::StatusOr<int64_t> RegularFileBytes(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoError(errno, "stat", path);
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": not a regular file"));
  }
  return static_cast<int64_t>(st.st_size);
}

// Reads the 8-byte length and the header text it announces from the `file_bytes`-byte file
// open as `fd`, and sets *crc to their CRC-32C. DATA_LOSS when the length does not fit.
absl::StatusOr<std::string> ReadHeaderText(int fd, const std::string& path, int64_t file_bytes,
                                           uint32_t* crc) {
  if (file_bytes < 8) {
    return HeaderError(path, absl::StrCat("the file has ", file_bytes,
                                          " bytes, fewer than the 8-byte header length"));
  }
  unsigned char len[8];
  RETURN_IF_ERROR(PreadFully(fd, len, 8, 0, path));
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(len[i]) << (8 * i);
  if (n > static_cast<uint64_t>(file_bytes - 8)) {
    return HeaderError(path, absl::StrCat("header length ", n, " runs past the end of the file (",
                                          file_bytes, " bytes)"));
  }
  if (n > kMaxHeaderBytes) {
    return HeaderError(path, absl::StrCat("header length ", n, " is over the limit of ",
                                          kMaxHeaderBytes));
  }
  std::string text(n, '\0');
  RETURN_IF_ERROR(PreadFully(fd, text.data(), n, 8, path));
  *crc = Crc32cExtend(Crc32cExtend(0, len, 8), text.data(), text.size());
  return text;
}

// Parses the header text as a JSON object; DATA_LOSS when it is not one or when an object
// in it has a key twice (nlohmann would keep the last; the parser callback sees every key).
absl::StatusOr<nlohmann::json> ParseHeaderJson(const std::string& path, const std::string& text) {
  if (text.empty() || text[0] != '{') return HeaderError(path, "does not start with '{'");
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(
        text,
        [&](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
          using Event = nlohmann::json::parse_event_t;
          if (event == Event::object_start) {
            open_objects.emplace_back();
          } else if (event == Event::object_end) {
            if (!open_objects.empty()) open_objects.pop_back();
          } else if (event == Event::key && !open_objects.empty()) {
            std::string key = parsed.get<std::string>();
            if (!open_objects.back().insert(key).second && duplicate.empty()) {
              duplicate = std::move(key);
            }
          }
          return true;
        });
  } catch (const nlohmann::json::exception& e) {
    return HeaderError(path, absl::StrCat("invalid JSON: ", e.what()));
  }
  if (!duplicate.empty()) return HeaderError(path, absl::StrCat("key '", duplicate, "' appears twice"));
  if (!header.is_object()) return HeaderError(path, "not a JSON object");
  return header;
}

// The header's "__metadata__" (strings only) and tensor entries, in the JSON's key order.
absl::Status ParseHeaderEntries(const std::string& path, const nlohmann::json& header,
                                std::map<std::string, std::string>* metadata,
                                std::vector<TensorInfo>* tensors) {
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (value.is_null()) continue;
      if (!value.is_object()) return HeaderError(path, "__metadata__ is not an object");
      for (const auto& [mkey, mvalue] : value.items()) {
        if (!mvalue.is_string()) {
          return HeaderError(path, absl::StrCat("__metadata__.", mkey, " is not a string"));
        }
        (*metadata)[mkey] = mvalue.get<std::string>();
      }
      continue;
    }
    TensorInfo info;
    RETURN_IF_ERROR(ParseTensorEntry(path, key, value, &info));
    tensors->push_back(std::move(info));
  }
  return absl::OkStatus();
}

// Sorts the tensors into data order (the offsets' order: the JSON's key order carries no
// meaning) and checks that they tile the `data_bytes` of the data section exactly.
absl::Status CheckTiling(const std::string& path, int64_t data_bytes,
                         std::vector<TensorInfo>* tensors) {
  std::stable_sort(tensors->begin(), tensors->end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::make_pair(a.data_begin(), a.data_end()) <
           std::make_pair(b.data_begin(), b.data_end());
  });
  int64_t expected = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo& t : *tensors) {
    if (t.data_begin() < expected) {
      return TensorError(path, t.name(),
                         absl::StrCat("data_offsets [", t.data_begin(), ", ", t.data_end(),
                                      ") overlap tensor '", previous->name(), "' (ends at ",
                                      expected, ")"));
    }
    if (t.data_begin() > expected) {
      return TensorError(path, t.name(),
                         absl::StrCat("gap: bytes [", expected, ", ", t.data_begin(),
                                      ") of the data section before it belong to no tensor"));
    }
    expected = t.data_end();
    previous = &t;
  }
  if (expected > data_bytes) {
    return HeaderError(path, absl::StrCat("truncated: the tensors need ", expected,
                                          " bytes of data, the file holds ", data_bytes));
  }
  if (expected < data_bytes) {
    return HeaderError(path, absl::StrCat(data_bytes - expected,
                                          " bytes after the last tensor's data"));
  }
  return absl::OkStatus();
}

}  // namespace

int DtypeSize(absl::string_view dtype) {
  for (const DtypeEntry& e : kDtypes) {
    if (dtype == e.name) return e.size;
  }
  return 0;
}

absl::StatusOr<DataFileInfo> WriteSafetensors(const std::string& path,
                                              std::vector<TensorToWrite> tensors,
                                              const SafetensorsWriteOptions& options,
                                              SafetensorsWriteStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  DataFileInfo info;
  info.set_file(BaseName(path));
  ASSIGN_OR_RETURN(const std::string head, EncodeHeader(path, tensors, options, &info));
  TempFile temp(path + ".tmp");
  RETURN_IF_ERROR(temp.Create());
  BatchWriter writer(&temp);
  writer.Add(head.data(), head.size());
  ASSIGN_OR_RETURN(const uint32_t file_crc,
                   WriteTensorData(&tensors, &writer, info.header_crc32c(), &info));
  RETURN_IF_ERROR(Publish(&temp, path, options.fsync));
  info.set_bytes(writer.written());
  info.set_crc32c(file_crc);
  if (stats != nullptr) {
    stats->bytes = writer.written();
    stats->seconds = SecondsSince(start);
  }
  return info;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile);
  file->path_ = path;
  file->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file->fd_ < 0) return ErrnoError(errno, "open", path);
  ASSIGN_OR_RETURN(file->file_bytes_, RegularFileBytes(file->fd_, path));
  ASSIGN_OR_RETURN(const std::string text,
                   ReadHeaderText(file->fd_, path, file->file_bytes_, &file->header_crc32c_));
  file->data_offset_ = 8 + static_cast<int64_t>(text.size());
  ASSIGN_OR_RETURN(const nlohmann::json header, ParseHeaderJson(path, text));
  RETURN_IF_ERROR(ParseHeaderEntries(path, header, &file->metadata_, &file->tensors_));
  RETURN_IF_ERROR(CheckTiling(path, file->file_bytes_ - file->data_offset_, &file->tensors_));
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

const TensorInfo* SafetensorsFile::Find(absl::string_view name) const {
  for (const TensorInfo& t : tensors_) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

absl::Status SafetensorsFile::CheckBounds(const TensorInfo& tensor) const {
  if (tensor.data_begin() < 0 || tensor.data_end() < tensor.data_begin() ||
      tensor.data_end() > file_bytes_ - data_offset_) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": tensor '", tensor.name(), "': data [", tensor.data_begin(), ", ",
        tensor.data_end(), ") is not within the data section of ", file_bytes_ - data_offset_,
        " bytes"));
  }
  return absl::OkStatus();
}

absl::Status SafetensorsFile::ReadRange(const TensorInfo& tensor, int64_t begin, int64_t end,
                                        char* out) const {
  RETURN_IF_ERROR(CheckBounds(tensor));
  if (begin < 0 || begin > end || end > tensor.data_end() - tensor.data_begin()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": tensor '", tensor.name(), "': bytes [", begin, ", ", end,
        ") are not within its ", tensor.data_end() - tensor.data_begin(), " bytes"));
  }
  return PreadFully(fd_, out, static_cast<size_t>(end - begin),
                    data_offset_ + tensor.data_begin() + begin, path_);
}

absl::Status SafetensorsFile::StreamTensor(
    const TensorInfo& tensor, uint32_t expected_crc32c,
    absl::FunctionRef<absl::Status(int64_t, absl::string_view)> fn, int64_t granule) const {
  RETURN_IF_ERROR(CheckBounds(tensor));
  const int64_t size = tensor.data_end() - tensor.data_begin();
  if (granule <= 0) granule = std::max(1, DtypeSize(tensor.dtype()));
  const int64_t chunk = std::max<int64_t>(1, kReadChunkBytes / granule) * granule;
  std::unique_ptr<char[]> buffer;
  if (size > 0) buffer.reset(new char[static_cast<size_t>(std::min(chunk, size))]);
  uint32_t crc = 0;
  const int64_t base = data_offset_ + tensor.data_begin();
  ReadAhead ahead(fd_, base + size);
  for (int64_t at = 0; at < size;) {
    const int64_t n = std::min(chunk, size - at);
    ahead.Before(base + at);
    RETURN_IF_ERROR(PreadFully(fd_, buffer.get(), static_cast<size_t>(n), base + at, path_));
    crc = Crc32cExtend(crc, buffer.get(), static_cast<size_t>(n));
    RETURN_IF_ERROR(fn(at, absl::string_view(buffer.get(), static_cast<size_t>(n))));
    at += n;
  }
  return CrcMismatch(tensor, crc, expected_crc32c);
}

absl::Status SafetensorsFile::ReadTensorInto(const TensorInfo& tensor, uint32_t expected_crc32c,
                                             absl::Span<const TensorReadTarget> targets) const {
  RETURN_IF_ERROR(CheckBounds(tensor));
  const int64_t size = tensor.data_end() - tensor.data_begin();
  int64_t given = 0, dropped = 0;
  for (const TensorReadTarget& t : targets) {
    if (t.size < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ": tensor '", tensor.name(), "': a read target of ", t.size, " bytes"));
    }
    given += t.size;
    if (t.data == nullptr) dropped += t.size;
  }
  if (given != size) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": tensor '", tensor.name(), "' is ",
                                                   size, " bytes but the read targets hold ",
                                                   given));
  }
  std::unique_ptr<char[]> scratch;
  if (dropped > 0) scratch.reset(new char[static_cast<size_t>(std::min(kReadChunkBytes, dropped))]);
  uint32_t crc = 0;
  const int64_t base = data_offset_ + tensor.data_begin();
  ReadAhead ahead(fd_, base + size);
  int64_t at = 0;
  for (const TensorReadTarget& t : targets) {
    for (int64_t done = 0; done < t.size;) {
      const int64_t n = std::min(kReadChunkBytes, t.size - done);
      char* const into = t.data != nullptr ? t.data + done : scratch.get();
      ahead.Before(base + at);
      if (t.data != nullptr) Prefault(into, n);
      RETURN_IF_ERROR(PreadFully(fd_, into, static_cast<size_t>(n), base + at, path_));
      // Still in the cache from the read: the checksum costs no second trip to memory.
      crc = Crc32cExtend(crc, into, static_cast<size_t>(n));
      done += n;
      at += n;
    }
  }
  return CrcMismatch(tensor, crc, expected_crc32c);
}

absl::Status SafetensorsFile::CrcMismatch(const TensorInfo& tensor, uint32_t crc,
                                          uint32_t expected) const {
  if (crc == expected) return absl::OkStatus();
  return absl::DataLossError(absl::StrFormat(
      "%s: tensor '%s': CRC-32C mismatch: its %d bytes (data section [%d, %d)) read as "
      "0x%08x, expected 0x%08x",
      path_, tensor.name(), tensor.data_end() - tensor.data_begin(), tensor.data_begin(),
      tensor.data_end(), crc, expected));
}

absl::Status SafetensorsFile::Verify(int64_t expected_bytes, uint32_t expected_crc32c) const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return ErrnoError(errno, "stat", path_);
  if (st.st_size != expected_bytes) {
    return absl::DataLossError(absl::StrCat(path_, ": ", st.st_size, " bytes, expected ",
                                            expected_bytes));
  }
  std::unique_ptr<char[]> buffer(new char[kReadChunkBytes]);
  uint32_t crc = 0;
  ReadAhead ahead(fd_, expected_bytes);
  for (int64_t at = 0; at < expected_bytes;) {
    const int64_t n = std::min<int64_t>(kReadChunkBytes, expected_bytes - at);
    ahead.Before(at);
    RETURN_IF_ERROR(PreadFully(fd_, buffer.get(), static_cast<size_t>(n), at, path_));
    crc = Crc32cExtend(crc, buffer.get(), static_cast<size_t>(n));
    at += n;
  }
  if (crc != expected_crc32c) {
    return absl::DataLossError(absl::StrFormat(
        "%s: CRC-32C mismatch: the file reads as 0x%08x, expected 0x%08x", path_, crc,
        expected_crc32c));
  }
  return absl::OkStatus();
}

}  // namespace shardps
