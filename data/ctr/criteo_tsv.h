// Criteo display-ads TSV: reading it, writing it (from any CtrSource), and converting it once
// into a ctrbin file (ctr_binary.h) that workers read at random.
//
// Format: one example a line, fields separated by tabs, '\n' line ends ("\r\n" accepted):
//   label            "0" or "1"
//   num_dense ints   decimal integers, possibly negative; empty = missing. The batch holds
//                    CriteoDenseValue(x) = log(1 + max(x, 0)) (what DLRM does); missing -> 0.
//   num_categorical  ids as hexadecimal of 1 to 16 digits (either case), read as the 64-bit
//                    pattern (so "ffffffffffffffff" is id -1); empty = missing (no ids);
//                    several ids separated by ',' for a multi-hot feature (up to the
//                    schema's max_hotness; Criteo's own files have one).
// The schema gives the counts: CriteoSchema() is Criteo's 13 dense and 26 categorical
// features C1..C26 with unbounded ids; a schema with vocab sizes also checks id ranges.
// Files are plain or gzipped (zlib's gzread reads both, whatever the name).
//
// A bad line (wrong field count, bad label, bad integer, bad hex, too many ids, an id out of
// range) gives INVALID_ARGUMENT naming the file, the line number and the field; with
// skip_bad_lines it is counted (bad_lines()) and skipped.
//
// The writer writes dense values as the integers x with CriteoDenseValue(x) equal to the
// batch's value (INVALID_ARGUMENT when there is none), so that reading the file back with the
// source's schema gives the same CtrBatch; ids as at least 8 lowercase hex digits. A path
// ending in ".gz" is gzipped. Written to a temporary file and renamed into place.
//
// Thread-safety: a CriteoTsvReader is used by one thread; the functions are thread-safe.
#ifndef SHARDPS_DATA_CTR_CRITEO_TSV_H_
#define SHARDPS_DATA_CTR_CRITEO_TSV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/ctr/ctr_batch.h"

namespace shardps {

// Criteo's layout: dense features I1.. are not named in the schema; categorical features are
// C1..C<num_categorical>, vocab_size 0 (hashed ids), max_hotness as given.
CtrSchema CriteoSchema(int num_dense = 13, int num_categorical = 26, int max_hotness = 1);

struct CriteoTsvOptions {
  CtrSchema schema = CriteoSchema();
  bool skip_bad_lines = false;
};

class CriteoTsvReader {
 public:
  // NOT_FOUND when the file does not exist; INVALID_ARGUMENT for a bad schema.
  static absl::StatusOr<std::unique_ptr<CriteoTsvReader>> Open(const std::string& path,
                                                               const CriteoTsvOptions& options);
  ~CriteoTsvReader();

  const CtrSchema& schema() const { return options_.schema; }

  // Replaces *out with the next up to max_examples examples; out->size == 0 at the end of the
  // file. INVALID_ARGUMENT for a bad line (unless skipping), DATA_LOSS for a corrupt or
  // truncated gzip stream.
  absl::Status ReadBatch(int max_examples, CtrBatch* out);

  int64_t lines_read() const { return line_number_; }
  int64_t bad_lines() const { return bad_lines_; }

 private:
  CriteoTsvReader() = default;
  // Next line without its terminator; false at the end of the file.
  absl::StatusOr<bool> NextLine(absl::string_view* line);
  // Appends the example of `line` to *out; on error (INVALID_ARGUMENT naming the line and
  // field) *out is left as it was.
  absl::Status ParseLine(absl::string_view line, CtrBatch* out);
  // Steps of ParseLine over fields_: they append to *out's tails and, on error, leave what
  // they appended for ParseLine to drop.
  absl::Status ParseDense(CtrBatch* out) const;
  absl::Status ParseIds(size_t feature, CtrBatch* out) const;
  // INVALID_ARGUMENT naming the file, line and field (0 is the label).
  absl::Status FieldError(size_t field, absl::string_view why) const;

  std::string path_;
  CriteoTsvOptions options_;
  void* gz_ = nullptr;  // gzFile
  std::vector<char> buffer_;
  size_t begin_ = 0;  // unread data is buffer_[begin_, end_)
  size_t end_ = 0;
  bool eof_ = false;
  int64_t line_number_ = 0;
  int64_t bad_lines_ = 0;
  std::vector<absl::string_view> fields_;  // scratch
};

// Writes examples [begin, end) of `source` as Criteo TSV at `path` (gzipped when it ends in
// ".gz").
absl::Status WriteCriteoTsv(const CtrSource& source, int64_t begin, int64_t end,
                            const std::string& path);

struct ConvertStats {
  int64_t examples = 0;
  int64_t bad_lines = 0;
};

// Streams a TSV file into a ctrbin file (bounded memory; the ctrbin's description names the
// input).
absl::StatusOr<ConvertStats> ConvertCriteoTsvToBinary(const std::string& tsv_path,
                                                      const std::string& ctrbin_path,
                                                      const CriteoTsvOptions& options);

}  // namespace shardps

#endif  // SHARDPS_DATA_CTR_CRITEO_TSV_H_
