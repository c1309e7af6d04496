#include "tests/checkpoint_testing.h"

#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_reader.h"

namespace shardps {
namespace testing {
namespace {

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// One tensor of a variable (slot "" = parameters), whole, as floats.
absl::StatusOr<std::vector<float>> ReadWhole(CheckpointReader& reader, const ManifestVariable& v,
                                             const std::string& slot) {
  std::vector<float> out(Elements(v.shape));
  const int64_t rows = v.shape.empty() ? 1 : v.shape[0];
  absl::Status s = reader.ReadRows(v.name, slot, 0, rows, absl::MakeSpan(out));
  if (!s.ok()) return s;
  return out;
}

}  // namespace

std::vector<CommittedCheckpoint> CommittedCheckpoints(const std::string& dir) {
  absl::StatusOr<CheckpointDir> d = CheckpointDir::OpenReadOnly(dir);
  if (!d.ok()) return {};
  absl::StatusOr<std::vector<CommittedCheckpoint>> all = d->List();
  return all.ok() ? *std::move(all) : std::vector<CommittedCheckpoint>();
}

absl::Status SameModel(const std::string& a, const std::string& b, bool with_slots) {
  absl::StatusOr<std::unique_ptr<CheckpointReader>> ra = CheckpointReader::Open(a);
  if (!ra.ok()) return ra.status();
  absl::StatusOr<std::unique_ptr<CheckpointReader>> rb = CheckpointReader::Open(b);
  if (!rb.ok()) return rb.status();
  const Manifest& ma = (*ra)->manifest();
  const Manifest& mb = (*rb)->manifest();
  if (ma.variables.size() != mb.variables.size()) {
    return absl::FailedPreconditionError(absl::StrCat(a, " holds ", ma.variables.size(),
                                                      " variables, ", b, " ",
                                                      mb.variables.size()));
  }
  if (ma.variables.empty()) return absl::FailedPreconditionError(absl::StrCat(a, ": no variables"));
  for (const ManifestVariable& va : ma.variables) {
    const ManifestVariable* vb = mb.FindVariable(va.name);
    if (vb == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(b, " has no variable ", va.name));
    }
    if (va.shape != vb->shape) {
      return absl::FailedPreconditionError(absl::StrCat(va.name, ": shapes differ"));
    }
    std::vector<std::string> slots = {""};
    if (with_slots) {
      if (va.slots != vb->slots) {
        return absl::FailedPreconditionError(absl::StrCat(va.name, ": slots differ"));
      }
      slots.insert(slots.end(), va.slots.begin(), va.slots.end());
    }
    for (const std::string& slot : slots) {
      absl::StatusOr<std::vector<float>> xa = ReadWhole(**ra, va, slot);
      if (!xa.ok()) return xa.status();
      absl::StatusOr<std::vector<float>> xb = ReadWhole(**rb, *vb, slot);
      if (!xb.ok()) return xb.status();
      int64_t differ = 0, first = -1;
      for (size_t i = 0; i < xa->size(); ++i) {
        // Bit for bit: memcmp, so that -0 != +0 and NaNs compare by their bits.
        if (std::memcmp(&(*xa)[i], &(*xb)[i], sizeof(float)) != 0) {
          if (first < 0) first = static_cast<int64_t>(i);
          ++differ;
        }
      }
      if (differ > 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            va.name, slot.empty() ? "" : "/", slot, ": ", differ, " of ", xa->size(),
            " elements differ; first at ", first, ": ", (*xa)[first], " vs ", (*xb)[first]));
      }
    }
  }
  return absl::OkStatus();
}

std::map<std::string, int64_t> ManifestShardVersions(const Manifest& manifest) {
  std::map<std::string, int64_t> out;
  for (const ManifestVariable& v : manifest.variables) {
    for (const ManifestShard& s : v.shards) out[s.name] = s.version;
  }
  return out;
}

absl::StatusOr<std::map<std::string, PullVersions>> LiveVersions(PsClient* client) {
  if (absl::Status s = client->Discover(); !s.ok()) return s;
  std::map<std::string, PullVersions> out;
  for (const std::string& name : client->VariableNames()) {
    absl::StatusOr<VariableLayout> layout = client->GetLayout(name);
    if (!layout.ok()) return layout.status();
    std::vector<float> values(layout->num_elements);
    PullVersions versions;
    if (absl::Status s = client->Pull(name, absl::MakeSpan(values), {}, &versions); !s.ok()) {
      return s;
    }
    out[name] = versions;
  }
  return out;
}

absl::Status FlipByteInTensor(const CommittedCheckpoint& checkpoint, const std::string& file,
                              const std::string& tensor) {
  const DataFileInfo* info = checkpoint.manifest.FindFile(file);
  if (info == nullptr) {
    return absl::NotFoundError(absl::StrCat(checkpoint.path, " has no data file ", file));
  }
  const TensorInfo* t = nullptr;
  for (const TensorInfo& candidate : info->tensors()) {
    if (candidate.name() == tensor) t = &candidate;
  }
  if (t == nullptr || t->data_end() <= t->data_begin()) {
    return absl::NotFoundError(absl::StrCat(file, " has no (non-empty) tensor ", tensor));
  }
  const std::string path = absl::StrCat(checkpoint.path, "/", file);
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  // safetensors: an 8-byte little-endian header length, the JSON header, then the data.
  unsigned char len_bytes[8];
  f.read(reinterpret_cast<char*>(len_bytes), 8);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | len_bytes[i];
  const int64_t offset = 8 + static_cast<int64_t>(header_len) +
                         (t->data_begin() + t->data_end()) / 2;
  char byte = 0;
  f.seekg(offset);
  f.read(&byte, 1);
  byte = static_cast<char>(~byte);
  f.seekp(offset);
  f.write(&byte, 1);
  f.flush();
  if (!f) return absl::InternalError(absl::StrCat("cannot rewrite byte ", offset, " of ", path));
  return absl::OkStatus();
}

}  // namespace testing
}  // namespace shardps
