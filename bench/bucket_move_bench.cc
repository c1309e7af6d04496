// What moving a dynamic table's buckets between ps costs a training job (shardctl
// move-buckets, docs/elastic.md): the sparse click model on hashed ids (dynamic tables on 2
// ps, one of them with many rows) trains async, then sync; in each, the job's steps/s over a
// window before a move, then `count` buckets of the largest table move from ps 0 to ps 1
// while it trains: the bytes/s the move sent, the steps/s during the move (from the chief's
// step counts at its start and end) and its ratio to the steps/s before (the issue's aim:
// at least 0.8), and the longest a bucket was frozen. And a ps added to the running job and
// removed (scale-ps 3 and 2 --live against the same through a checkpoint, RunScale).
// Printed; a benchmark, not a test.
//
//   bazel run -c opt //bench:bucket_move_bench -- [--buckets=256] [--per_switch=16] [--rounds=2]
//       [--scale_only] [--json]
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/stats.h"
#include "client/grpc_chief_interface.h"
#include "common/flags.h"
#include "nlohmann/json.hpp"
#include "tests/process.h"
#include "tests/training_cluster.h"

namespace shardps {
namespace bench {
namespace {

using testing::TrainingCluster;

// A vocabulary of 400000 in the third table: its rows grow with the steps (most ids seen
// once or twice), so a bucket holds tens to hundreds of rows by the time it moves.
constexpr char kDataset[] =
    "synthetic_ctr:examples=2000000,test=1000,dense=4,tables=4,vocab=50|300|400000|1000,"
    "hot=1|1|1..3|1,seed=11,ids=hashed";
constexpr int kBatch = 256;

absl::StatusOr<double> StepsPerSecond(TrainingCluster* c, absl::Duration window) {
  absl::StatusOr<JobStatus> a = c->Status();
  if (!a.ok()) return a.status();
  const absl::Time start = absl::Now();
  absl::SleepFor(window);
  absl::StatusOr<JobStatus> b = c->Status();
  if (!b.ok()) return b.status();
  return static_cast<double>(b->steps_done() - a->steps_done()) /
         absl::ToDoubleSeconds(absl::Now() - start);
}

struct Figures {
  std::vector<double> before, during, ratio, bytes_per_s, bytes, frozen_ms, seconds, rows;
};

// The click-model job (`mode`, `extra` job-file fields) on a cluster of `num_ps` ps and 2
// workers of 1 thread, trained past 1500 steps (the big table fills as it trains); null after
// saying why on stderr.
std::unique_ptr<TrainingCluster> StartJob(const std::string& file, const std::string& mode,
                                          const std::string& extra, int num_ps) {
  const std::string job = testing::WriteTempFile(
      file, absl::StrCat(R"({"name": "bmb", "model": "dlrm:bottom=32,16;top=32;dim=16;)",
                         R"(interaction=dot;pooling=mean", "dataset": ")", kDataset,
                         R"(", "batch_size": 256, "optimizer": {"type": "adam", )",
                         R"("learning_rate": 0.005}, "mode": ")", mode,
                         R"(", "partitioner": "fixed:2", "seed": 5, "backend": "cpu",)", extra,
                         R"( "steps": 100000000})"));
  TrainingCluster::Options options;
  options.num_workers = 2;
  options.num_ps = num_ps;
  options.job_file = job;
  options.worker_flags = {"--threads=1"};
  auto cluster = TrainingCluster::Start(options);
  if (!cluster.ok()) {
    std::cerr << "bucket_move_bench: " << cluster.status() << "\n";
    return nullptr;
  }
  TrainingCluster* c = cluster->get();
  if (!c->WaitForStatus([](const JobStatus& s) { return s.steps_done() >= 1500; },
                        absl::Minutes(5))
           .ok()) {
    std::cerr << "bucket_move_bench: the job does not train\n" << c->Logs();
    return nullptr;
  }
  return *std::move(cluster);
}

int RunMode(const std::string& mode, int buckets, int per_switch, int pause_ms, int rounds,
            nlohmann::json* out) {
  const std::unique_ptr<TrainingCluster> cluster =
      StartJob("bucket_move_bench_" + mode + ".json", mode, "", 2);
  if (cluster == nullptr) return 1;
  TrainingCluster* c = cluster.get();
  auto client = c->NewPsClient();
  if (!client.ok() || !(*client)->Discover().ok()) {
    std::cerr << "bucket_move_bench: cannot read the layout\n";
    return 1;
  }
  std::string table;
  for (const std::string& name : (*client)->VariableNames()) {
    if (absl::EndsWith(name, "/C2")) table = name;  // the 400000-id table
  }
  const std::unique_ptr<ChiefInterface> chief = NewGrpcChiefInterface(c->chief_address());
  Figures f;
  for (int round = 0; round < rounds; ++round) {
    absl::StatusOr<double> before = StepsPerSecond(c, absl::Seconds(3));
    if (!before.ok()) {
      std::cerr << "bucket_move_bench: " << before.status() << "\n";
      return 1;
    }
    MoveTableBucketsRequest request;
    request.set_variable(table);
    // Out and back: every round moves the same buckets, grown by the steps between.
    request.set_from_shard(round % 2 == 0 ? 0 : 1);
    request.set_to_shard(round % 2 == 0 ? 1 : 0);
    request.set_count(buckets);
    request.set_per_switch(per_switch);
    request.set_pause_ms(pause_ms);
    absl::StatusOr<MoveTableBucketsResponse> moved =
        chief->MoveTableBuckets(request, absl::Minutes(10));
    if (!moved.ok()) {
      std::cerr << "bucket_move_bench: " << moved.status() << "\n" << c->Logs();
      return 1;
    }
    const double during =
        static_cast<double>(moved->steps_after() - moved->steps_before()) / moved->seconds();
    f.before.push_back(*before);
    f.during.push_back(during);
    f.ratio.push_back(*before > 0 ? during / *before : 0);
    f.bytes.push_back(static_cast<double>(moved->bytes()));
    f.rows.push_back(static_cast<double>(moved->rows()));
    f.bytes_per_s.push_back(static_cast<double>(moved->bytes()) / moved->seconds());
    f.frozen_ms.push_back(moved->frozen_s() * 1000);
    f.seconds.push_back(moved->seconds());
    std::cout << absl::StrFormat(
        "%s round %d, %d per switch, pause %d ms: %d buckets of %s, %d rows, %.0f bytes in "
        "%.2f s (%.0f B/s, %.3f ms/bucket); steps/s %.1f before, %.1f during (x%.2f); "
        "longest freeze %.2f ms\n",
        mode, round, per_switch, pause_ms, moved->buckets(), table, moved->rows(),
        f.bytes.back(), moved->seconds(), f.bytes_per_s.back(),
        moved->seconds() * 1000 / std::max(1, moved->buckets()), *before, during,
        f.ratio.back(), f.frozen_ms.back());
  }
  std::cout << absl::StrFormat(
      "%s, %d per switch, pause %d ms, median of %d: %.0f B/s moved (%.0f rows, %.0f bytes, "
      "%.2f s for %d buckets); steps/s %.1f before, %.1f during: x%.2f (aim >= 0.8); longest "
      "freeze %.2f ms\n",
      mode, per_switch, pause_ms, rounds, Median(f.bytes_per_s), Median(f.rows),
      Median(f.bytes), Median(f.seconds), buckets, Median(f.before), Median(f.during),
      Median(f.ratio), Median(f.frozen_ms));
  const std::string key = pause_ms > 0 ? absl::StrCat(mode, "_", per_switch, "_pause", pause_ms)
                                       : absl::StrCat(mode, "_", per_switch);
  (*out)[key] = {{"buckets", buckets},
                 {"pause_ms", pause_ms},
                 {"rows", Median(f.rows)},
                 {"bytes", Median(f.bytes)},
                 {"seconds", Median(f.seconds)},
                 {"bytes_per_s", Median(f.bytes_per_s)},
                 {"steps_per_s_before", Median(f.before)},
                 {"steps_per_s_during", Median(f.during)},
                 {"ratio", Median(f.ratio)},
                 {"longest_freeze_ms", Median(f.frozen_ms)}};
  return 0;
}

// A ps added to the running job and removed again: TF_CONFIG names 3 ps, the job starts on 2
// (num_ps), and after 1500 steps `scale-ps 3`, then `scale-ps 2`, run live (the tables balanced
// onto the new ps, or moved off it, while the job trains) or, the baseline, through a
// checkpoint, each way on a cluster of its own. The pause (no step leased), the scale's time,
// what it moved, and the job's steps/s before, during the scale (the chief's step counts at
// its start and end) and after.
int RunScale(const std::string& mode, bool live, int pause_ms, nlohmann::json* out) {
  const std::string dir = testing::FreshTempDir(absl::StrCat("bmb_scale_", mode, live));
  const std::unique_ptr<TrainingCluster> cluster = StartJob(
      absl::StrCat("bucket_move_bench_scale_", mode, ".json"), mode,
      absl::StrCat(R"( "num_ps": 2, "checkpoint": {"dir": ")", dir,
                   R"(", "every_steps": 100000000},)"),
      3);
  if (cluster == nullptr) return 1;
  TrainingCluster* c = cluster.get();
  const std::unique_ptr<ChiefInterface> chief = NewGrpcChiefInterface(c->chief_address());
  // Up to 3 ps, then back down to 2: each measured alike.
  for (const int to : {3, 2}) {
    absl::StatusOr<double> before = StepsPerSecond(c, absl::Seconds(3));
    absl::StatusOr<JobStatus> start = c->Status();
    if (!before.ok() || !start.ok()) {
      std::cerr << "bucket_move_bench: cannot read the chief's status\n";
      return 1;
    }
    ScalePsRequest request;
    request.set_num_ps(to);
    request.set_live(live);
    request.set_per_switch(64);
    request.set_pause_ms(pause_ms);
    absl::StatusOr<ScalePsResponse> scaled = chief->ScalePs(request, absl::Minutes(10));
    absl::StatusOr<JobStatus> end = c->Status();
    if (!scaled.ok() || !end.ok()) {
      std::cerr << "bucket_move_bench: scale-ps " << to << (live ? " --live" : "") << ": "
                << (scaled.ok() ? end.status() : scaled.status()) << "\n" << c->Logs();
      return 1;
    }
    const double during =
        static_cast<double>(end->steps_done() - start->steps_done()) / scaled->seconds();
    absl::StatusOr<double> after = StepsPerSecond(c, absl::Seconds(3));
    if (!after.ok()) return 1;
    const std::string how = live ? absl::StrCat("live, pause ", pause_ms, " ms") : "checkpoint";
    const int from = to == 3 ? 2 : 3;
    std::cout << absl::StrFormat(
        "%s, %d -> %d ps (%s): paused %.3f s, %.2f s in all; %s; steps/s %.1f on %d ps, %.1f "
        "during the scale (x%.2f), %.1f on %d ps after (x%.2f)\n",
        mode, from, to, how, scaled->pause_s(), scaled->seconds(),
        live ? absl::StrFormat("%d buckets, %d rows, %d bytes moved in %.2f s",
                               scaled->buckets_moved(), scaled->rows_moved(),
                               scaled->bytes_moved(), scaled->balance_s())
             : absl::StrFormat("checkpoint %d, %d bytes through it", scaled->checkpoint_id(),
                               scaled->bytes_moved()),
        *before, from, during, *before > 0 ? during / *before : 0, *after, to,
        *before > 0 ? *after / *before : 0);
    (*out)[absl::StrCat("scale_", mode, "_", from, "_to_", to, live ? "_live" : "_checkpoint")] = {
        {"pause_s", scaled->pause_s()},
        {"seconds", scaled->seconds()},
        {"bytes_moved", scaled->bytes_moved()},
        {"buckets_moved", scaled->buckets_moved()},
        {"rows_moved", scaled->rows_moved()},
        {"balance_s", scaled->balance_s()},
        {"steps_per_s_before", *before},
        {"steps_per_s_during", during},
        {"steps_per_s_after", *after}};
  }
  return 0;
}

int Main(int argc, char** argv) {
  int64_t buckets = 256;
  int64_t rounds = 2;
  bool json = false;
  FlagParser flags("bucket_move_bench",
                   "steps/s of a training job while a dynamic table's buckets move between ps");
  flags.AddInt("buckets", &buckets, "buckets per move (of the table's 2048 on a shard)");
  int64_t per_switch = 16;
  flags.AddInt("per_switch", &per_switch, "buckets per switch of the second measurement (the "
               "first moves one at a time)");
  int64_t pause_ms = 25;
  flags.AddInt("pause_ms", &pause_ms, "the pause between switches of the third measurement "
               "(per_switch buckets a switch)");
  flags.AddInt("rounds", &rounds, "moves measured per mode, alternately out and back");
  flags.AddBool("json", &json, "also print the figures as one JSON line");
  bool scale_only = false;
  flags.AddBool("scale_only", &scale_only,
                "only the ps added to the running job (scale-ps 3 --live, and through a "
                "checkpoint), not the moves");
  const int rc = HandleParseResult(flags, flags.Parse(argc, argv));
  if (rc >= 0) return rc;
  testing::SetUpRunfilesForBazelRun(argv[0], "worker/worker", "bucket_move_bench");
  nlohmann::json out;
  for (const std::string mode : {"async", "sync"}) {
    for (const bool live : {true, false}) {
      if (const int rc = RunScale(mode, live, static_cast<int>(pause_ms), &out); rc != 0) {
        return rc;
      }
    }
    if (scale_only) continue;
    const std::vector<std::pair<int64_t, int64_t>> configs = {
        {1, 0}, {per_switch, 0}, {per_switch, pause_ms}};
    for (const auto& [k, pause] : configs) {
      if (const int rc = RunMode(mode, static_cast<int>(buckets), static_cast<int>(k),
                                 static_cast<int>(pause), static_cast<int>(rounds), &out);
          rc != 0) {
        return rc;
      }
    }
  }
  if (json) std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace shardps

int main(int argc, char** argv) { return shardps::bench::Main(argc, argv); }
