// The evaluator daemon. Follows the chief's job: while it trains, evaluates a consistent
// snapshot of the parameters on the whole test set (every `eval_every_steps` steps, or as
// often as it can), reports each result to the chief (shown by `shardctl status`) and appends
// it to the metrics file (JSON lines). After training it runs a final evaluation, reports it,
// and exits 0.
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "client/ps_client.h"
#include "common/flags.h"
#include "evaluator/evaluator.h"
#include "grpcpp/client_context.h"
#include "proto/coordinator.grpc.pb.h"
#include "rpc/daemon.h"
#include "rpc/grpc_util.h"
#include "worker/compute/backend.h"

namespace shardps {
namespace {

absl::StatusOr<JobStatus> GetStatus(CoordinatorService::Stub* chief) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  JobStatus status;
  grpc::Status s = chief->GetStatus(&ctx, GetStatusRequest(), &status);
  if (!s.ok()) return FromGrpcStatus(s);
  return status;
}

absl::Status Report(CoordinatorService::Stub* chief, const std::string& job_id,
                    const EvalMetrics& result, bool final) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  ReportEvalRequest request;
  request.set_job_id(job_id);
  *request.mutable_result() = result;
  request.set_final(final);
  ReportEvalResponse response;
  return FromGrpcStatus(chief->ReportEval(&ctx, request, &response));
}

int Main(int argc, char** argv) {
  FlagParser flags("evaluator",
                   "shardps evaluator daemon: evaluates the chief's job on held-out data.");
  Daemon daemon("evaluator", &flags, /*serves=*/false);
  std::string metrics_file = "evaluator_metrics.jsonl", backend_flag = "cpu";
  int64_t threads = 1, chief_timeout_s = 60;
  flags.AddString("metrics_file", &metrics_file, "append evaluations here as JSON lines");
  flags.AddString("backend", &backend_flag, "compute backend: auto, cpu or gpu");
  flags.AddInt("threads", &threads, "CPU compute threads");
  flags.AddInt("chief_timeout_s", &chief_timeout_s,
               "exit 1 when the chief stays unreachable this long during a job");
  if (int rc = daemon.Init(argc, argv); rc >= 0) return rc;
  const TfConfig* config = &daemon.config();
  if (config->NumTasks("chief") != 1) {
    std::cerr << "error: TF_CONFIG: cluster.chief: the evaluator needs the chief's address\n";
    return 2;
  }
  absl::StatusOr<BackendKind> kind = ParseBackendKind(backend_flag);
  if (!kind.ok()) {
    std::cerr << "error: --backend: " << kind.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend =
      ComputeBackend::Create(*kind, static_cast<int>(threads));
  if (!backend.ok()) {
    std::cerr << "error: " << backend.status().message() << "\n";
    return 1;
  }
  std::ofstream metrics(metrics_file, std::ios::app);
  if (!metrics) {
    std::cerr << "error: --metrics_file: cannot open \"" << metrics_file << "\"\n";
    return 2;
  }
  std::string chief_address = config->Tasks("chief")[0];
  auto chief = CoordinatorService::NewStub(NewChannel(chief_address));
  std::cerr << "evaluator: " << config->DebugString() << ", chief at " << chief_address
            << ", backend " << (*backend)->Name() << ", metrics to " << metrics_file << "\n";

  std::unique_ptr<PsClient> ps;
  std::unique_ptr<Evaluator> evaluator;
  int64_t last_eval_steps = -1;
  absl::Time last_contact = absl::Now();
  while (!daemon.stop_requested()) {
    absl::StatusOr<JobStatus> status = GetStatus(chief.get());
    if (!status.ok()) {
      if (evaluator != nullptr && absl::Now() - last_contact > absl::Seconds(chief_timeout_s)) {
        std::cerr << "evaluator: chief unreachable for " << chief_timeout_s << " s: "
                  << status.status() << "\n";
        return 1;
      }
      daemon.WaitForStopWithTimeout(absl::Milliseconds(500));
      continue;
    }
    last_contact = absl::Now();
    bool running = status->state() == JobStatus::RUNNING;
    if (evaluator == nullptr || evaluator->job_id() != status->job_id()) {
      if (!running || status->training_done()) {
        if (evaluator != nullptr) return 0;  // our job ended and another is not running
        daemon.WaitForStopWithTimeout(absl::Milliseconds(300));
        continue;
      }
      auto client = NewGrpcPsClient(config->Tasks("ps"), PsClient::Options());
      if (!client.ok()) {
        std::cerr << "evaluator: " << client.status() << "\n";
        return 1;
      }
      ps = std::move(*client);
      auto created = Evaluator::Create(status->job(), ps.get(), backend->get());
      if (!created.ok()) {
        std::cerr << "evaluator: " << created.status() << "\n";
        daemon.WaitForStopWithTimeout(absl::Seconds(1));
        continue;
      }
      evaluator = std::move(*created);
      last_eval_steps = -1;
      std::cerr << "evaluator: following job " << status->job_id() << "\n";
    }
    if (!running) {
      std::cerr << "evaluator: job " << status->job_id() << " ended ("
                << JobStatus::State_Name(status->state()) << ")\n";
      return 0;
    }
    bool final = status->training_done();
    int64_t every = std::max<int64_t>(1, status->job().eval_every_steps());
    if (!final && last_eval_steps >= 0 && status->steps_done() - last_eval_steps < every) {
      daemon.WaitForStopWithTimeout(absl::Milliseconds(200));
      continue;
    }
    bool consistent = false;
    absl::StatusOr<EvalMetrics> result = evaluator->Evaluate(50, &consistent);
    if (!result.ok()) {
      std::cerr << "evaluator: evaluation failed: " << result.status() << "\n";
      daemon.WaitForStopWithTimeout(absl::Seconds(1));
      continue;
    }
    last_eval_steps = status->steps_done();
    metrics << EvalJsonLine(status->job_id(), *result, status->steps_done(), consistent, final)
            << std::endl;
    absl::Status reported = Report(chief.get(), status->job_id(), *result, final);
    if (!reported.ok()) std::cerr << "evaluator: report failed: " << reported << "\n";
    if (final) {
      std::cerr << "evaluator: final test accuracy " << result->accuracy() << " loss "
                << result->loss() << " at version " << result->step() << "\n";
      return 0;
    }
  }
  return 0;
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) {
  shardps::Daemon::BlockTerminationSignals();
  return shardps::Main(argc, argv);
}
