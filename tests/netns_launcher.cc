#include "tests/netns_launcher.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include "absl/memory/memory.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "tests/wait.h"

namespace shardps {
namespace testing {
namespace {

// A process that exists and is not a zombie.
bool Alive(pid_t pid) {
  const std::string stat = ReadWholeFile(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
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
  const std::string stat = ReadWholeFile(absl::StrCat("/proc/", pid, "/stat"));
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

absl::StatusOr<std::unique_ptr<NetnsLauncher>> NetnsLauncher::Start(const Options& options,
                                                                    absl::Time deadline) {
  if (options.name.empty() || options.name.size() > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("NetnsCluster name \"", options.name, "\" must have 1 to 4 letters"));
  }
  auto l = absl::WrapUnique(new NetnsLauncher());
  l->options_ = options;
  const uint32_t r = std::random_device()();
  // A prefix and a /24 of this cluster alone: 16 random bits in the prefix, 11 in the subnet
  // (10.233.0.0 to 10.238.255.0: clear of run_netns.sh's default 10.231 and netns_test's
  // 10.232); run_netns.sh refuses a prefix a live run holds and a subnet in use (exit 2,
  // before it makes anything), and then the caller tries another pair.
  l->prefix_ = absl::StrFormat("%s%04x", options.name, r & 0xffff);
  l->subnet_ = absl::StrCat("10.", 233 + (r >> 16) % 6, ".", (r >> 24) & 0xff);
  l->run_dir_ = FreshTempDir(l->prefix_);
  const std::string job = absl::StrCat(TempDir(), "/", l->prefix_, "_job.json");
  std::ofstream(job) << options.job_json;
  // The binaries sit in the runfiles tree, as the script's own ../ sees it.
  std::string bin = BinaryPath("ps_server/ps");
  bin.resize(bin.size() - std::string("/ps_server/ps").size());
  auto script = Process::Start(
      BinaryPath("deploy/run_netns.sh"),
      {job, "--ps", std::to_string(options.num_ps), "--workers",
       std::to_string(options.num_workers), "--run_dir", l->run_dir_, "--prefix", l->prefix_,
       "--subnet", l->subnet_,
       // Plaintext: this process's clients (the Cluster's chief client, the fault tests' ps
       // probes) speak it; the launcher's TLS is run by python:launcher_test and the main job.
       "--tls", "off"},
      {{"SHARDPS_BIN", bin}}, absl::StrCat(TempDir(), "/", l->prefix_, "_launcher.log"));
  if (!script.ok()) return script.status();
  l->script_ = *std::move(script);
  PollUntil([&] { return !l->script_->Running() || l->Pid("chief-0") != 0; }, deadline,
            absl::Milliseconds(20));
  return l;
}

std::optional<absl::Status> NetnsLauncher::ChiefEnded() {
  if (script_->Running()) return std::nullopt;
  return absl::FailedPreconditionError(absl::StrCat(
      "run_netns.sh exited (", script_->exit_code().value_or(-1), "); the chief at ",
      chief_address(), " is gone"));
}

bool NetnsLauncher::Collided() {
  if (script_->Running() || script_->exit_code() != 2) return false;
  const std::string log = script_->Log();
  return absl::StrContains(log, "pick another --subnet") ||
         absl::StrContains(log, "another run with --prefix");
}

std::string NetnsLauncher::Shutdown() {
  if (!shut_down_) {
    shut_down_ = true;
    for (const std::string& task : Tasks()) Pid(task);  // noted, to check they end
    // SIGTERM: the script's trap stops the daemons and removes the network; SIGKILL when it
    // does not end in 30 s, and --cleanup below removes what it left.
    if (script_ != nullptr && script_->Running()) {
      script_->Signal(SIGTERM);
      if (!script_->Wait(absl::Seconds(30)).ok()) script_->Signal(SIGKILL);
      (void)script_->Wait(absl::Seconds(10));
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

std::vector<std::string> NetnsLauncher::Tasks() const {
  std::vector<std::string> tasks = {"chief-0"};
  for (int i = 0; i < options_.num_ps; ++i) tasks.push_back(TaskName("ps", i));
  for (int i = 0; i < options_.num_workers; ++i) tasks.push_back(TaskName("worker", i));
  tasks.push_back("evaluator-0");
  return tasks;
}

std::string NetnsLauncher::Veth(const std::string& task) const {
  // run_netns.sh's address order: chief, ps, workers, evaluator at .2, .3, ...
  const std::vector<std::string> tasks = Tasks();
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i] == task) return absl::StrCat(prefix_, "-v", i + 2);
  }
  return "";
}

absl::Status NetnsLauncher::SetLink(const std::string& task, bool up) {
  const std::string veth = Veth(task);
  if (veth.empty()) return absl::InvalidArgumentError(absl::StrCat("no task \"", task, "\""));
  std::string out;
  if (Ip({"link", "set", veth, up ? "up" : "down"}, &out) != 0) {
    return absl::InternalError(absl::StrCat("ip link set ", veth, up ? " up" : " down",
                                            " failed: ", out));
  }
  return absl::OkStatus();
}

pid_t NetnsLauncher::Pid(const std::string& task) const {
  int pid = 0;
  const std::string text = ReadWholeFile(absl::StrCat(run_dir_, "/pids/", task, ".pid"));
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &pid) || pid <= 0) return 0;
  seen_pids_.insert(pid);
  return pid;
}

std::string NetnsLauncher::Log(const std::string& task) const {
  return ReadWholeFile(absl::StrCat(run_dir_, "/", task, ".log"));
}

std::string NetnsLauncher::Logs() const {
  std::string all;
  for (const std::string& task : Tasks()) {
    absl::StrAppend(&all, "==== ", task, " ====\n", Log(task));
  }
  if (script_ != nullptr) absl::StrAppend(&all, "==== run_netns.sh ====\n", script_->Log());
  return all;
}

}  // namespace testing
}  // namespace shardps
