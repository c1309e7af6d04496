// What the rest of this machine did while a benchmark ran, so that every figure is printed
// with it: the 1-minute load average at a run's start and end, and the CPU time that
// processes outside this process tree (this process, its children and theirs) used during
// the run: the machine's busy time (/proc/stat) less the tree's (/proc/PID/stat, reaped
// children included). A run in which others used more than 10% of the cores is flagged
// "BUSY": its figures may be low. The /proc readers are here too, for benchmarks that count
// their own processes' CPU.
//
// Thread-safety: the functions are thread-safe; a HostRun is used from one thread.
#ifndef SHARDPS_BENCH_HOST_STATS_H_
#define SHARDPS_BENCH_HOST_STATS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace shardps {
namespace bench {

// One process' /proc/PID/stat, in seconds.
struct ProcStat {
  char state = '?';
  pid_t ppid = 0;
  double cpu_s = 0;           // user + system
  double children_cpu_s = 0;  // user + system of its reaped children
};

// Parses the text of a /proc/PID/stat file; nullopt when malformed.
std::optional<ProcStat> ParseProcStat(const std::string& text);
// The process' stat; nullopt when it is gone.
std::optional<ProcStat> ReadProcStat(pid_t pid);
// Its user + system CPU seconds; NaN when it is gone.
double ProcessCpuSeconds(pid_t pid);
// CPU seconds a process' live threads have run so far, in nanoseconds from the scheduler
// (/proc/PID/task/TID/schedstat; /proc/PID/stat counts only 10 ms ticks, too coarse for a
// 1 ms operation). 0 when it cannot be read.
double SchedulerCpuSeconds(pid_t pid);
// Every process on the machine as (pid, stat), read from /proc.
std::vector<std::pair<pid_t, ProcStat>> AllProcesses();
// The live (not zombie) children of `parent`.
std::vector<pid_t> ChildPids(pid_t parent);
// CPU seconds of the tree under `root`: root's own, its reaped children's, and every live or
// unreaped descendant's (with theirs), as far as /proc shows them now.
double TreeCpuSeconds(pid_t root);

// The busy CPU seconds of all cores since boot (user, nice, system, irq, softirq, steal of
// /proc/stat's "cpu" line); NaN when unreadable. Parsed from that line's text.
double ParseMachineBusySeconds(const std::string& cpu_line, double ticks_per_second);
double MachineBusySeconds();
// The 1-minute load average; NaN when unreadable.
double LoadAverage1m();
// The cores this process may run on (what a `taskset` leaves, not the machine's count).
int OnlineCores();

// The host's figures over one run.
struct HostStats {
  int cores = 0;
  double load_before = 0;
  double load_after = 0;
  double seconds = 0;       // wall time of the run
  double others_cpu_s = 0;  // CPU seconds of processes outside this tree during the run
  double others_cores() const { return seconds > 0 ? others_cpu_s / seconds : 0; }
  // Others used more than 10% of the cores.
  bool busy() const { return others_cores() > 0.1 * cores; }
  // "load 1.20 -> 1.35; other processes 0.08 cores (4% of 2)", and "; BUSY: ..." when busy.
  std::string Line() const;
};

// From the host's samples at a run's start and end: the figures of the run. `machine_s` and
// `tree_s` are MachineBusySeconds and TreeCpuSeconds; a tree that used more than the machine
// counted (clock ticks round differently) leaves others at 0.
HostStats Between(int cores, double load0, double load1, double wall_s, double machine0_s,
                  double machine1_s, double tree0_s, double tree1_s);

// The host at one moment, counting the tree under `root`. Its text (FormatSample) lets a
// script sample a run's start and end from two processes (bench/host_stats_main.cc).
struct HostSample {
  double load = 0;       // LoadAverage1m
  double wall_s = 0;     // the machine's monotonic clock, comparable across processes
  double machine_s = 0;  // MachineBusySeconds
  double tree_s = 0;     // TreeCpuSeconds(root)
};
HostSample SampleHost(pid_t root);
std::string FormatSample(const HostSample& sample);
// nullopt unless `text` is FormatSample's.
std::optional<HostSample> ParseSample(const std::string& text);
// Between() of two samples.
HostStats Between(int cores, const HostSample& start, const HostSample& end);

// Samples the host at construction (a run's start) and at Stop (its end), counting the tree
// of this process.
class HostRun {
 public:
  HostRun();
  HostStats Stop() const;

 private:
  const HostSample start_;
};

}  // namespace bench
}  // namespace shardps

#endif  // SHARDPS_BENCH_HOST_STATS_H_
