// staleness_bench: what the ps' staleness-aware updates (ps_server/staleness.h) cost per
// push, against a plain ASYNC push of the same gradient measured in the same run: the MLP
// 784-256-128-10's largest kernel half (392 x 256 floats, one shard of two), Adam, each push
// two versions stale. Policies in turn, round after round, so that a busy machine slows all
// alike; the median round of each is printed with its ratio to plain, and the memory the
// retained versions hold at the end.
//
//   bazel run //bench:staleness_bench -- [--rounds N] [--pushes N] [--rows N] [--width N]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/host_stats.h"
#include "bench/stats.h"
#include "common/flags.h"
#include "ps_server/shard_store.h"

namespace shardps {
namespace {

struct Variant {
  std::string name;
  UpdateSpec update;
  std::vector<double> us_per_push;
};

ShardSpec Spec(const std::string& name, int64_t rows, int64_t width, const UpdateSpec& update) {
  ShardSpec s;
  s.set_name(name);
  s.set_variable(name);
  s.set_num_parts(1);
  for (int64_t d : {rows, width}) {
    s.mutable_shape()->add_dim(d);
    s.mutable_full_shape()->add_dim(d);
  }
  s.mutable_initializer()->set_type(InitializerSpec::GLOROT_UNIFORM);
  s.mutable_optimizer()->set_type(OptimizerSpec::ADAM);
  s.mutable_optimizer()->set_learning_rate(1e-3);
  *s.mutable_update() = update;
  return s;
}

int Main(int argc, char** argv) {
  int64_t rounds = 7, pushes = 200, rows = 392, width = 256;
  FlagParser flags("staleness_bench", "the cost per push of each staleness policy");
  flags.AddInt("rounds", &rounds, "rounds of every policy");
  flags.AddInt("pushes", &pushes, "pushes per policy per round");
  flags.AddInt("rows", &rows, "shard rows");
  flags.AddInt("width", &width, "shard row width");
  if (int rc = HandleParseResult(flags, flags.Parse(argc, argv)); rc >= 0) return rc;
  std::vector<Variant> variants(5);
  variants[0].name = "plain";
  variants[1].name = "inverse";
  variants[1].update.set_staleness_lr(UpdateSpec::INVERSE);
  variants[2].name = "dc";
  variants[2].update.set_delay_compensation(0.04);
  variants[3].name = "dc_adaptive";
  variants[3].update.set_delay_compensation(0.04);
  variants[3].update.set_delay_compensation_adaptive(true);
  variants[4].name = "inverse_dc";
  variants[4].update.set_staleness_lr(UpdateSpec::INVERSE);
  variants[4].update.set_delay_compensation(0.04);

  const bench::HostRun host_run;
  auto store = ShardStore::Create({});
  if (!store.ok()) return 1;
  CreateShardsRequest create;
  for (const Variant& v : variants) *create.add_shards() = Spec(v.name, rows, width, v.update);
  CreateShardsResponse created;
  if (absl::Status s = (*store)->CreateShards(create, &created); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::vector<float> grad(static_cast<size_t>(rows * width));
  for (size_t i = 0; i < grad.size(); ++i) grad[i] = 1e-3f * static_cast<float>(i % 97) - 0.05f;
  PushRequest push;
  push.set_data(std::string(reinterpret_cast<const char*>(grad.data()), grad.size() * 4));
  uint64_t request_id = 0;
  std::vector<int64_t> versions(variants.size(), 0);
  for (int64_t round = 0; round < rounds; ++round) {
    for (size_t v = 0; v < variants.size(); ++v) {
      push.set_shard(variants[v].name);
      const auto start = std::chrono::steady_clock::now();
      for (int64_t k = 0; k < pushes; ++k) {
        push.set_request_id(++request_id);
        // Two versions stale (the plain shard ignores it).
        push.set_base_version(versions[v] >= 3 ? versions[v] - 2 : 0);
        PushResponse response;
        if (absl::Status s = (*store)->Push(push, &response); !s.ok()) {
          std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
          return 1;
        }
        versions[v] = response.version();
      }
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count();
      variants[v].us_per_push.push_back(us / static_cast<double>(pushes));
    }
  }
  const double plain = bench::Median(variants[0].us_per_push);
  std::printf("shard %lld x %lld floats (%.2f MiB), Adam, pushes 2 versions stale; "
              "median of %lld rounds of %lld pushes\n",
              static_cast<long long>(rows), static_cast<long long>(width),
              static_cast<double>(rows * width * 4) / (1 << 20), static_cast<long long>(rounds),
              static_cast<long long>(pushes));
  std::printf("%-12s %12s %10s\n", "policy", "us/push", "vs plain");
  for (const Variant& v : variants) {
    const double median = bench::Median(v.us_per_push);
    std::printf("%-12s %12.1f %9.2fx\n", v.name.c_str(), median, median / plain);
  }
  std::printf("host during the run (bench/host_stats.h): %s\n", host_run.Stop().Line().c_str());
  return 0;
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) { return shardps::Main(argc, argv); }
