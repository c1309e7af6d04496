// Reads a committed checkpoint by variable and rows, whatever the sharding that wrote it:
// the manifest records each shard's global row range, so any row range of any variable
// (parameters or a slot) is gathered from the shards that hold it. This is what makes a
// checkpoint written by M ps restore into N ps under another partitioner, and what the
// evaluator (sidecar mode) and `shardctl export` read.
//
// Every source tensor that is read is read whole and checked against the manifest's
// CRC-32C, and every data file's header against its header CRC-32C, before its bytes are
// handed out as good: a flipped byte anywhere in a tensor or header is DATA_LOSS naming the
// file (and tensor).
//
// Thread-safety: a CheckpointReader may be used from several threads at once.
#ifndef SHARDPS_CHECKPOINT_CHECKPOINT_READER_H_
#define SHARDPS_CHECKPOINT_CHECKPOINT_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "checkpoint/manifest.h"

namespace shardps {

class CheckpointReader {
 public:
  // `path`: a checkpoint's manifest.json, the checkpoint's directory, or a checkpoint
  // directory (DIR, whose newest committed checkpoint is read).
  static absl::StatusOr<std::unique_ptr<CheckpointReader>> Open(const std::string& path);
  virtual ~CheckpointReader() = default;

  virtual const Manifest& manifest() const = 0;
  virtual const std::string& manifest_path() const = 0;

  // Rows [row_begin, row_end) of `variable`'s tensor `slot` ("" = the parameters, else a
  // slot name of the manifest's variable), in row order: sink(first row, bytes) for
  // consecutive chunks of whole rows. The sink may have been handed bytes of a tensor that
  // then fails its checksum: on error, discard what the sink built. `bytes_read` (optional)
  // adds the bytes read from disk.
  // "first row" is the variable's global row number (row_begin for the first chunk); the
  // bytes are valid only during the call. A chunk never spans two source shards. Unknown
  // variable or slot: NOT_FOUND; a range outside [0, rows): INVALID_ARGUMENT.
  virtual absl::Status ReadRows(const std::string& variable, const std::string& slot,
                                int64_t row_begin, int64_t row_end,
                                absl::FunctionRef<absl::Status(int64_t, absl::string_view)> sink,
                                int64_t* bytes_read = nullptr) = 0;
  // Where ReadRowsInto puts rows: appends to `spans` the memory for the variable's global
  // rows [first, last), in row order; their sizes add up to (last - first) * the row's bytes.
  using RowSpans =
      absl::FunctionRef<void(int64_t first, int64_t last, std::vector<absl::Span<char>>* spans)>;
  // Rows [row_begin, row_end) as ReadRows gives them, but read straight into the memory
  // `where` names (the kernel's copy is the only one; the checksum is taken of the
  // destination's bytes right after each read): where(first, last) is asked once for the
  // rows of each source shard in the range, in row order, on the calling thread. Each
  // source tensor is still read whole and checked against its CRC-32C; its rows outside
  // the range go through a scratch buffer. On error the spans may hold bytes of a tensor
  // that failed its checksum: discard them. Errors as ReadRows; spans that do not add up
  // to the rows' bytes: INVALID_ARGUMENT.
  virtual absl::Status ReadRowsInto(const std::string& variable, const std::string& slot,
                                    int64_t row_begin, int64_t row_end, RowSpans where,
                                    int64_t* bytes_read = nullptr) = 0;
  // The same into `out` (row-major floats, (row_end - row_begin) * row width of them;
  // INVALID_ARGUMENT when the variable is not F32 or `out` has another size), read straight
  // into it (ReadRowsInto).
  absl::Status ReadRows(const std::string& variable, const std::string& slot,
                        int64_t row_begin, int64_t row_end, absl::Span<float> out,
                        int64_t* bytes_read = nullptr);

  // Reads every data file whole and checks its size and CRC-32C.
  virtual absl::Status VerifyFiles() = 0;
};

// Writes every variable of the checkpoint at `path` (as for CheckpointReader::Open) whole,
// un-sharded, under its own name ("mlp/dense_0/kernel", full shape), into one safetensors
// file at `out_path`; with `with_slots`, each optimizer slot too ("mlp/dense_0/kernel/adam_m").
// The metadata records the job id, checkpoint id and steps. Ready for numpy, PyTorch or JAX.
// The bytes go from the mapped data files straight to the writer; the CRC-32C it computes
// for each exported tensor must equal the manifest's CRCs of its shards combined, else the
// corrupt source tensor is DATA_LOSS naming its file and nothing is left at `out_path`.
absl::Status ExportCheckpoint(const std::string& path, const std::string& out_path,
                              bool with_slots);

}  // namespace shardps

#endif  // SHARDPS_CHECKPOINT_CHECKPOINT_READER_H_
