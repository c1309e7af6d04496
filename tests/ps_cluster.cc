#include "tests/ps_cluster.h"

#include <signal.h>

#include "absl/strings/str_cat.h"

namespace shardps {
namespace testing {

absl::StatusOr<std::unique_ptr<PsCluster>> PsCluster::Start(int num_ps) {
  auto cluster = std::unique_ptr<PsCluster>(new PsCluster);
  for (int i = 0; i < num_ps; ++i) {
    cluster->addresses_.push_back(LoopbackAddress());
  }
  // A chief entry makes the config look like a real job's; nothing listens there.
  std::map<std::string, std::vector<std::string>> spec = {
      {"ps", cluster->addresses_},
      {"chief", {LoopbackAddress()}}};
  static int generation = 0;
  ++generation;
  for (int i = 0; i < num_ps; ++i) {
    std::string log = absl::StrCat(TempDir(), "/ps_", generation, "_", i, ".log");
    auto process = Process::Start(BinaryPath("ps_server/ps"), {},
                                  {{"TF_CONFIG", MakeTfConfig(spec, "ps", i)}}, log);
    if (!process.ok()) return process.status();
    cluster->processes_.push_back(std::move(*process));
  }
  PsClient::Options options;
  options.rpc_timeout = absl::Seconds(2);
  options.max_attempts = 1;
  absl::StatusOr<std::unique_ptr<PsClient>> client = cluster->NewClient(options);
  if (!client.ok()) return client.status();
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  absl::Status health;
  do {
    std::vector<HealthResponse> responses;
    health = (*client)->Health(&responses);
    if (health.ok()) return cluster;
    for (auto& p : cluster->processes_) {
      if (!p->Running()) {
        return absl::InternalError(absl::StrCat("ps exited during start:\n", cluster->Logs()));
      }
    }
    absl::SleepFor(absl::Milliseconds(50));
  } while (absl::Now() < deadline);
  return absl::DeadlineExceededError(
      absl::StrCat("ps tasks not healthy after 30s: ", health.ToString(), "\n", cluster->Logs()));
}

PsCluster::~PsCluster() {
  for (auto& p : processes_) p->Signal(SIGTERM);
  for (auto& p : processes_) (void)p->Wait(absl::Seconds(10));
  // ~Process kills whatever did not stop.
}

std::string PsCluster::Logs() const {
  std::string out;
  for (size_t i = 0; i < processes_.size(); ++i) {
    absl::StrAppend(&out, "--- ps ", i, " ---\n", processes_[i]->Log());
  }
  return out;
}

absl::StatusOr<std::unique_ptr<PsClient>> PsCluster::NewClient(PsClient::Options options) const {
  return NewGrpcPsClient(addresses_, options);
}

}  // namespace testing
}  // namespace shardps
