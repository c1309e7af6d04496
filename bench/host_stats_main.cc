// host_stats_tool: bench/host_stats.h for the benchmarks that are scripts: a sample of the
// host at a run's start, and at its end the line of the run's figures (load, the cores that
// processes outside the script's tree used, BUSY above 10%).
//
//   start=$(host_stats_tool start --pid=$$)  ...run...  host_stats_tool line --pid=$$ "$start"
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "bench/host_stats.h"
#include "common/flags.h"

namespace shardps {
namespace bench {
namespace {

int Main(int argc, char** argv) {
  int64_t pid = 0;
  FlagParser flags("host_stats_tool start|line SAMPLE",
                   "A sample of the host (start), or the figures of the run since a sample "
                   "(line), counting the process tree under --pid as the run's own.");
  flags.AddInt("pid", &pid, "the run's process (a script's $$); its tree is not 'others'");
  std::vector<std::string> args;
  const int rc = HandleParseResult(flags, flags.Parse(argc, argv, &args));
  if (rc >= 0) return rc;
  if (pid <= 0) {
    std::cerr << "host_stats_tool: --pid must name the run's process\n";
    return 2;
  }
  if (args.size() == 1 && args[0] == "start") {
    std::cout << FormatSample(SampleHost(static_cast<pid_t>(pid))) << "\n";
    return 0;
  }
  if (args.size() != 2 || args[0] != "line") {
    std::cerr << "host_stats_tool: usage: host_stats_tool start --pid=PID | "
                 "host_stats_tool line --pid=PID SAMPLE\n";
    return 2;
  }
  std::optional<HostSample> start = ParseSample(args[1]);
  if (!start.has_value()) {
    std::cerr << "host_stats_tool: \"" << args[1]
              << "\" is not a sample of `host_stats_tool start`\n";
    return 2;
  }
  const HostStats stats = Between(OnlineCores(), *start, SampleHost(static_cast<pid_t>(pid)));
  std::cout << "host during the run (bench/host_stats.h): " << stats.Line() << "\n";
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace shardps

int main(int argc, char** argv) { return shardps::bench::Main(argc, argv); }
