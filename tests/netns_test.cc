// deploy/run_netns.sh end to end: a short sync job (2 ps, 2 workers, evaluator, chief) with
// every daemon in its own network namespace. Checks that the job succeeds with a sane
// accuracy, that each daemon ran in its own namespace with a TF_CONFIG of DNS names and that
// the ps served peers over the namespaces' subnet, and that the launcher left no namespace,
// link, hosts file or process behind. Each run takes its own prefix and subnet (NetnsCluster),
// so runs may overlap.
// Skipped (with the reason) where network namespaces cannot be made: not root, no
// CAP_NET_ADMIN, no iproute2.
#include <unistd.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/netns_cluster.h"
#include "tests/wait.h"

namespace shardps {
namespace testing {
namespace {

using ::testing::HasSubstr;

// "a.b.c.d:port" from an address of /proc/net/tcp ("0100007F:08AE": the IPv4 address in host,
// little-endian, byte order) or /proc/net/tcp6 (four such words; an IPv4-mapped address
// gives its IPv4 form, any other IPv6 address "ipv6").
std::string ProcNetAddress(absl::string_view hex) {
  std::vector<absl::string_view> parts = absl::StrSplit(hex, ':');
  uint32_t port = 0;
  if (parts.size() != 2 || !absl::SimpleHexAtoi(parts[1], &port)) return "?";
  absl::string_view ip_hex = parts[0];
  if (ip_hex.size() == 32) {
    if (!absl::StartsWith(ip_hex, "0000000000000000FFFF0000")) return "ipv6";
    ip_hex.remove_prefix(24);
  }
  uint32_t ip = 0;
  if (!absl::SimpleHexAtoi(ip_hex, &ip)) return "?";
  return absl::StrFormat("%d.%d.%d.%d:%d", ip & 0xff, (ip >> 8) & 0xff, (ip >> 16) & 0xff, ip >> 24,
                         port);
}

// The established TCP connections of the network namespace that `pid` is in, from
// /proc/PID/net/tcp and tcp6: {local "ip:port", remote "ip:port"} each.
std::vector<std::pair<std::string, std::string>> EstablishedConnections(pid_t pid) {
  std::vector<std::pair<std::string, std::string>> conns;
  for (const char* table : {"tcp", "tcp6"}) {
    const std::string text = ReadWholeFile(absl::StrCat("/proc/", pid, "/net/", table));
    for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
      std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (f.size() < 4 || f[3] != "01") continue;  // 01: ESTABLISHED
      conns.emplace_back(ProcNetAddress(f[1]), ProcNetAddress(f[2]));
    }
  }
  return conns;
}

TEST(NetnsTest, TrainsAcrossNamespacesAndCleansUp) {
  const std::string why = WhyNoNamespaces(absl::StrCat("ns", getpid()));
  if (!why.empty()) {
    std::cerr << "\n*** SKIPPED netns_test: cannot make network namespaces here: " << why
              << " ***\n\n";
    GTEST_SKIP() << "cannot make network namespaces here: " << why;
  }
  NetnsCluster::Options options;
  options.name = "ns";
  options.job_json = R"({"name": "netns", "model": "mlp:64", "dataset": "fashion_mnist",
    "batch_size": 64, "steps": 400, "optimizer": {"type": "adam", "learning_rate": 0.002},
    "mode": "sync", "partitioner": "min_size:65536:2", "seed": 7, "eval_every_steps": 200})";
  auto cluster = NetnsCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  NetnsCluster* c = cluster->get();
  const std::string& prefix = c->prefix();
  const std::string& subnet = c->subnet();

  // While it runs: each daemon's namespace and TF_CONFIG, and the ps' connections.
  const std::vector<std::string> tasks = {"chief-0",  "ps-0",     "ps-1",
                                          "worker-0", "worker-1", "evaluator-0"};
  std::map<std::string, std::string> netns, tf_config;
  std::map<std::string, std::set<std::string>> ps_peers;  // ps task -> remote IPs
  // Sampled every 50 ms until the launcher ends the run.
  const auto sample = [&] {
    if (!c->launcher()->Running()) return true;
    for (const std::string& task : tasks) {
      const pid_t pid = c->Pid(task);
      if (pid == 0) continue;
      std::string ns;
      if (!netns.count(task) && Ip({"netns", "identify", std::to_string(pid)}, &ns) == 0 &&
          !std::string(absl::StripAsciiWhitespace(ns)).empty()) {
        netns[task] = std::string(absl::StripAsciiWhitespace(ns));
      }
      if (!tf_config.count(task)) {
        for (absl::string_view var :
             absl::StrSplit(ReadWholeFile(absl::StrCat("/proc/", pid, "/environ")), '\0')) {
          if (absl::ConsumePrefix(&var, "TF_CONFIG=")) tf_config[task] = std::string(var);
        }
      }
      if (absl::StartsWith(task, "ps-")) {
        for (const auto& [local, remote] : EstablishedConnections(pid)) {
          if (absl::EndsWith(local, ":2222"))
            ps_peers[task].insert(remote.substr(0, remote.rfind(':')));
        }
      }
    }
    return false;
  };
  PollUntil(sample, absl::Now() + absl::Seconds(120), absl::Milliseconds(50));
  absl::StatusOr<int> rc = c->WaitForLauncher(absl::Seconds(30));
  const std::string log = c->launcher()->Log();
  ASSERT_TRUE(rc.ok()) << rc.status() << "\n" << log;
  EXPECT_EQ(*rc, 0) << log;
  EXPECT_THAT(log, HasSubstr("SUCCEEDED"));
  const size_t at = log.find("final test accuracy: ");
  ASSERT_NE(at, std::string::npos) << log;
  double accuracy = 0;
  ASSERT_TRUE(absl::SimpleAtod(log.substr(at + 21, 6), &accuracy)) << log;
  EXPECT_GT(accuracy, 0.7) << log;  // 400 steps of mlp:64 reach ~0.8; chance is 0.1
  EXPECT_LE(accuracy, 1.0);

  const std::string chief_dns =
      absl::StrCat(prefix, "-chief-0.", prefix, "-chief.default.svc:2222");
  for (const std::string& task : tasks) {
    SCOPED_TRACE(task);
    EXPECT_EQ(netns[task], absl::StrCat(prefix, "-", task)) << "ip netns identify";
    EXPECT_THAT(tf_config[task], HasSubstr(chief_dns));
    EXPECT_THAT(tf_config[task],
                HasSubstr(absl::StrCat(prefix, "-ps-1.", prefix, "-ps.default.svc:2222")));
    EXPECT_THAT(tf_config[task], ::testing::Not(HasSubstr("127.0.0.1")));
  }
  // Each ps served the workers and the chief (and the evaluator) over the bridge: peers at
  // their subnet addresses, not loopback.
  for (const std::string ps : {"ps-0", "ps-1"}) {
    SCOPED_TRACE(ps);
    int on_subnet = 0;
    for (const std::string& ip : ps_peers[ps]) {
      EXPECT_TRUE(absl::StartsWith(ip, subnet + ".")) << ip;
      on_subnet += absl::StartsWith(ip, subnet + ".");
    }
    EXPECT_GE(on_subnet, 3) << "distinct peers of " << ps;
  }
  EXPECT_EQ(NetnsLeftovers(prefix), "") << "left behind by run_netns.sh";
  EXPECT_EQ(c->Shutdown(), "") << "left behind";
}

}  // namespace
}  // namespace testing
}  // namespace shardps
