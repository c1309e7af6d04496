// checkpoint_bench: what the checkpoint library's data path costs on this machine, each
// figure against a baseline measured in the same run:
//   - CRC-32C of a 256 MiB buffer (Crc32cExtend, and each implementation behind it: PCLMULQDQ
//     folding, the crc32 instruction's three streams, the portable table) against the memory
//     floor (a plain read of the same buffer);
//   - a 1 GiB safetensors file written by WriteSafetensors (tensors of 128 MiB in 1 MiB
//     pieces, as a ps snapshot's blocks hand them over; CRC, fsync, rename) against
//     `dd if=/dev/zero of=F bs=4M count=256 conv=fdatasync` into the same directory,
//     alternated so that both see the same disk.
//
//   bazel run //bench:checkpoint_bench -- [--dir D] [--reps N] [--json]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "bench/host_stats.h"
#include "bench/stats.h"
#include "checkpoint/crc32c.h"
#include "checkpoint/crc32c_internal.h"
#include "checkpoint/safetensors.h"
#include "common/flags.h"
#include "nlohmann/json.hpp"

namespace shardps {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

template <typename Fn>
double BestOf(int reps, Fn fn) {
  double best = 1e300;
  for (int i = 0; i < reps; ++i) {
    const auto start = Clock::now();
    fn();
    best = std::min(best, Seconds(start));
  }
  return best;
}

// The memory floor of a checksum: every 8 bytes loaded and combined, nothing else.
uint64_t ReadAll(const std::vector<uint64_t>& words) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (size_t i = 0; i + 4 <= words.size(); i += 4) {
    a ^= words[i];
    b ^= words[i + 1];
    c ^= words[i + 2];
    d ^= words[i + 3];
  }
  return a ^ b ^ c ^ d;
}

nlohmann::json HostJson(const bench::HostStats& host) {
  return {{"load_average_1m_before", host.load_before},
          {"load_average_1m_after", host.load_after},
          {"others_cores", host.others_cores()},
          {"busy", host.busy()}};
}

// CRC-32C of 256 MiB through every implementation against a plain read of it (best of
// `reps`, alternated: the machine is shared, so every figure sees the same moments).
absl::StatusOr<nlohmann::json> CrcFigures(int64_t reps) {
  constexpr size_t kCrcBytes = size_t{256} << 20;
  std::vector<uint64_t> words(kCrcBytes / 8);
  std::mt19937_64 rng(1);
  for (uint64_t& w : words) w = rng();
  volatile uint64_t sink = 0;
  uint32_t crc_public = 0, crc_fold = 0, crc_hw = 0, crc_sw = 0;
  double floor_s = 1e300, public_s = 1e300, fold_s = 1e300, hw_s = 1e300, sw_s = 1e300;
  for (int rep = 0; rep < reps; ++rep) {
    floor_s = std::min(floor_s, BestOf(1, [&] { sink = sink ^ ReadAll(words); }));
    public_s = std::min(public_s, BestOf(1, [&] {
      crc_public = Crc32cExtend(0, words.data(), kCrcBytes);
    }));
    fold_s = std::min(fold_s, BestOf(1, [&] {
      crc_fold = crc32c_internal::ExtendFolding(0, words.data(), kCrcBytes);
    }));
    hw_s = std::min(hw_s, BestOf(1, [&] {
      crc_hw = crc32c_internal::ExtendHardware(0, words.data(), kCrcBytes);
    }));
    sw_s = std::min(sw_s, BestOf(1, [&] {
      crc_sw = crc32c_internal::ExtendPortable(0, words.data(), kCrcBytes);
    }));
  }
  if (crc_public != crc_sw || crc_fold != crc_sw || crc_hw != crc_sw) {
    return absl::InternalError("CRC mismatch between implementations");
  }
  const double gb = kCrcBytes / 1e9;
  std::fprintf(stderr, "CRC-32C of 256 MiB (best of %d)\n", static_cast<int>(reps));
  std::fprintf(stderr, "  %-34s %8.2f GB/s\n", "memory read floor", gb / floor_s);
  std::fprintf(stderr, "  %-34s %8.2f GB/s  (%.2f of the floor)\n", "Crc32cExtend", gb / public_s,
               floor_s / public_s);
  std::fprintf(stderr, "  %-34s %8.2f GB/s%s\n", "  PCLMULQDQ folding, 4 lanes", gb / fold_s,
               crc32c_internal::HaveFolding() ? "" : "  [not here: crc32 streams]");
  std::fprintf(stderr, "  %-34s %8.2f GB/s%s\n", "  crc32 instruction, 3 streams", gb / hw_s,
               crc32c_internal::HaveHardware() ? "" : "  [no SSE4.2: portable]");
  std::fprintf(stderr, "  %-34s %8.2f GB/s\n", "  portable table (slicing by 8)", gb / sw_s);
  return nlohmann::json{{"crc_bytes", kCrcBytes},
                        {"memory_floor_gb_per_s", gb / floor_s},
                        {"crc32c_gb_per_s", gb / public_s},
                        {"crc32c_folding_gb_per_s", gb / fold_s},
                        {"crc32c_three_streams_gb_per_s", gb / hw_s},
                        {"crc32c_portable_gb_per_s", gb / sw_s}};
}

// One 1 GiB safetensors file as WriteSafetensors writes it: its seconds.
absl::StatusOr<double> WriteOneFile(const std::string& path,
                                    const std::shared_ptr<std::vector<char>>& data,
                                    int64_t tensor_bytes, int num_tensors) {
  constexpr int64_t kPieceBytes = int64_t{1} << 20;
  std::vector<TensorToWrite> tensors;
  for (int t = 0; t < num_tensors; ++t) {
    TensorToWrite tensor;
    tensor.name = absl::StrCat("layer_", t, "/kernel");
    tensor.shape = {tensor_bytes / 4 / 1024, 1024};
    for (int64_t at = 0; at < tensor_bytes; at += kPieceBytes) {
      tensor.pieces.emplace_back(data->data() + at, kPieceBytes);
    }
    tensor.holds.push_back(data);
    tensors.push_back(std::move(tensor));
  }
  SafetensorsWriteStats stats;
  absl::StatusOr<DataFileInfo> info = WriteSafetensors(path, std::move(tensors), {}, &stats);
  if (!info.ok()) return info.status();
  std::remove(path.c_str());
  return stats.seconds;
}

// A 1 GiB safetensors file against dd into the same directory, alternated (median of `reps`).
absl::StatusOr<nlohmann::json> FileFigures(const std::string& dir, int64_t reps) {
  constexpr int64_t kTensorBytes = int64_t{128} << 20;
  constexpr int kTensors = 8;
  auto data = std::make_shared<std::vector<char>>(static_cast<size_t>(kTensorBytes));
  for (size_t i = 0; i < data->size(); i += 4096) (*data)[i] = static_cast<char>(i >> 12);
  const std::string st_path = dir + "/checkpoint_bench.safetensors";
  const std::string dd_path = dir + "/checkpoint_bench.dd";
  const std::string dd = absl::StrCat("dd if=/dev/zero of=", dd_path,
                                      " bs=4M count=256 conv=fdatasync status=none");
  std::vector<double> writer_s, dd_s;
  for (int rep = 0; rep < reps; ++rep) {
    auto start = Clock::now();
    if (std::system(dd.c_str()) != 0) return absl::InternalError(absl::StrCat(dd, " failed"));
    dd_s.push_back(Seconds(start));
    std::remove(dd_path.c_str());
    absl::StatusOr<double> written = WriteOneFile(st_path, data, kTensorBytes, kTensors);
    if (!written.ok()) return written.status();
    writer_s.push_back(*written);
  }
  const double file_gb = kTensors * kTensorBytes / 1e9;
  const double writer = bench::Median(writer_s), baseline = bench::Median(dd_s);
  std::fprintf(stderr, "1 GiB file in %s (median of %d, alternated)\n", dir.c_str(),
               static_cast<int>(reps));
  std::fprintf(stderr, "  %-34s %8.3f GB/s\n", "dd bs=4M conv=fdatasync", file_gb / baseline);
  std::fprintf(stderr, "  %-34s %8.3f GB/s  (%.2f of dd)\n", "WriteSafetensors", file_gb / writer,
               baseline / writer);
  for (int i = 0; i < reps; ++i) {
    std::fprintf(stderr, "    rep %d: dd %.2f s, writer %.2f s\n", i, dd_s[i], writer_s[i]);
  }
  return nlohmann::json{{"file_bytes", kTensors * kTensorBytes},
                        {"dd_gb_per_s", file_gb / baseline},
                        {"writer_gb_per_s", file_gb / writer},
                        {"writer_vs_dd", baseline / writer},
                        {"dd_seconds", dd_s},
                        {"writer_seconds", writer_s}};
}

int Main(int argc, char** argv) {
  std::string dir = "/tmp";
  int64_t reps = 3;
  bool json = false;
  FlagParser flags("checkpoint_bench", "CRC-32C and safetensors writer against baselines");
  flags.AddString("dir", &dir, "directory for the 1 GiB files (removed afterwards)");
  flags.AddInt("reps", &reps, "repetitions of each measurement (best CRC, median write)");
  flags.AddBool("json", &json, "print the figures as JSON on stdout");
  const int rc = HandleParseResult(flags, flags.Parse(argc, argv));
  if (rc >= 0) return rc;
  const bench::HostRun host_run;
  absl::StatusOr<nlohmann::json> crc = CrcFigures(reps);
  if (!crc.ok()) {
    std::cerr << "checkpoint_bench: " << crc.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<nlohmann::json> file = FileFigures(dir, reps);
  if (!file.ok()) {
    std::cerr << "checkpoint_bench: " << file.status().message() << "\n";
    return 1;
  }
  const bench::HostStats host = host_run.Stop();
  std::fprintf(stderr, "host during the run (bench/host_stats.h): %s\n", host.Line().c_str());
  if (json) {
    nlohmann::json out = *crc;
    out.update(*file);
    out["host"] = HostJson(host);
    std::cout << out.dump(2) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) { return shardps::Main(argc, argv); }
