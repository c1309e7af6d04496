#include "tests/training_cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "grpcpp/client_context.h"
#include "rpc/grpc_util.h"
#include "rpc/protocol.h"

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

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<std::string> TaskFlags(const TrainingCluster::Options& options, const std::string& role,
                                   int index) {
  auto it = options.task_flags.find({role, index});
  return it == options.task_flags.end() ? std::vector<std::string>() : it->second;
}

}  // namespace

std::unique_ptr<TrainingCluster::Task> TrainingCluster::NewTask(const std::string& binary,
                                                                const std::string& type,
                                                                int index,
                                                                std::vector<std::string> args)
    const {
  auto task = std::make_unique<Task>();
  task->binary = binary;
  task->type = type;
  task->index = index;
  task->args = std::move(args);
  return task;
}

absl::Status TrainingCluster::Launch(Task* task) {
  if (task->current != nullptr) {
    if (task->current->Running()) {
      return absl::FailedPreconditionError(
          absl::StrCat(task->type, " ", task->index, " is still running"));
    }
    task->past.push_back(std::move(task->current));
  }
  // g<cluster>_<type><index>.log, then .1.log, .2.log for later incarnations.
  std::string log = absl::StrCat(dir_, "/g", generation_, "_", task->type, task->index);
  if (!task->past.empty()) absl::StrAppend(&log, ".", task->past.size());
  absl::StrAppend(&log, ".log");
  absl::StatusOr<std::unique_ptr<Process>> p =
      Process::Start(BinaryPath(task->binary), task->args,
                     {{"TF_CONFIG", MakeTfConfig(spec_, task->type, task->index)}}, log);
  if (!p.ok()) return p.status();
  task->current = *std::move(p);
  return absl::OkStatus();
}

absl::StatusOr<int> TrainingCluster::Stop(Task* task, int sig) {
  if (task->current == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(task->type, " ", task->index, " was never started"));
  }
  task->current->Signal(sig);
  return task->current->Wait(absl::Seconds(60));
}

absl::StatusOr<std::unique_ptr<TrainingCluster>> TrainingCluster::Start(const Options& options) {
  static int generation = 0;
  auto c = std::unique_ptr<TrainingCluster>(new TrainingCluster);
  c->generation_ = ++generation;
  c->dir_ = TempDir();
  auto addr = [] { return LoopbackAddress(); };
  c->chief_address_ = addr();
  c->spec_["chief"] = {c->chief_address_};
  for (int i = 0; i < options.num_ps; ++i) c->ps_addresses_.push_back(addr());
  c->spec_["ps"] = c->ps_addresses_;
  for (int i = 0; i < options.num_workers; ++i) c->spec_["worker"].push_back(addr());
  if (options.evaluator && !options.evaluator_outside_cluster) c->spec_["evaluator"] = {addr()};

  for (int i = 0; i < options.num_ps; ++i) {
    c->ps_.push_back(c->NewTask("ps_server/ps", "ps", i,
                                Concat(options.ps_flags, TaskFlags(options, "ps", i))));
    if (absl::Status s = c->Launch(c->ps_.back().get()); !s.ok()) return s;
  }
  for (int i = 0; i < options.num_workers; ++i) {
    c->workers_.push_back(c->NewTask("worker/worker", "worker", i,
                                     Concat(Concat({"--threads=1"}, options.worker_flags),
                                            TaskFlags(options, "worker", i))));
    if (!options.start_workers) continue;
    if (absl::Status s = c->Launch(c->workers_.back().get()); !s.ok()) return s;
  }
  if (options.evaluator) {
    c->metrics_file_ = absl::StrCat(c->dir_, "/g", c->generation_, "_metrics.jsonl");
    c->evaluator_ = c->NewTask(
        "evaluator/evaluator", "evaluator", 0,
        Concat({absl::StrCat("--metrics_file=", c->metrics_file_)}, options.evaluator_flags));
    if (absl::Status s = c->Launch(c->evaluator_.get()); !s.ok()) return s;
  }
  // The chief starts a --job at once: with every task already accepting connections, no
  // worker misses the job's start (a refused StartJob is retried only after the chief's probe
  // interval, by when a short job may be over). A task that exits meanwhile is not waited for.
  {
    std::vector<std::pair<const Task*, std::string>> tasks;
    for (int i = 0; i < options.num_ps; ++i) {
      tasks.emplace_back(c->ps_[i].get(), c->ps_addresses_[i]);
    }
    if (options.start_workers) {
      for (int i = 0; i < options.num_workers; ++i) {
        tasks.emplace_back(c->workers_[i].get(), c->spec_["worker"][i]);
      }
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    for (const auto& [task, address] : tasks) {
      while (absl::Now() < deadline && task->current->Running() &&
             !PortAcceptsConnections(address)) {
        absl::SleepFor(absl::Milliseconds(10));
      }
    }
  }
  std::vector<std::string> chief_args;
  if (options.long_lived) chief_args.push_back("--long_lived");
  if (!options.job_file.empty()) chief_args.push_back(absl::StrCat("--job=", options.job_file));
  if (!options.checkpoint_dir.empty()) {
    chief_args.push_back(absl::StrCat("--checkpoint_dir=", options.checkpoint_dir));
  }
  c->chief_ = c->NewTask("coordinator/chief", "chief", 0, Concat(chief_args, options.chief_flags));
  if (absl::Status s = c->Launch(c->chief_.get()); !s.ok()) return s;
  if (absl::Status s = c->WaitForChief(); !s.ok()) return s;
  return c;
}

absl::Status TrainingCluster::WaitForChief() {
  Process* chief = chief_->current.get();
  absl::Time deadline = absl::Now() + absl::Seconds(60);
  // A channel whose first connection is refused backs off for seconds before it tries again:
  // make it only once the chief's port accepts connections.
  while (absl::Now() < deadline && !PortAcceptsConnections(chief_address_) && chief->Running()) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  stub_ = CoordinatorService::NewStub(NewChannel(chief_address_));
  while (absl::Now() < deadline) {
    // Short deadlines: a call made while the first connection attempt is still pending would
    // otherwise wait out a long one.
    if (Status(absl::Milliseconds(250)).ok()) return absl::OkStatus();
    if (!chief->Running()) {
      // A chief given a short --job may finish it and exit before the first status answer;
      // that is a start, not a failure, when it exited 0.
      if (chief->Wait(absl::ZeroDuration()).value_or(-1) == 0) return absl::OkStatus();
      return absl::InternalError(absl::StrCat("chief exited at start:\n", Logs()));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat("chief not up after 60 s\n", Logs()));
}

TrainingCluster::~TrainingCluster() { SignalAll(SIGTERM); }

std::vector<TrainingCluster::Task*> TrainingCluster::AllTasks() const {
  std::vector<Task*> all;
  if (chief_) all.push_back(chief_.get());
  if (evaluator_) all.push_back(evaluator_.get());
  for (const auto& t : workers_) all.push_back(t.get());
  for (const auto& t : ps_) all.push_back(t.get());
  return all;
}

void TrainingCluster::SignalAll(int sig) {
  std::vector<Process*> running;
  for (Task* t : AllTasks()) {
    if (t->current != nullptr && t->current->Running()) running.push_back(t->current.get());
  }
  for (Process* p : running) p->Signal(sig);
  // Whatever does not exit in time is killed by ~Process.
  for (Process* p : running) (void)p->Wait(absl::Seconds(10));
}

absl::StatusOr<int> TrainingCluster::StopPs(int i, int sig) { return Stop(ps_[i].get(), sig); }

absl::Status TrainingCluster::RestartPs(int i) {
  if (absl::Status s = Launch(ps_[i].get()); !s.ok()) return s;
  Process* ps = ps_[i]->current.get();
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!PortAcceptsConnections(ps_addresses_[i])) {
    if (!ps->Running() || absl::Now() > deadline) {
      return absl::InternalError(absl::StrCat("ps ", i, " did not come back at ",
                                              ps_addresses_[i], "\n", Logs()));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> TrainingCluster::StopChief(int sig) { return Stop(chief_.get(), sig); }

absl::Status TrainingCluster::RestartChief() {
  if (absl::Status s = Launch(chief_.get()); !s.ok()) return s;
  return WaitForChief();
}

absl::StatusOr<JobStatus> TrainingCluster::KillAndRestartChief() {
  absl::StatusOr<int> killed = StopChief(SIGKILL);
  if (!killed.ok()) return killed.status();
  if (*killed != 128 + SIGKILL) {
    return absl::InternalError(
        absl::StrCat("the chief exited ", *killed, " before it was killed\n", Logs()));
  }
  if (absl::Status s = RestartChief(); !s.ok()) return s;
  return WaitForStatus([](const JobStatus& s) { return s.state() != JobStatus::NO_JOB; });
}

absl::Status TrainingCluster::StartWorker(int i) { return Launch(workers_[i].get()); }

absl::StatusOr<JobStatus> TrainingCluster::Status(absl::Duration timeout) {
  grpc::ClientContext ctx;
  AttachProtocolVersion(&ctx);
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  JobStatus status;
  grpc::Status s = stub_->GetStatus(&ctx, GetStatusRequest(), &status);
  if (!s.ok()) return FromGrpcStatus(s);
  return status;
}

absl::StatusOr<JobStatus> TrainingCluster::WaitForStatus(
    const std::function<bool(const JobStatus&)>& pred, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<JobStatus> status;
  while (absl::Now() < deadline) {
    status = Status();
    if (status.ok() && pred(*status)) return status;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "the chief's status did not come to the expected state in ",
      absl::FormatDuration(timeout), "; last: ",
      status.ok() ? status->ShortDebugString() : status.status().ToString(), "\n", Logs()));
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
      (status.ok() ? absl::StrCat(" (", status->steps_done(), "/", status->total_steps(),
                                  " steps, phase \"", status->phase(), "\")")
                   : status.status().ToString()),
      "\n", Logs()));
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

std::string TrainingCluster::Logs() const {
  std::string out;
  auto add = [&](const std::string& name, const Task* task) {
    if (task == nullptr) return;
    std::vector<const Process*> all;
    for (const auto& p : task->past) all.push_back(p.get());
    if (task->current != nullptr) all.push_back(task->current.get());
    for (size_t n = 0; n < all.size(); ++n) {
      absl::StrAppend(&out, "--- ", name);
      if (all.size() > 1) absl::StrAppend(&out, " (incarnation ", n + 1, ")");
      if (all[n]->exit_code().has_value()) {
        absl::StrAppend(&out, " (exited ", *all[n]->exit_code(), ")");
      }
      absl::StrAppend(&out, " ---\n", all[n]->Log());
    }
  };
  add("chief", chief_.get());
  for (size_t i = 0; i < ps_.size(); ++i) add(absl::StrCat("ps ", i), ps_[i].get());
  for (size_t i = 0; i < workers_.size(); ++i) {
    add(absl::StrCat("worker ", i), workers_[i].get());
  }
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
