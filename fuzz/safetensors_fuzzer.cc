// Fuzz target: the safetensors reader (checkpoint/safetensors.h), which validates a header
// it trusts in nothing. The input is the file. When it opens, each tensor (at most 16) is
// read whole by ReadRange, StreamTensor and ReadTensorInto (the checksums the caller expects
// are unknown here, so a CRC mismatch is the expected end of the last two), the file is
// verified, and a tensor's range must lie within the file.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "checkpoint/safetensors.h"
#include "fuzz/fuzz_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = shardps::WriteFuzzFile(
      "ps.safetensors", absl::string_view(reinterpret_cast<const char*>(data), size));
  auto file = shardps::SafetensorsFile::Open(path);
  if (!file.ok()) return 0;
  const shardps::SafetensorsFile& f = **file;
  const size_t count = std::min<size_t>(f.tensors().size(), 16);
  for (size_t t = 0; t < count; ++t) {
    const shardps::TensorInfo& tensor = f.tensors()[t];
    const int64_t bytes = tensor.data_end() - tensor.data_begin();
    if (tensor.data_begin() < 0 || bytes < 0 ||
        f.data_offset() + tensor.data_end() > f.file_bytes()) {
      std::fprintf(stderr, "tensor %s lies outside the file\n", tensor.name().c_str());
      std::abort();
    }
    if (f.Find(tensor.name()) == nullptr) std::abort();
    std::vector<char> whole(static_cast<size_t>(bytes));
    (void)f.ReadRange(tensor, 0, bytes, whole.data());
    (void)f.ReadRange(tensor, bytes / 2, bytes + 1, whole.data());
    int64_t streamed = 0;
    (void)f.StreamTensor(tensor, 0, [&](int64_t offset, absl::string_view chunk) {
      if (offset != streamed) std::abort();
      streamed += static_cast<int64_t>(chunk.size());
      return absl::OkStatus();
    });
    std::vector<char> into(static_cast<size_t>(bytes));
    const shardps::TensorReadTarget targets[] = {{into.data(), bytes / 2},
                                                 {nullptr, bytes - bytes / 2}};
    (void)f.ReadTensorInto(tensor, 0, targets);
  }
  (void)f.Verify(f.file_bytes(), 0);
  return 0;
}
