#include "ps_server/shard_restore.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/error_detail.h"
#include "common/status_macros.h"
#include "proto/error.pb.h"

namespace shardps {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// The first exception thrown on any of RunUnits' threads, rethrown on the caller's.
class FirstException {
 public:
  void Keep(std::exception_ptr thrown) {
    absl::MutexLock lock(&mu_);
    if (!thrown_) thrown_ = std::move(thrown);
  }
  // REQUIRES: every thread that may call Keep has been joined.
  void RethrowIfAny() {
    std::exception_ptr thrown;
    {
      absl::MutexLock lock(&mu_);
      thrown = thrown_;
    }
    if (thrown != nullptr) std::rethrow_exception(thrown);
  }

 private:
  absl::Mutex mu_;
  std::exception_ptr thrown_ ABSL_GUARDED_BY(mu_);
};

// Calls fn(i) for every i in [0, n) on up to `threads` threads (this one included), and
// returns the status of the lowest i that failed. A unit above a failed one is skipped (it
// cannot change the answer); every unit below it runs, so the answer is the one a loop over
// [0, n) in order would give. std::bad_alloc on a helper is rethrown here.
absl::Status RunUnits(int n, int threads, absl::FunctionRef<absl::Status(int)> fn) {
  std::vector<absl::Status> status(static_cast<size_t>(n));
  std::atomic<int> next{0};
  std::atomic<int> first_failed{n};
  FirstException thrown;
  auto work = [&] {
    for (int i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      if (i > first_failed.load()) continue;
      try {
        status[static_cast<size_t>(i)] = fn(i);
      } catch (...) {
        thrown.Keep(std::current_exception());
        status[static_cast<size_t>(i)] = absl::CancelledError("threw");
      }
      if (!status[static_cast<size_t>(i)].ok()) {
        int failed = first_failed.load();
        while (i < failed && !first_failed.compare_exchange_weak(failed, i)) {
        }
      }
    }
  };
  std::vector<std::thread> helpers;
  for (int t = 1; t < std::min(threads, n); ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // fewer helpers: this thread takes what they would have
    }
  }
  work();
  for (std::thread& t : helpers) t.join();
  thrown.RethrowIfAny();
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// Marks a DATA_LOSS as a corrupt checkpoint file, naming `file` (when the reader has not
// named one already).
absl::Status Corrupt(const absl::Status& status, const std::string& file) {
  if (status.code() != absl::StatusCode::kDataLoss) return status;
  std::optional<ErrorDetail> detail = GetDetail(status);
  if (detail.has_value() && detail->kind() == ErrorDetail::CHECKPOINT_CORRUPT &&
      !detail->file().empty()) {
    return status;
  }
  ErrorDetail corrupt;
  corrupt.set_kind(ErrorDetail::CHECKPOINT_CORRUPT);
  corrupt.set_file(file);
  return WithDetail(status, corrupt);
}

}  // namespace

absl::Status CheckRestorable(const Manifest& manifest, const std::string& manifest_path,
                             const Shard& shard, const ShardSource& source) {
  const std::string what = absl::StrCat("restore ", QuotedShard(shard.name()));
  const ManifestVariable* variable = manifest.FindVariable(source.variable);
  if (variable == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": the checkpoint ", manifest_path, " has no variable '", source.variable, "'"));
  }
  const std::vector<int64_t> shape(shard.spec().full_shape().dim().begin(),
                                   shard.spec().full_shape().dim().end());
  if (variable->shape != shape) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": the variable's shape is ", ShapeText(shape), " but checkpoint variable '",
        source.variable, "' in ", manifest_path, " has shape ", ShapeText(variable->shape)));
  }
  if (source.params_only) return absl::OkStatus();
  const Optimizer& optimizer = shard.optimizer();
  for (int s = 0; s < optimizer.num_slots(); ++s) {
    const std::string slot(optimizer.slot_name(s));
    if (std::find(variable->slots.begin(), variable->slots.end(), slot) ==
        variable->slots.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": its optimizer (", OptimizerSpec::Type_Name(shard.spec().optimizer().type()),
          ") keeps slot '", slot, "' but checkpoint variable '", source.variable, "' in ",
          manifest_path, " has slots [", absl::StrJoin(variable->slots, ", "),
          "]; restore with params_only, or with the checkpoint's optimizer"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RestoredState> ReadShardState(CheckpointReader& reader, const Shard& shard,
                                             const ShardSource& source, int threads) {
  const std::string what = absl::StrCat("restore ", QuotedShard(shard.name()));
  const ManifestVariable* variable = reader.manifest().FindVariable(source.variable);
  if (variable == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": the checkpoint has no variable '", source.variable, "'"));
  }
  RestoredState restored;
  // Slots that the checkpoint supplies are not filled first: every byte of them is read.
  restored.state = shard.NewState(/*initialize_slots=*/source.params_only);
  const int64_t begin = shard.spec().row_offset();
  const int64_t end = begin + shard.rows();
  // The tensors to read: the parameters, and each slot unless params_only.
  std::vector<std::pair<std::string, ParamBlocks*>> tensors = {{"", &restored.state.params}};
  if (!source.params_only) {
    for (int s = 0; s < shard.optimizer().num_slots(); ++s) {
      tensors.emplace_back(std::string(shard.optimizer().slot_name(s)),
                           &restored.state.slots[static_cast<size_t>(s)]);
    }
  }
  // One unit per source shard and tensor, each read straight into its rows of the blocks
  // (disjoint rows, so units never write the same memory).
  struct Unit {
    const ManifestShard* from;
    int64_t lo, hi;
    const std::string* slot;
    ParamBlocks* blocks;
    int64_t bytes_read = 0;
  };
  std::vector<Unit> units;
  for (const ManifestShard& from : variable->shards) {
    const int64_t lo = std::max(begin, from.row_offset);
    const int64_t hi = std::min(end, from.row_offset + from.rows);
    if (lo >= hi) continue;
    if (!source.params_only) restored.version = std::max(restored.version, from.version);
    for (auto& [slot, blocks] : tensors) units.push_back({&from, lo, hi, &slot, blocks});
  }
  const int64_t width = shard.width();
  RETURN_IF_ERROR(RunUnits(
      static_cast<int>(units.size()), threads, [&](int i) -> absl::Status {
        Unit& u = units[static_cast<size_t>(i)];
        const absl::Status status = reader.ReadRowsInto(
            source.variable, *u.slot, u.lo, u.hi,
            [&](int64_t first, int64_t last, std::vector<absl::Span<char>>* spans) {
              // Rows outside the shard get no span: the reader then finds the spans short.
              if (first < begin || last > end) return;
              u.blocks->ForEachRun((first - begin) * width, (last - begin) * width,
                                   [spans](int64_t, float* dst, int64_t n) {
                                     spans->emplace_back(reinterpret_cast<char*>(dst),
                                                         static_cast<size_t>(n) * sizeof(float));
                                   });
            },
            &u.bytes_read);
        if (status.ok()) return status;
        return Annotate(Corrupt(status, u.from->file),
                        absl::StrCat(what, " from '", source.variable, "'",
                                     u.slot->empty() ? "" : absl::StrCat(" slot '", *u.slot, "'"),
                                     " rows [", u.lo, ", ", u.hi, ") in ", u.from->file));
      }));
  for (const Unit& u : units) restored.bytes_read += u.bytes_read;
  return restored;
}

absl::StatusOr<RestoredState> InitialShardState(const Shard& shard) {
  RestoredState restored;
  restored.state = shard.NewState();
  RETURN_IF_ERROR(shard.InitializeParams(&restored.state.params));
  return restored;
}

}  // namespace shardps
