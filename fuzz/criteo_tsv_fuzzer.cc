// Fuzz target: the Criteo TSV reader (data/ctr/criteo_tsv.h). The input is the file (plain,
// or gzipped: the reader takes either), read twice: with Criteo's schema (13 dense, 26
// categorical), stopping at the first bad line; and with a small schema (2 dense, 3
// categorical of up to 3 ids, one with a vocabulary of 1000), skipping bad lines and then
// converting the file to a ctrbin file that must read back as the same batches. Every batch
// read must be a well-formed batch of its schema (ValidateBatch).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "data/ctr/criteo_tsv.h"
#include "data/ctr/ctr_batch.h"
#include "data/ctr/ctr_binary.h"
#include "fuzz/fuzz_files.h"

namespace {

using shardps::CtrBatch;
using shardps::CriteoTsvOptions;

void Fail(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "%s: %s\n", what, status.ToString().c_str());
  std::abort();
}

// Reads the file in batches of 7; returns the examples read when it reached the end.
std::vector<CtrBatch> ReadAll(const std::string& path, const CriteoTsvOptions& options) {
  std::vector<CtrBatch> batches;
  auto reader = shardps::CriteoTsvReader::Open(path, options);
  if (!reader.ok()) Fail("CriteoTsvReader::Open of a file that exists", reader.status());
  for (;;) {
    CtrBatch batch;
    const absl::Status status = (*reader)->ReadBatch(7, &batch);
    if (!status.ok()) return {};
    if (batch.size == 0) break;
    const absl::Status valid = shardps::ValidateBatch((*reader)->schema(), batch);
    if (!valid.ok()) Fail("the reader returned a malformed batch", valid);
    batches.push_back(std::move(batch));
  }
  return batches;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = shardps::WriteFuzzFile(
      "day_0.tsv", absl::string_view(reinterpret_cast<const char*>(data), size));
  (void)ReadAll(path, CriteoTsvOptions());

  CriteoTsvOptions small;
  small.schema = shardps::CriteoSchema(2, 3, 3);
  small.schema.features[1].vocab_size = 1000;
  small.skip_bad_lines = true;
  const std::vector<CtrBatch> batches = ReadAll(path, small);

  const std::string ctrbin = shardps::FuzzTempDir() + "/day_0.ctrbin";
  absl::StatusOr<shardps::ConvertStats> stats =
      shardps::ConvertCriteoTsvToBinary(path, ctrbin, small);
  if (!stats.ok()) return 0;  // a corrupt gzip stream
  auto source = shardps::CtrBinarySource::Open(ctrbin);
  if (!source.ok()) Fail("the converted ctrbin file does not open", source.status());
  int64_t examples = 0;
  for (const CtrBatch& batch : batches) examples += batch.size;
  if ((*source)->num_examples() != examples || stats->examples != examples) {
    std::fprintf(stderr, "the ctrbin file has %lld examples, the TSV %lld\n",
                 static_cast<long long>((*source)->num_examples()),
                 static_cast<long long>(examples));
    std::abort();
  }
  int64_t next = 0;
  for (const CtrBatch& batch : batches) {
    std::vector<int64_t> indices;
    for (int i = 0; i < batch.size; ++i) indices.push_back(next++);
    CtrBatch read;
    const absl::Status status = (*source)->Read(indices, &read);
    if (!status.ok()) Fail("reading the converted ctrbin file", status);
    if (!(read == batch)) {
      std::fprintf(stderr, "the ctrbin file reads back other examples than the TSV's\n");
      std::abort();
    }
  }
  return 0;
}
