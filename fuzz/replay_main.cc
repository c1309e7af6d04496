// A main for the fuzz targets without libFuzzer (gcc, or clang without -fsanitize=fuzzer):
// feeds every file under each directory (or each file) named on the command line to
// LLVMFuzzerTestOneInput, once each, in sorted order, so that a target's seed and regression
// corpus runs as an ordinary test. Exits 1 when no input was found (a corpus that went
// missing must not pass as an empty test), 0 otherwise; a crash or sanitizer report ends the
// process as it would under libFuzzer.
//
// Thread-safety: a program.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    std::error_code error;
    const fs::path arg(argv[i]);
    if (fs::is_directory(arg, error)) {
      for (const auto& entry : fs::recursive_directory_iterator(arg, error)) {
        if (entry.is_regular_file()) inputs.push_back(entry.path());
      }
    } else if (fs::is_regular_file(arg, error)) {
      inputs.push_back(arg);
    } else {
      std::fprintf(stderr, "replay: %s: no such file or directory\n", argv[i]);
      return 1;
    }
  }
  std::sort(inputs.begin(), inputs.end());
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs (usage: %s CORPUS_DIR_OR_FILE...)\n", argv[0]);
    return 1;
  }
  for (const fs::path& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
      return 1;
    }
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", path.c_str(), bytes.size());
    // A copy of exactly `size` bytes on the heap, as libFuzzer passes it, so that ASan sees a
    // read past the end.
    std::vector<uint8_t> input(bytes.begin(), bytes.end());
    static uint8_t empty = 0;  // libFuzzer passes a valid pointer for an empty input too
    LLVMFuzzerTestOneInput(input.empty() ? &empty : input.data(), input.size());
  }
  std::fprintf(stderr, "replay: %zu inputs, no crash\n", inputs.size());
  return 0;
}
