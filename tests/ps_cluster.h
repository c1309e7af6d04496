// PsCluster: N real ps daemons as processes, started by the loopback launcher
// (tests/loopback_launcher.h) at loopback addresses of their own and configured by TF_CONFIG
// (whose chief is never started), for integration tests and benchmarks of the ps alone.
// Stopped (SIGTERM, then SIGKILL) by the destructor.
//
// Thread-safety: a PsCluster is used from one thread.
#ifndef SHARDPS_TESTS_PS_CLUSTER_H_
#define SHARDPS_TESTS_PS_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/ps_client.h"
#include "tests/loopback_launcher.h"
#include "tests/process.h"

namespace shardps {
namespace testing {

class PsCluster {
 public:
  // Starts `num_ps` daemons (each given `ps_flags` after the launcher's own) and waits until
  // each answers Health, over the process's channel credentials (rpc/tls.h).
  static absl::StatusOr<std::unique_ptr<PsCluster>> Start(int num_ps,
                                                          std::vector<std::string> ps_flags = {});

  const std::vector<std::string>& addresses() const { return addresses_; }
  Process* ps(int i) { return launcher_->Current("ps", i); }
  std::string Logs() const { return launcher_->Logs(); }
  absl::StatusOr<std::unique_ptr<PsClient>> NewClient(PsClient::Options options = {}) const;

 private:
  explicit PsCluster(std::unique_ptr<LoopbackLauncher> launcher);

  const std::unique_ptr<LoopbackLauncher> launcher_;
  const std::vector<std::string> addresses_;
};

}  // namespace testing
}  // namespace shardps

#endif  // SHARDPS_TESTS_PS_CLUSTER_H_
