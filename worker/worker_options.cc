#include "worker/worker_options.h"

#include <algorithm>
#include <thread>

#include "absl/status/status.h"

namespace shardps {

void WorkerOptions::AddFlags(FlagParser* flags) {
  flags->AddString("backend", &backend,
                   "compute backend: auto, cpu or gpu (default: each job's choice)",
                   [](const std::string& value) {
                     return value.empty() ? absl::OkStatus() : ParseBackendKind(value).status();
                   });
  flags->AddInt("threads", &threads, "compute threads of the CPU backend", {1, 1024});
  flags->AddInt("test_only_delay_before_push_ms", &test_only_delay_before_push_ms,
                "tests only: sleep this long before each step's push (a straggler)",
                {0, 600000});
}

BackendKind WorkerOptions::backend_override() const {
  if (backend.empty()) return BackendKind::kAuto;
  absl::StatusOr<BackendKind> kind = ParseBackendKind(backend);
  return kind.ok() ? *kind : BackendKind::kAuto;  // checked by the flag
}

int64_t WorkerOptions::DefaultThreads() { return std::max(1u, std::thread::hardware_concurrency()); }

}  // namespace shardps
