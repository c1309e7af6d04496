#include "tests/training_cluster.h"

#include <signal.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "tests/wait.h"

namespace shardps {
namespace testing {

TrainingCluster::TrainingCluster(LoopbackLauncher* launcher)
    : Cluster(std::unique_ptr<Launcher>(launcher), Polling()),
      loopback_(launcher),
      ps_addresses_(launcher->Addresses("ps")),
      worker_addresses_(launcher->Addresses("worker")) {}

absl::StatusOr<std::unique_ptr<TrainingCluster>> TrainingCluster::Start(const Options& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<LoopbackLauncher> launcher, LoopbackLauncher::Start(options));
  auto cluster = std::unique_ptr<TrainingCluster>(new TrainingCluster(launcher.release()));
  RETURN_IF_ERROR(cluster->ConnectChief(absl::Now() + absl::Seconds(60)));
  return cluster;
}

std::string TrainingCluster::evaluator_address() const {
  const std::vector<std::string> evaluators = loopback_->Addresses("evaluator");
  return evaluators.empty() ? "" : evaluators[0];
}

absl::Status TrainingCluster::RestartPs(int i) {
  RETURN_IF_ERROR(loopback_->Launch("ps", i));
  Process* ps = loopback_->Current("ps", i);
  const absl::Status up = WaitForPort(ps_addresses_[i], absl::Now() + absl::Seconds(60),
                                      [ps] { return ps->Running(); });
  if (!up.ok()) {
    return absl::InternalError(absl::StrCat("ps ", i, " did not come back at ", ps_addresses_[i],
                                            ": ", up.message(), "\n", Logs()));
  }
  return absl::OkStatus();
}

absl::Status TrainingCluster::RestartChief() {
  RETURN_IF_ERROR(loopback_->Launch("chief", 0));
  return ConnectChief(absl::Now() + absl::Seconds(60));
}

absl::StatusOr<JobStatus> TrainingCluster::KillAndRestartChief() {
  ASSIGN_OR_RETURN(const int killed, StopChief(SIGKILL));
  if (killed != 128 + SIGKILL) {
    return absl::InternalError(
        absl::StrCat("the chief exited ", killed, " before it was killed\n", Logs()));
  }
  RETURN_IF_ERROR(RestartChief());
  return WaitForStatus([](const JobStatus& s) { return s.state() != JobStatus::NO_JOB; });
}

absl::StatusOr<std::unique_ptr<PsClient>> TrainingCluster::NewPsClient() const {
  return NewGrpcPsClient(ps_addresses_, {});
}

absl::StatusOr<std::vector<std::vector<float>>> TrainingCluster::PullAllVariables(
    const std::vector<int64_t>& dynamic_keys) const {
  ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client, NewPsClient());
  RETURN_IF_ERROR(client->Discover());
  std::vector<std::vector<float>> out;
  for (const std::string& name : client->VariableNames()) {
    ASSIGN_OR_RETURN(VariableLayout layout, client->GetLayout(name));
    if (layout.dynamic) {
      out.emplace_back(dynamic_keys.size() * layout.row_width);
      RETURN_IF_ERROR(client->PullRows(name, dynamic_keys, absl::MakeSpan(out.back())));
      continue;
    }
    out.emplace_back(layout.num_elements);
    RETURN_IF_ERROR(client->Pull(name, absl::MakeSpan(out.back())));
  }
  return out;
}

std::string WriteTempFile(const std::string& name, const std::string& json) {
  static int counter = 0;
  std::string path = absl::StrCat(TempDir(), "/", counter++, "_", name);
  std::ofstream(path) << json;
  return path;
}

}  // namespace testing
}  // namespace shardps
