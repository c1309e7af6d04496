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
  // What gRPC's buffers for requests in flight may hold (a resource quota), taken out of the
  // memory budget; -1: a quarter of the budget, or 4 x --max_request_bytes when that is more
  // (at most half the budget), none without a budget (ResolveRequestMemory); 0: no bound.
  // Past it gRPC resets streams (RESOURCE_EXHAUSTED): a small quota refuses heavy traffic of
  // requests under the cap too (32 pushes of 16 MiB at once past a 64 MiB quota were reset).
  int64_t max_request_memory_bytes = -1;
  int64_t test_snapshot_write_delay_ms = 0;     // a test aid

  // Registers a flag for each field on `flags`, which writes the field when parsed.
  void AddFlags(FlagParser* flags);
};

// The budget as the flags and the memory limit set it (the accounting of what is used against
// it is ps_server/memory_budget.h's MemoryBudget; this was once a second type of that name,
// which broke the one-definition rule in a binary holding both).
struct BudgetSetting {
  int64_t bytes = 0;
  std::string source;  // "--memory_budget_bytes", or "90% of N bytes (<limit's source>)"
  int64_t request_bytes = 0;  // taken out of it for requests in flight (RequestMemory)
};

// The bound on requests in flight (--max_request_memory_bytes; 0: none) for a budget of
// `budget_bytes` (0: none) and requests of at most `max_request_bytes` (0: no cap), and the
// budget left for parameters and slots. INVALID_ARGUMENT naming the flag when a bound given
// leaves nothing of the budget.
struct RequestMemory {
  int64_t request_bytes = 0;  // the gRPC resource quota; 0: none
  int64_t store_bytes = 0;    // the store's budget: budget_bytes - request_bytes (0: none)
};
absl::StatusOr<RequestMemory> ResolveRequestMemory(int64_t max_request_memory_bytes,
                                                   int64_t budget_bytes,
                                                   int64_t max_request_bytes);

// The budget --memory_budget_bytes gives: its value, or for -1 90% of what `limit` reads
// (called only then). INVALID_ARGUMENT naming the flag when the limit cannot be read.
absl::StatusOr<BudgetSetting> ResolveMemoryBudget(
    int64_t memory_budget_bytes, const std::function<absl::StatusOr<MemoryLimit>()>& limit);

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_PS_OPTIONS_H_
