#include "checkpoint/checkpoint_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/crc32c.h"
#include "checkpoint/file_io.h"
#include "checkpoint/safetensors.h"
#include "common/status_macros.h"

namespace shardps {
namespace {

constexpr char kManifestName[] = "manifest.json";

int64_t Rows(const ManifestVariable& v) { return v.shape.empty() ? 1 : v.shape[0]; }

int64_t RowWidth(const ManifestVariable& v) {
  int64_t width = 1;
  for (size_t i = 1; i < v.shape.size(); ++i) width *= v.shape[i];
  return width;
}

class Reader : public CheckpointReader {
 public:
  Reader(Manifest manifest, std::string manifest_path)
      : manifest_(std::move(manifest)),
        manifest_path_(std::move(manifest_path)),
        dir_(DirName(manifest_path_)) {
    for (const DataFileInfo& f : manifest_.files) {
      for (const TensorInfo& t : f.tensors()) tensors_[{f.file(), t.name()}] = &t;
    }
  }

  using CheckpointReader::ReadRows;

  const Manifest& manifest() const override { return manifest_; }
  const std::string& manifest_path() const override { return manifest_path_; }

  absl::Status ReadRows(const std::string& variable, const std::string& slot, int64_t row_begin,
                        int64_t row_end,
                        absl::FunctionRef<absl::Status(int64_t, absl::string_view)> sink,
                        int64_t* bytes_read) override {
    ASSIGN_OR_RETURN(const ManifestVariable* v, FindVariable(variable, slot));
    RETURN_IF_ERROR(CheckRange(*v, row_begin, row_end));
    const int64_t row_bytes = RowWidth(*v) * DtypeSize(v->dtype);
    for (const ManifestShard& shard : v->shards) {
      const int64_t begin = std::max(row_begin, shard.row_offset);
      const int64_t end = std::min(row_end, shard.row_offset + shard.rows);
      if (begin >= end) continue;
      const std::string& name = shard.tensors.at(slot);  // ParseManifest checked it is there
      const TensorInfo& tensor = *tensors_.at({shard.file, name});
      ASSIGN_OR_RETURN(std::shared_ptr<const SafetensorsFile> file, File(shard.file));
      // The source tensor is read whole, so that its CRC-32C is checked; only the rows in
      // [begin, end) go to the sink, as views of the chunks read.
      RETURN_IF_ERROR(file->StreamTensor(
          tensor, tensor.crc32c(),
          [&](int64_t offset, absl::string_view bytes) -> absl::Status {
            if (row_bytes == 0) return absl::OkStatus();
            const int64_t first = shard.row_offset + offset / row_bytes;
            const int64_t last = first + static_cast<int64_t>(bytes.size()) / row_bytes;
            const int64_t from = std::max(first, begin), to = std::min(last, end);
            if (from >= to) return absl::OkStatus();
            return sink(from, bytes.substr(static_cast<size_t>((from - first) * row_bytes),
                                           static_cast<size_t>((to - from) * row_bytes)));
          },
          row_bytes));
      if (bytes_read != nullptr) *bytes_read += tensor.data_end() - tensor.data_begin();
    }
    return absl::OkStatus();
  }

  absl::Status ReadRowsInto(const std::string& variable, const std::string& slot,
                            int64_t row_begin, int64_t row_end, RowSpans where,
                            int64_t* bytes_read) override {
    ASSIGN_OR_RETURN(const ManifestVariable* v, FindVariable(variable, slot));
    RETURN_IF_ERROR(CheckRange(*v, row_begin, row_end));
    const int64_t row_bytes = RowWidth(*v) * DtypeSize(v->dtype);
    std::vector<absl::Span<char>> spans;
    std::vector<TensorReadTarget> targets;
    for (const ManifestShard& shard : v->shards) {
      const int64_t begin = std::max(row_begin, shard.row_offset);
      const int64_t end = std::min(row_end, shard.row_offset + shard.rows);
      if (begin >= end) continue;
      const TensorInfo& tensor = *tensors_.at({shard.file, shard.tensors.at(slot)});
      ASSIGN_OR_RETURN(std::shared_ptr<const SafetensorsFile> file, File(shard.file));
      // The whole source tensor, in order: its rows before the range and after it to the
      // scratch buffer (null), the range's rows where the caller wants them.
      spans.clear();
      where(begin, end, &spans);
      targets.clear();
      targets.push_back({nullptr, (begin - shard.row_offset) * row_bytes});
      int64_t given = 0;
      for (absl::Span<char> span : spans) {
        targets.push_back({span.data(), static_cast<int64_t>(span.size())});
        given += static_cast<int64_t>(span.size());
      }
      if (given != (end - begin) * row_bytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            manifest_path_, ": rows [", begin, ", ", end, ") of variable '", variable, "' are ",
            (end - begin) * row_bytes, " bytes, the destination spans hold ", given));
      }
      targets.push_back({nullptr, (shard.row_offset + shard.rows - end) * row_bytes});
      RETURN_IF_ERROR(file->ReadTensorInto(tensor, tensor.crc32c(), targets));
      if (bytes_read != nullptr) *bytes_read += tensor.data_end() - tensor.data_begin();
    }
    return absl::OkStatus();
  }

  absl::Status VerifyFiles() override {
    for (const DataFileInfo& f : manifest_.files) {
      ASSIGN_OR_RETURN(std::shared_ptr<const SafetensorsFile> file, File(f.file()));
      RETURN_IF_ERROR(file->Verify(f.bytes(), f.crc32c()));
    }
    return absl::OkStatus();
  }

  // The data file `name`, opened once and checked against the manifest: its size, its
  // header's CRC-32C, and every tensor the manifest lists in it.
  absl::StatusOr<std::shared_ptr<const SafetensorsFile>> File(const std::string& name) {
    absl::MutexLock lock(&mu_);
    if (auto it = files_.find(name); it != files_.end()) return it->second;
    const DataFileInfo* info = manifest_.FindFile(name);
    const std::string path = DataPath(name);
    if (info == nullptr) {
      return absl::InternalError(absl::StrCat(path, ": not a file of ", manifest_path_));
    }
    ASSIGN_OR_RETURN(std::shared_ptr<const SafetensorsFile> file, SafetensorsFile::Open(path));
    if (file->file_bytes() != info->bytes()) {
      return absl::DataLossError(absl::StrCat(path, ": ", file->file_bytes(),
                                              " bytes, the manifest says ", info->bytes()));
    }
    if (file->header_crc32c() != info->header_crc32c()) {
      return absl::DataLossError(absl::StrFormat(
          "%s: header CRC-32C mismatch: the header reads as 0x%08x, the manifest says 0x%08x",
          path, file->header_crc32c(), info->header_crc32c()));
    }
    absl::flat_hash_map<absl::string_view, const TensorInfo*> in_file;
    for (const TensorInfo& t : file->tensors()) in_file[t.name()] = &t;
    for (const TensorInfo& want : info->tensors()) {
      const auto it = in_file.find(want.name());
      if (it == in_file.end()) {
        return absl::DataLossError(
            absl::StrCat(path, ": tensor '", want.name(), "' of the manifest is not in the file"));
      }
      const TensorInfo& got = *it->second;
      if (got.dtype() != want.dtype() || got.data_begin() != want.data_begin() ||
          got.data_end() != want.data_end() ||
          !std::equal(got.shape().begin(), got.shape().end(), want.shape().begin(),
                      want.shape().end())) {
        return absl::DataLossError(absl::StrCat(
            path, ": tensor '", want.name(), "' is ", got.dtype(), " [",
            absl::StrJoin(got.shape(), ", "), "] at [", got.data_begin(), ", ", got.data_end(),
            "), the manifest says ", want.dtype(), " [", absl::StrJoin(want.shape(), ", "),
            "] at [", want.data_begin(), ", ", want.data_end(), ")"));
      }
    }
    files_.emplace(name, file);
    return file;
  }

  std::string DataPath(const std::string& name) const { return dir_ + "/" + name; }

  const TensorInfo& Tensor(const std::string& file, const std::string& name) const {
    return *tensors_.at({file, name});
  }

  absl::Status CheckRange(const ManifestVariable& v, int64_t row_begin, int64_t row_end) const {
    const int64_t rows = Rows(v);
    if (row_begin < 0 || row_begin > row_end || row_end > rows) {
      return absl::InvalidArgumentError(
          absl::StrCat(manifest_path_, ": rows [", row_begin, ", ", row_end, ") of variable '",
                       v.name, "', which has ", rows));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<const ManifestVariable*> FindVariable(const std::string& variable,
                                                       const std::string& slot) const {
    const ManifestVariable* v = manifest_.FindVariable(variable);
    if (v == nullptr) {
      return absl::NotFoundError(
          absl::StrCat(manifest_path_, ": the checkpoint has no variable '", variable, "'"));
    }
    if (!slot.empty() && std::find(v->slots.begin(), v->slots.end(), slot) == v->slots.end()) {
      return absl::NotFoundError(absl::StrCat(manifest_path_, ": variable '", variable,
                                              "' has no slot '", slot, "' (it has [",
                                              absl::StrJoin(v->slots, ", "), "])"));
    }
    return v;
  }

 private:
  const Manifest manifest_;
  const std::string manifest_path_;
  const std::string dir_;
  // (file, tensor name) -> the manifest's entry.
  absl::flat_hash_map<std::pair<std::string, std::string>, const TensorInfo*> tensors_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const SafetensorsFile>> files_
      ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<Reader>> OpenReader(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoError(errno, "open checkpoint", path);
  std::string manifest_path = path;
  if (S_ISDIR(st.st_mode)) {
    manifest_path = path + "/" + kManifestName;
    if (::access(manifest_path.c_str(), F_OK) != 0) {
      // Not a checkpoint: a checkpoint directory, whose newest committed checkpoint is read.
      ASSIGN_OR_RETURN(CheckpointDir dir, CheckpointDir::OpenReadOnly(path));
      std::vector<std::string> skipped;
      ASSIGN_OR_RETURN(std::vector<CommittedCheckpoint> committed, dir.List(&skipped));
      if (committed.empty()) {
        return absl::NotFoundError(absl::StrCat(
            path, " holds neither a manifest.json nor a committed checkpoint",
            skipped.empty() ? "" : absl::StrCat(" (skipped: ", absl::StrJoin(skipped, "; "), ")")));
      }
      return std::make_unique<Reader>(std::move(committed.front().manifest),
                                      committed.front().manifest_path);
    }
  }
  ASSIGN_OR_RETURN(std::string text, ReadWholeFile(manifest_path));
  ASSIGN_OR_RETURN(Manifest manifest, ParseManifest(text, manifest_path));
  return std::make_unique<Reader>(std::move(manifest), manifest_path);
}

// A data file mapped read-only; the export's pieces point into it.
class Mapping {
 public:
  static absl::StatusOr<std::shared_ptr<Mapping>> Create(const std::string& path, int64_t bytes) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoError(errno, "open", path);
    struct stat st;
    if (::fstat(fd, &st) != 0 || st.st_size != bytes) {
      ::close(fd);
      return absl::DataLossError(absl::StrCat(path, ": not the ", bytes, " bytes the manifest says"));
    }
    void* data = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ, MAP_SHARED, fd, 0);
    const int err = errno;
    ::close(fd);
    if (data == MAP_FAILED) return ErrnoError(err, "mmap", path);
    ::madvise(data, static_cast<size_t>(bytes), MADV_SEQUENTIAL);
    return std::shared_ptr<Mapping>(new Mapping(static_cast<const char*>(data), bytes));
  }
  ~Mapping() { ::munmap(const_cast<char*>(data_), static_cast<size_t>(bytes_)); }
  const char* data() const { return data_; }

 private:
  Mapping(const char* data, int64_t bytes) : data_(data), bytes_(bytes) {}
  const char* const data_;
  const int64_t bytes_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<Reader> reader, OpenReader(path));
  return std::unique_ptr<CheckpointReader>(std::move(reader));
}

absl::Status CheckpointReader::ReadRows(const std::string& variable, const std::string& slot,
                                        int64_t row_begin, int64_t row_end, absl::Span<float> out,
                                        int64_t* bytes_read) {
  const ManifestVariable* v = manifest().FindVariable(variable);
  if (v != nullptr) {
    if (v->dtype != "F32") {
      return absl::InvalidArgumentError(absl::StrCat(
          manifest_path(), ": variable '", variable, "' is ", v->dtype, ", not F32 floats"));
    }
    const int64_t width = RowWidth(*v);
    // (A bad range is left to the read below, which names it.)
    if (row_begin >= 0 && row_begin <= row_end && row_end <= Rows(*v) &&
        static_cast<int64_t>(out.size()) != (row_end - row_begin) * width) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rows [", row_begin, ", ", row_end, ") of variable '", variable, "' are ",
          (row_end - row_begin) * width, " floats, the output holds ", out.size()));
    }
  }
  char* const base = reinterpret_cast<char*>(out.data());
  const int64_t row_bytes = v == nullptr ? 0 : RowWidth(*v) * static_cast<int64_t>(sizeof(float));
  return ReadRowsInto(
      variable, slot, row_begin, row_end,
      [&](int64_t first, int64_t last, std::vector<absl::Span<char>>* spans) {
        spans->emplace_back(base + (first - row_begin) * row_bytes,
                            static_cast<size_t>((last - first) * row_bytes));
      },
      bytes_read);
}

absl::Status ExportCheckpoint(const std::string& path, const std::string& out_path,
                              bool with_slots) {
  ASSIGN_OR_RETURN(std::unique_ptr<Reader> reader, OpenReader(path));
  const Manifest& m = reader->manifest();
  // Every data file is mapped once, after its header has been checked against the manifest.
  absl::flat_hash_map<std::string, std::pair<std::shared_ptr<Mapping>, int64_t>> maps;
  for (const DataFileInfo& f : m.files) {
    ASSIGN_OR_RETURN(std::shared_ptr<const SafetensorsFile> file, reader->File(f.file()));
    ASSIGN_OR_RETURN(std::shared_ptr<Mapping> mapping,
                     Mapping::Create(reader->DataPath(f.file()), f.bytes()));
    maps[f.file()] = {std::move(mapping), file->data_offset()};
  }
  // Each exported tensor is its shards' tensors in row order, straight from the mappings.
  // The CRC-32C the writer computes over them must equal the manifest's CRCs combined: a
  // mismatch means a source tensor is corrupt, found below by reading each.
  struct Source {
    std::string file;
    const TensorInfo* tensor;
  };
  std::vector<TensorToWrite> tensors;
  std::vector<std::vector<Source>> sources;
  std::vector<uint32_t> expected;
  for (const ManifestVariable& v : m.variables) {
    std::vector<std::string> slots = {""};
    if (with_slots) slots.insert(slots.end(), v.slots.begin(), v.slots.end());
    for (const std::string& slot : slots) {
      TensorToWrite t;
      t.name = slot.empty() ? v.name : absl::StrCat(v.name, "/", slot);
      t.dtype = v.dtype;
      t.shape = v.shape;
      uint32_t crc = 0;
      sources.emplace_back();
      for (const ManifestShard& shard : v.shards) {
        const TensorInfo& src = reader->Tensor(shard.file, shard.tensors.at(slot));
        const auto& [mapping, data_offset] = maps.at(shard.file);
        const int64_t size = src.data_end() - src.data_begin();
        t.pieces.emplace_back(mapping->data() + data_offset + src.data_begin(),
                              static_cast<size_t>(size));
        t.holds.push_back(mapping);
        crc = Crc32cCombine(crc, src.crc32c(), static_cast<uint64_t>(size));
        sources.back().push_back({shard.file, &src});
      }
      expected.push_back(crc);
      tensors.push_back(std::move(t));
    }
  }
  maps.clear();  // the pieces' holds keep the mappings
  SafetensorsWriteOptions options;
  options.metadata = {{"format", "shardps-export"},
                      {"job_id", m.job_id},
                      {"checkpoint_id", absl::StrCat(m.checkpoint_id)},
                      {"generation", absl::StrCat(m.generation)},
                      {"steps_done", absl::StrCat(m.progress.steps_done)},
                      {"with_slots", with_slots ? "true" : "false"}};
  // Written under a staging name and renamed to out_path only once verified.
  const std::string staging = out_path + ".unverified";
  ASSIGN_OR_RETURN(DataFileInfo written, WriteSafetensors(staging, std::move(tensors), options));
  for (int i = 0; i < written.tensors_size(); ++i) {
    if (written.tensors(i).crc32c() == expected[i]) continue;
    ::unlink(staging.c_str());
    for (const Source& s : sources[i]) {
      ASSIGN_OR_RETURN(std::shared_ptr<const SafetensorsFile> file, reader->File(s.file));
      RETURN_IF_ERROR(file->StreamTensor(*s.tensor, s.tensor->crc32c(),
                                         [](int64_t, absl::string_view) { return absl::OkStatus(); }));
    }
    return absl::DataLossError(absl::StrCat("export of ", reader->manifest_path(), ": tensor '",
                                            written.tensors(i).name(),
                                            "' changed while it was read"));
  }
  if (::rename(staging.c_str(), out_path.c_str()) != 0) {
    const int err = errno;
    ::unlink(staging.c_str());
    return ErrnoError(err, absl::StrCat("rename ", staging, " to"), out_path);
  }
  return FsyncDirectory(DirName(out_path));
}

}  // namespace shardps
