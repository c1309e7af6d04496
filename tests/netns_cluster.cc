#include "tests/netns_cluster.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace shardps {
namespace testing {
namespace {

// Short calls: a call to a chief that is cut off would otherwise hold the poll.
Cluster::Polling NetnsPolling() {
  Cluster::Polling polling;
  polling.status_interval = absl::Milliseconds(10);
  polling.state_interval = absl::Milliseconds(20);
  polling.call_timeout = absl::Milliseconds(500);
  polling.status_timeout = absl::Seconds(2);
  return polling;
}

}  // namespace

NetnsCluster::NetnsCluster(NetnsLauncher* launcher)
    : Cluster(std::unique_ptr<Launcher>(launcher), NetnsPolling()), netns_(launcher) {}

absl::StatusOr<std::unique_ptr<NetnsCluster>> NetnsCluster::Start(const Options& options) {
  absl::Status last = absl::OkStatus();
  for (int attempt = 0; attempt < 5; ++attempt) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    absl::StatusOr<std::unique_ptr<NetnsLauncher>> launcher =
        NetnsLauncher::Start(options, deadline);
    if (!launcher.ok()) return launcher.status();
    auto c = std::unique_ptr<NetnsCluster>(new NetnsCluster(launcher->release()));
    const absl::Status up = c->ConnectChief(deadline);
    if (up.ok()) return c;
    if (c->netns_->Collided()) {
      last = absl::UnavailableError(c->launcher()->Log());
      continue;  // the destructor removes the run's leftovers (there are none)
    }
    return absl::InternalError(absl::StrCat("the chief at ", c->chief_address(),
                                            " did not answer within 60 s: ", up.message()));
  }
  return absl::UnavailableError(
      absl::StrCat("5 random prefixes and subnets were all in use; the last: ", last.message()));
}

}  // namespace testing
}  // namespace shardps
