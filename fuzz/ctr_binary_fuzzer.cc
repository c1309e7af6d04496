// Fuzz target: the ctrbin reader (data/ctr/ctr_binary.h), which mmaps a file and trusts
// nothing in it. The input is the file, read twice: as it is, and with its header, index and
// record checksums recomputed where the file's own offsets say they are (a mutated file
// almost never has right checksums, which would keep the fuzzer at the first check). When
// it opens, every example (at most the first 64, and the last) is read one by one and in one
// batch, and must be a well-formed batch of the file's schema; reading index -1 or
// num_examples must fail.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "data/ctr/ctr_batch.h"
#include "data/ctr/ctr_binary.h"
#include "data/ctr/ctr_hash.h"
#include "fuzz/fuzz_files.h"

namespace {

template <typename T>
T Get(const std::string& b, uint64_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof(T));
  return v;
}

template <typename T>
void Set(std::string* b, uint64_t at, T v) {
  std::memcpy(&(*b)[at], &v, sizeof(T));
}

// The file with the checksums the writer would have written (ctr_binary.h has the layout),
// wherever the header's offsets point inside the file.
std::string WithChecksums(std::string b) {
  const uint64_t size = b.size();
  if (size < 64) return b;
  const uint32_t header_size = Get<uint32_t>(b, 12);
  const uint64_t n = Get<uint64_t>(b, 16);
  const uint64_t records_offset = Get<uint64_t>(b, 24);
  const uint64_t records_size = Get<uint64_t>(b, 32);
  const uint64_t index_offset = Get<uint64_t>(b, 40);
  if (n < (uint64_t{1} << 58) && index_offset <= size && size - index_offset == 8 * (n + 1) &&
      records_offset <= size && records_size <= size - records_offset) {
    for (uint64_t i = 0; i < n && i < 4096; ++i) {
      const uint64_t begin = Get<uint64_t>(b, index_offset + 8 * i);
      const uint64_t end = Get<uint64_t>(b, index_offset + 8 * (i + 1));
      if (begin > end || end > records_size || end - begin < 4) continue;
      const uint64_t r = records_offset + begin;
      Set<uint32_t>(&b, r, static_cast<uint32_t>(shardps::Checksum64(&b[r + 4], end - begin - 4)));
    }
    uint64_t h = 0;  // chained over 1 MiB chunks
    constexpr uint64_t kChunk = uint64_t{1} << 20;
    for (uint64_t at = 0; at < 8 * (n + 1); at += kChunk) {
      h = shardps::Checksum64(&b[index_offset + at], std::min(kChunk, 8 * (n + 1) - at), h);
    }
    Set<uint64_t>(&b, 48, h);
  }
  if (header_size >= 64 && header_size <= size) {
    Set<uint64_t>(&b, 56, 0);
    Set<uint64_t>(&b, 56, shardps::Checksum64(b.data(), header_size));
  }
  return b;
}

void ReadFile(const std::string& bytes) {
  const std::string path = shardps::WriteFuzzFile("data.ctrbin", bytes);
  auto source = shardps::CtrBinarySource::Open(path);
  if (!source.ok()) return;
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
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  ReadFile(bytes);
  ReadFile(WithChecksums(bytes));
  return 0;
}
