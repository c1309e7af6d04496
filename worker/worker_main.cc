// The worker daemon: runs the training steps the chief hands it (WorkerService).
//
//   TF_CONFIG='{"cluster":{"ps":[...],"worker":["localhost:2230"]},
//               "task":{"type":"worker","index":0}}' worker [--backend=cpu]
//
// At its start it announces itself to the chief (JoinJob: elastic workers, docs/elastic.md),
// so a worker the chief's TF_CONFIG does not name joins the running job; on SIGTERM it
// leaves (LeaveJob: the steps it holds come back first) and exits 0.
//
// Exit codes (rpc/daemon.h; docs/exit-codes.md): 0 after the chief's Shutdown RPC at
// the job's end (ignored under --long_lived), after leaving the job on SIGTERM, or when it
// arrived after the job ended; 5 on SIGINT/SIGTERM when the chief could not be told (an
// eviction: restart it); 2 when the chief refuses it (its index is live elsewhere, it
// belongs to another job's ps);
// 6 after --orphan_timeout_s without a call from the chief (the job is gone: do not restart);
// 2 on a bad command line or configuration; 1 when it cannot serve (port taken, no compute
// backend). Every call from the chief (StartJob, RunStep, Status, Shutdown) resets the
// orphan clock; the chief pings an idle worker with Status every few seconds.
#include <memory>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/grpc_chief_interface.h"
#include "client/ps_client.h"
#include "common/flags.h"
#include "common/log.h"
#include "rpc/daemon.h"
#include "rpc/daemon_run.h"
#include "rpc/executor.h"
#include "worker/rpc/grpc_worker_service.h"
#include "worker/chief_membership.h"
#include "worker/metered_steps.h"
#include "worker/step_executor.h"
#include "worker/worker_options.h"

namespace shardps {
namespace {

// StartJob and RunStep run here. The chief keeps up to two steps in flight (JobSpec
// steps_in_flight), which run at once; a step the chief re-sent after a timed-out lease may
// wait for one of them to finish. A few more threads leave room for a StartJob or Shutdown
// meanwhile.
constexpr int kServiceThreads = 6;

// How long shutdown waits for a step in flight (say, one waiting on the ps for a version)
// before the process exits anyway.
constexpr absl::Duration kShutdownGrace = absl::Seconds(10);

// How long a leaving worker gives the steps it holds to finish before the chief hands them
// to other workers.
constexpr absl::Duration kLeaveWait = absl::Seconds(20);


// The step executor and the service over it. Destroyed after the server, in reverse order:
// the service, the executor (already emptied by FinishShutdown), the step executor.
class WorkerBody : public DaemonBody {
 public:
  WorkerBody(std::unique_ptr<StepExecutor> steps, Daemon& daemon) : steps_(std::move(steps)) {
    WorkerServiceOptions service_options;
    service_options.on_shutdown = [&daemon](const std::string& reason) {
      daemon.RequestStop(reason, /*from_rpc=*/true);
    };
    service_options.on_chief_call = [this, &daemon] {
      daemon.NoteChiefContact();
      last_contact_.store(absl::ToUnixMillis(absl::Now()), std::memory_order_relaxed);
    };
    executor_ = std::make_unique<Executor>(kServiceThreads);
    service_ = NewGrpcWorkerService(steps_.get(), executor_.get(), service_options);
    // A --long_lived worker that runs no job has nothing to come back for.
    daemon.set_idle_check([steps = steps_.get()] { return steps->Status().job_id().empty(); });
  }

  std::vector<grpc::Service*> Services() override { return {service_.get()}; }

  // Joins the job while the server runs; on SIGTERM leaves it before the server stops.
  int Run(Daemon& daemon) override {
    if (chief_ == nullptr) return DaemonBody::Run(daemon);
    absl::Status joined = absl::CancelledError("not joined");
    std::thread joiner([&] {
      absl::StatusOr<JoinJobResponse> answer =
          JoinChief(chief_.get(), me_,
                    [&daemon](absl::Duration d) { return daemon.WaitForStopWithTimeout(d); });
      joined = answer.status();
      if (answer.ok()) {
        LogInfo() << "joined " << (answer->job_id().empty() ? "the chief (no job yet)"
                                                             : "job " + answer->job_id())
                  << " at " << chief_->address() << ", " << answer->workers() << " workers";
      } else if (!absl::IsCancelled(answer.status())) {
        LogError() << "the chief refused this worker: " << answer.status();
        refused_exit_ = JoinedTooLate(answer.status()) ? kExitDone : kExitBadConfig;
        daemon.RequestStop("refused by the chief", /*from_rpc=*/false);
        return;
      }
      // A chief that restarted knows only its TF_CONFIG's workers.
      StayJoined(
          chief_.get(), me_,
          [this] { return absl::FromUnixMillis(last_contact_.load(std::memory_order_relaxed)); },
          [&daemon](absl::Duration d) { return daemon.WaitForStopWithTimeout(d); });
    });
    daemon.WaitForStop();
    joiner.join();
    if (refused_exit_ >= 0) return refused_exit_;
    if (daemon.stop_cause() != StopCause::kSignal || !joined.ok()) return daemon.StopExitCode();
    absl::StatusOr<LeaveJobResponse> left = LeaveChief(chief_.get(), me_, kLeaveWait);
    if (!left.ok()) {
      LogWarning() << "could not leave the job at the chief (" << left.status()
                   << "): its leases expire instead";
      return daemon.StopExitCode();
    }
    LogInfo() << "left the job: " << left->steps_handed_back()
              << " leased steps handed back to the chief";
    return kExitDone;
  }

  // The chief this worker joins (null: none in TF_CONFIG).
  void set_membership(std::unique_ptr<ChiefInterface> chief, Membership me) {
    chief_ = std::move(chief);
    me_ = std::move(me);
  }
  std::string Describe() const override { return ", backend " + steps_->BackendName(); }
  void FinishShutdown() override { executor_.reset(); }  // runs what calls scheduled

 private:
  std::unique_ptr<StepExecutor> steps_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<ChiefInterface> chief_;
  Membership me_;
  int refused_exit_ = -1;  // set (before the stop it requests) when the chief refused it
  // The chief's last call (Unix ms), for the rejoin after a silence.
  std::atomic<int64_t> last_contact_{absl::ToUnixMillis(absl::Now())};
};

int Main(int argc, char** argv) {
  FlagParser flags("worker", "shardps worker daemon; the cluster comes from TF_CONFIG.");
  Daemon daemon("worker", &flags);
  WorkerOptions options;
  options.AddFlags(&flags);
  if (int rc = daemon.Init(argc, argv); rc >= 0) return rc;

  StepExecutor::Options executor_options;
  executor_options.task_index = daemon.config().task_index;
  executor_options.data_root = daemon.data_root();
  executor_options.backend_override = options.backend_override();
  executor_options.num_threads = static_cast<int>(options.threads);
  executor_options.test_only_delay_before_push =
      absl::Milliseconds(options.test_only_delay_before_push_ms);
  executor_options.connect = [](const std::vector<std::string>& ps_addresses) {
    return NewGrpcPsClient(ps_addresses, PsClient::Options());
  };
  absl::StatusOr<std::unique_ptr<StepExecutor>> steps = StepExecutor::Create(executor_options);
  if (!steps.ok()) {
    LogError() << steps.status().message();
    return kExitError;
  }
  if (daemon.metrics_enabled()) {
    steps = NewMeteredStepExecutor(*std::move(steps), daemon.metrics());
    if (!steps.ok()) {
      LogError() << steps.status().message();
      return kExitError;
    }
  }
  WorkerBody body(*std::move(steps), daemon);
  if (daemon.config().NumTasks("chief") > 0) {
    body.set_membership(NewGrpcChiefInterface(daemon.config().Tasks("chief")[0]),
                        Membership::FromConfig(daemon.config()));
  }
  // A step waiting on the ps (for a version, or a ps that is down) would hold up the
  // server's drain until its pull gives up: bound the time a stop may take.
  RunOptions run;
  run.shutdown_grace = kShutdownGrace;
  return RunDaemon(daemon, body, run);
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) {
  shardps::Daemon::BlockTerminationSignals();
  return shardps::Main(argc, argv);
}
