// Prometheus metrics of a running cluster (chief, ps, worker, evaluator as processes, each
// with --metrics_port): every daemon answers /metrics, promtool accepts each answer (when it
// is installed), and the counters move as training goes on.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/process.h"
#include "tests/training_cluster.h"

namespace shardps {
namespace testing {
namespace {

// The body of GET /metrics at host:port; "" when nothing answers.
std::string Scrape(const std::string& host, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  inet_pton(AF_INET, host.c_str(), &address.sin_addr);
  std::string answer;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    send(fd, request.data(), request.size(), 0);
    char buffer[8192];
    for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) answer.append(buffer, n);
  }
  close(fd);
  const size_t body = answer.find("\r\n\r\n");
  if (answer.rfind("HTTP/1.1 200", 0) != 0 || body == std::string::npos) return "";
  return answer.substr(body + 4);
}

// The value of the sample `series` ("name" or "name{labels}"); -1 when absent.
double Sample(const std::string& text, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, series + " ")) {
      double value = -1;
      if (absl::SimpleAtod(line.substr(series.size() + 1), &value)) return value;
    }
  }
  return -1;
}

std::string Promtool() {
  for (const char* path : {"/usr/bin/promtool", "/usr/local/bin/promtool"}) {
    if (!std::ifstream(path).fail()) return path;
  }
  return "";
}

// "" when promtool accepts `text` (or is missing: said once), else its report.
std::string PromtoolCheck(const std::string& name, const std::string& text) {
  const std::string promtool = Promtool();
  if (promtool.empty()) return "";
  const std::string file = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name, ".prom");
  std::ofstream(file) << text;
  std::string output;
  absl::StatusOr<int> rc =
      RunCommand("/bin/sh", {"-c", absl::StrCat(promtool, " check metrics < ", file)}, {},
                 &output);
  if (rc.ok() && *rc == 0) return "";
  return absl::StrCat(name, ": promtool: ", output);
}

std::string HostOf(const std::string& address) { return address.substr(0, address.rfind(':')); }

TEST(MetricsTest, EveryDaemonServesMetricsThatMoveAsTrainingGoesOn) {
  if (Promtool().empty()) {
    std::cout << "promtool is not installed (deploy/setup.sh installs it): the format is not "
                 "checked here, only the values\n";
  }
  TrainingCluster::Options options;
  options.num_ps = 1;
  options.num_workers = 1;
  options.evaluator = true;
  options.long_lived = true;  // every daemon stays up after the job, to be scraped
  options.job_file = WriteTempFile(
      "metrics.json",
      R"({"name": "metrics", "model": "mlp:32", "batch_size": 32, "steps": 400,)"
      R"( "eval_every_steps": 200, "partitioner": "min_size:4096:2", "seed": 7,)"
      R"( "backend": "cpu"})");
  std::map<std::string, int> ports;
  for (const char* task : {"chief", "ps", "worker", "evaluator"}) ports[task] = PickFreePort();
  // (task_flags reach the ps and workers only.)
  options.chief_flags = {absl::StrCat("--metrics_port=", ports["chief"])};
  options.task_flags[{"ps", 0}] = {absl::StrCat("--metrics_port=", ports["ps"])};
  options.task_flags[{"worker", 0}] = {absl::StrCat("--metrics_port=", ports["worker"])};
  // --long_lived: the evaluator too stays up after its final evaluation (else it exits, and
  // the scrape after the job races its exit).
  options.evaluator_flags = {absl::StrCat("--metrics_port=", ports["evaluator"]), "--long_lived"};
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::map<std::string, std::string> hosts = {
      {"chief", HostOf((*cluster)->chief_address())},
      {"ps", HostOf((*cluster)->ps_addresses()[0])},
      {"worker", HostOf((*cluster)->worker_addresses()[0])},
      {"evaluator", HostOf((*cluster)->evaluator_address())}};

  auto running = (*cluster)->WaitForStatus(
      [](const JobStatus& s) { return s.steps_done() >= 20; }, absl::Minutes(3));
  ASSERT_TRUE(running.ok()) << running.status() << (*cluster)->Logs();
  std::map<std::string, std::string> first;
  for (const auto& [task, host] : hosts) {
    first[task] = Scrape(host, ports[task]);
    ASSERT_FALSE(first[task].empty()) << task << " at " << host << ":" << ports[task] << "\n"
                                      << (*cluster)->Logs();
    EXPECT_EQ(PromtoolCheck(task, first[task]), "") << first[task];
  }

  auto done = (*cluster)->WaitForStatus(
      [](const JobStatus& s) { return s.state() == JobStatus::SUCCEEDED && s.has_eval(); },
      absl::Minutes(5));
  ASSERT_TRUE(done.ok()) << done.status() << (*cluster)->Logs();
  std::map<std::string, std::string> last;
  for (const auto& [task, host] : hosts) {
    last[task] = Scrape(host, ports[task]);
    ASSERT_FALSE(last[task].empty()) << task;
    EXPECT_EQ(PromtoolCheck(absl::StrCat(task, "_last"), last[task]), "") << last[task];
  }

  // The chief: steps done, from its JobStatus.
  const double chief_before = Sample(first["chief"], "shardps_chief_steps_done");
  EXPECT_GE(chief_before, 20);
  EXPECT_EQ(Sample(last["chief"], "shardps_chief_steps_done"), 400);
  EXPECT_GT(Sample(last["chief"], "shardps_chief_steps_done"), chief_before);
  // The worker: steps, examples and phase times, counted as it runs them.
  const double worker_before = Sample(first["worker"], "shardps_worker_steps_total{outcome=\"ok\"}");
  EXPECT_GT(worker_before, 0) << first["worker"];
  EXPECT_GT(Sample(last["worker"], "shardps_worker_steps_total{outcome=\"ok\"}"), worker_before);
  EXPECT_GT(Sample(last["worker"], "shardps_worker_examples_total"),
            Sample(first["worker"], "shardps_worker_examples_total"));
  EXPECT_GT(Sample(last["worker"], "shardps_worker_step_phase_seconds_count{phase=\"compute\"}"),
            0);
  // The ps: pushes per variable, and its request latency.
  double pushes_before = 0;
  double pushes_after = 0;
  for (absl::string_view line : absl::StrSplit(first["ps"], '\n')) {
    if (absl::StartsWith(line, "shardps_ps_pushes_total{")) {
      pushes_before += std::strtod(std::string(line.substr(line.rfind(' ') + 1)).c_str(), nullptr);
    }
  }
  for (absl::string_view line : absl::StrSplit(last["ps"], '\n')) {
    if (absl::StartsWith(line, "shardps_ps_pushes_total{")) {
      pushes_after += std::strtod(std::string(line.substr(line.rfind(' ') + 1)).c_str(), nullptr);
    }
  }
  EXPECT_GT(pushes_before, 0) << first["ps"];
  EXPECT_GT(pushes_after, pushes_before) << last["ps"];
  EXPECT_NE(last["ps"].find("shardps_ps_variable_bytes{variable="), std::string::npos);
  EXPECT_GT(Sample(last["ps"], "shardps_ps_shards"), 0);
  // The evaluator: its evaluations.
  EXPECT_GE(Sample(last["evaluator"], "shardps_evaluator_evaluations_total"), 1)
      << last["evaluator"];
  EXPECT_GT(Sample(last["evaluator"], "shardps_evaluator_accuracy"), 0);
}

}  // namespace
}  // namespace testing
}  // namespace shardps
