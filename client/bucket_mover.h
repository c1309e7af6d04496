// MoveTableBuckets: moves buckets of a dynamic table from one of its shards to the shard next
// to it while training goes on (docs/elastic.md): to even out a hot ps, or to give buckets
// to a ps that holds few. Buckets go one at a time, each from the edge of the source's range
// that faces the target, so that every shard keeps a contiguous range:
//   1. copy: the source exports the bucket's rows (MoveBucketsRequest EXPORT) and the target
//      stages them (STAGE: held, not served);
//   2. catch up: rounds of the rows changed (and keys deleted) since the last export, until a
//      round brings at most `catch_up_rows` rows or `max_catch_up_rounds` have run;
//   3. switch: before_switch() (a SYNC job drains to a step boundary there), the source
//      freezes the bucket (its pushes are refused, BUCKET_MOVED with moving set; its pulls
//      served) and sends the last changes, the source drops it and the target activates it,
//      both at the table's next routing version (above every shard's), then after_switch().
// Clients routing by the old layout are refused with BUCKET_MOVED and route again
// (client/bucket_reroute.h). A failure before the drop aborts the move (the source thaws,
// the target drops its copy): nothing changed. The source holds the rows until it drops them,
// so no step can lose the bucket; a target that fails to activate after the drop leaves the
// bucket staged there and the error names it (a ps lost then is the chief's recovery's).
//
// Thread-safety: one move of a table at a time (the chief runs them on its control thread);
// data calls may run meanwhile.
#ifndef SHARDPS_CLIENT_BUCKET_MOVER_H_
#define SHARDPS_CLIENT_BUCKET_MOVER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/ps_client.h"

namespace shardps {

struct BucketMoveOptions {
  // How long the source holds a bucket frozen before it takes it back by itself (a mover
  // that died mid-switch leaves nothing stuck). The switch takes milliseconds.
  absl::Duration freeze = absl::Seconds(10);
  // Buckets that switch together (a run at the source's edge): each switch makes every
  // client route again once, so a larger run costs the job less, and freezes more rows.
  int buckets_per_switch = 1;
  // A wait between one switch and the copy of the next run: the move takes longer, and the
  // job gets back the share of its cores (and the routes again) that the move takes.
  absl::Duration pause = absl::ZeroDuration();
  int max_catch_up_rounds = 4;
  int64_t catch_up_rows = 256;
  int64_t generation = 0;  // the ps's recovery generation (0: not fenced)
  // The source may give every bucket it holds (a shard emptied before its ps is removed live:
  // coordinator/ps_scaling.h); it then holds none.
  bool may_empty_source = false;
  // Around each bucket's switch (either may be empty). A before_switch error aborts the move;
  // after_switch runs whenever before_switch succeeded.
  std::function<absl::Status()> before_switch;
  std::function<void()> after_switch;
};

struct BucketMoveStats {
  int buckets = 0;             // moved
  int64_t rows = 0;            // rows sent (the copy and every catch-up)
  int64_t bytes = 0;           // bytes of keys, steps and values sent
  absl::Duration total;        // the whole move
  absl::Duration frozen;       // the longest a bucket was frozen
  int64_t routing_version = 0;  // the table's after the move
  int from_ps = 0;
  int to_ps = 0;
};

// Moves `count` buckets of `variable` (a dynamic table) from its shard `from_shard` to its
// shard `to_shard` (|from_shard - to_shard| == 1). INVALID_ARGUMENT naming what is wrong (an
// unknown or dense variable, a shard out of range or not next to the other, a count that
// would leave the source no bucket, unless options.may_empty_source, or more than it holds);
// the ps's error for a step it refuses. The client's layout is rebuilt at the end.
absl::StatusOr<BucketMoveStats> MoveTableBuckets(PsClient* client, const std::string& variable,
                                                 int from_shard, int to_shard, int count,
                                                 const BucketMoveOptions& options = {});

// One move of a plan: `count` buckets from shard `from_shard` to its neighbour `to_shard`.
struct PlannedMove {
  int from_shard = 0;
  int to_shard = 0;
  int count = 0;
};

// The moves that even out the rows of a table whose shards hold `ranges` (contiguous, in
// order, tiling its buckets) and `rows` rows, taking the rows of a shard as spread evenly over
// its buckets: the boundary between shards i and i+1 goes where the running sum of rows
// reaches (i+1)/S of them, each shard keeping at least one bucket. Empty when the largest
// shard holds at most (1 + tolerance) times the mean. A table without rows is evened out by
// buckets (shards added to a running table hold none: coordinator/ps_scaling.h). In an order
// that MoveTableBuckets can run them in (each source keeps a bucket at every step).
// REQUIRES: ranges.size() == rows.size() >= 1.
std::vector<PlannedMove> PlanBalance(const std::vector<BucketRange>& ranges,
                                     const std::vector<int64_t>& rows, double tolerance);

// The largest shard's rows over the mean (1: even; 0 for an empty table).
double Imbalance(const std::vector<int64_t>& rows);

struct BalanceStats {
  std::vector<PlannedMove> moves;  // as run
  BucketMoveStats moved;           // summed over the moves (frozen: the longest)
  double imbalance_before = 0;     // Imbalance of the rows before and after
  double imbalance_after = 0;
};

// Measures the rows each shard of `variable` holds (ListShards), plans with PlanBalance and
// runs the moves one after another with `options`. INVALID_ARGUMENT for an unknown or dense
// variable or a tolerance below 0; a failed move's error (the moves before it stay done).
absl::StatusOr<BalanceStats> BalanceTableBuckets(PsClient* client, const std::string& variable,
                                                 double tolerance,
                                                 const BucketMoveOptions& options = {});

// What FinishCutOffMoves found and did.
struct CutOffMoves {
  int finished = 0;  // switches completed: the source had dropped, the target had it staged
  int aborted = 0;   // copies thrown away: the source still held the buckets
  std::vector<std::string> what;  // one line each, for the log
};

// Clears the moves of `tables` (dynamic tables; others are skipped) that a mover left cut off
// (a chief killed mid-move), so that the job resumes on whole tables with nothing staged:
// buckets that the source has dropped and that a neighbouring shard holds staged are
// activated there at the table's routing version (the switch finishes: no step is lost);
// staged buckets that another shard still holds are aborted on both (the target drops its
// copy, the source thaws). Buckets on no shard and staged nowhere (a ps lost) are left to the
// caller, whose Discover then fails. REQUIRES: no move runs.
absl::StatusOr<CutOffMoves> FinishCutOffMoves(PsClient* client,
                                              const std::vector<std::string>& tables,
                                              int64_t generation = 0);

}  // namespace shardps

#endif  // SHARDPS_CLIENT_BUCKET_MOVER_H_
