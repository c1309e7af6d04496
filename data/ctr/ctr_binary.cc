#include "data/ctr/ctr_binary.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/ctr/ctr_hash.h"

namespace shardps {
namespace {

static_assert(sizeof(float) == 4, "ctrbin stores binary32 floats");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ctrbin reads and writes little-endian integers in place: a big-endian host needs byte swaps"
#endif

constexpr char kMagic[8] = {'S', 'P', 'C', 'T', 'R', 'B', 'I', 'N'};
constexpr size_t kFixedHeader = 64;
constexpr size_t kHeaderChecksumAt = 56;
constexpr size_t kChunk = size_t{1} << 20;

template <typename T>
void Put(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

template <typename T>
T Get(const unsigned char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

template <typename T>
void SetAt(std::string* out, size_t at, T value) {
  std::memcpy(&(*out)[at], &value, sizeof(T));
}

// Checksum64 chained over 1 MiB chunks, so a writer computes it while streaming.
class ChunkedChecksum {
 public:
  void Add(const unsigned char* data, size_t size) {
    while (size > 0) {
      const size_t take = std::min(size, kChunk - buffer_.size());
      buffer_.insert(buffer_.end(), data, data + take);
      data += take;
      size -= take;
      if (buffer_.size() == kChunk) Flush();
    }
  }
  uint64_t Finish() {
    Flush();
    return h_;
  }

 private:
  void Flush() {
    if (!buffer_.empty()) h_ = Checksum64(buffer_.data(), buffer_.size(), h_);
    buffer_.clear();
  }
  std::vector<unsigned char> buffer_;
  uint64_t h_ = 0;
};

absl::Status ErrnoStatus(int err, const std::string& message) {
  const std::string text = absl::StrCat(message, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(text);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(text);
  if (err == ENOSPC || err == EDQUOT) return absl::ResourceExhaustedError(text);
  return absl::InternalError(text);
}

std::string EncodeHeader(const CtrSchema& schema, absl::string_view description) {
  std::string h(kFixedHeader, '\0');
  std::memcpy(&h[0], kMagic, 8);
  SetAt<uint32_t>(&h, 8, kCtrBinaryVersion);
  Put<uint32_t>(&h, static_cast<uint32_t>(schema.num_dense));
  Put<uint32_t>(&h, static_cast<uint32_t>(schema.features.size()));
  for (const CtrFeature& f : schema.features) {
    Put<int64_t>(&h, f.vocab_size);
    Put<int32_t>(&h, f.max_hotness);
    Put<uint32_t>(&h, static_cast<uint32_t>(f.name.size()));
    h += f.name;
  }
  Put<uint32_t>(&h, static_cast<uint32_t>(description.size()));
  h.append(description.data(), description.size());
  h.resize((h.size() + 7) / 8 * 8, '\0');
  SetAt<uint32_t>(&h, 12, static_cast<uint32_t>(h.size()));
  SetAt<uint64_t>(&h, 24, h.size());
  return h;
}

absl::Status NotWellFormed(const std::string& path, absl::string_view why) {
  return absl::DataLossError(absl::StrCat(path, ": not a well-formed ctrbin file: ", why));
}

// Maps the whole file at `path` read-only into *map, *size (set only on success): the errno's
// code when it cannot be opened, DATA_LOSS when it is too short to be a ctrbin file.
absl::Status MapFile(const std::string& path, void** map, size_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot open ", path));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus(err, absl::StrCat("cannot stat ", path));
  }
  const uint64_t bytes = static_cast<uint64_t>(st.st_size);
  if (bytes < kFixedHeader + 8) {
    ::close(fd);
    return NotWellFormed(path, absl::StrCat("only ", bytes, " bytes"));
  }
  void* mapped = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);
  if (mapped == MAP_FAILED) return ErrnoStatus(err, absl::StrCat("cannot mmap ", path));
  *map = mapped;
  *size = bytes;
  return absl::OkStatus();
}

// The fixed 64 bytes of a ctrbin header (see ctr_binary.h).
struct FixedHeader {
  uint32_t header_size = 0;
  uint64_t num_examples = 0;
  uint64_t records_offset = 0;
  uint64_t records_size = 0;
  uint64_t index_offset = 0;
};

// Reads and checks the fixed header of the `size`-byte file at p: magic, version (newer:
// FAILED_PRECONDITION), header size, header checksum, and sizes that add up to the file's.
absl::StatusOr<FixedHeader> ReadFixedHeader(const std::string& path, const unsigned char* p,
                                            uint64_t size) {
  if (std::memcmp(p, kMagic, 8) != 0) return NotWellFormed(path, "bad magic (expected SPCTRBIN)");
  const uint32_t version = Get<uint32_t>(p + 8);
  if (version > kCtrBinaryVersion) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": ctrbin format version ", version,
                                                      ", this reader reads up to ",
                                                      kCtrBinaryVersion));
  }
  if (version == 0) return NotWellFormed(path, "format version 0");
  FixedHeader h;
  h.header_size = Get<uint32_t>(p + 12);
  h.num_examples = Get<uint64_t>(p + 16);
  h.records_offset = Get<uint64_t>(p + 24);
  h.records_size = Get<uint64_t>(p + 32);
  h.index_offset = Get<uint64_t>(p + 40);
  if (h.header_size < kFixedHeader + 12 || h.header_size % 8 != 0 || h.header_size > size) {
    return NotWellFormed(path, absl::StrCat("header size ", h.header_size, " for a file of ",
                                            size, " bytes"));
  }
  std::string header(reinterpret_cast<const char*>(p), h.header_size);
  SetAt<uint64_t>(&header, kHeaderChecksumAt, 0);
  if (Checksum64(header.data(), header.size()) != Get<uint64_t>(p + kHeaderChecksumAt)) {
    return NotWellFormed(path, "header checksum mismatch");
  }
  const uint64_t n = h.num_examples;
  if (n >= (uint64_t{1} << 58) || h.records_offset != h.header_size ||
      h.records_size > size || h.index_offset != h.records_offset + h.records_size ||
      h.index_offset > size || (size - h.index_offset) != 8 * (n + 1)) {
    return NotWellFormed(
        path, absl::StrCat("sizes do not add up (", n, " examples, records ", h.records_offset,
                           "+", h.records_size, ", index at ", h.index_offset, ", file ", size,
                           " bytes): truncated?"));
  }
  return h;
}

// Reads the schema and description that follow the fixed header (DATA_LOSS when they run
// past the header's `header_size` bytes or the schema is not valid).
absl::Status ReadSchema(const std::string& path, const unsigned char* p, uint32_t header_size,
                        CtrSchema* schema, std::string* description) {
  size_t at = kFixedHeader;
  auto need = [&](size_t bytes) { return at + bytes <= header_size; };
  schema->num_dense = static_cast<int>(Get<uint32_t>(p + at));
  const uint32_t num_features = Get<uint32_t>(p + at + 4);
  at += 8;
  if (schema->num_dense < 0 || num_features > (1u << 20)) return NotWellFormed(path, "schema sizes");
  for (uint32_t f = 0; f < num_features; ++f) {
    if (!need(16)) return NotWellFormed(path, "schema runs past the header");
    CtrFeature feature;
    feature.vocab_size = Get<int64_t>(p + at);
    feature.max_hotness = Get<int32_t>(p + at + 8);
    const uint32_t name_len = Get<uint32_t>(p + at + 12);
    at += 16;
    if (!need(name_len)) return NotWellFormed(path, "schema runs past the header");
    feature.name.assign(reinterpret_cast<const char*>(p + at), name_len);
    at += name_len;
    schema->features.push_back(std::move(feature));
  }
  if (!need(4)) return NotWellFormed(path, "schema runs past the header");
  const uint32_t description_len = Get<uint32_t>(p + at);
  at += 4;
  if (!need(description_len)) return NotWellFormed(path, "description runs past the header");
  description->assign(reinterpret_cast<const char*>(p + at), description_len);
  if (absl::Status valid = ValidateSchema(*schema); !valid.ok()) {
    return NotWellFormed(path, valid.message());
  }
  return absl::OkStatus();
}

// Checks the index against its checksum in the header and that it spans the records.
absl::Status CheckIndex(const std::string& path, const unsigned char* p, const FixedHeader& h) {
  const unsigned char* index = p + h.index_offset;
  const uint64_t n = h.num_examples;
  ChunkedChecksum checksum;
  checksum.Add(index, 8 * (n + 1));
  if (checksum.Finish() != Get<uint64_t>(p + 48)) return NotWellFormed(path, "index checksum mismatch");
  if (Get<uint64_t>(index) != 0 || Get<uint64_t>(index + 8 * n) != h.records_size) {
    return NotWellFormed(path, "index does not span the records");
  }
  return absl::OkStatus();
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Writer

absl::StatusOr<std::unique_ptr<CtrBinaryWriter>> CtrBinaryWriter::Create(
    const std::string& path, const CtrSchema& schema, absl::string_view description) {
  RETURN_IF_ERROR(ValidateSchema(schema));
  if (description.size() > (1u << 20)) {
    return absl::InvalidArgumentError("ctrbin description longer than 1 MiB");
  }
  std::unique_ptr<CtrBinaryWriter> w(new CtrBinaryWriter());
  w->path_ = path;
  w->schema_ = schema;
  w->header_ = EncodeHeader(schema, description);
  for (std::string* tmp : {&w->tmp_path_, &w->index_tmp_path_}) {
    std::string templ = path + (tmp == &w->tmp_path_ ? ".tmp-XXXXXX" : ".index-XXXXXX");
    const int fd = mkstemp(&templ[0]);
    if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot create a file beside ", path));
    *tmp = templ;
    std::FILE* f = fdopen(fd, "w+b");
    if (f == nullptr) {
      const int err = errno;
      close(fd);
      return ErrnoStatus(err, absl::StrCat("cannot open ", templ));
    }
    (tmp == &w->tmp_path_ ? w->records_ : w->index_) = f;
  }
  if (std::fwrite(w->header_.data(), 1, w->header_.size(), w->records_) != w->header_.size()) {
    return w->WriteError(w->tmp_path_);
  }
  const uint64_t zero = 0;
  if (std::fwrite(&zero, 8, 1, w->index_) != 1) return w->WriteError(w->index_tmp_path_);
  return w;
}

CtrBinaryWriter::~CtrBinaryWriter() {
  if (records_ != nullptr) std::fclose(records_);
  if (index_ != nullptr) std::fclose(index_);
  if (!index_tmp_path_.empty()) ::unlink(index_tmp_path_.c_str());
  if (!finished_ && !tmp_path_.empty()) ::unlink(tmp_path_.c_str());
}

absl::Status CtrBinaryWriter::WriteError(const std::string& what) {
  return ErrnoStatus(errno, absl::StrCat("cannot write ", what));
}

absl::Status CtrBinaryWriter::Append(const CtrBatch& batch) {
  if (finished_) return absl::FailedPreconditionError("ctrbin writer: Append after Finish");
  RETURN_IF_ERROR(ValidateBatch(schema_, batch));
  const int num_dense = schema_.num_dense;
  for (int j = 0; j < batch.size; ++j) {
    record_.assign(4, '\0');
    Put<float>(&record_, batch.labels[j]);
    if (num_dense > 0) {  // no dense features: batch.dense is empty, with no element
      record_.append(
          reinterpret_cast<const char*>(&batch.dense[static_cast<size_t>(j) * num_dense]),
          sizeof(float) * num_dense);
    }
    for (const CtrFeatureIds& f : batch.features) {
      Put<uint32_t>(&record_, static_cast<uint32_t>(f.offsets[j + 1] - f.offsets[j]));
    }
    for (const CtrFeatureIds& f : batch.features) {
      record_.append(reinterpret_cast<const char*>(f.ids.data() + f.offsets[j]),
                     sizeof(int64_t) * (f.offsets[j + 1] - f.offsets[j]));
    }
    SetAt<uint32_t>(&record_, 0,
                    static_cast<uint32_t>(Checksum64(record_.data() + 4, record_.size() - 4)));
    if (std::fwrite(record_.data(), 1, record_.size(), records_) != record_.size()) {
      return WriteError(tmp_path_);
    }
    records_size_ += record_.size();
    if (std::fwrite(&records_size_, 8, 1, index_) != 1) return WriteError(index_tmp_path_);
    ++num_examples_;
  }
  return absl::OkStatus();
}

absl::Status CtrBinaryWriter::Finish() {
  if (finished_) return absl::FailedPreconditionError("ctrbin writer: Finish called twice");
  // Append the index, checksumming it on the way.
  if (std::fflush(index_) != 0 || std::fseek(index_, 0, SEEK_SET) != 0) {
    return WriteError(index_tmp_path_);
  }
  ChunkedChecksum checksum;
  std::vector<unsigned char> buffer(kChunk);
  uint64_t copied = 0;
  for (;;) {
    const size_t n = std::fread(buffer.data(), 1, buffer.size(), index_);
    if (n == 0) break;
    checksum.Add(buffer.data(), n);
    if (std::fwrite(buffer.data(), 1, n, records_) != n) return WriteError(tmp_path_);
    copied += n;
  }
  if (std::ferror(index_) || copied != 8 * static_cast<uint64_t>(num_examples_ + 1)) {
    return absl::DataLossError(absl::StrCat("cannot read back ", index_tmp_path_));
  }
  SetAt<uint64_t>(&header_, 16, static_cast<uint64_t>(num_examples_));
  SetAt<uint64_t>(&header_, 32, records_size_);
  SetAt<uint64_t>(&header_, 40, header_.size() + records_size_);
  SetAt<uint64_t>(&header_, 48, checksum.Finish());
  SetAt<uint64_t>(&header_, kHeaderChecksumAt, 0);
  SetAt<uint64_t>(&header_, kHeaderChecksumAt, Checksum64(header_.data(), header_.size()));
  if (std::fflush(records_) != 0 || std::fseek(records_, 0, SEEK_SET) != 0 ||
      std::fwrite(header_.data(), 1, header_.size(), records_) != header_.size() ||
      std::fflush(records_) != 0 || ::fsync(fileno(records_)) != 0) {
    return WriteError(tmp_path_);
  }
  const int closed = std::fclose(records_);
  records_ = nullptr;
  if (closed != 0) return WriteError(tmp_path_);
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot rename ", tmp_path_, " to ", path_));
  }
  finished_ = true;
  return absl::OkStatus();
}

absl::Status WriteCtrBinary(const CtrSource& source, int64_t begin, int64_t end,
                            const std::string& path, absl::string_view description) {
  if (begin < 0 || end < begin || end > source.num_examples()) {
    return absl::InvalidArgumentError(absl::StrCat("example range [", begin, ", ", end,
                                                   ") outside [0, ", source.num_examples(),
                                                   ")"));
  }
  ASSIGN_OR_RETURN(auto writer, CtrBinaryWriter::Create(path, source.schema(), description));
  CtrBatch batch;
  constexpr int64_t kBatch = 4096;
  for (int64_t at = begin; at < end; at += kBatch) {
    RETURN_IF_ERROR(ReadRange(source, at, std::min(end, at + kBatch), &batch));
    RETURN_IF_ERROR(writer->Append(batch));
  }
  return writer->Finish();
}

// ---------------------------------------------------------------------------------------
// Reader

CtrBinarySource::~CtrBinarySource() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

absl::Status CtrBinarySource::Corrupt(int64_t example, absl::string_view why) const {
  return absl::DataLossError(
      absl::StrCat(path_, ": corrupt ctrbin file: example ", example, ": ", why));
}

absl::StatusOr<std::unique_ptr<CtrBinarySource>> CtrBinarySource::Open(const std::string& path) {
  std::unique_ptr<CtrBinarySource> s(new CtrBinarySource());
  s->path_ = path;
  RETURN_IF_ERROR(MapFile(path, &s->map_, &s->map_size_));
  const unsigned char* p = static_cast<const unsigned char*>(s->map_);
  ASSIGN_OR_RETURN(const FixedHeader h, ReadFixedHeader(path, p, s->map_size_));
  RETURN_IF_ERROR(ReadSchema(path, p, h.header_size, &s->schema_, &s->description_));
  // Every record holds at least the schema's fixed part (checksum, label, dense values,
  // counts), so a header whose schema is larger than its records is corrupt: Read sizes its
  // batch by the schema before it reads a record.
  const uint64_t fixed = 8 + 4 * static_cast<uint64_t>(s->schema_.num_dense) +
                         4 * static_cast<uint64_t>(s->schema_.features.size());
  if (h.num_examples > 0 && fixed > h.records_size / h.num_examples) {
    return NotWellFormed(path, absl::StrCat("the schema's ", fixed, "-byte record prefix times ",
                                            h.num_examples, " examples exceeds the records' ",
                                            h.records_size, " bytes"));
  }
  s->num_examples_ = static_cast<int64_t>(h.num_examples);
  s->records_ = p + h.records_offset;
  s->records_size_ = h.records_size;
  s->index_ = p + h.index_offset;
  RETURN_IF_ERROR(CheckIndex(path, p, h));
  return s;
}

absl::Status CtrBinarySource::Read(absl::Span<const int64_t> example_indices,
                                   CtrBatch* out) const {
  RETURN_IF_ERROR(CheckExampleIndices(example_indices, num_examples_));
  const int n = static_cast<int>(example_indices.size());
  const int num_dense = schema_.num_dense;
  const size_t num_features = schema_.features.size();
  const size_t fixed = 8 + 4 * static_cast<size_t>(num_dense) + 4 * num_features;
  out->Reset(schema_, n);
  out->labels.resize(n);
  out->dense.resize(static_cast<size_t>(n) * num_dense);
  for (int j = 0; j < n; ++j) {
    const int64_t i = example_indices[j];
    const uint64_t begin = Get<uint64_t>(index_ + 8 * i);
    const uint64_t end = Get<uint64_t>(index_ + 8 * (i + 1));
    if (begin > end || end > records_size_ || end - begin < fixed) {
      return Corrupt(i, absl::StrCat("record bounds [", begin, ", ", end, ")"));
    }
    const unsigned char* r = records_ + begin;
    const size_t length = end - begin;
    if (static_cast<uint32_t>(Checksum64(r + 4, length - 4)) != Get<uint32_t>(r)) {
      return Corrupt(i, "record checksum mismatch");
    }
    const float label = Get<float>(r + 4);
    if (label != 0.0f && label != 1.0f) return Corrupt(i, "label is not 0 or 1");
    out->labels[j] = label;
    if (num_dense > 0) {  // as in Append
      std::memcpy(&out->dense[static_cast<size_t>(j) * num_dense], r + 8, 4 * num_dense);
    }
    const unsigned char* counts = r + 8 + 4 * num_dense;
    const unsigned char* ids = r + fixed;
    size_t total = 0;
    for (size_t f = 0; f < num_features; ++f) {
      const uint32_t count = Get<uint32_t>(counts + 4 * f);
      if (count > static_cast<uint32_t>(schema_.features[f].max_hotness)) {
        return Corrupt(i, absl::StrCat("feature ", schema_.features[f].name, " has ", count,
                                       " ids, max_hotness ", schema_.features[f].max_hotness));
      }
      total += count;
    }
    if (fixed + 8 * total != length) return Corrupt(i, "id counts do not match the record size");
    for (size_t f = 0; f < num_features; ++f) {
      const uint32_t count = Get<uint32_t>(counts + 4 * f);
      std::vector<int64_t>& dst = out->features[f].ids;
      const size_t old = dst.size();
      dst.resize(old + count);
      std::memcpy(dst.data() + old, ids, 8 * static_cast<size_t>(count));
      ids += 8 * static_cast<size_t>(count);
      const int64_t vocab = schema_.features[f].vocab_size;
      if (vocab > 0) {
        for (size_t k = old; k < dst.size(); ++k) {
          if (dst[k] < 0 || dst[k] >= vocab) {
            return Corrupt(i, absl::StrCat("feature ", schema_.features[f].name, ": id ",
                                           dst[k], " outside [0, ", vocab, ")"));
          }
        }
      }
      out->features[f].offsets.push_back(static_cast<int64_t>(dst.size()));
    }
  }
  out->size = n;
  return absl::OkStatus();
}

}  // namespace shardps
