#include "tests/cluster.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/grpc_chief_interface.h"
#include "tests/wait.h"

namespace shardps {
namespace testing {
namespace {

absl::Status WithLogs(const absl::Status& status, const std::string& logs) {
  return absl::Status(status.code(), absl::StrCat(status.message(), "\n", logs));
}

}  // namespace

Cluster::Cluster(std::unique_ptr<Launcher> launcher, Polling polling)
    : launcher_(std::move(launcher)),
      polling_(polling),
      chief_address_(launcher_->chief_address()),
      chief_(NewGrpcChiefInterface(chief_address_)) {}

Cluster::~Cluster() = default;

absl::StatusOr<JobStatus> Cluster::Status() { return Status(polling_.status_timeout); }

absl::StatusOr<JobStatus> Cluster::Status(absl::Duration timeout) {
  return chief_->GetStatus(timeout);
}

ChiefInterface::WaitOptions Cluster::status_wait_options() const {
  ChiefInterface::WaitOptions options;
  options.poll_interval = polling_.status_interval;
  options.call_timeout = polling_.call_timeout;
  return options;
}

absl::StatusOr<JobStatus> Cluster::WaitFor(const std::function<bool(const JobStatus&)>& pred,
                                           absl::Duration timeout,
                                           const ChiefInterface::WaitOptions& options) {
  absl::StatusOr<JobStatus> status = chief_->WaitFor(pred, absl::Now() + timeout, options);
  if (!status.ok()) return WithLogs(status.status(), Logs());
  return status;
}

absl::StatusOr<JobStatus> Cluster::WaitForStatus(
    const std::function<bool(const JobStatus&)>& pred, absl::Duration timeout) {
  return WaitFor(pred, timeout, status_wait_options());
}

absl::StatusOr<JobStatus> Cluster::WaitForState(JobStatus::State state, absl::Duration timeout) {
  ChiefInterface::WaitOptions options = status_wait_options();
  options.poll_interval = polling_.state_interval;
  options.on_answer = [this, state](const absl::StatusOr<JobStatus>& answer) -> absl::Status {
    if (absl::Status s = EndedOtherThan(state, answer); !s.ok()) return s;
    if (answer.ok() && answer->state() == state) return absl::OkStatus();
    if (std::optional<absl::Status> ended = launcher_->ChiefEnded(); ended.has_value()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the chief can no longer answer (", ended->ok() ? "it ended" : ended->ToString(),
          ") and its job was not ", JobStatus::State_Name(state), " when last seen"));
    }
    return absl::OkStatus();
  };
  return WaitFor([state](const JobStatus& s) { return s.state() == state; }, timeout, options);
}

absl::Status Cluster::ConnectChief(absl::Time deadline) {
  absl::Status port = WaitForPort(chief_address_, deadline,
                                  [this] { return !launcher_->ChiefEnded().has_value(); });
  if (std::optional<absl::Status> ended = launcher_->ChiefEnded(); ended.has_value()) {
    if (ended->ok()) return absl::OkStatus();
    return WithLogs(*ended, Logs());
  }
  if (!port.ok()) return WithLogs(port, Logs());
  chief_ = NewGrpcChiefInterface(chief_address_);
  ChiefInterface::WaitOptions options;
  options.poll_interval = absl::Milliseconds(50);
  // Short calls: one made while the first connection attempt is still pending would
  // otherwise wait out a long one.
  options.call_timeout = absl::Milliseconds(250);
  bool ended_well = false;
  options.on_answer = [&](const absl::StatusOr<JobStatus>& answer) -> absl::Status {
    if (answer.ok()) return absl::OkStatus();
    std::optional<absl::Status> ended = launcher_->ChiefEnded();
    if (!ended.has_value()) return absl::OkStatus();
    ended_well = ended->ok();
    return ended_well ? absl::CancelledError("the chief ended well") : *ended;
  };
  absl::StatusOr<JobStatus> answered =
      chief_->WaitFor([](const JobStatus&) { return true; }, deadline, options);
  if (answered.ok() || ended_well) return absl::OkStatus();
  return WithLogs(answered.status(), Logs());
}

}  // namespace testing
}  // namespace shardps
