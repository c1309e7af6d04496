#include "client/bucket_mover.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error_detail.h"
#include "common/status_macros.h"

namespace shardps {
namespace {

// A move of one bucket between two shards.
class OneMove {
 public:
  OneMove(PsClient* client, const VariableLayout& layout, int from, int to, BucketRange buckets,
          const BucketMoveOptions& options, BucketMoveStats* stats)
      : client_(client),
        options_(options),
        stats_(stats),
        src_(layout.shards[from].spec.name()),
        dst_(layout.shards[to].spec.name()),
        src_ps_(layout.shards[from].ps),
        dst_ps_(layout.shards[to].ps),
        buckets_(buckets),
        bucket_(buckets.begin),
        routing_version_(layout.routing_version + 1) {}

  absl::Status Run() {
    const absl::Status copied = CopyAndCatchUp();
    if (!copied.ok()) return Abort(copied);
    if (options_.before_switch) {
      const absl::Status ready = options_.before_switch();
      if (!ready.ok()) return Abort(Annotate(ready, "before the switch"));
    }
    const absl::Status switched = Switch();
    if (options_.after_switch) options_.after_switch();
    return switched;
  }

 private:
  MoveBucketsRequest Request(MoveBucketsRequest::Op op, const std::string& shard) const {
    MoveBucketsRequest r;
    r.set_op(op);
    r.set_shard(shard);
    for (int32_t b = buckets_.begin; b < buckets_.end; ++b) r.add_buckets(b);
    r.set_generation(options_.generation);
    return r;
  }

  // Exports from the source what changed since `since_` (freezing when asked) and stages it
  // on the target. Returns the rows sent.
  absl::StatusOr<int64_t> Round(bool freeze) {
    MoveBucketsRequest out = Request(MoveBucketsRequest::EXPORT, src_);
    out.set_since_epoch(since_);
    out.set_whole(options_.may_empty_source);
    if (freeze) {
      out.set_freeze(true);
      out.set_freeze_ms(std::max<int64_t>(1, absl::ToInt64Milliseconds(options_.freeze)));
    }
    MoveBucketsResponse exported;
    RETURN_IF_ERROR(Annotate(client_->MoveBuckets(src_ps_, out, &exported),
                             absl::StrCat("exporting buckets from ", bucket_, " from ", src_)));
    if (freeze) frozen_at_ = absl::Now();
    MoveBucketsRequest in = Request(MoveBucketsRequest::STAGE, dst_);
    in.set_since_epoch(since_);
    in.set_keys(std::move(*exported.mutable_keys()));
    in.set_last_steps(std::move(*exported.mutable_last_steps()));
    in.set_values(std::move(*exported.mutable_values()));
    *in.mutable_deleted_keys() = exported.deleted_keys();
    stats_->bytes += static_cast<int64_t>(in.keys().size() + in.last_steps().size() +
                                          in.values().size() +
                                          in.deleted_keys_size() * sizeof(int64_t));
    stats_->rows += exported.rows();
    MoveBucketsResponse staged;
    RETURN_IF_ERROR(Annotate(client_->MoveBuckets(dst_ps_, in, &staged),
                             absl::StrCat("staging bucket ", bucket_, " on ", dst_)));
    since_ = exported.epoch();
    return exported.rows();
  }

  absl::Status CopyAndCatchUp() {
    ASSIGN_OR_RETURN(int64_t rows, Round(/*freeze=*/false));
    for (int i = 0; i < options_.max_catch_up_rounds && rows > options_.catch_up_rows; ++i) {
      ASSIGN_OR_RETURN(rows, Round(false));
    }
    return absl::OkStatus();
  }

  absl::Status Switch() {
    absl::StatusOr<int64_t> last = Round(/*freeze=*/true);
    if (!last.ok()) return Abort(last.status());
    MoveBucketsRequest drop = Request(MoveBucketsRequest::DROP, src_);
    drop.set_routing_version(routing_version_);
    drop.set_to_ps(dst_ps_);
    MoveBucketsResponse dropped;
    const absl::Status d = client_->MoveBuckets(src_ps_, drop, &dropped);
    if (!d.ok()) {
      return Abort(Annotate(d, absl::StrCat("dropping bucket ", bucket_, " from ", src_)));
    }
    // From here the target's staged copy is the only one: activate it, retrying a little.
    MoveBucketsRequest activate = Request(MoveBucketsRequest::ACTIVATE, dst_);
    activate.set_routing_version(routing_version_);
    absl::Status a;
    for (int attempt = 0; attempt < 5; ++attempt) {
      MoveBucketsResponse activated;
      a = client_->MoveBuckets(dst_ps_, activate, &activated);
      if (a.ok()) break;
      absl::SleepFor(absl::Milliseconds(50) * (attempt + 1));
    }
    stats_->frozen = std::max(stats_->frozen, absl::Now() - frozen_at_);
    if (!a.ok()) {
      return Annotate(a, absl::StrCat("bucket ", bucket_, " of ", src_,
                                      " was handed over but not activated on ", dst_,
                                      " (ps ", dst_ps_, "), where it is staged"));
    }
    stats_->buckets += buckets_.end - buckets_.begin;
    stats_->routing_version = routing_version_;
    return absl::OkStatus();
  }

  // Puts both sides back as they were (best effort) and answers `why`.
  absl::Status Abort(absl::Status why) {
    MoveBucketsResponse ignored;
    (void)client_->MoveBuckets(src_ps_, Request(MoveBucketsRequest::ABORT, src_), &ignored);
    (void)client_->MoveBuckets(dst_ps_, Request(MoveBucketsRequest::ABORT, dst_), &ignored);
    return why;
  }

  PsClient* const client_;
  const BucketMoveOptions& options_;
  BucketMoveStats* const stats_;
  const std::string src_;
  const std::string dst_;
  const int src_ps_;
  const int dst_ps_;
  const BucketRange buckets_;
  const int32_t bucket_;  // the first, for messages
  const int64_t routing_version_;
  uint32_t since_ = 0;
  absl::Time frozen_at_;
};

// The layout of dynamic table `variable`, read from the ps now; INVALID_ARGUMENT for a dense
// variable, the client's error for an unknown one. `what` prefixes errors.
absl::StatusOr<VariableLayout> TableLayout(PsClient* client, const std::string& variable,
                                           const std::string& what) {
  RETURN_IF_ERROR(Annotate(client->Discover(), what));
  ASSIGN_OR_RETURN(VariableLayout layout, client->GetLayout(variable));
  if (!layout.dynamic) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": not a dynamic table (only their buckets move)"));
  }
  return layout;
}

}  // namespace

absl::StatusOr<BucketMoveStats> MoveTableBuckets(PsClient* client, const std::string& variable,
                                                 int from_shard, int to_shard, int count,
                                                 const BucketMoveOptions& options) {
  const std::string what = absl::StrCat("move ", count, " buckets of \"", variable,
                                        "\" from shard ", from_shard, " to shard ", to_shard);
  if (count < 1) return absl::InvalidArgumentError(absl::StrCat(what, ": count must be >= 1"));
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(VariableLayout layout, TableLayout(client, variable, what));
  const int shards = static_cast<int>(layout.shards.size());
  if (from_shard < 0 || from_shard >= shards || to_shard < 0 || to_shard >= shards ||
      std::abs(from_shard - to_shard) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": the table has shards 0..", shards - 1,
        "; buckets move between neighbouring shards (|from - to| = 1)"));
  }
  const BucketRange range = layout.shards[from_shard].buckets;
  if (count > range.end - range.begin ||
      (count == range.end - range.begin && !options.may_empty_source)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": shard ", from_shard, " holds ", range.end - range.begin, " buckets [",
        range.begin, ", ", range.end, "); it must keep at least one"));
  }
  BucketMoveStats stats;
  stats.from_ps = layout.shards[from_shard].ps;
  stats.to_ps = layout.shards[to_shard].ps;
  const int per_switch = std::max(1, options.buckets_per_switch);
  for (int moved = 0; moved < count;) {
    if (moved > 0) {
      if (options.pause > absl::ZeroDuration()) absl::SleepFor(options.pause);
      RETURN_IF_ERROR(Annotate(client->Discover(), what));
      ASSIGN_OR_RETURN(layout, client->GetLayout(variable));
    }
    const int n = std::min(per_switch, count - moved);
    const BucketRange now = layout.shards[from_shard].buckets;
    const BucketRange run = to_shard > from_shard ? BucketRange{now.end - n, now.end}
                                                  : BucketRange{now.begin, now.begin + n};
    OneMove move(client, layout, from_shard, to_shard, run, options, &stats);
    RETURN_IF_ERROR(Annotate(move.Run(), absl::StrCat(what, " (", moved, " moved)")));
    moved += n;
  }
  RETURN_IF_ERROR(Annotate(client->Discover(), what));
  stats.total = absl::Now() - start;
  return stats;
}

double Imbalance(const std::vector<int64_t>& rows) {
  int64_t total = 0, most = 0;
  for (int64_t r : rows) {
    total += r;
    most = std::max(most, r);
  }
  if (total <= 0 || rows.empty()) return 0;
  return static_cast<double>(most) * static_cast<double>(rows.size()) /
         static_cast<double>(total);
}

std::vector<PlannedMove> PlanBalance(const std::vector<BucketRange>& ranges,
                                     const std::vector<int64_t>& rows, double tolerance) {
  const int shards = static_cast<int>(ranges.size());
  double total = 0;
  for (int64_t r : rows) total += static_cast<double>(r);
  if (total == 0) {
    // An empty table (a ps added live before the job pushed any row): even buckets.
    std::vector<int64_t> buckets;
    for (const BucketRange& r : ranges) buckets.push_back(r.end - r.begin);
    if (std::accumulate(buckets.begin(), buckets.end(), int64_t{0}) == 0) return {};
    return PlanBalance(ranges, buckets, tolerance);
  }
  if (shards < 2 || Imbalance(rows) <= 1.0 + tolerance) return {};
  // The running sum of rows up to bucket b (rows spread evenly over each shard's buckets).
  auto rows_before = [&](int32_t b) {
    double sum = 0;
    for (int i = 0; i < shards; ++i) {
      const BucketRange& r = ranges[static_cast<size_t>(i)];
      const int32_t size = r.end - r.begin;
      const int32_t in = std::clamp(b - r.begin, 0, size);
      sum += static_cast<double>(rows[static_cast<size_t>(i)]) * in / std::max(size, 1);
    }
    return sum;
  };
  const int32_t first = ranges.front().begin;
  const int32_t last = ranges.back().end;
  // Target boundaries: target[i] is where shard i begins (i >= 1).
  std::vector<int32_t> target(static_cast<size_t>(shards) + 1);
  target[0] = first;
  target[static_cast<size_t>(shards)] = last;
  for (int i = 1; i < shards; ++i) {
    const double want = total * i / shards;
    int32_t lo = first, hi = last;  // the first b with rows_before(b) >= want
    while (lo < hi) {
      const int32_t mid = lo + (hi - lo) / 2;
      if (rows_before(mid) >= want) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    // Round to the nearer bucket edge, and leave every shard a bucket.
    if (lo > first && want - rows_before(lo - 1) < rows_before(lo) - want) --lo;
    target[static_cast<size_t>(i)] =
        std::clamp(lo, target[static_cast<size_t>(i) - 1] + 1, last - (shards - i));
  }
  // Run the boundary shifts, each as far as its source can give (keeping a bucket), in passes
  // until all are done: a shard that must give more than it holds gets from its other side
  // first.
  std::vector<BucketRange> now = ranges;
  std::vector<PlannedMove> plan;
  for (bool progress = true; progress;) {
    progress = false;
    for (int i = 1; i < shards; ++i) {
      const int32_t want = target[static_cast<size_t>(i)];
      BucketRange& left = now[static_cast<size_t>(i) - 1];
      BucketRange& right = now[static_cast<size_t>(i)];
      if (want < right.begin) {  // left gives its last buckets to right
        const int32_t n = std::min(right.begin - want, left.end - left.begin - 1);
        if (n <= 0) continue;
        plan.push_back({i - 1, i, n});
        left.end -= n;
        right.begin -= n;
        progress = true;
      } else if (want > right.begin) {  // right gives its first buckets to left
        const int32_t n = std::min(want - right.begin, right.end - right.begin - 1);
        if (n <= 0) continue;
        plan.push_back({i, i - 1, n});
        left.end += n;
        right.begin += n;
        progress = true;
      }
    }
  }
  return plan;
}

namespace {

// The rows each shard of `variable` holds now, in shard order.
absl::StatusOr<std::vector<int64_t>> ShardRows(PsClient* client, const VariableLayout& layout) {
  std::vector<ListShardsResponse> listed;
  ListShardsRequest request;
  request.set_variable(layout.name);
  RETURN_IF_ERROR(client->ListShardsAll(request, &listed));
  std::vector<int64_t> rows(layout.shards.size());
  for (size_t i = 0; i < layout.shards.size(); ++i) {
    bool found = false;
    for (const ShardInfo& info : listed[static_cast<size_t>(layout.shards[i].ps)].shards()) {
      if (info.spec().name() != layout.shards[i].spec.name()) continue;
      rows[i] = info.dynamic().rows();
      found = true;
    }
    if (!found) {
      return absl::FailedPreconditionError(absl::StrCat(
          "shard ", layout.shards[i].spec.name(), " is not on ps ", layout.shards[i].ps));
    }
  }
  return rows;
}

}  // namespace

absl::StatusOr<BalanceStats> BalanceTableBuckets(PsClient* client, const std::string& variable,
                                                 double tolerance,
                                                 const BucketMoveOptions& options) {
  const std::string what = absl::StrCat("balance the buckets of \"", variable, "\"");
  if (!(tolerance >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": tolerance must be >= 0, got ", tolerance));
  }
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(VariableLayout layout, TableLayout(client, variable, what));
  absl::StatusOr<std::vector<int64_t>> measured = ShardRows(client, layout);
  RETURN_IF_ERROR(Annotate(measured.status(), what));
  std::vector<int64_t> rows = *std::move(measured);
  BalanceStats stats;
  stats.imbalance_before = Imbalance(rows);
  std::vector<BucketRange> ranges;
  for (const VariableLayout::Shard& shard : layout.shards) ranges.push_back(shard.buckets);
  for (const PlannedMove& m : PlanBalance(ranges, rows, tolerance)) {
    ASSIGN_OR_RETURN(BucketMoveStats moved,
                     MoveTableBuckets(client, variable, m.from_shard, m.to_shard, m.count,
                                      options));
    stats.moves.push_back(m);
    stats.moved.buckets += moved.buckets;
    stats.moved.rows += moved.rows;
    stats.moved.bytes += moved.bytes;
    stats.moved.frozen = std::max(stats.moved.frozen, moved.frozen);
    stats.moved.routing_version = moved.routing_version;
  }
  ASSIGN_OR_RETURN(layout, client->GetLayout(variable));
  measured = ShardRows(client, layout);
  RETURN_IF_ERROR(Annotate(measured.status(), what));
  rows = *std::move(measured);
  stats.imbalance_after = Imbalance(rows);
  stats.moved.routing_version = layout.routing_version;
  stats.moved.total = absl::Now() - start;
  return stats;
}

absl::StatusOr<CutOffMoves> FinishCutOffMoves(PsClient* client,
                                              const std::vector<std::string>& tables,
                                              int64_t generation) {
  struct Held {
    int ps;
    std::string shard;
    BucketRange range;
    BucketRange staged;
    int64_t routing_version;
  };
  std::vector<ListShardsResponse> listed;
  RETURN_IF_ERROR(Annotate(client->ListShardsAll(ListShardsRequest(), &listed),
                           "looking for bucket moves that were cut off"));
  std::map<std::string, std::vector<Held>> by_table;
  for (size_t k = 0; k < listed.size(); ++k) {
    for (const ShardInfo& info : listed[k].shards()) {
      if (!info.spec().has_dynamic()) continue;
      by_table[info.spec().variable()].push_back(
          {static_cast<int>(k), info.spec().name(),
           {info.spec().dynamic().bucket_begin(), info.spec().dynamic().bucket_end()},
           {info.staged_begin(), info.staged_end()},
           info.routing_version()});
    }
  }
  CutOffMoves out;
  for (const std::string& table : tables) {
    auto it = by_table.find(table);
    if (it == by_table.end()) continue;
    const std::vector<Held>& shards = it->second;
    int64_t routing_version = 0;
    for (const Held& h : shards) routing_version = std::max(routing_version, h.routing_version);
    for (const Held& target : shards) {
      const BucketRange staged = target.staged;
      if (staged.end <= staged.begin) continue;
      MoveBucketsRequest r;
      r.set_shard(target.shard);
      for (int32_t b = staged.begin; b < staged.end; ++b) r.add_buckets(b);
      r.set_generation(generation);
      const Held* source = nullptr;
      for (const Held& h : shards) {
        if (h.range.Contains(staged.begin) || h.range.Contains(staged.end - 1)) source = &h;
      }
      const std::string buckets =
          absl::StrCat("buckets [", staged.begin, ", ", staged.end, ") of \"", table, "\"");
      MoveBucketsResponse ignored;
      if (source == nullptr) {
        // The source dropped them: the target's copy is the only one, whole (the last,
        // frozen, round was staged before the drop). Finish the switch.
        r.set_op(MoveBucketsRequest::ACTIVATE);
        r.set_routing_version(std::max(routing_version, target.routing_version + 1));
        RETURN_IF_ERROR(Annotate(client->MoveBuckets(target.ps, r, &ignored),
                                 absl::StrCat("finishing the cut-off move of ", buckets,
                                              " to ", target.shard)));
        ++out.finished;
        out.what.push_back(absl::StrCat("finished the move of ", buckets, " to ", target.shard,
                                        " (ps ", target.ps, ") at routing version ",
                                        r.routing_version()));
      } else {
        // The source still holds them (perhaps frozen, until its freeze runs out): the copy
        // goes, and the source thaws.
        r.set_op(MoveBucketsRequest::ABORT);
        RETURN_IF_ERROR(Annotate(client->MoveBuckets(target.ps, r, &ignored),
                                 absl::StrCat("aborting the cut-off move of ", buckets)));
        r.set_shard(source->shard);
        (void)client->MoveBuckets(source->ps, r, &ignored);
        ++out.aborted;
        out.what.push_back(absl::StrCat("aborted the move of ", buckets, " from ",
                                        source->shard, " to ", target.shard,
                                        " (its copy dropped)"));
      }
    }
  }
  return out;
}

}  // namespace shardps
