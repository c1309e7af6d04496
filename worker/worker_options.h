// The worker daemon's own flags (worker/worker_main.cc), each with the values it takes. The
// common daemon flags are rpc/daemon.h's.
//
// Thread-safety: plain data, for main().
#ifndef SHARDPS_WORKER_WORKER_OPTIONS_H_
#define SHARDPS_WORKER_WORKER_OPTIONS_H_

#include <cstdint>
#include <string>

#include "common/flags.h"
#include "compute/backend_kind.h"

namespace shardps {

struct WorkerOptions {
  std::string backend;  // auto, cpu or gpu; "": each job's choice
  int64_t threads = DefaultThreads();  // of the CPU backend
  int64_t test_only_delay_before_push_ms = 0;  // tests only: a straggler

  // Registers a flag for each field on `flags`, which writes the field when parsed.
  void AddFlags(FlagParser* flags);
  // --backend as a kind; kAuto when not given (the job's choice then stands).
  BackendKind backend_override() const;

  static int64_t DefaultThreads();  // the machine's cores
};

}  // namespace shardps

#endif  // SHARDPS_WORKER_WORKER_OPTIONS_H_
