// Fuzz target: the ctrbin reader (data/ctr/ctr_binary.h), which mmaps a file and trusts
// nothing in it. The input is the file. When it opens, every example (at most the first 64,
// and the last) is read one by one and in one batch, and must be a well-formed batch of the
// file's schema; reading index -1 or num_examples must fail.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/string_view.h"
#include "data/ctr/ctr_batch.h"
#include "data/ctr/ctr_binary.h"
#include "fuzz/fuzz_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = shardps::WriteFuzzFile(
      "data.ctrbin", absl::string_view(reinterpret_cast<const char*>(data), size));
  auto source = shardps::CtrBinarySource::Open(path);
  if (!source.ok()) return 0;
  const shardps::CtrBinarySource& s = **source;
  const int64_t n = s.num_examples();
  std::vector<int64_t> all;
  for (int64_t i = 0; i < std::min<int64_t>(n, 64); ++i) all.push_back(i);
  if (n > 64) all.push_back(n - 1);
  for (int64_t i : all) {
    shardps::CtrBatch batch;
    const int64_t one[] = {i};
    if (!s.Read(one, &batch).ok()) continue;  // a corrupt record: DATA_LOSS
    const absl::Status valid = shardps::ValidateBatch(s.schema(), batch);
    if (batch.size != 1 || !valid.ok()) {
      std::fprintf(stderr, "example %lld read as a malformed batch: %s\n",
                   static_cast<long long>(i), valid.ToString().c_str());
      std::abort();
    }
  }
  shardps::CtrBatch batch;
  if (s.Read(all, &batch).ok() && !shardps::ValidateBatch(s.schema(), batch).ok()) std::abort();
  for (int64_t bad : {int64_t{-1}, n}) {
    const int64_t one[] = {bad};
    if (s.Read(one, &batch).ok()) {
      std::fprintf(stderr, "example %lld of %lld read\n", static_cast<long long>(bad),
                   static_cast<long long>(n));
      std::abort();
    }
  }
  return 0;
}
