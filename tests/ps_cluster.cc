#include "tests/ps_cluster.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "tests/wait.h"

namespace shardps {
namespace testing {

PsCluster::PsCluster(std::unique_ptr<LoopbackLauncher> launcher)
    : launcher_(std::move(launcher)), addresses_(launcher_->Addresses("ps")) {}

absl::StatusOr<std::unique_ptr<PsCluster>> PsCluster::Start(int num_ps,
                                                            std::vector<std::string> ps_flags) {
  LoopbackLauncher::Options options;
  options.num_ps = num_ps;
  options.ps_flags = std::move(ps_flags);
  options.num_workers = 0;
  options.start_chief = false;  // a chief entry makes the config look like a real job's
  ASSIGN_OR_RETURN(std::unique_ptr<LoopbackLauncher> launcher, LoopbackLauncher::Start(options));
  auto cluster = std::unique_ptr<PsCluster>(new PsCluster(std::move(launcher)));
  PsClient::Options client_options;
  client_options.rpc_timeout = absl::Seconds(2);
  client_options.max_attempts = 1;
  ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client, cluster->NewClient(client_options));
  absl::Status health;
  bool exited = false;
  const bool healthy = PollUntil(
      [&] {
        std::vector<HealthResponse> responses;
        health = client->Health(&responses);
        if (health.ok()) return true;
        for (int i = 0; i < num_ps; ++i) exited = exited || !cluster->ps(i)->Running();
        return exited;
      },
      absl::Now() + absl::Seconds(30), absl::Milliseconds(50));
  if (healthy && !exited) return cluster;
  if (exited) {
    return absl::InternalError(absl::StrCat("ps exited during start:\n", cluster->Logs()));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("ps tasks not healthy after 30s: ", health.ToString(), "\n", cluster->Logs()));
}

absl::StatusOr<std::unique_ptr<PsClient>> PsCluster::NewClient(PsClient::Options options) const {
  return NewGrpcPsClient(addresses_, options);
}

}  // namespace testing
}  // namespace shardps
