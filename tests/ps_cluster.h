// PsCluster: N real ps daemons started as processes on free localhost ports, configured by
// TF_CONFIG, for integration tests. Stopped (SIGTERM, then SIGKILL) by the destructor.
#ifndef SHARDPS_TESTS_PS_CLUSTER_H_
#define SHARDPS_TESTS_PS_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/ps_client.h"
#include "tests/process.h"

namespace shardps {
namespace testing {

class PsCluster {
 public:
  // Starts `num_ps` daemons and waits until each answers Health.
  static absl::StatusOr<std::unique_ptr<PsCluster>> Start(int num_ps);
  ~PsCluster();

  const std::vector<std::string>& addresses() const { return addresses_; }
  Process* ps(int i) { return processes_[i].get(); }
  std::string Logs() const;
  absl::StatusOr<std::unique_ptr<PsClient>> NewClient(PsClient::Options options = {}) const;

 private:
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<Process>> processes_;
};

}  // namespace testing
}  // namespace shardps

#endif  // SHARDPS_TESTS_PS_CLUSTER_H_
