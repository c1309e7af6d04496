#include "bench/host_stats.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace shardps {
namespace bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double TicksPerSecond() { return static_cast<double>(sysconf(_SC_CLK_TCK)); }

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::optional<ProcStat> ParseProcStat(const std::string& text) {
  // The fields after the parenthesized command name (which may hold spaces): state, ppid,
  // ..., utime and stime the 12th and 13th, cutime and cstime the 14th and 15th.
  const size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 > text.size()) return std::nullopt;
  std::vector<std::string> fields =
      absl::StrSplit(text.substr(close + 2), ' ', absl::SkipEmpty());
  if (fields.size() < 15 || fields[0].empty()) return std::nullopt;
  int64_t ppid = 0;
  double utime = 0, stime = 0, cutime = 0, cstime = 0;
  if (!absl::SimpleAtoi(fields[1], &ppid) || !absl::SimpleAtod(fields[11], &utime) ||
      !absl::SimpleAtod(fields[12], &stime) || !absl::SimpleAtod(fields[13], &cutime) ||
      !absl::SimpleAtod(fields[14], &cstime)) {
    return std::nullopt;
  }
  ProcStat stat;
  stat.state = fields[0][0];
  stat.ppid = static_cast<pid_t>(ppid);
  stat.cpu_s = (utime + stime) / TicksPerSecond();
  stat.children_cpu_s = (cutime + cstime) / TicksPerSecond();
  return stat;
}

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  return ParseProcStat(ReadText(absl::StrCat("/proc/", pid, "/stat")));
}

double ProcessCpuSeconds(pid_t pid) {
  std::optional<ProcStat> stat = ReadProcStat(pid);
  return stat.has_value() ? stat->cpu_s : kNaN;
}

double SchedulerCpuSeconds(pid_t pid) {
  const std::string dir = absl::StrCat("/proc/", pid, "/task");
  DIR* tasks = opendir(dir.c_str());
  if (tasks == nullptr) return 0;
  double total = 0;
  while (dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream in(absl::StrCat(dir, "/", entry->d_name, "/schedstat"));
    double ns = 0;
    if (in >> ns) total += ns * 1e-9;
  }
  closedir(tasks);
  return total;
}

std::vector<std::pair<pid_t, ProcStat>> AllProcesses() {
  std::vector<std::pair<pid_t, ProcStat>> out;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return out;
  while (dirent* entry = readdir(dir)) {
    int64_t pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid)) continue;
    std::optional<ProcStat> stat = ReadProcStat(static_cast<pid_t>(pid));
    if (stat.has_value()) out.emplace_back(static_cast<pid_t>(pid), *stat);
  }
  closedir(dir);
  return out;
}

std::vector<pid_t> ChildPids(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& [pid, stat] : AllProcesses()) {
    if (stat.ppid == parent && stat.state != 'Z') out.push_back(pid);
  }
  return out;
}

double TreeCpuSeconds(pid_t root) {
  std::multimap<pid_t, std::pair<pid_t, ProcStat>> by_parent;
  std::optional<ProcStat> root_stat;
  for (const auto& [pid, stat] : AllProcesses()) {
    if (pid == root) root_stat = stat;
    by_parent.emplace(stat.ppid, std::make_pair(pid, stat));
  }
  if (!root_stat.has_value()) return kNaN;
  double total = 0;
  std::vector<std::pair<pid_t, ProcStat>> todo = {{root, *root_stat}};
  while (!todo.empty()) {
    const auto [pid, stat] = todo.back();
    todo.pop_back();
    total += stat.cpu_s + stat.children_cpu_s;
    auto [begin, end] = by_parent.equal_range(pid);
    for (auto it = begin; it != end; ++it) todo.push_back(it->second);
  }
  return total;
}

double ParseMachineBusySeconds(const std::string& cpu_line, double ticks_per_second) {
  if (cpu_line.rfind("cpu ", 0) != 0) return kNaN;
  std::vector<std::string> fields = absl::StrSplit(cpu_line, ' ', absl::SkipEmpty());
  // cpu user nice system idle iowait irq softirq steal ...
  double busy = 0;
  for (size_t i = 1; i < fields.size() && i <= 8; ++i) {
    if (i == 4 || i == 5) continue;  // idle, iowait
    double v = 0;
    if (absl::SimpleAtod(fields[i], &v)) busy += v;
  }
  return busy / ticks_per_second;
}

double MachineBusySeconds() {
  std::ifstream in("/proc/stat");
  std::string line;
  if (!std::getline(in, line)) return kNaN;
  return ParseMachineBusySeconds(line, TicksPerSecond());
}

double LoadAverage1m() {
  std::ifstream in("/proc/loadavg");
  double load = kNaN;
  in >> load;
  return load;
}

int OnlineCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    return static_cast<int>(std::thread::hardware_concurrency());
  }
  return CPU_COUNT(&set);
}

std::string HostStats::Line() const {
  std::string line = absl::StrFormat(
      "load %.2f -> %.2f; other processes %.2f cores (%.0f%% of %d)", load_before, load_after,
      others_cores(), cores > 0 ? 100 * others_cores() / cores : 0.0, cores);
  if (busy()) {
    absl::StrAppend(&line, "; BUSY: others used more than 10% of the cores, figures may be low");
  }
  return line;
}

HostStats Between(int cores, double load0, double load1, double wall_s, double machine0_s,
                  double machine1_s, double tree0_s, double tree1_s) {
  HostStats h;
  h.cores = cores;
  h.load_before = load0;
  h.load_after = load1;
  h.seconds = wall_s;
  const double others = (machine1_s - machine0_s) - (tree1_s - tree0_s);
  h.others_cpu_s = std::isnan(others) ? 0 : std::max(0.0, others);
  return h;
}

HostSample SampleHost(pid_t root) {
  HostSample sample;
  sample.load = LoadAverage1m();
  sample.wall_s = WallSeconds();
  sample.machine_s = MachineBusySeconds();
  sample.tree_s = TreeCpuSeconds(root);
  return sample;
}

std::string FormatSample(const HostSample& sample) {
  return absl::StrFormat("%.17g %.17g %.17g %.17g", sample.load, sample.wall_s,
                         sample.machine_s, sample.tree_s);
}

std::optional<HostSample> ParseSample(const std::string& text) {
  std::vector<std::string> fields = absl::StrSplit(text, ' ', absl::SkipEmpty());
  HostSample sample;
  if (fields.size() != 4 || !absl::SimpleAtod(fields[0], &sample.load) ||
      !absl::SimpleAtod(fields[1], &sample.wall_s) ||
      !absl::SimpleAtod(fields[2], &sample.machine_s) ||
      !absl::SimpleAtod(fields[3], &sample.tree_s)) {
    return std::nullopt;
  }
  return sample;
}

HostStats Between(int cores, const HostSample& start, const HostSample& end) {
  return Between(cores, start.load, end.load, end.wall_s - start.wall_s, start.machine_s,
                 end.machine_s, start.tree_s, end.tree_s);
}

HostRun::HostRun() : start_(SampleHost(getpid())) {}

HostStats HostRun::Stop() const { return Between(OnlineCores(), start_, SampleHost(getpid())); }

}  // namespace bench
}  // namespace shardps
