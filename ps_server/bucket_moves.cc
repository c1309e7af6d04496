#include "ps_server/bucket_moves.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/error_detail.h"
#include "common/status_macros.h"

namespace shardps {
namespace {

constexpr size_t kMovesRemembered = 64;

bool Empty(BucketRange r) { return r.end <= r.begin; }

std::string Describe(BucketRange r) { return absl::StrCat("[", r.begin, ", ", r.end, ")"); }

bool Same(BucketRange a, BucketRange b) { return a.begin == b.begin && a.end == b.end; }

std::vector<int32_t> List(BucketRange r) {
  std::vector<int32_t> out;
  for (int32_t b = r.begin; b < r.end; ++b) out.push_back(b);
  return out;
}

}  // namespace

BucketMoves::BucketMoves(std::string variable, int32_t num_buckets, BucketRange range)
    : variable_(std::move(variable)), num_buckets_(num_buckets), range_(range) {}

bool BucketMoves::Frozen(absl::Time now) {
  if (Empty(frozen_)) return false;
  if (now < frozen_until_) return true;
  frozen_ = {};  // the mover did not finish in time: the buckets are this shard's again
  return false;
}

absl::Status BucketMoves::Refuse(int32_t bucket, absl::string_view what, bool moving) const {
  ErrorDetail detail;
  detail.set_kind(ErrorDetail::BUCKET_MOVED);
  detail.set_ps_task(-1);
  detail.set_variable(variable_);
  detail.set_bucket(bucket);
  detail.set_routing_version(routing_version_);
  detail.set_moving(moving);
  std::string where;
  for (auto it = moved_.rbegin(); it != moved_.rend(); ++it) {
    if (bucket >= 0 && it->buckets.Contains(bucket)) {
      detail.set_ps_task(it->to_ps);
      where = absl::StrCat(" (moved to ps ", it->to_ps, " at routing version ",
                           it->routing_version, ")");
      break;
    }
  }
  std::string message;
  if (moving) {
    message = absl::StrCat(what, ": bucket ", bucket, " of table '", variable_,
                           "' is being handed to another shard; send again in a moment");
  } else if (bucket < 0) {
    message = absl::StrCat(what, ": routed by an older layout of table '", variable_,
                           "' than its routing version ", routing_version_,
                           "; rebuild the layout (Discover) and send again");
  } else {
    message = absl::StrCat(what, ": bucket ", bucket, " of table '", variable_,
                           "' is not held here", where, "; this shard holds ",
                           Describe(range_), " at routing version ", routing_version_,
                           "; rebuild the layout (Discover) and send again");
  }
  return WithDetail(absl::AbortedError(message), detail);
}

absl::Status BucketMoves::Check(absl::Span<const int64_t> keys, bool push,
                                int64_t routing_version, absl::Time now, absl::string_view what) {
  const bool frozen = push && Frozen(now);
  if (routing_version_ == 0 && !frozen && Empty(staged_)) {
    // No move has touched this table's shard: the unlocked range check (Shard::CheckKeys)
    // was the whole check.
    return absl::OkStatus();
  }
  if (push && routing_version < routing_version_) return Refuse(-1, what, false);
  for (int64_t key : keys) {
    const int32_t bucket = BucketOf(key, num_buckets_);
    if (!range_.Contains(bucket)) return Refuse(bucket, what, false);
    if (frozen && frozen_.Contains(bucket)) return Refuse(bucket, what, true);
  }
  return absl::OkStatus();
}

void BucketMoves::TableReplaced() {
  frozen_ = {};
  staged_ = {};
}

absl::StatusOr<BucketMoveOutcome> BucketMoves::Apply(const MoveBucketsRequest& request,
                                                     DynamicTable* table, bool step_in_progress,
                                                     absl::Time now,
                                                     MoveBucketsResponse* response) {
  const std::string what = absl::StrCat("move buckets of table '", variable_, "'");
  if (request.buckets().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": no buckets"));
  }
  const BucketRange buckets{request.buckets(0), request.buckets(0) + request.buckets_size()};
  for (int i = 0; i < request.buckets_size(); ++i) {
    if (request.buckets(i) != buckets.begin + i || request.buckets(i) < 0 ||
        request.buckets(i) >= num_buckets_) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": buckets must be a run of consecutive buckets in [0, ", num_buckets_,
          "); buckets[", i, "] = ", request.buckets(i)));
    }
  }
  const std::vector<int32_t> list = List(buckets);
  const bool inside = buckets.begin >= range_.begin && buckets.end <= range_.end;
  const bool at_edge = buckets.begin == range_.begin || buckets.end == range_.end;
  const bool adjacent = buckets.end == range_.begin || buckets.begin == range_.end;
  BucketMoveOutcome outcome;
  switch (request.op()) {
    case MoveBucketsRequest::EXPORT: {
      if (!inside || !at_edge || (Same(buckets, range_) && !request.whole())) {
        return absl::FailedPreconditionError(absl::StrCat(
            what, ": buckets ", Describe(buckets), " are not a run at an edge of this shard's ",
            Describe(range_), " that leaves it at least one bucket (or, with whole, all)"));
      }
      if (request.freeze()) {
        if (request.freeze_ms() <= 0) {
          return absl::InvalidArgumentError(absl::StrCat(what, ": freeze needs freeze_ms > 0"));
        }
        if (step_in_progress) {
          return absl::FailedPreconditionError(
              absl::StrCat(what, ": a SYNC step is partly pushed; freeze between steps"));
        }
        if (Frozen(now) && !Same(frozen_, buckets)) {
          return absl::FailedPreconditionError(absl::StrCat(
              what, ": buckets ", Describe(frozen_), " are being handed over already"));
        }
      }
      std::vector<int64_t> deleted;
      if (request.since_epoch() > 0) {
        absl::StatusOr<std::vector<int64_t>> d =
            table->DeletedInBuckets(list, request.since_epoch());
        if (!d.ok()) return Annotate(d.status(), what);
        deleted = *std::move(d);
      }
      ASSIGN_OR_RETURN(RowBatch rows, table->ExportBuckets(list, request.since_epoch()));
      // Changes after this call are stamped with a later epoch than the one closed here.
      const uint32_t closed = table->AdvanceEpoch();
      if (request.freeze()) {
        frozen_ = buckets;
        frozen_until_ = now + absl::Milliseconds(request.freeze_ms());
      }
      response->set_rows(static_cast<int64_t>(rows.keys.size()));
      EncodeRows(rows, response->mutable_keys(), response->mutable_last_steps(),
                 response->mutable_values());
      for (int64_t key : deleted) response->add_deleted_keys(key);
      response->set_epoch(closed);
      break;
    }
    case MoveBucketsRequest::STAGE: {
      if (!adjacent) {
        return absl::FailedPreconditionError(
            absl::StrCat(what, ": buckets ", Describe(buckets),
                         " are not next to this shard's ", Describe(range_)));
      }
      ASSIGN_OR_RETURN(RowBatch rows,
                       DecodeRows(request.keys(), request.last_steps(), request.values(),
                                  table->dim() * (1 + table->num_slots())));
      if (request.since_epoch() == 0) {
        // A fresh copy: any earlier staging (of a move that did not finish) goes first.
        if (!Empty(staged_)) {
          RETURN_IF_ERROR(Annotate(table->DropBuckets(List(staged_)), what));
          staged_ = {};
        }
        RETURN_IF_ERROR(Annotate(table->ImportBuckets(list, rows), what));
        staged_ = buckets;
      } else {
        if (!Same(staged_, buckets)) {
          return absl::FailedPreconditionError(
              absl::StrCat(what, ": buckets ", Describe(buckets), " are not staged here (",
                           Empty(staged_) ? "none are" : Describe(staged_) + " are",
                           "); stage a fresh copy (since_epoch 0)"));
        }
        for (size_t k = 0; k < rows.keys.size(); ++k) {
          if (!buckets.Contains(BucketOf(rows.keys[k], num_buckets_))) {
            return absl::InvalidArgumentError(absl::StrCat(
                what, ": key ", rows.keys[k], " (position ", k, ") is not in buckets ",
                Describe(buckets)));
          }
        }
        RETURN_IF_ERROR(Annotate(table->UpsertRows(rows), what));
        std::vector<int64_t> deleted(request.deleted_keys().begin(),
                                     request.deleted_keys().end());
        std::vector<int64_t> erase;
        for (int64_t key : deleted) {
          if (buckets.Contains(BucketOf(key, num_buckets_))) erase.push_back(key);
        }
        RETURN_IF_ERROR(Annotate(table->EraseKeys(erase), what));
      }
      response->set_rows(static_cast<int64_t>(rows.keys.size()));
      break;
    }
    case MoveBucketsRequest::ACTIVATE:
    case MoveBucketsRequest::DROP: {
      const bool activate = request.op() == MoveBucketsRequest::ACTIVATE;
      if (request.routing_version() <= routing_version_) {
        return absl::FailedPreconditionError(
            absl::StrCat(what, ": routing version ", request.routing_version(),
                         " is not above this shard's, ", routing_version_));
      }
      if (step_in_progress) {
        return absl::FailedPreconditionError(
            absl::StrCat(what, ": a SYNC step is partly pushed; move between steps"));
      }
      if (activate) {
        if (!Same(staged_, buckets)) {
          return absl::FailedPreconditionError(absl::StrCat(
              what, ": buckets ", Describe(buckets), " are not staged here"));
        }
        table->RestampBuckets(list);
        staged_ = {};
        range_ = {std::min(range_.begin, buckets.begin), std::max(range_.end, buckets.end)};
      } else {
        if (!Frozen(now) || !Same(frozen_, buckets)) {
          return absl::FailedPreconditionError(absl::StrCat(
              what, ": buckets ", Describe(buckets),
              " are not frozen here (the freeze may have run out): the move is void"));
        }
        RETURN_IF_ERROR(Annotate(table->DropBuckets(list), what));
        frozen_ = {};
        range_ = buckets.begin == range_.begin ? BucketRange{buckets.end, range_.end}
                                               : BucketRange{range_.begin, buckets.begin};
        moved_.push_back({buckets, request.to_ps(), request.routing_version()});
        while (moved_.size() > kMovesRemembered) moved_.pop_front();
      }
      routing_version_ = request.routing_version();
      outcome.range_changed = true;
      break;
    }
    case MoveBucketsRequest::ABORT:
      if (Same(frozen_, buckets)) frozen_ = {};
      if (Same(staged_, buckets)) {
        RETURN_IF_ERROR(Annotate(table->DropBuckets(list), what));
        staged_ = {};
      }
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": op ", static_cast<int>(request.op()), " is not one of EXPORT, ",
                       "STAGE, ACTIVATE, DROP, ABORT"));
  }
  response->set_routing_version(routing_version_);
  response->set_bucket_begin(range_.begin);
  response->set_bucket_end(range_.end);
  return outcome;
}

void EncodeRows(const RowBatch& rows, std::string* keys, std::string* last_steps,
                std::string* values) {
  keys->assign(reinterpret_cast<const char*>(rows.keys.data()),
               rows.keys.size() * sizeof(int64_t));
  last_steps->assign(reinterpret_cast<const char*>(rows.last_steps.data()),
                     rows.last_steps.size() * sizeof(uint32_t));
  values->assign(reinterpret_cast<const char*>(rows.values.data()),
                 rows.values.size() * sizeof(float));
}

absl::StatusOr<RowBatch> DecodeRows(const std::string& keys, const std::string& last_steps,
                                    const std::string& values, int64_t row_floats) {
  if (keys.size() % sizeof(int64_t) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("keys has ", keys.size(), " bytes, not a multiple of 8"));
  }
  const size_t n = keys.size() / sizeof(int64_t);
  if (last_steps.size() != n * sizeof(uint32_t) ||
      values.size() != n * static_cast<size_t>(row_floats) * sizeof(float)) {
    return absl::InvalidArgumentError(absl::StrCat(
        n, " keys need ", n * sizeof(uint32_t), " bytes of last_steps and ",
        n * row_floats * sizeof(float), " bytes of values (", row_floats,
        " floats a row); got ", last_steps.size(), " and ", values.size()));
  }
  RowBatch rows;
  rows.keys.resize(n);
  rows.last_steps.resize(n);
  rows.values.resize(n * static_cast<size_t>(row_floats));
  if (n > 0) {
    std::memcpy(rows.keys.data(), keys.data(), keys.size());
    std::memcpy(rows.last_steps.data(), last_steps.data(), last_steps.size());
    std::memcpy(rows.values.data(), values.data(), values.size());
  }
  return rows;
}

}  // namespace shardps
