// Memory and throughput of a dynamic (hashed-key) embedding table (ps_server/dynamic_table.h).
//
// Inserts --rows rows (default 10^7) of --dim floats (16) with Adagrad (one slot) through
// pushes, and prints the process RSS before and after, the bytes per row, and the ratio of
// RSS to the rows' floats (rows x (dim + slot floats) x 4 bytes), whose target is at most 1.3
// at 10^7 rows of dim 16. Then pull and push rows/s with keys drawn from a power law
// (Zipf exponent --zipf, 1.1 by default) over the inserted keys, deduplicated per batch as a
// worker does, on 1 and --threads threads.
//
//   bazel run -c opt //bench:dynamic_table_bench -- [--rows N] [--dim D] [--threads T]
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "bench/host_stats.h"
#include "bench/rss.h"
#include "common/flags.h"
#include "math/optimizer.h"
#include "ps_server/dynamic_table.h"
#include "ps_server/shard_store.h"
#include "absl/strings/str_cat.h"

namespace shardps {
namespace {

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The key of rank r (0 = hottest): a hashed id, as a feature hasher would produce.
int64_t KeyOf(int64_t r) { return static_cast<int64_t>(Mix64(static_cast<uint64_t>(r) + 1)); }

// Ranks in [0, n) from a continuous power law of exponent `a` (inverse CDF), so that rank r is
// drawn with probability about proportional to (r + 1)^-a.
class PowerLaw {
 public:
  PowerLaw(int64_t n, double a, uint64_t seed) : n_(n), a_(a), rng_(seed) {
    top_ = std::pow(static_cast<double>(n) + 1, 1 - a) - 1;
  }
  int64_t Next() {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng_);
    const double x = std::pow(top_ * u + 1, 1 / (1 - a_)) - 1;
    return std::min<int64_t>(n_ - 1, static_cast<int64_t>(x));
  }

 private:
  int64_t n_;
  double a_;
  double top_;
  std::mt19937_64 rng_;
};

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

int64_t RssNow() {
  auto r = bench::ReadRss(getpid());
  return r.ok() ? r->rss_bytes : -1;
}

// A ShardStore holding one empty dynamic shard "bench/emb" of `dim` floats with Adagrad.
absl::StatusOr<std::unique_ptr<ShardStore>> StoreWithDynamicShard(int64_t dim) {
  auto store = ShardStore::Create({});
  if (!store.ok()) return store.status();
  CreateShardsRequest create;
  ShardSpec* spec = create.add_shards();
  spec->set_name("bench/emb");
  spec->set_variable("bench/emb");
  for (int64_t d : {int64_t{0}, dim}) {
    spec->mutable_shape()->add_dim(d);
    spec->mutable_full_shape()->add_dim(d);
  }
  spec->mutable_initializer()->set_type(InitializerSpec::RANDOM_UNIFORM);
  spec->mutable_optimizer()->set_type(OptimizerSpec::ADAGRAD);
  spec->mutable_optimizer()->set_learning_rate(0.05);
  spec->mutable_dynamic()->set_num_buckets(4096);
  spec->mutable_dynamic()->set_bucket_end(4096);
  CreateShardsResponse created;
  if (absl::Status s = (*store)->CreateShards(create, &created); !s.ok()) return s;
  return store;
}

// Pushes rows of bench/emb through the store's PushRows, a batch at a time; exits on an error.
class RowPusher {
 public:
  RowPusher(ShardStore* store, int64_t dim, int64_t batch)
      : store_(store), dim_(dim), batch_(batch), keys_(batch), grads_(batch * dim, 0.01f) {}
  // The rows of ranks first, first + stride, ... (count of them).
  void Push(int64_t first, int64_t count, int64_t stride) {
    for (int64_t b = 0; b < count; b += batch_) {
      const int64_t n = std::min(batch_, count - b);
      for (int64_t i = 0; i < n; ++i) keys_[i] = KeyOf(first + (b + i) * stride);
      PushRowsRequest request;
      request.set_request_id(++request_id_);
      request.set_shard("bench/emb");
      request.set_ids_bytes(std::string(reinterpret_cast<const char*>(keys_.data()), n * 8));
      request.set_data(std::string(reinterpret_cast<const char*>(grads_.data()), n * dim_ * 4));
      PushRowsResponse response;
      if (absl::Status s = store_->PushRows(request, &response); !s.ok()) {
        std::cerr << s << "\n";
        std::exit(1);
      }
    }
  }

 private:
  ShardStore* const store_;
  const int64_t dim_, batch_;
  std::vector<int64_t> keys_;
  std::vector<float> grads_;
  uint64_t request_id_ = 0;
};

// A snapshot of the store (full: since 0) cut and written into `dir`: its cut, its write
// and the peak RSS meanwhile. Exits on an error.
void SnapshotFigures(ShardStore* store, const std::string& dir, int64_t id, int64_t since,
                     int64_t rss_steady) {
  (void)bench::ResetPeakRss(getpid());
  const auto t0 = std::chrono::steady_clock::now();
  SnapshotRequest request;
  request.set_checkpoint_id(id);
  request.set_path(absl::StrCat(dir, "/snapshot-", id, ".safetensors"));
  request.set_incremental_since(since);
  SnapshotResponse response;
  if (absl::Status s = store->Snapshot(request, &response); !s.ok()) {
    std::cerr << s << "\n";
    std::exit(1);
  }
  const double cut_s = Seconds(t0);
  SnapshotStatusResponse status;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    SnapshotStatusRequest query;
    query.set_checkpoint_id(id);
    (void)store->SnapshotStatus(query, &status);
  } while (status.state() == SnapshotStatusResponse::WRITING);
  const double total_s = Seconds(t0);
  if (status.state() != SnapshotStatusResponse::DONE) {
    std::cerr << "dynamic_table_bench: snapshot " << id << " to " << request.path() << " "
              << SnapshotStatusResponse::State_Name(status.state()) << ": " << status.error()
              << "\n";
    std::exit(1);
  }
  auto rss = bench::ReadRss(getpid());
  const int64_t written = response.shards(0).dynamic().rows();
  std::printf("%s snapshot: %lld rows, cut in %.2f s (training paused), file %.1f MiB written "
              "in %.2f s; peak RSS %.1f MiB = %.3f x the steady RSS\n",
              since == 0 ? "full" : "incremental", static_cast<long long>(written), cut_s,
              status.file().bytes() / 1048576.0, total_s,
              rss.ok() ? rss->peak_bytes / 1048576.0 : -1.0,
              rss.ok() ? static_cast<double>(rss->peak_bytes) / rss_steady : -1.0);
  std::remove(request.path().c_str());
}

// The figures of a ps: a ShardStore holding one dynamic shard of `rows` rows, its RSS per
// row of floats in steady state, and the peak while a full and an incremental snapshot (after
// `changed` of the rows were pushed again) are cut and written to `dir`.
int CheckpointFigures(int64_t rows, int64_t dim, int64_t batch, double changed,
                      const std::string& dir) {
  const int64_t rss_start = RssNow();
  absl::StatusOr<std::unique_ptr<ShardStore>> store = StoreWithDynamicShard(dim);
  if (!store.ok()) {
    std::cerr << store.status() << "\n";
    return 1;
  }
  RowPusher pusher(store->get(), dim, batch);
  pusher.Push(0, rows, 1);
  const int64_t rss_steady = RssNow();
  const double floats = static_cast<double>(rows) * dim * 2 * 4;  // parameters + accumulator
  std::printf("ps store, %lld rows dim %lld Adagrad: RSS %.1f MiB, %.3f x the floats (%.3f for "
              "the table's growth); target <= 1.3\n",
              static_cast<long long>(rows), static_cast<long long>(dim), rss_steady / 1048576.0,
              rss_steady / floats, (rss_steady - rss_start) / floats);
  SnapshotFigures(store->get(), dir, 1, 0, rss_steady);
  // `changed` of the rows pushed again, spread over the table: the increment's rows.
  const int64_t again = std::max<int64_t>(1, static_cast<int64_t>(rows * changed));
  pusher.Push(0, again, std::max<int64_t>(1, rows / again));
  SnapshotFigures(store->get(), dir, 2, 1, rss_steady);
  return 0;
}

struct Flags {
  int64_t rows = 10'000'000, dim = 16, threads = 2, batch = 4096, seconds = 3;
  double zipf = 1.1;
  std::string checkpoint_dir;
  double changed = 0.01;
};

// Inserts the rows through pushes (with the caller's buffers of one batch, made before the
// RSS baselines) and prints the memory figures; the step reached.
absl::StatusOr<int64_t> InsertFigures(const Flags& f, const Optimizer& opt, DynamicTable* table,
                                      int64_t rss_before, int64_t rss_empty,
                                      std::vector<int64_t>& keys, std::vector<float>& grads) {
  const auto start = std::chrono::steady_clock::now();
  int64_t step = 0;
  for (int64_t first = 0; first < f.rows; first += f.batch) {
    const int64_t n = std::min(f.batch, f.rows - first);
    for (int64_t i = 0; i < n; ++i) keys[i] = KeyOf(first + i);
    auto r = table->Push(absl::MakeConstSpan(keys.data(), n),
                         absl::MakeConstSpan(grads.data(), n * f.dim), opt, ++step);
    if (!r.ok()) return r.status();
  }
  const double insert_s = Seconds(start);
  const int64_t rss_after = RssNow();
  const DynamicTableStats stats = table->stats();
  const double payload = static_cast<double>(stats.rows) * f.dim * (1 + opt.num_slots()) * 4;
  std::printf("rows %lld dim %lld slots %d: inserted in %.2f s (%.0f rows/s)\n",
              static_cast<long long>(stats.rows), static_cast<long long>(f.dim),
              opt.num_slots(), insert_s, stats.rows / insert_s);
  std::printf("RSS before %.1f MiB, empty table %.1f MiB, after %.1f MiB\n", rss_before / 1048576.0,
              rss_empty / 1048576.0, rss_after / 1048576.0);
  std::printf("index %.1f MiB, row chunks mapped %.1f MiB, floats %.1f MiB\n",
              stats.index_bytes / 1048576.0, stats.arena_bytes / 1048576.0, payload / 1048576.0);
  std::printf("bytes per row: %.1f (table's growth), %.1f (whole process); floats %.0f\n",
              (rss_after - rss_before) / static_cast<double>(stats.rows),
              rss_after / static_cast<double>(stats.rows), payload / stats.rows);
  std::printf("ratio RSS / floats: %.3f (whole process), %.3f (table's growth); target <= 1.3\n",
              rss_after / payload, (rss_after - rss_before) / payload);
  return step;
}

// Rows/s of pulls (or pushes) on `nthreads` threads under the power law, deduplicated per
// batch, for --seconds.
double Throughput(const Flags& f, const Optimizer& opt, DynamicTable* table, int nthreads,
                  bool push, int64_t step) {
  std::atomic<int64_t> total{0};
  std::atomic<int64_t> step_counter{step};
  // Key batches drawn before the clock starts (the draws cost more than the table).
  std::vector<std::vector<std::vector<int64_t>>> drawn(nthreads);
  for (int t = 0; t < nthreads; ++t) {
    PowerLaw law(f.rows, f.zipf, 1000 + t);
    absl::flat_hash_set<int64_t> seen;
    for (int b = 0; b < 32; ++b) {
      seen.clear();
      std::vector<int64_t> ks;
      for (int64_t i = 0; i < f.batch; ++i) {
        const int64_t k = KeyOf(law.Next());
        if (seen.insert(k).second) ks.push_back(k);
      }
      drawn[t].push_back(std::move(ks));
    }
  }
  std::vector<std::thread> pool;
  const auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < nthreads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<float> buf(f.batch * f.dim, 0.01f);
      for (size_t b = 0; Seconds(t0) < f.seconds; ++b) {
        const std::vector<int64_t>& ks = drawn[t][b % drawn[t].size()];
        const auto span = absl::MakeSpan(buf.data(), ks.size() * f.dim);
        if (push) {
          auto r = table->Push(ks, span, opt, ++step_counter);
          if (!r.ok()) std::abort();
        } else if (!table->Pull(ks, span).ok()) {
          std::abort();
        }
        total += static_cast<int64_t>(ks.size());
      }
    });
  }
  for (auto& th : pool) th.join();
  return total.load() / Seconds(t0);
}

int TableFigures(const Flags& f) {
  OptimizerSpec spec;
  spec.set_type(OptimizerSpec::ADAGRAD);
  spec.set_learning_rate(0.05);
  auto opt = Optimizer::Create(spec);
  if (!opt.ok()) {
    std::cerr << opt.status() << "\n";
    return 1;
  }
  DynamicTableOptions options;
  options.name = "bench";
  options.dim = f.dim;
  options.initializer.set_type(InitializerSpec::RANDOM_UNIFORM);
  options.initializer.set_seed(1);
  // Buffers of one batch, made before the baseline so that they are not counted per row.
  std::vector<int64_t> keys(f.batch);
  std::vector<float> grads(f.batch * f.dim, 0.01f);
  const int64_t rss_before = RssNow();
  auto table = DynamicTable::Create(options, **opt);
  if (!table.ok()) {
    std::cerr << table.status() << "\n";
    return 1;
  }
  const int64_t rss_empty = RssNow();
  absl::StatusOr<int64_t> step =
      InsertFigures(f, **opt, table->get(), rss_before, rss_empty, keys, grads);
  if (!step.ok()) {
    std::cerr << step.status() << "\n";
    return 1;
  }
  for (int nthreads : {1, static_cast<int>(f.threads)}) {
    const double pull = Throughput(f, **opt, table->get(), nthreads, false, *step);
    const double push = Throughput(f, **opt, table->get(), nthreads, true, *step);
    std::printf("zipf %.2f, batch %lld deduplicated, %d thread(s): pull %.2f M rows/s (%.0f MB/s), "
                "push %.2f M rows/s\n",
                f.zipf, static_cast<long long>(f.batch), nthreads, pull / 1e6,
                pull * f.dim * 4 / 1e6, push / 1e6);
    if (f.threads == 1) break;
  }
  std::printf("RSS at the end %.1f MiB (rows %lld)\n", RssNow() / 1048576.0,
              static_cast<long long>((*table)->size()));
  return 0;
}

int Main(int argc, char** argv) {
  Flags f;
  FlagParser flags("dynamic_table_bench", "Memory per row and row throughput of a dynamic table.");
  flags.AddInt("rows", &f.rows, "rows to insert");
  flags.AddInt("dim", &f.dim, "floats per row");
  flags.AddInt("threads", &f.threads, "threads for the parallel throughput figures");
  flags.AddInt("batch", &f.batch, "keys per pull or push (before deduplication)");
  flags.AddInt("seconds", &f.seconds, "seconds per throughput figure");
  flags.AddDouble("zipf", &f.zipf, "power-law exponent of the key draws");
  flags.AddString("checkpoint_dir", &f.checkpoint_dir,
                  "measure a ps store's snapshots instead, writing them here");
  flags.AddDouble("changed", &f.changed,
                  "share of rows pushed between the full and the incremental snapshot");
  const int rc = HandleParseResult(flags, flags.Parse(argc, argv));
  if (rc >= 0) return rc;
  if (f.checkpoint_dir.empty() &&
      (f.rows <= 0 || f.dim <= 0 || f.threads <= 0 || f.batch <= 0 || f.zipf <= 1)) {
    std::cerr << "--rows, --dim, --threads, --batch must be > 0 and --zipf > 1\n";
    return 2;
  }
  const bench::HostRun host_run;
  const int code = f.checkpoint_dir.empty()
                       ? TableFigures(f)
                       : CheckpointFigures(f.rows, f.dim, f.batch, f.changed, f.checkpoint_dir);
  std::printf("host during the run (bench/host_stats.h): %s\n", host_run.Stop().Line().c_str());
  return code;
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) { return shardps::Main(argc, argv); }
