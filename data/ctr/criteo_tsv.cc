#include "data/ctr/criteo_tsv.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "data/ctr/ctr_binary.h"

namespace shardps {
namespace {

constexpr size_t kReadChunk = size_t{1} << 20;

gzFile Gz(void* p) { return static_cast<gzFile>(p); }

// Hex of 1..16 digits to the 64-bit pattern.
bool ParseHexId(absl::string_view text, int64_t* id) {
  if (text.empty() || text.size() > 16) return false;
  uint64_t v = 0;
  for (char c : text) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return false;
    }
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *id = static_cast<int64_t>(v);
  return true;
}

// The integer x >= 0 with CriteoDenseValue(x) == value, or -1.
int64_t DenseInteger(float value) {
  if (!(value >= 0) || !std::isfinite(value)) return -1;
  if (value == 0) return 0;
  const double guess = std::expm1(static_cast<double>(value));
  if (guess < 9e18) {
    const int64_t x0 = std::llround(guess);
    for (int64_t x = std::max<int64_t>(0, x0 - 2); x <= x0 + 2; ++x) {
      if (CriteoDenseValue(x) == value) return x;
    }
  }
  int64_t lo = 0;
  int64_t hi = int64_t{1} << 62;
  while (lo < hi) {  // smallest x with CriteoDenseValue(x) >= value
    const int64_t mid = lo + (hi - lo) / 2;
    if (CriteoDenseValue(mid) >= value) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return CriteoDenseValue(lo) == value ? lo : -1;
}

// Replaces *fields with the tab-separated fields of `line` (one empty field for "").
void SplitTabs(absl::string_view line, std::vector<absl::string_view>* fields) {
  fields->clear();
  size_t at = 0;
  for (;;) {
    const size_t tab = line.find('\t', at);
    fields->push_back(line.substr(at, tab == absl::string_view::npos ? line.npos : tab - at));
    if (tab == absl::string_view::npos) break;
    at = tab + 1;
  }
}

absl::Status ErrnoStatus(int err, const std::string& message) {
  const std::string text = absl::StrCat(message, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(text);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(text);
  return absl::InternalError(text);
}

}  // namespace

CtrSchema CriteoSchema(int num_dense, int num_categorical, int max_hotness) {
  CtrSchema schema;
  schema.num_dense = num_dense;
  for (int c = 0; c < num_categorical; ++c) {
    schema.features.push_back(CtrFeature{absl::StrCat("C", c + 1), 0, max_hotness});
  }
  return schema;
}

absl::StatusOr<std::unique_ptr<CriteoTsvReader>> CriteoTsvReader::Open(
    const std::string& path, const CriteoTsvOptions& options) {
  RETURN_IF_ERROR(ValidateSchema(options.schema));
  std::unique_ptr<CriteoTsvReader> r(new CriteoTsvReader());
  r->path_ = path;
  r->options_ = options;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot open ", path));
  gzFile gz = gzdopen(fd, "rb");
  if (gz == nullptr) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("cannot gzdopen ", path));
  }
  gzbuffer(gz, 1 << 18);
  r->gz_ = gz;
  r->buffer_.resize(kReadChunk);
  return r;
}

CriteoTsvReader::~CriteoTsvReader() {
  if (gz_ != nullptr) gzclose(Gz(gz_));
}

absl::StatusOr<bool> CriteoTsvReader::NextLine(absl::string_view* line) {
  for (;;) {
    const char* start = buffer_.data() + begin_;
    const void* nl = std::memchr(start, '\n', end_ - begin_);
    if (nl != nullptr) {
      const size_t len = static_cast<const char*>(nl) - start;
      *line = absl::string_view(start, len);
      begin_ += len + 1;
      ++line_number_;
      return true;
    }
    if (eof_) {
      if (begin_ == end_) return false;
      *line = absl::string_view(start, end_ - begin_);  // a last line without '\n'
      begin_ = end_;
      ++line_number_;
      return true;
    }
    // Move the partial line to the front and fill the rest (growing for very long lines).
    std::memmove(buffer_.data(), start, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
    if (end_ == buffer_.size()) buffer_.resize(buffer_.size() * 2);
    const int n = gzread(Gz(gz_), buffer_.data() + end_,
                         static_cast<unsigned>(buffer_.size() - end_));
    if (n < 0) {
      int errnum = 0;
      const char* msg = gzerror(Gz(gz_), &errnum);
      return absl::DataLossError(absl::StrCat(path_, ": corrupt or truncated gzip stream: ", msg));
    }
    if (n == 0) {
      int errnum = 0;
      const char* msg = gzerror(Gz(gz_), &errnum);
      if (errnum != Z_OK && errnum != Z_STREAM_END) {
        return absl::DataLossError(
            absl::StrCat(path_, ": corrupt or truncated gzip stream: ", msg));
      }
      eof_ = true;
    }
    end_ += static_cast<size_t>(n);
  }
}

absl::Status CriteoTsvReader::FieldError(size_t field, absl::string_view why) const {
  const CtrSchema& schema = options_.schema;
  std::string name = field == 0 ? "label"
                     : field <= static_cast<size_t>(schema.num_dense)
                         ? absl::StrCat("I", field)
                         : schema.features[field - 1 - schema.num_dense].name;
  return absl::InvalidArgumentError(absl::StrCat(path_, " line ", line_number_, ": field ",
                                                 field + 1, " (", name, "): ", why));
}

absl::Status CriteoTsvReader::ParseDense(CtrBatch* out) const {
  for (int d = 0; d < options_.schema.num_dense; ++d) {
    const absl::string_view text = fields_[1 + d];
    int64_t x = 0;
    if (!text.empty() && !absl::SimpleAtoi(text, &x)) {
      return FieldError(1 + d, absl::StrCat("\"", text, "\" is not an integer"));
    }
    out->dense.push_back(CriteoDenseValue(x));
  }
  return absl::OkStatus();
}

absl::Status CriteoTsvReader::ParseIds(size_t f, CtrBatch* out) const {
  const CtrSchema& schema = options_.schema;
  const size_t field = 1 + schema.num_dense + f;
  absl::string_view text = fields_[field];
  std::vector<int64_t>& ids = out->features[f].ids;
  const size_t old = static_cast<size_t>(out->features[f].offsets.back());
  absl::Status status;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const absl::string_view hex = text.substr(0, comma);
    int64_t id = 0;
    if (!ParseHexId(hex, &id)) {
      status = FieldError(field, absl::StrCat("\"", hex, "\" is not hex of 1 to 16 digits"));
      break;
    }
    const int64_t vocab = schema.features[f].vocab_size;
    if (vocab > 0 && (id < 0 || id >= vocab)) {
      status = FieldError(field, absl::StrCat("id ", id, " outside [0, ", vocab, ")"));
      break;
    }
    ids.push_back(id);
    if (comma == absl::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) status = FieldError(field, "empty id after ','");
  }
  if (status.ok() && ids.size() - old > static_cast<size_t>(schema.features[f].max_hotness)) {
    status = FieldError(field, absl::StrCat(ids.size() - old, " ids, max_hotness is ",
                                            schema.features[f].max_hotness));
  }
  return status;
}

absl::Status CriteoTsvReader::ParseLine(absl::string_view line, CtrBatch* out) {
  const CtrSchema& schema = options_.schema;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  SplitTabs(line, &fields_);
  const size_t expected = 1 + schema.num_dense + schema.features.size();
  if (fields_.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(path_, " line ", line_number_, ": ",
                                                   fields_.size(), " fields, expected ",
                                                   expected));
  }
  float label;
  if (fields_[0] == "0") {
    label = 0;
  } else if (fields_[0] == "1") {
    label = 1;
  } else {
    return FieldError(0, absl::StrCat("label \"", fields_[0], "\" is not 0 or 1"));
  }
  // Parse into the batch's tails, then commit the example only when the whole line is good.
  const size_t dense_at = out->dense.size();
  if (absl::Status status = ParseDense(out); !status.ok()) {
    out->dense.resize(dense_at);
    return status;
  }
  for (size_t f = 0; f < schema.features.size(); ++f) {
    if (absl::Status status = ParseIds(f, out); !status.ok()) {
      out->dense.resize(dense_at);
      for (size_t g = 0; g <= f; ++g) {
        out->features[g].ids.resize(static_cast<size_t>(out->features[g].offsets.back()));
      }
      return status;
    }
  }
  out->labels.push_back(label);
  out->EndExample();
  return absl::OkStatus();
}

absl::Status CriteoTsvReader::ReadBatch(int max_examples, CtrBatch* out) {
  out->Reset(options_.schema, max_examples);
  absl::string_view line;
  while (out->size < max_examples) {
    ASSIGN_OR_RETURN(bool more, NextLine(&line));
    if (!more) break;
    absl::Status status = ParseLine(line, out);
    if (!status.ok()) {
      if (!options_.skip_bad_lines) return status;
      ++bad_lines_;
    }
  }
  return absl::OkStatus();
}

absl::Status WriteCriteoTsv(const CtrSource& source, int64_t begin, int64_t end,
                            const std::string& path) {
  if (begin < 0 || end < begin || end > source.num_examples()) {
    return absl::InvalidArgumentError(absl::StrCat("example range [", begin, ", ", end,
                                                   ") outside [0, ", source.num_examples(),
                                                   ")"));
  }
  std::string tmp = path + ".tmp-XXXXXX";
  const int fd = mkstemp(&tmp[0]);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot create a file beside ", path));
  const bool gzipped = absl::EndsWith(path, ".gz");
  gzFile gz = gzdopen(fd, gzipped ? "wb1" : "wbT");  // T: plain, no gzip framing
  if (gz == nullptr) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot open ", tmp, " for writing"));
  }
  gzbuffer(gz, 1 << 18);
  auto fail = [&](absl::Status status) {
    gzclose(gz);
    ::unlink(tmp.c_str());
    return status;
  };
  const CtrSchema& schema = source.schema();
  const int num_dense = schema.num_dense;
  CtrBatch batch;
  std::string text;
  constexpr int64_t kBatch = 4096;
  for (int64_t at = begin; at < end; at += kBatch) {
    absl::Status read = ReadRange(source, at, std::min(end, at + kBatch), &batch);
    if (!read.ok()) return fail(read);
    text.clear();
    for (int j = 0; j < batch.size; ++j) {
      text += batch.labels[j] == 1.0f ? '1' : '0';
      for (int d = 0; d < num_dense; ++d) {
        const float v = batch.dense[static_cast<size_t>(j) * num_dense + d];
        const int64_t x = DenseInteger(v);
        if (x < 0) {
          return fail(absl::InvalidArgumentError(
              absl::StrCat("example ", at + j, ": dense value ", d, " (", v,
                           ") is not log(1 + x) of an integer x >= 0")));
        }
        text += '\t';
        absl::StrAppend(&text, x);
      }
      for (const CtrFeatureIds& f : batch.features) {
        text += '\t';
        for (int64_t k = f.offsets[j]; k < f.offsets[j + 1]; ++k) {
          if (k > f.offsets[j]) text += ',';
          absl::StrAppendFormat(&text, "%08x", static_cast<uint64_t>(f.ids[k]));
        }
      }
      text += '\n';
    }
    if (!text.empty() &&
        gzwrite(gz, text.data(), static_cast<unsigned>(text.size())) !=
            static_cast<int>(text.size())) {
      return fail(absl::InternalError(absl::StrCat("cannot write ", tmp)));
    }
  }
  if (gzclose(gz) != Z_OK) {
    ::unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot finish writing ", tmp));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoStatus(err, absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<ConvertStats> ConvertCriteoTsvToBinary(const std::string& tsv_path,
                                                      const std::string& ctrbin_path,
                                                      const CriteoTsvOptions& options) {
  ASSIGN_OR_RETURN(auto reader, CriteoTsvReader::Open(tsv_path, options));
  ASSIGN_OR_RETURN(auto writer, CtrBinaryWriter::Create(ctrbin_path, options.schema,
                                                        absl::StrCat("criteo_tsv:", tsv_path)));
  CtrBatch batch;
  for (;;) {
    RETURN_IF_ERROR(reader->ReadBatch(4096, &batch));
    if (batch.size == 0) break;
    RETURN_IF_ERROR(writer->Append(batch));
  }
  RETURN_IF_ERROR(writer->Finish());
  ConvertStats stats;
  stats.examples = writer->num_examples();
  stats.bad_lines = reader->bad_lines();
  return stats;
}

}  // namespace shardps
