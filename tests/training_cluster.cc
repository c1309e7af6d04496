#include "tests/training_cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "rpc/grpc_util.h"

namespace shardps {
namespace testing {
namespace {

bool PortAcceptsConnections(const std::string& address) {
  size_t colon = address.rfind(':');
  int port = std::atoi(address.c_str() + colon + 1);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TrainingCluster>> TrainingCluster::Start(const Options& options) {
  static int generation = 0;
  ++generation;
  auto c = std::unique_ptr<TrainingCluster>(new TrainingCluster);
  auto addr = [] { return absl::StrCat("127.0.0.1:", PickFreePort()); };
  std::map<std::string, std::vector<std::string>> spec;
  c->chief_address_ = addr();
  spec["chief"] = {c->chief_address_};
  for (int i = 0; i < options.num_ps; ++i) c->ps_addresses_.push_back(addr());
  spec["ps"] = c->ps_addresses_;
  for (int i = 0; i < options.num_workers; ++i) spec["worker"].push_back(addr());
  if (options.evaluator) spec["evaluator"] = {addr()};
  std::string dir = TempDir();
  auto log = [&](const std::string& name) {
    return absl::StrCat(dir, "/g", generation, "_", name, ".log");
  };
  auto start = [&](const std::string& bin, const std::string& type, int index,
                   std::vector<std::string> args) -> absl::StatusOr<std::unique_ptr<Process>> {
    return Process::Start(BinaryPath(bin), args, {{"TF_CONFIG", MakeTfConfig(spec, type, index)}},
                          log(absl::StrCat(type, index)));
  };
  for (int i = 0; i < options.num_ps; ++i) {
    auto p = start("ps_server/ps", "ps", i, {"--bind_host=127.0.0.1"});
    if (!p.ok()) return p.status();
    c->ps_.push_back(std::move(*p));
  }
  for (int i = 0; i < options.num_workers; ++i) {
    auto p = start("worker/worker", "worker", i, {"--bind_host=127.0.0.1", "--threads=1"});
    if (!p.ok()) return p.status();
    c->workers_.push_back(std::move(*p));
  }
  if (options.evaluator) {
    c->metrics_file_ = absl::StrCat(dir, "/g", generation, "_metrics.jsonl");
    auto p = start("evaluator/evaluator", "evaluator", 0,
                   {absl::StrCat("--metrics_file=", c->metrics_file_)});
    if (!p.ok()) return p.status();
    c->evaluator_ = std::move(*p);
  }
  std::vector<std::string> chief_args = {"--bind_host=127.0.0.1"};
  if (options.long_lived) chief_args.push_back("--long_lived");
  if (!options.job_file.empty()) chief_args.push_back(absl::StrCat("--job=", options.job_file));
  auto chief = start("coordinator/chief", "chief", 0, chief_args);
  if (!chief.ok()) return chief.status();
  c->chief_ = std::move(*chief);
  absl::Time deadline = absl::Now() + absl::Seconds(60);
  // A channel whose first connection is refused backs off for seconds before it tries again:
  // make it only once the chief's port accepts connections.
  while (absl::Now() < deadline && !PortAcceptsConnections(c->chief_address_) &&
         c->chief_->Running()) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  c->stub_ = CoordinatorService::NewStub(NewChannel(c->chief_address_));
  while (absl::Now() < deadline) {
    // Short deadlines: a call made while the first connection attempt is still pending would
    // otherwise wait out a long one.
    if (c->Status(absl::Milliseconds(250)).ok()) return c;
    if (!c->chief_->Running()) {
      // A chief given a short --job may finish it and exit before the first status answer;
      // that is a start, not a failure, when it exited 0.
      if (c->chief_->Wait(absl::ZeroDuration()).value_or(-1) == 0) return c;
      return absl::InternalError(absl::StrCat("chief exited at start:\n", c->Logs()));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat("chief not up after 60 s\n", c->Logs()));
}

TrainingCluster::~TrainingCluster() {
  std::vector<Process*> all;
  if (chief_) all.push_back(chief_.get());
  if (evaluator_) all.push_back(evaluator_.get());
  for (auto& p : workers_) all.push_back(p.get());
  for (auto& p : ps_) all.push_back(p.get());
  for (Process* p : all) p->Signal(SIGTERM);
  for (Process* p : all) (void)p->Wait(absl::Seconds(10));
}

absl::StatusOr<JobStatus> TrainingCluster::Status(absl::Duration timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  JobStatus status;
  grpc::Status s = stub_->GetStatus(&ctx, GetStatusRequest(), &status);
  if (!s.ok()) return FromGrpcStatus(s);
  return status;
}

absl::StatusOr<JobStatus> TrainingCluster::WaitForState(JobStatus::State state,
                                                        absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<JobStatus> status;
  while (absl::Now() < deadline) {
    status = Status();
    if (status.ok() && status->state() == state) return status;
    if (status.ok() && status->state() != JobStatus::RUNNING &&
        status->state() != JobStatus::NO_JOB) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ended as ", JobStatus::State_Name(status->state()), ": ",
                       status->error(), "\n", Logs()));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "job not ", JobStatus::State_Name(state), " after ", absl::FormatDuration(timeout),
      (status.ok() ? absl::StrCat(" (", status->steps_done(), "/", status->total_steps(), ")")
                   : status.status().ToString()),
      "\n", Logs()));
}

absl::StatusOr<std::unique_ptr<PsClient>> TrainingCluster::NewPsClient() const {
  return NewGrpcPsClient(ps_addresses_, {});
}

std::string TrainingCluster::Logs() const {
  std::string out;
  auto add = [&](const std::string& name, const Process* p) {
    if (p != nullptr) absl::StrAppend(&out, "--- ", name, " ---\n", p->Log());
  };
  add("chief", chief_.get());
  for (size_t i = 0; i < ps_.size(); ++i) add(absl::StrCat("ps ", i), ps_[i].get());
  for (size_t i = 0; i < workers_.size(); ++i) add(absl::StrCat("worker ", i), workers_[i].get());
  add("evaluator", evaluator_.get());
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
