// The ctrbin file: click-log examples in a binary file with an index, so that any worker
// reads any batch at random (a gzipped TSV cannot be). Converted once from a Criteo TSV or
// written by the generator; read by mmap.
//
// Format, version 1 (all integers little-endian; floats IEEE-754 binary32):
//   header, at 0, header_size bytes (a multiple of 8):
//      0 char[8] magic "SPCTRBIN"
//      8 u32     format version (1)
//     12 u32     header_size
//     16 u64     num_examples (N)
//     24 u64     records_offset (= header_size)
//     32 u64     records_size (bytes)
//     40 u64     index_offset (= records_offset + records_size)
//     48 u64     index checksum (Checksum64 chained over 1 MiB chunks of the index)
//     56 u64     header checksum (Checksum64 of the header with this field zero)
//     64 u32 num_dense, u32 num_features, then per feature:
//        i64 vocab_size, i32 max_hotness, u32 name length, name bytes;
//        then u32 description length, description bytes (free text: the synthetic_ctr
//        spec that generated the file, or the TSV it came from); zero padding to 8.
//   records, N of them back to back, example i at records_offset + index[i]:
//        u32 checksum (low 32 bits of Checksum64 of the rest of the record)
//        f32 label, f32 dense[num_dense], u32 count[num_features],
//        i64 ids[sum of counts] (feature by feature)
//   index, at index_offset: u64 index[N + 1], index[0] = 0, index[N] = records_size.
//   The file ends there: its size is index_offset + 8 (N + 1).
// Open checks the magic, version, sizes, header checksum and index checksum (one pass over
// the index, 8 bytes per example); Read checks each record's bounds, checksum, counts
// (<= max_hotness) and ids (< vocab_size). A truncated or corrupt file gives DATA_LOSS
// naming the file (and the example); a newer format version FAILED_PRECONDITION.
//
// Writing streams: records go to a temporary file beside the target, the index to a second
// temporary file, so memory stays bounded; Finish appends the index, writes the header,
// fsyncs and renames the file into place (atomic: readers see the old file or the whole new
// one).
//
// Thread-safety: CtrBinarySource is immutable after Open (Read is thread-safe); a
// CtrBinaryWriter is used by one thread.
#ifndef SHARDPS_DATA_CTR_CTR_BINARY_H_
#define SHARDPS_DATA_CTR_CTR_BINARY_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "data/ctr/ctr_batch.h"

namespace shardps {

inline constexpr uint32_t kCtrBinaryVersion = 1;

class CtrBinaryWriter {
 public:
  // INVALID_ARGUMENT for a bad schema; the errno's code when the temporary files cannot be
  // made.
  static absl::StatusOr<std::unique_ptr<CtrBinaryWriter>> Create(const std::string& path,
                                                                 const CtrSchema& schema,
                                                                 absl::string_view description);
  // Removes the temporary files unless Finish succeeded.
  ~CtrBinaryWriter();

  // Appends the batch's examples (INVALID_ARGUMENT, nothing appended, when it does not fit
  // the schema: ValidateBatch).
  absl::Status Append(const CtrBatch& batch);
  // Writes the index and header and renames the file into place. Call once.
  absl::Status Finish();

  int64_t num_examples() const { return num_examples_; }

 private:
  CtrBinaryWriter() = default;
  absl::Status WriteError(const std::string& what);

  std::string path_;
  std::string tmp_path_;
  std::string index_tmp_path_;
  CtrSchema schema_;
  std::string header_;  // with zero counts until Finish
  std::FILE* records_ = nullptr;
  std::FILE* index_ = nullptr;
  uint64_t records_size_ = 0;
  int64_t num_examples_ = 0;
  std::string record_;  // scratch
  bool finished_ = false;
};

class CtrBinarySource : public CtrSource {
 public:
  // NOT_FOUND / PERMISSION_DENIED when the file cannot be opened; DATA_LOSS naming the file
  // when it is not a well-formed ctrbin file; FAILED_PRECONDITION for a newer version.
  static absl::StatusOr<std::unique_ptr<CtrBinarySource>> Open(const std::string& path);
  ~CtrBinarySource() override;

  const CtrSchema& schema() const override { return schema_; }
  int64_t num_examples() const override { return num_examples_; }
  absl::Status Read(absl::Span<const int64_t> example_indices, CtrBatch* out) const override;

  const std::string& path() const { return path_; }
  const std::string& description() const { return description_; }

 private:
  CtrBinarySource() = default;
  absl::Status Corrupt(int64_t example, absl::string_view why) const;

  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  CtrSchema schema_;
  std::string description_;
  int64_t num_examples_ = 0;
  const unsigned char* records_ = nullptr;
  uint64_t records_size_ = 0;
  const unsigned char* index_ = nullptr;
};

// Writes examples [begin, end) of `source` to a ctrbin file at `path`.
absl::Status WriteCtrBinary(const CtrSource& source, int64_t begin, int64_t end,
                            const std::string& path, absl::string_view description);

}  // namespace shardps

#endif  // SHARDPS_DATA_CTR_CTR_BINARY_H_
