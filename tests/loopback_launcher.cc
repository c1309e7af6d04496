#include "tests/loopback_launcher.h"

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/wait.h"

namespace shardps {
namespace testing {
namespace {

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<std::string> TaskFlags(const LoopbackLauncher::Options& options,
                                   const std::string& role, int index) {
  auto it = options.task_flags.find({role, index});
  return it == options.task_flags.end() ? std::vector<std::string>() : it->second;
}

std::vector<std::string> ChiefArgs(const LoopbackLauncher::Options& options) {
  std::vector<std::string> args;
  if (options.long_lived) args.push_back("--long_lived");
  if (!options.job_file.empty()) args.push_back(absl::StrCat("--job=", options.job_file));
  if (!options.checkpoint_dir.empty()) {
    args.push_back(absl::StrCat("--checkpoint_dir=", options.checkpoint_dir));
  }
  return Concat(args, options.chief_flags);
}

}  // namespace

std::unique_ptr<LoopbackLauncher::Task> LoopbackLauncher::NewTask(const std::string& binary,
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

void LoopbackLauncher::AddTasks(const Options& options) {
  spec_["chief"] = {LoopbackAddress()};
  for (int i = 0; i < options.num_ps; ++i) spec_["ps"].push_back(LoopbackAddress());
  for (int i = 0; i < options.num_workers; ++i) spec_["worker"].push_back(LoopbackAddress());
  if (options.evaluator && !options.evaluator_outside_cluster) {
    spec_["evaluator"] = {LoopbackAddress()};
  }
  for (int i = 0; i < options.num_ps; ++i) {
    ps_.push_back(
        NewTask("ps_server/ps", "ps", i, Concat(options.ps_flags, TaskFlags(options, "ps", i))));
  }
  for (int i = 0; i < options.num_workers; ++i) {
    workers_.push_back(NewTask("worker/worker", "worker", i,
                               Concat(Concat({"--threads=1"}, options.worker_flags),
                                      TaskFlags(options, "worker", i))));
  }
  if (options.evaluator) {
    metrics_file_ = absl::StrCat(dir_, "/g", generation_, "_metrics.jsonl");
    evaluator_ = NewTask(
        "evaluator/evaluator", "evaluator", 0,
        Concat({absl::StrCat("--metrics_file=", metrics_file_)}, options.evaluator_flags));
  }
  chief_ = NewTask("coordinator/chief", "chief", 0, ChiefArgs(options));
}

absl::StatusOr<std::unique_ptr<LoopbackLauncher>> LoopbackLauncher::Start(const Options& options) {
  static int generation = 0;
  auto l = std::unique_ptr<LoopbackLauncher>(new LoopbackLauncher);
  l->generation_ = ++generation;
  l->dir_ = TempDir();
  l->AddTasks(options);
  for (const auto& ps : l->ps_) {
    if (absl::Status s = l->Launch(ps.get()); !s.ok()) return s;
  }
  for (const auto& worker : l->workers_) {
    if (!options.start_workers) break;
    if (absl::Status s = l->Launch(worker.get()); !s.ok()) return s;
  }
  if (l->evaluator_ != nullptr) {
    if (absl::Status s = l->Launch(l->evaluator_.get()); !s.ok()) return s;
  }
  if (!options.start_chief) return l;
  // The chief starts a --job at once: with every task already accepting connections, no
  // worker misses the job's start (a refused StartJob is retried only after the chief's probe
  // interval, by when a short job may be over).
  l->WaitForPsAndWorkers();
  if (absl::Status s = l->Launch(l->chief_.get()); !s.ok()) return s;
  return l;
}

void LoopbackLauncher::WaitForPsAndWorkers() const {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  std::vector<Task*> tasks;
  for (const auto& t : ps_) tasks.push_back(t.get());
  for (const auto& t : workers_) tasks.push_back(t.get());
  for (Task* task : tasks) {
    if (task->current == nullptr) continue;
    const std::string address = spec_.at(task->type).at(task->index);
    (void)WaitForPort(address, deadline, [task] { return task->current->Running(); });
  }
}

LoopbackLauncher::~LoopbackLauncher() { SignalAll(SIGTERM); }

absl::Status LoopbackLauncher::Launch(Task* task) {
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

LoopbackLauncher::Task* LoopbackLauncher::Find(const std::string& type, int index) const {
  for (Task* task : AllTasks()) {
    if (task->type == type && task->index == index) return task;
  }
  return nullptr;
}

absl::Status LoopbackLauncher::Launch(const std::string& type, int index) {
  Task* task = Find(type, index);
  if (task == nullptr) {
    return absl::NotFoundError(absl::StrCat("no task ", TaskName(type, index)));
  }
  return Launch(task);
}

absl::StatusOr<int> LoopbackLauncher::Stop(const std::string& type, int index, int sig) {
  Task* task = Find(type, index);
  if (task == nullptr || task->current == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(type, " ", index, " was never started"));
  }
  task->current->Signal(sig);
  return task->current->Wait(absl::Seconds(60));
}

std::vector<LoopbackLauncher::Task*> LoopbackLauncher::AllTasks() const {
  std::vector<Task*> all;
  if (chief_) all.push_back(chief_.get());
  if (evaluator_) all.push_back(evaluator_.get());
  for (const auto& t : workers_) all.push_back(t.get());
  for (const auto& t : ps_) all.push_back(t.get());
  return all;
}

void LoopbackLauncher::SignalAll(int sig) {
  std::vector<Process*> running;
  for (Task* t : AllTasks()) {
    if (t->current != nullptr && t->current->Running()) running.push_back(t->current.get());
  }
  for (Process* p : running) p->Signal(sig);
  // Whatever does not exit in time is killed by ~Process.
  for (Process* p : running) (void)p->Wait(absl::Seconds(10));
}

std::optional<absl::Status> LoopbackLauncher::ChiefEnded() {
  Process* chief = chief_ != nullptr ? chief_->current.get() : nullptr;
  if (chief == nullptr || chief->Running()) return std::nullopt;
  // A chief given a short --job may finish it and exit before it is asked; that is a good
  // end when it exited 0.
  if (chief->exit_code().value_or(-1) == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("the chief exited ", chief->exit_code().value_or(-1)));
}

std::vector<std::string> LoopbackLauncher::Addresses(const std::string& type) const {
  auto it = spec_.find(type);
  return it == spec_.end() ? std::vector<std::string>() : it->second;
}

Process* LoopbackLauncher::Current(const std::string& type, int index) const {
  Task* task = Find(type, index);
  return task == nullptr ? nullptr : task->current.get();
}

pid_t LoopbackLauncher::Pid(const std::string& task) const {
  for (Task* t : AllTasks()) {
    if (TaskName(t->type, t->index) == task && t->current != nullptr && t->current->Running()) {
      return t->current->pid();
    }
  }
  return 0;
}

std::string LoopbackLauncher::Log(const std::string& task) const {
  std::string out;
  for (Task* t : AllTasks()) {
    if (TaskName(t->type, t->index) != task) continue;
    for (const auto& p : t->past) out += p->Log();
    if (t->current != nullptr) out += t->current->Log();
  }
  return out;
}

std::string LoopbackLauncher::Logs() const {
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

}  // namespace testing
}  // namespace shardps

