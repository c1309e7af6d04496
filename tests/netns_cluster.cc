#include "tests/netns_cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <sstream>

#include "absl/memory/memory.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpcpp/client_context.h"
#include "rpc/grpc_util.h"
#include "rpc/protocol.h"

namespace shardps {
namespace testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A process that exists and is not a zombie.
bool Alive(pid_t pid) {
  const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

// A TCP connection to ip:port succeeds (a refusal comes back at once once the namespace's
// link is up; this is only called then).
bool AcceptsConnections(const std::string& ip, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

}  // namespace

int Ip(const std::vector<std::string>& args, std::string* out) {
  absl::StatusOr<int> code = RunCommand("/usr/sbin/ip", args, {}, out, absl::Seconds(20));
  return code.ok() ? *code : -1;
}

std::string WhyNoNamespaces(const std::string& prefix) {
  if (geteuid() != 0) return "not root: making network namespaces needs CAP_NET_ADMIN";
  if (access("/usr/sbin/ip", X_OK) != 0) return "iproute2's /usr/sbin/ip is not installed";
  std::string out;
  const std::string probe = prefix + "-probe";
  if (Ip({"netns", "add", probe}, &out) != 0) {
    return absl::StrCat("`ip netns add ", probe, "` failed: ", out);
  }
  Ip({"netns", "delete", probe}, &out);
  return "";
}

std::string NetnsLeftovers(const std::string& prefix) {
  std::string namespaces, links, etc;
  Ip({"netns", "list"}, &namespaces);
  Ip({"-o", "link", "show"}, &links);
  (void)RunCommand("/bin/sh", {"-c", absl::StrCat("ls -d /etc/netns/", prefix, "-* 2>/dev/null")},
                   {}, &etc);
  std::string left;
  for (absl::string_view line : absl::StrSplit(namespaces + links + etc, '\n')) {
    if (!absl::StrContains(line, prefix + "-")) continue;
    absl::StrAppend(&left, line, "\n");
    // A namespace left: the processes still in it.
    if (absl::StartsWith(line, prefix + "-")) {
      const std::string ns(line.substr(0, line.find(' ')));
      std::string pids;
      if (Ip({"netns", "pids", ns}, &pids) == 0 && !absl::StripAsciiWhitespace(pids).empty()) {
        absl::StrAppend(&left, "  processes in ", ns, ": ",
                        absl::StrJoin(absl::StrSplit(pids, '\n', absl::SkipEmpty()), " "), "\n");
      }
    }
  }
  return left;
}

absl::Duration ProcessCpuTime(pid_t pid) {
  const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  // The fields after "(comm)": state is the 3rd field of the line, utime the 14th, stime the
  // 15th.
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return absl::Seconds(-1);
  std::vector<absl::string_view> f =
      absl::StrSplit(absl::string_view(stat).substr(paren + 2), ' ', absl::SkipEmpty());
  int64_t utime = 0, stime = 0;
  if (f.size() < 13 || !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime)) {
    return absl::Seconds(-1);
  }
  return absl::Seconds(static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK));
}

absl::StatusOr<std::unique_ptr<NetnsCluster>> NetnsCluster::Start(const Options& options) {
  if (options.name.empty() || options.name.size() > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("NetnsCluster name \"", options.name, "\" must have 1 to 4 letters"));
  }
  std::random_device rd;
  // The binaries sit in the runfiles tree, as the script's own ../ sees it.
  std::string bin = BinaryPath("ps_server/ps");
  bin.resize(bin.size() - std::string("/ps_server/ps").size());
  absl::Status last = absl::OkStatus();
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto c = absl::WrapUnique(new NetnsCluster());
    c->options_ = options;
    const uint32_t r = rd();
    // A prefix and a /24 of this cluster alone: 16 random bits in the prefix, 11 in the
    // subnet (10.233.0.0 to 10.238.255.0: clear of run_netns.sh's default 10.231 and
    // netns_test's 10.232); run_netns.sh refuses a prefix a live run holds and a subnet in use
    // (exit 2, before it makes anything), and then another pair is tried.
    c->prefix_ = absl::StrFormat("%s%04x", options.name, r & 0xffff);
    c->subnet_ = absl::StrCat("10.", 233 + (r >> 16) % 6, ".", (r >> 24) & 0xff);
    c->run_dir_ = FreshTempDir(c->prefix_);
    const std::string job = absl::StrCat(TempDir(), "/", c->prefix_, "_job.json");
    std::ofstream(job) << options.job_json;
    auto launcher = Process::Start(
        BinaryPath("deploy/run_netns.sh"),
        {job, "--ps", std::to_string(options.num_ps), "--workers",
         std::to_string(options.num_workers), "--run_dir", c->run_dir_, "--prefix", c->prefix_,
         "--subnet", c->subnet_},
        {{"SHARDPS_BIN", bin}}, absl::StrCat(TempDir(), "/", c->prefix_, "_launcher.log"));
    if (!launcher.ok()) return launcher.status();
    c->launcher_ = *std::move(launcher);
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    // The channel only once the chief's namespace is on the bridge (its supervisor has
    // started it): a connection tried before would leave by the default route and wait out
    // gRPC's 20 s connect timeout.
    while (absl::Now() < deadline && c->launcher_->Running() && c->Pid("chief-0") == 0) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    // And once the chief listens: a first connection refused backs the channel off for up to
    // 2 s, long enough for a short job to be half done before the first status.
    while (absl::Now() < deadline && c->launcher_->Running() &&
           !AcceptsConnections(c->subnet_ + ".2", 2222)) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    c->stub_ = CoordinatorService::NewStub(NewChannel(absl::StrCat(c->subnet_, ".2:2222")));
    bool up = false;
    while (absl::Now() < deadline && c->launcher_->Running()) {
      if (c->Status(absl::Milliseconds(250)).ok()) {
        up = true;
        break;
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    if (up) return c;
    const std::string log = c->launcher_->Log();
    if (!c->launcher_->Running() && c->launcher_->exit_code() == 2 &&
        (absl::StrContains(log, "pick another --subnet") ||
         absl::StrContains(log, "another run with --prefix"))) {
      last = absl::UnavailableError(log);
      continue;  // the destructor removes the run's leftovers (there are none)
    }
    return absl::InternalError(
        absl::StrCat("the chief at ", c->subnet_, ".2:2222 did not answer within 60 s\n",
                     c->Logs()));
  }
  return absl::UnavailableError(
      absl::StrCat("5 random prefixes and subnets were all in use; the last: ", last.message()));
}

NetnsCluster::~NetnsCluster() { Shutdown(); }

std::string NetnsCluster::Shutdown() {
  if (!shut_down_) {
    shut_down_ = true;
    for (const std::string& task : Tasks()) Pid(task);  // noted, to check they end
    // SIGTERM: the launcher's trap stops the daemons and removes the network; SIGKILL when
    // it does not end in 30 s, and --cleanup below removes what it left.
    if (launcher_ != nullptr && launcher_->Running()) {
      launcher_->Signal(SIGTERM);
      if (!launcher_->Wait(absl::Seconds(30)).ok()) launcher_->Signal(SIGKILL);
      (void)launcher_->Wait(absl::Seconds(10));
    }
    std::string out;
    (void)RunCommand(BinaryPath("deploy/run_netns.sh"), {"--cleanup", "--prefix", prefix_}, {},
                     &out);
    // run_netns.sh keeps its per-prefix lock file; this random prefix is never used again.
    unlink(absl::StrCat("/run/shardps-netns/", prefix_, ".lock").c_str());
  }
  std::string left = NetnsLeftovers(prefix_);
  for (pid_t pid : seen_pids_) {
    if (Alive(pid)) absl::StrAppend(&left, "daemon process ", pid, " still runs\n");
  }
  return left;
}

std::vector<std::string> NetnsCluster::Tasks() const {
  std::vector<std::string> tasks = {"chief-0"};
  for (int i = 0; i < options_.num_ps; ++i) tasks.push_back(absl::StrCat("ps-", i));
  for (int i = 0; i < options_.num_workers; ++i) tasks.push_back(absl::StrCat("worker-", i));
  tasks.push_back("evaluator-0");
  return tasks;
}

std::string NetnsCluster::Veth(const std::string& task) const {
  // run_netns.sh's address order: chief, ps, workers, evaluator at .2, .3, ...
  const std::vector<std::string> tasks = Tasks();
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i] == task) return absl::StrCat(prefix_, "-v", i + 2);
  }
  return "";
}

absl::Status NetnsCluster::SetLink(const std::string& task, bool up) {
  const std::string veth = Veth(task);
  if (veth.empty()) return absl::InvalidArgumentError(absl::StrCat("no task \"", task, "\""));
  std::string out;
  if (Ip({"link", "set", veth, up ? "up" : "down"}, &out) != 0) {
    return absl::InternalError(absl::StrCat("ip link set ", veth, up ? " up" : " down",
                                            " failed: ", out));
  }
  return absl::OkStatus();
}

pid_t NetnsCluster::Pid(const std::string& task) const {
  int pid = 0;
  const std::string text = ReadFile(absl::StrCat(run_dir_, "/pids/", task, ".pid"));
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &pid) || pid <= 0) return 0;
  seen_pids_.insert(pid);
  return pid;
}

std::string NetnsCluster::Log(const std::string& task) const {
  return ReadFile(absl::StrCat(run_dir_, "/", task, ".log"));
}

std::string NetnsCluster::Logs() const {
  std::string all;
  for (const std::string& task : Tasks()) {
    absl::StrAppend(&all, "==== ", task, " ====\n", Log(task));
  }
  if (launcher_ != nullptr) absl::StrAppend(&all, "==== run_netns.sh ====\n", launcher_->Log());
  return all;
}

absl::StatusOr<JobStatus> NetnsCluster::Status(absl::Duration timeout) {
  grpc::ClientContext ctx;
  AttachProtocolVersion(&ctx);
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  JobStatus status;
  grpc::Status s = stub_->GetStatus(&ctx, GetStatusRequest(), &status);
  if (!s.ok()) return FromGrpcStatus(s);
  return status;
}

absl::StatusOr<JobStatus> NetnsCluster::WaitForStatus(
    const std::function<bool(const JobStatus&)>& pred, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<JobStatus> status;
  while (absl::Now() < deadline) {
    // Short deadlines: a call to a chief that is cut off would otherwise hold the poll.
    status = Status(absl::Milliseconds(500));
    if (status.ok() && pred(*status)) return status;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "the chief's status did not come to the expected state in ",
      absl::FormatDuration(timeout), "; last: ",
      status.ok() ? status->ShortDebugString() : status.status().ToString(), "\n", Logs()));
}

absl::StatusOr<JobStatus> NetnsCluster::WaitForSuccess(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<JobStatus> status;
  while (absl::Now() < deadline) {
    status = Status(absl::Milliseconds(500));
    if (status.ok() && status->state() == JobStatus::SUCCEEDED) return status;
    if (status.ok() && status->state() != JobStatus::RUNNING &&
        status->state() != JobStatus::NO_JOB) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ended as ", JobStatus::State_Name(status->state()), ": ",
                       status->error(), "\n", Logs()));
    }
    if (!launcher_->Running()) {
      return absl::FailedPreconditionError(
          absl::StrCat("run_netns.sh exited (", launcher_->exit_code().value_or(-1),
                       ") before the job's success was seen\n", Logs()));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "job not SUCCEEDED after ", absl::FormatDuration(timeout),
      (status.ok() ? absl::StrCat(" (", status->steps_done(), "/", status->total_steps(),
                                  " steps, phase \"", status->phase(), "\")")
                   : status.status().ToString()),
      "\n", Logs()));
}

absl::StatusOr<int> NetnsCluster::WaitForLauncher(absl::Duration timeout) {
  return launcher_->Wait(timeout);
}

}  // namespace testing
}  // namespace shardps
