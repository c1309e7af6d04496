// client_loop: the C++ client's side of bench/python_client_bench.py. Against ps tasks that
// hold the bench's variables, it times what the Python bench times with shardps.Client, with
// the same calls in the same order, and prints one JSON object:
//
//   client_loop --ps=H:P,H:P --op=pull|push --variable=NAME --reps=N [--threads=T]
//   client_loop --ps=... --op=latency --variable=NAME --reps=N
//
// pull/push: N timed calls per thread after 2 untimed ones, each thread its own buffer;
// {"seconds": [...per call, thread 0...], "bytes": B, "wall_s": W} with W the time all
// threads took together. latency: N timed 4-byte pulls; {"seconds": [...]}.
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/ps_client.h"
#include "common/flags.h"

namespace shardps {
namespace bench {
namespace {

int Main(int argc, char** argv) {
  std::string ps_list, op, variable;
  int64_t reps = 10, threads = 1;
  FlagParser flags("client_loop --ps=H:P,... --op=pull|push|latency --variable=NAME",
                   "Times the C++ client's dense calls for bench/python_client_bench.py.");
  flags.AddString("ps", &ps_list, "the ps tasks, in task order");
  flags.AddString("op", &op, "pull, push or latency");
  flags.AddString("variable", &variable, "the variable (the bench creates it)");
  flags.AddInt("reps", &reps, "timed calls per thread");
  flags.AddInt("threads", &threads, "threads calling at once (pull and push)");
  const int rc = HandleParseResult(flags, flags.Parse(argc, argv, nullptr));
  if (rc >= 0) return rc;
  if (ps_list.empty() || variable.empty() || reps <= 0 || threads <= 0 ||
      (op != "pull" && op != "push" && op != "latency")) {
    std::cerr << "client_loop: needs --ps, --variable, --op pull|push|latency, --reps >= 1, "
                 "--threads >= 1\n";
    return 2;
  }
  const std::vector<std::string> ps = absl::StrSplit(ps_list, ',');
  PsClient::Options options;
  absl::StatusOr<std::unique_ptr<PsClient>> client = NewGrpcPsClient(ps, options);
  if (!client.ok() || !(*client)->Discover().ok()) {
    std::cerr << "client_loop: cannot reach the ps tasks\n";
    return 1;
  }
  absl::StatusOr<VariableLayout> layout = (*client)->GetLayout(variable);
  if (!layout.ok()) {
    std::cerr << "client_loop: " << layout.status() << "\n";
    return 1;
  }
  const int64_t n = layout->num_elements;
  std::vector<std::vector<double>> seconds(threads);
  std::vector<absl::Status> errors(threads);
  const absl::Time start = absl::Now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<float> buffer(n, 1e-6f);
      for (int64_t i = 0; i < reps + 2; ++i) {
        const absl::Time t0 = absl::Now();
        absl::Status s = op == "push" ? (*client)->Push(variable, buffer)
                                      : (*client)->Pull(variable, absl::MakeSpan(buffer));
        if (!s.ok()) {
          errors[t] = s;
          return;
        }
        if (i >= 2) seconds[t].push_back(absl::ToDoubleSeconds(absl::Now() - t0));
      }
    });
  }
  for (std::thread& th : pool) th.join();
  const double wall = absl::ToDoubleSeconds(absl::Now() - start);
  for (const absl::Status& s : errors) {
    if (!s.ok()) {
      std::cerr << "client_loop: " << s << "\n";
      return 1;
    }
  }
  std::cout << "{\"seconds\": [" << absl::StrJoin(seconds[0], ", ")
            << "], \"bytes\": " << n * 4 << ", \"wall_s\": " << wall << "}\n";
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace shardps

int main(int argc, char** argv) { return shardps::bench::Main(argc, argv); }
