// The safetensors file format (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON header (padded with spaces to a multiple of
// 8), then the tensors' raw little-endian bytes. The header maps each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets into the data section) and may
// hold "__metadata__", a map of strings. Readable by the `safetensors` Python package,
// numpy, PyTorch and JAX without shardps.
//
// The writer streams tensors from pieces (a shard's copy-on-write parameter blocks), never
// gathering a tensor into one buffer, computes each tensor's and the whole file's CRC-32C
// on the way, and publishes the file atomically: it writes PATH.tmp, fsyncs it, renames it
// to PATH and fsyncs the directory, so PATH is either absent or whole.
//
// The reader trusts nothing: the header is validated (JSON, dtypes, shapes against byte
// counts, offsets in order, within the file, without overlap or gap) and every malformed or
// short file is DATA_LOSS naming the file (and tensor); tensor bytes are checked against
// CRC-32Cs the caller expects (from the checkpoint's manifest).
//
// Thread-safety: WriteSafetensors is a function; a SafetensorsFile may be read from several
// threads at once (pread).
#ifndef SHARDPS_CHECKPOINT_SAFETENSORS_H_
#define SHARDPS_CHECKPOINT_SAFETENSORS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/ps.pb.h"

namespace shardps {

// Bytes per element of a safetensors dtype ("F32" 4, "F64" 8, "I64" 8, "U64" 8, "I32" 4,
// "U8" 1, ...); 0 for a dtype this library does not know.
int DtypeSize(absl::string_view dtype);

struct TensorToWrite {
  std::string name;
  std::string dtype = "F32";
  std::vector<int64_t> shape;
  // The tensor's bytes: the concatenation of the pieces (prod(shape) * DtypeSize bytes).
  std::vector<absl::string_view> pieces;
  // Keep the pieces' memory alive and unchanged; dropped as soon as this tensor's bytes are
  // written, so that a snapshot lets go of its blocks tensor by tensor.
  std::vector<std::shared_ptr<const void>> holds;
};

struct SafetensorsWriteOptions {
  std::map<std::string, std::string> metadata;  // "__metadata__"
  bool fsync = true;                            // fsync the file and its directory
};

struct SafetensorsWriteStats {
  int64_t bytes = 0;
  double seconds = 0;  // from open to the directory's fsync
};

// Writes `tensors`, in order, to `path` (see above). On failure (disk full, directory not
// writable: the error names the path and the errno text) nothing is left at `path` and the
// temporary file is removed. Returns what the checkpoint's manifest records: file name
// (basename of path), size, CRC-32C of the file and of its header, and each tensor's dtype,
// shape, data offsets and CRC-32C.
absl::StatusOr<DataFileInfo> WriteSafetensors(const std::string& path,
                                              std::vector<TensorToWrite> tensors,
                                              const SafetensorsWriteOptions& options = {},
                                              SafetensorsWriteStats* stats = nullptr);

// Where SafetensorsFile::ReadTensorInto puts the next `size` bytes of a tensor: at `data`,
// or, when `data` is null, nowhere (the bytes are read and checksummed, then dropped).
struct TensorReadTarget {
  char* data = nullptr;
  int64_t size = 0;
};

class SafetensorsFile {
 public:
  // Opens and validates the header (DATA_LOSS naming the file when malformed, NOT_FOUND when
  // missing).
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  int64_t file_bytes() const { return file_bytes_; }
  // Where the data section starts: 8 + the header's length.
  int64_t data_offset() const { return data_offset_; }
  // Tensors in data order, with data_begin / data_end; crc32c is left 0 (not in the file).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* Find(absl::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The CRC-32C of the 8-byte length and the header, as the writer computed it.
  uint32_t header_crc32c() const { return header_crc32c_; }

  // Reads bytes [begin, end) of `tensor`'s data into `out` (no checksum: the caller checks).
  absl::Status ReadRange(const TensorInfo& tensor, int64_t begin, int64_t end, char* out) const;
  // Reads all of `tensor` in chunks of whole elements, calling fn(offset in the tensor,
  // bytes) for each in order, and then checks the bytes' CRC-32C against `expected_crc32c`:
  // DATA_LOSS naming the file and tensor on a mismatch (fn has then seen the bad bytes; the
  // caller discards what it built). An error from fn stops the read and is returned.
  // `granule` > 0: every chunk is a multiple of that many bytes instead (whole rows; the
  // tensor's size must be a multiple of it).
  absl::Status StreamTensor(const TensorInfo& tensor, uint32_t expected_crc32c,
                            absl::FunctionRef<absl::Status(int64_t, absl::string_view)> fn,
                            int64_t granule = 0) const;
  // Reads all of `tensor` straight into `targets`, in order (their sizes must add up to the
  // tensor's bytes: INVALID_ARGUMENT otherwise), so that the kernel's copy is the only one
  // and its page faults bring in fresh destination memory; bytes of null targets go
  // through a scratch buffer. Each chunk is checksummed in the destination right after it
  // is read, and the tensor's CRC-32C is checked against `expected_crc32c` at the end:
  // DATA_LOSS naming the file and tensor on a mismatch (the targets then hold the bad
  // bytes; the caller discards them). A file shorter than the header says: DATA_LOSS.
  absl::Status ReadTensorInto(const TensorInfo& tensor, uint32_t expected_crc32c,
                              absl::Span<const TensorReadTarget> targets) const;
  // Reads the whole file and checks its size and CRC-32C (DATA_LOSS naming the file).
  absl::Status Verify(int64_t expected_bytes, uint32_t expected_crc32c) const;

 private:
  SafetensorsFile() = default;
  // INVALID_ARGUMENT unless `tensor`'s data lies within this file's data section.
  absl::Status CheckBounds(const TensorInfo& tensor) const;
  // DATA_LOSS: `tensor` read as `crc`, not `expected`.
  absl::Status CrcMismatch(const TensorInfo& tensor, uint32_t crc, uint32_t expected) const;
  std::string path_;
  int fd_ = -1;
  int64_t file_bytes_ = 0;
  int64_t data_offset_ = 0;  // where the data section starts in the file
  uint32_t header_crc32c_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace shardps

#endif  // SHARDPS_CHECKPOINT_SAFETENSORS_H_
