// soak_bench: two real ps daemons with mutual TLS and roles, hammered for a long time by many
// client threads in several processes with mixed work, to see that nothing drifts: errors,
// latency, the ps's memory, file descriptors and threads (issue 23 §6). Printed, not a test.
//
//   bazel run //bench:soak_bench -- [--seconds=600] [--short] [--processes=4] [--threads=64]
//                                    [--interval_s=30] [--tls=on|off]
//
// The clients: --processes copies of this binary (re-executed with --client), --threads
// threads in all, each a loop of random operations on one PsClient per process: dense pulls
// and pushes of a 1 MiB variable (2 shards), row pulls and pushes of 256 ids of a 100 000 x 32
// table, inserts into a dynamic table of 16-float rows (keys from 200 000, so that it fills
// and stays full), and Health calls. This process, as the chief, cuts a checkpoint of both ps
// every --checkpoint_every_s (and keeps the last two) and reads the ps's RSS, open file
// descriptors and threads every interval.
//
// Reported per interval: operations per second, errors, p50 and p99 latency of all
// operations; at the end: errors (target 0), the ps's RSS at the end of the first interval
// (after the dynamic table has filled) and at the end (growth target < 10%), descriptors and
// threads first and last (target: flat), checkpoints cut, and the host's load.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/host_stats.h"
#include "bench/rss.h"
#include "bench/stats.h"
#include "client/ps_client.h"
#include "common/flags.h"
#include "common/process_tuning.h"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"
#include "rpc/test_pki.h"
#include "rpc/tls.h"
#include "tests/process.h"

namespace shardps {
namespace bench {
namespace {

struct Config {
  int64_t seconds = 600;
  bool short_run = false;
  int64_t processes = 4;
  int64_t threads = 64;
  double interval_s = 30;
  double checkpoint_every_s = 20;
  std::string tls = "on";
  // Client mode (re-executed by the bench).
  std::string client_of;  // ps addresses, comma-separated
  std::string tls_dir;    // ca.crt, client.crt, client.key ("": plaintext)
  int64_t seed = 1;
};

constexpr int64_t kDenseRows = 256, kDenseCols = 1024;
constexpr int64_t kEmbRows = 100000, kEmbDim = 32, kRowBatch = 256;
constexpr int64_t kDynDim = 16, kDynKeys = 200000, kDynBatch = 64;

std::vector<VariableDef> Variables() {
  auto def = [](const std::string& name, std::vector<int64_t> shape) {
    VariableDef d;
    d.name = name;
    d.shape = std::move(shape);
    d.initializer.set_type(InitializerSpec::RANDOM_NORMAL);
    d.initializer.set_seed(7);
    d.optimizer.set_type(OptimizerSpec::SGD);
    d.optimizer.set_learning_rate(1e-6);
    return d;
  };
  std::vector<VariableDef> defs = {def("dense", {kDenseRows, kDenseCols}),
                                   def("emb", {kEmbRows, kEmbDim}), def("dyn", {0, kDynDim})};
  defs[2].dynamic = DynamicTableDef();
  return defs;
}

// ---- client mode: one process's threads; one line per interval on stdout ----

int RunClient(const Config& config) {
  if (!config.tls_dir.empty()) {
    TlsOptions tls;
    tls.ca_file = config.tls_dir + "/ca.crt";
    tls.cert_file = config.tls_dir + "/client.crt";
    tls.key_file = config.tls_dir + "/client.key";
    SetProcessTls(tls);
  }
  PsClient::Options options;
  options.rpc_timeout = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<PsClient>> client =
      NewGrpcPsClient(absl::StrSplit(config.client_of, ','), options);
  if (!client.ok() || !(*client)->Discover().ok()) {
    std::cerr << "client: cannot reach the ps\n";
    return 1;
  }
  const int intervals =
      static_cast<int>(std::ceil(config.seconds / config.interval_s));
  struct PerThread {
    std::vector<std::vector<double>> latency_ms;
    std::vector<int64_t> errors;
    std::string first_error;
  };
  std::vector<PerThread> per(config.threads);
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::Seconds(config.seconds);
  std::vector<std::thread> threads;
  for (int t = 0; t < config.threads; ++t) {
    threads.emplace_back([&, t] {
      PerThread& mine = per[t];
      mine.latency_ms.resize(intervals);
      mine.errors.assign(intervals, 0);
      std::mt19937_64 gen(config.seed * 1000 + t);
      std::vector<float> dense(kDenseRows * kDenseCols, 1e-3f);
      std::vector<int64_t> ids(kRowBatch), keys(kDynBatch);
      std::vector<float> rows(kRowBatch * kEmbDim, 1e-3f), dyn(kDynBatch * kDynDim, 1e-3f);
      std::vector<HealthResponse> health;
      PsClient& ps = **client;
      for (absl::Time now = absl::Now(); now < end; now = absl::Now()) {
        for (auto& id : ids) id = static_cast<int64_t>(gen() % kEmbRows);
        for (auto& key : keys) key = static_cast<int64_t>(gen() % kDynKeys) * 7919 + 13;
        const int op = static_cast<int>(gen() % 20);
        absl::Status s;
        if (op < 4) s = ps.Pull("dense", absl::MakeSpan(dense));
        else if (op < 8) s = ps.Push("dense", dense);
        else if (op < 12) s = ps.PullRows("emb", ids, absl::MakeSpan(rows));
        else if (op < 16) s = ps.PushRows("emb", ids, rows);
        else if (op < 19) s = ps.PushRows("dyn", keys, dyn);
        else s = ps.Health(&health);
        const absl::Time done = absl::Now();
        const int i = std::min<int>(intervals - 1, static_cast<int>(absl::ToDoubleSeconds(
                                                       now - start) / config.interval_s));
        mine.latency_ms[i].push_back(absl::ToDoubleMilliseconds(done - now));
        if (!s.ok()) {
          ++mine.errors[i];
          if (mine.first_error.empty()) mine.first_error = s.ToString();
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < intervals; ++i) {
    int64_t errors = 0;
    std::vector<double> all;
    for (const PerThread& p : per) {
      errors += p.errors[i];
      all.insert(all.end(), p.latency_ms[i].begin(), p.latency_ms[i].end());
    }
    std::cout << "interval " << i << " ops " << all.size() << " errors " << errors << " lat";
    // The samples themselves, rounded to 10 us: the bench merges the processes' before
    // taking percentiles.
    for (double ms : all) std::cout << " " << absl::StrFormat("%.2f", ms);
    std::cout << "\n";
  }
  for (const PerThread& p : per) {
    if (!p.first_error.empty()) std::cout << "first_error " << p.first_error << "\n";
  }
  return 0;
}

// ---- the bench ----

struct PsSample {
  int64_t rss = 0;
  int fds = 0;
  int threads = 0;
};

PsSample SamplePs(pid_t pid) {
  PsSample s;
  if (absl::StatusOr<ProcessRss> rss = ReadRss(pid); rss.ok()) s.rss = rss->rss_bytes;
  if (DIR* dir = ::opendir(absl::StrCat("/proc/", pid, "/fd").c_str())) {
    while (dirent* e = ::readdir(dir)) s.fds += e->d_name[0] != '.';
    ::closedir(dir);
  }
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(status, line);) {
    if (absl::StartsWith(line, "Threads:")) (void)absl::SimpleAtoi(line.substr(8), &s.threads);
  }
  return s;
}

int RunBench(const Config& config, const char* argv0) {
  const std::string dir = testing::TempDir();
  const std::string root = dir + "/root";
  ::mkdir(root.c_str(), 0755);
  std::vector<std::string> addresses = {testing::LoopbackAddress(), testing::LoopbackAddress()};
  const bool tls = config.tls == "on";
  std::string tls_dir;
  std::vector<std::string> tls_flags;
  if (tls) {
    tls_dir = dir + "/tls";
    ::mkdir(tls_dir.c_str(), 0755);
    TestPki pki(tls_dir, "ca");
    std::string ips;
    for (const std::string& a : addresses) {
      absl::StrAppend(&ips, ips.empty() ? "" : ",", "IP:", a.substr(0, a.rfind(':')));
    }
    pki.Issue("ps", {.uri = "spiffe://shardps/ps/0", .extra_sans = ips});
    // The clients push and pull; the bench, as the chief, also creates and snapshots.
    pki.Issue("client", {.uri = "spiffe://shardps/worker/0"});
    pki.Issue("chief", {.uri = "spiffe://shardps/chief/0"});
    tls_flags = {"--tls_cert_file=" + pki.cert("ps"), "--tls_key_file=" + pki.key("ps"),
                 "--tls_ca_file=" + pki.ca_file(), "--tls_client_auth"};
    SetProcessTls(pki.Options("chief"));
  }
  std::vector<std::unique_ptr<testing::Process>> ps;
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> args = {
        "--tf_config=" + testing::MakeTfConfig({{"ps", addresses}}, "ps", i),
        "--data_root=" + root};
    args.insert(args.end(), tls_flags.begin(), tls_flags.end());
    absl::StatusOr<std::unique_ptr<testing::Process>> p = testing::Process::Start(
        testing::BinaryPath("ps_server/ps"), args, {}, absl::StrCat(dir, "/ps-", i, ".log"));
    if (!p.ok()) {
      std::cerr << "soak_bench: " << p.status() << "\n";
      return 1;
    }
    ps.push_back(*std::move(p));
  }
  PsClient::Options options;
  options.rpc_timeout = absl::Seconds(30);
  std::unique_ptr<PsClient> chief = *NewGrpcPsClient(addresses, options);
  std::vector<HealthResponse> health;
  for (int tries = 0; !chief->Health(&health).ok(); ++tries) {
    if (tries > 300) {
      std::cerr << "soak_bench: the ps did not come up:\n" << ps[0]->Log() << ps[1]->Log();
      return 1;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  auto placer = *NewRoundRobinPlacer(2);
  if (absl::Status s = chief->CreateVariables(Variables(), **NewFixedShardsPartitioner(2),
                                              placer.get());
      !s.ok()) {
    std::cerr << "soak_bench: " << s << "\n";
    return 1;
  }

  const HostRun host_run;
  std::vector<std::unique_ptr<testing::Process>> clients;
  for (int p = 0; p < config.processes; ++p) {
    const int64_t threads =
        config.threads / config.processes + (p < config.threads % config.processes ? 1 : 0);
    clients.push_back(*testing::Process::Start(
        testing::SelfPath(),
        {"--client_of=" + absl::StrJoin(addresses, ","), "--tls_dir=" + tls_dir,
         absl::StrCat("--threads=", threads), absl::StrCat("--seconds=", config.seconds),
         absl::StrCat("--interval_s=", config.interval_s), absl::StrCat("--seed=", p + 1)},
        {}, absl::StrCat(dir, "/client-", p, ".log")));
  }
  const int intervals = static_cast<int>(std::ceil(config.seconds / config.interval_s));
  std::vector<std::vector<PsSample>> samples(2);
  const absl::Time start = absl::Now();
  int64_t checkpoints = 0, checkpoint_errors = 0;
  std::string checkpoint_error;
  absl::Time next_checkpoint = start + absl::Seconds(config.checkpoint_every_s);
  for (int i = 1; i <= intervals; ++i) {
    const absl::Time sample_at = start + absl::Seconds(i * config.interval_s);
    while (absl::Now() < sample_at) {
      if (absl::Now() >= next_checkpoint) {
        next_checkpoint += absl::Seconds(config.checkpoint_every_s);
        const int64_t id = ++checkpoints;
        std::vector<std::string> paths;
        for (int k = 0; k < 2; ++k) paths.push_back(absl::StrCat(root, "/ckpt-", id % 2, "-ps", k));
        std::vector<SnapshotResponse> cut;
        absl::Status s = chief->SnapshotAll(id, paths, 0, &cut);
        std::vector<SnapshotStatusResponse> status;
        for (int wait = 0; s.ok() && wait < 600; ++wait) {
          s = chief->SnapshotStatusAll(id, &status);
          const bool writing = absl::c_any_of(status, [](const SnapshotStatusResponse& r) {
            return r.state() == SnapshotStatusResponse::WRITING;
          });
          if (!writing) break;
          absl::SleepFor(absl::Milliseconds(50));
        }
        for (const SnapshotStatusResponse& r : status) {
          if (s.ok() && r.state() != SnapshotStatusResponse::DONE) {
            s = absl::InternalError(absl::StrCat("snapshot ", id, ": ", r.error()));
          }
        }
        if (!s.ok()) {
          ++checkpoint_errors;
          if (checkpoint_error.empty()) checkpoint_error = s.ToString();
        }
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
    for (int k = 0; k < 2; ++k) samples[k].push_back(SamplePs(ps[k]->pid()));
  }
  // Each process's intervals, merged.
  std::vector<int64_t> ops(intervals, 0), errors(intervals, 0);
  std::vector<std::vector<double>> latency(intervals);
  std::vector<std::string> first_errors;
  for (auto& c : clients) {
    absl::StatusOr<int> rc = c->Wait(absl::Seconds(60));
    if (!rc.ok() || *rc != 0) first_errors.push_back("a client process failed: " + c->Log());
    std::istringstream log(c->Log());
    for (std::string line; std::getline(log, line);) {
      std::vector<std::string> w = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (w.size() >= 7 && w[0] == "interval") {
        int i = 0;
        int64_t n = 0, e = 0;
        if (!absl::SimpleAtoi(w[1], &i) || i < 0 || i >= intervals) continue;
        (void)absl::SimpleAtoi(w[3], &n);
        (void)absl::SimpleAtoi(w[5], &e);
        ops[i] += n;
        errors[i] += e;
        for (size_t j = 7; j < w.size(); ++j) {
          double ms = 0;
          if (absl::SimpleAtod(w[j], &ms)) latency[i].push_back(ms);
        }
      } else if (absl::StartsWith(line, "first_error ")) {
        first_errors.push_back(line.substr(12));
      }
    }
  }
  const HostStats host = host_run.Stop();

  std::cout << absl::StrFormat(
      "soak: 2 ps, %d client processes, %d threads, %s, %.0f s, intervals of %.0f s\n",
      config.processes, config.threads, tls ? "mutual TLS with roles" : "plaintext",
      static_cast<double>(config.seconds), config.interval_s);
  std::cout << "interval  ops/s    errors  p50 ms  p99 ms  ps0 RSS MiB  ps1 RSS MiB  fds  threads\n";
  int64_t total_errors = 0;
  for (int i = 0; i < intervals; ++i) {
    total_errors += errors[i];
    std::cout << absl::StrFormat(
        "%8d  %7.0f  %6d  %6.2f  %6.2f  %11.1f  %11.1f  %d/%d  %d/%d\n", i,
        ops[i] / config.interval_s, errors[i], Percentile(latency[i], 0.5),
        Percentile(latency[i], 0.99), samples[0][i].rss / 1048576.0,
        samples[1][i].rss / 1048576.0, samples[0][i].fds, samples[1][i].fds,
        samples[0][i].threads, samples[1][i].threads);
  }
  std::cout << "errors: " << total_errors << (total_errors == 0 ? " (target 0: met)"
                                                                  : " (target 0: MISSED)")
            << "\n";
  for (const std::string& e : first_errors) std::cout << "  first error: " << e << "\n";
  for (int k = 0; k < 2; ++k) {
    const PsSample& first = samples[k].front();
    const PsSample& last = samples[k].back();
    const double growth = first.rss > 0 ? static_cast<double>(last.rss) / first.rss - 1 : 0;
    std::cout << absl::StrFormat(
        "ps%d: RSS %.1f -> %.1f MiB after the first interval (%+.1f%%, target < 10%%: %s); "
        "fds %d -> %d; threads %d -> %d\n",
        k, first.rss / 1048576.0, last.rss / 1048576.0, growth * 100,
        growth < 0.10 ? "met" : "MISSED", first.fds, last.fds, first.threads, last.threads);
    // Warm-up (the dynamic table filling, message pools reaching their size) is over by the
    // middle of a long run: growth over the second half is what a leak would show.
    const PsSample& middle = samples[k][samples[k].size() / 2];
    std::cout << absl::StrFormat("ps%d: RSS over the second half %.1f -> %.1f MiB (%+.1f%%)\n", k,
                                 middle.rss / 1048576.0, last.rss / 1048576.0,
                                 middle.rss > 0 ? (100.0 * last.rss / middle.rss - 100) : 0.0);
  }
  std::cout << "checkpoints cut: " << checkpoints << ", failed " << checkpoint_errors
            << (checkpoint_error.empty() ? "" : " (" + checkpoint_error + ")") << "\n";
  std::cout << "host during the run (bench/host_stats.h): " << host.Line() << "\n";
  for (auto& p : ps) p->Signal(SIGTERM);
  return total_errors == 0 && checkpoint_errors == 0 ? 0 : 1;
}

int Main(int argc, char** argv) {
  TuneMallocForBulkTransfers();
  Config config;
  FlagParser flags("soak_bench", "mixed load on 2 ps with TLS for a long time (issue 23 §6)");
  flags.AddInt("seconds", &config.seconds, "how long", {1, 86400});
  flags.AddBool("short", &config.short_run, "a short run: 60 s in intervals of 10 s");
  flags.AddInt("processes", &config.processes, "client processes", {1, 64});
  flags.AddInt("threads", &config.threads, "client threads in all", {1, 1024});
  flags.AddDouble("interval_s", &config.interval_s, "seconds per reported interval",
                  DoubleRange::GreaterThan(0));
  flags.AddDouble("checkpoint_every_s", &config.checkpoint_every_s, "seconds between cuts",
                  DoubleRange::GreaterThan(0));
  flags.AddString("tls", &config.tls, "on (mutual TLS, roles) or off");
  flags.AddString("client_of", &config.client_of, "internal: run as a client process");
  flags.AddString("tls_dir", &config.tls_dir, "internal: the client's TLS files");
  flags.AddInt("seed", &config.seed, "internal: the client's seed");
  if (const int rc = HandleParseResult(flags, flags.Parse(argc, argv)); rc >= 0) return rc;
  if (config.tls != "on" && config.tls != "off") {
    std::cerr << "soak_bench: --tls must be on or off, got \"" << config.tls << "\"\n";
    return 2;
  }
  if (!config.client_of.empty()) return RunClient(config);
  if (config.short_run) {
    config.seconds = 60;
    config.interval_s = 10;
    config.checkpoint_every_s = 10;
  }
  if (config.threads < config.processes) config.processes = config.threads;
  testing::SetUpRunfilesForBazelRun(argv[0], "ps_server/ps", "soak_bench");
  return RunBench(config, argv[0]);
}

}  // namespace
}  // namespace bench
}  // namespace shardps

int main(int argc, char** argv) { return shardps::bench::Main(argc, argv); }
