#include "ps_server/ps_options.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace shardps {

void PsOptions::AddFlags(FlagParser* flags) {
  flags->AddInt("threads", &threads, "threads for large requests", {1, 256});
  flags->AddInt("memory_budget_bytes", &memory_budget_bytes,
                "bytes that parameters, optimizer slots and checkpoint snapshots' copies may "
                "take; -1: 90% of the memory this process may use (machine or cgroup); 0: no "
                "budget",
                IntRange::AtLeast(-1));
  flags->AddDouble("snapshot_reserve", &snapshot_reserve,
                   "fraction of --memory_budget_bytes kept for the blocks updates copy while a "
                   "checkpoint snapshot is written",
                   DoubleRange::HalfOpen(0, 1));
  flags->AddInt("max_reply_bytes", &max_reply_bytes,
                "largest reply one pull may ask for (0: no limit)", IntRange::AtLeast(0));
  flags->AddInt("max_request_memory_bytes", &max_request_memory_bytes,
                "bytes that requests in flight may hold in gRPC's buffers, all connections "
                "together (past it gRPC resets streams: RESOURCE_EXHAUSTED), taken out of "
                "--memory_budget_bytes; -1: a quarter of the budget (4 x --max_request_bytes "
                "if more, at most half; no bound without a budget); 0: no bound",
                IntRange::AtLeast(-1));
  flags->AddInt("test_snapshot_write_delay_ms", &test_snapshot_write_delay_ms,
                "a test aid, not for production: wait this long before writing each checkpoint "
                "snapshot's file, so that a test can kill the ps while it writes one (0: none)",
                IntRange::AtLeast(0));
}

absl::StatusOr<RequestMemory> ResolveRequestMemory(int64_t max_request_memory_bytes,
                                                   int64_t budget_bytes,
                                                   int64_t max_request_bytes) {
  RequestMemory out;
  out.store_bytes = budget_bytes;
  if (max_request_memory_bytes == 0) return out;
  if (max_request_memory_bytes > 0) {
    if (budget_bytes > 0 && max_request_memory_bytes >= budget_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--max_request_memory_bytes=", max_request_memory_bytes,
          " leaves nothing of the memory budget (", budget_bytes,
          " bytes) for parameters: lower it, or raise --memory_budget_bytes"));
    }
    out.request_bytes = max_request_memory_bytes;
  } else if (budget_bytes > 0) {
    // A quarter of the budget, or 4 requests of the cap when that is more (at most half).
    out.request_bytes =
        std::max(budget_bytes / 4, std::min(4 * max_request_bytes, budget_bytes / 2));
  }
  if (budget_bytes > 0) out.store_bytes = budget_bytes - out.request_bytes;
  return out;
}

absl::StatusOr<BudgetSetting> ResolveMemoryBudget(
    int64_t memory_budget_bytes, const std::function<absl::StatusOr<MemoryLimit>()>& limit) {
  if (memory_budget_bytes != -1) return BudgetSetting{memory_budget_bytes, "--memory_budget_bytes"};
  absl::StatusOr<MemoryLimit> process = limit();
  if (!process.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot tell the memory this process may use for the default "
                     "--memory_budget_bytes (set it): ",
                     process.status().ToString()));
  }
  return BudgetSetting{
      static_cast<int64_t>(std::floor(0.9 * static_cast<double>(process->bytes))),
      absl::StrCat("90% of ", process->bytes, " bytes (", process->source, ")")};
}

}  // namespace shardps
