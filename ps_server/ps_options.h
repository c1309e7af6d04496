// The ps daemon's own flags (ps_server/ps_main.cc), each with the values it takes, and the
// memory budget they resolve to. The common daemon flags are rpc/daemon.h's.
//
// Thread-safety: plain data, for main().
#ifndef SHARDPS_PS_SERVER_PS_OPTIONS_H_
#define SHARDPS_PS_SERVER_PS_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "common/flags.h"
#include "ps_server/process_memory.h"

namespace shardps {

struct PsOptions {
  int64_t threads = 4;  // for large requests
  // Parameters, optimizer slots and snapshots' copies; -1: 90% of the process's memory
  // limit (ResolveMemoryBudget); 0: no budget.
  int64_t memory_budget_bytes = -1;
  double snapshot_reserve = 0.5;  // of the budget, kept for the blocks updates copy
  int64_t max_reply_bytes = int64_t{64} << 20;  // of one pull; 0: no limit
  int64_t test_snapshot_write_delay_ms = 0;     // a test aid

  // Registers a flag for each field on `flags`, which writes the field when parsed.
  void AddFlags(FlagParser* flags);
};

struct MemoryBudget {
  int64_t bytes = 0;
  std::string source;  // "--memory_budget_bytes", or "90% of N bytes (<limit's source>)"
};

// The budget --memory_budget_bytes gives: its value, or for -1 90% of what `limit` reads
// (called only then). INVALID_ARGUMENT naming the flag when the limit cannot be read.
absl::StatusOr<MemoryBudget> ResolveMemoryBudget(
    int64_t memory_budget_bytes, const std::function<absl::StatusOr<MemoryLimit>()>& limit);

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_PS_OPTIONS_H_
