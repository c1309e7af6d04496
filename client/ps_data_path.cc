#include "client/ps_data_path.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/bucket_reroute.h"
#include "client/call_batches.h"
#include "client/row_chunks.h"
#include "client/variable_layout.h"
#include "client/versions_seen.h"
#include "common/error_detail.h"
#include "common/fanout.h"
#include "common/status_macros.h"
#include "math/unique_ids.h"

namespace shardps {
namespace {

// A request's row ids in their raw form (PullRowsRequest.ids_bytes,
// PushRowsRequest.ids_bytes): little-endian int64s, copied as they lie. The transport turns
// them into the packed `ids` field for a ps that does not read ids_bytes.
void SetRowIds(absl::Span<const int64_t> ids, std::string* bytes) {
  static_assert(ABSL_IS_LITTLE_ENDIAN, "ids_bytes holds little-endian int64s");
  bytes->assign(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int64_t));
}

// The base version a push to `shard` carries (PushOptions::base_versions; 0: unknown).
int64_t BaseVersion(const PushOptions& options, const std::string& shard) {
  if (options.base_versions == nullptr) return 0;
  auto it = options.base_versions->shards.find(shard);
  return it == options.base_versions->shards.end() ? 0 : it->second;
}

// A pull's fan-out over `count` batch calls: once all are done, fills *versions (when set)
// with what they saw, then calls `done`.
std::shared_ptr<Fanout> PullFanout(size_t count, std::shared_ptr<VersionsSeen> seen,
                                   PullVersions* versions, StatusCallback done) {
  return Fanout::Make(count, [versions, seen, done](const absl::Status& s) {
    if (s.ok() && versions != nullptr) seen->Fill(versions);
    done(s);
  });
}

// A pull batch's completion: the version each of its items read goes to `seen` (when the
// caller asked for versions). Batch: a request and response of repeated `pulls`.
template <typename Batch>
std::function<absl::Status(Batch*, const absl::Status&)> RecordVersions(
    std::shared_ptr<VersionsSeen> seen, PullVersions* versions) {
  return [seen, versions](Batch* batch, const absl::Status& s) {
    if (!s.ok() || versions == nullptr) return s;
    const int n = std::min(batch->request.pulls_size(), batch->response.pulls_size());
    for (int i = 0; i < n; ++i) {
      seen->Add(batch->request.pulls(i).shard(), batch->response.pulls(i).version());
    }
    return s;
  };
}

}  // namespace

void PsDataPath::PullAsync(std::vector<PullTarget> targets, const PullOptions& options,
                           PullVersions* versions, StatusCallback done) {
  struct Batch {
    PullBatchRequest request;
    PullBatchResponse response;
    std::vector<absl::Span<char>> outs;
    int64_t bytes = 0;
  };
  CallBatches<Batch> batches(calls_->num_ps(), chunk_bytes());
  for (const PullTarget& target : targets) {
    absl::StatusOr<VariableLayout> layout =
        layouts_->GetDense(target.name, "pull", target.out.size());
    if (!layout.ok()) return done(layout.status());
    ForEachChunk(*layout, chunk_bytes(),
                 [&](const VariableLayout::Shard& shard, int64_t begin, int64_t end) {
                   const int64_t bytes = (end - begin) * layout->row_width * sizeof(float);
                   Batch* batch = batches.For(shard.ps, bytes);
                   PullRequest* item = batch->request.add_pulls();
                   item->set_shard(shard.spec.name());
                   item->set_row_begin(begin);
                   item->set_row_end(end);
                   item->set_min_version(options.min_version);
                   item->set_wait_timeout_ms(absl::ToInt64Milliseconds(options.wait_timeout));
                   item->set_exact_version(options.exact_version);
                   float* out = target.out.data() + (shard.row_offset + begin) * layout->row_width;
                   batch->outs.push_back(absl::MakeSpan(reinterpret_cast<char*>(out), bytes));
                 });
  }
  auto seen = std::make_shared<VersionsSeen>();
  auto fan = PullFanout(batches.size(), seen, versions, std::move(done));
  calls_->IssueParts<Batch>(
      batches.Take(), calls_->options().calls_in_flight_per_ps,
      calls_->Deadline() + options.wait_timeout,
      [](PsInterface* target, Batch* batch, absl::Time deadline, StatusCallback done) {
        target->PullBatchAsync(&batch->request, &batch->response, batch->outs, deadline,
                               std::move(done));
      },
      RecordVersions<Batch>(seen, versions),
      std::move(fan));
}

void PsDataPath::PushAsync(std::vector<PushSource> sources, const PushOptions& options,
                           StatusCallback done) {
  struct Batch {
    PushBatchRequest request;
    PushBatchResponse response;
    std::vector<absl::Span<const char>> data;  // in the caller's gradients, sent from there
    int64_t bytes = 0;
  };
  CallBatches<Batch> batches(calls_->num_ps(), chunk_bytes());
  for (const PushSource& source : sources) {
    absl::StatusOr<VariableLayout> layout =
        layouts_->GetDense(source.name, "push", source.grad.size());
    if (!layout.ok()) return done(layout.status());
    ForEachChunk(
        *layout, chunk_bytes(),
        [&](const VariableLayout::Shard& shard, int64_t begin, int64_t end) {
          const int64_t bytes = (end - begin) * layout->row_width * sizeof(float);
          Batch* batch = batches.For(shard.ps, bytes);
          PushRequest* item = batch->request.add_pushes();
          item->set_request_id(ids_->ForPush(options, source.name, shard.spec.name(), begin));
          item->set_shard(shard.spec.name());
          item->set_row_begin(begin);
          item->set_row_end(end);
          if (options.has_sync) *item->mutable_sync() = options.sync;
          item->set_generation(options.generation);
          item->set_base_version(BaseVersion(options, shard.spec.name()));
          if (options.step.has_value()) item->set_step(*options.step);
          const float* src = source.grad.data() + (shard.row_offset + begin) * layout->row_width;
          batch->data.push_back(absl::MakeConstSpan(reinterpret_cast<const char*>(src), bytes));
        });
  }
  auto fan = Fanout::Make(batches.size(), std::move(done));
  calls_->IssueParts<Batch>(
      batches.Take(), calls_->options().calls_in_flight_per_ps, calls_->Deadline(),
      [](PsInterface* target, Batch* batch, absl::Time deadline, StatusCallback done) {
        target->PushBatchAsync(&batch->request, batch->data, &batch->response, deadline,
                               std::move(done));
      },
      [](Batch*, const absl::Status& s) { return s; }, std::move(fan));
}

namespace {
// How many times one call routes again after bucket moves before it gives up.
constexpr int kMaxReroutes = 12;
}  // namespace

void PsDataPath::RefreshLayoutsAsync(const std::string& variable, StatusCallback done) {
  struct Lists {
    std::vector<ListShardsRequest> requests;
    std::vector<ListShardsResponse> responses;
  };
  auto lists = std::make_shared<Lists>();
  ListShardsRequest request;
  request.set_variable(variable);
  lists->requests.assign(static_cast<size_t>(calls_->num_ps()), request);
  lists->responses.resize(static_cast<size_t>(calls_->num_ps()));
  auto fan = Fanout::Make(lists->requests.size(), [this, lists, done](const absl::Status& s) {
    if (!s.ok()) return done(s);
    absl::StatusOr<std::map<std::string, VariableLayout>> found =
        LayoutsFromShards(lists->responses);
    if (!found.ok()) return done(found.status());
    std::vector<VariableLayout> layouts;
    for (auto& [name, layout] : *found) layouts.push_back(std::move(layout));
    layouts_->Put(std::move(layouts));
    done(absl::OkStatus());
  });
  for (int p = 0; p < calls_->num_ps(); ++p) {
    calls_->Call<ListShardsRequest, ListShardsResponse>(
        p, PsCalls::Addresses::kPs, &PsInterface::ListShardsAsync, &lists->requests[p],
        &lists->responses[p], calls_->Deadline(),
        [fan, lists](const absl::Status& s) { fan->Finish(s); });
  }
}

void PsDataPath::AfterBucketMoved(const absl::Status& why, int reroutes, absl::Time give_up,
                                  StatusCallback then) {
  if (reroutes >= kMaxReroutes || absl::Now() >= give_up) {
    return then(Annotate(why, absl::StrCat("still refused after routing again ", reroutes,
                                           " times")));
  }
  // A bucket being handed over is back within the move's freeze: wait a little, longer
  // each time; a moved one needs no wait.
  const absl::Duration wait =
      IsBucketMoving(why) || reroutes > 0
          ? std::min(absl::Milliseconds(2) * (1 << std::min(reroutes, 7)), absl::Milliseconds(200))
          : absl::ZeroDuration();
  calls_->RunAfter(wait, [this, why, reroutes, give_up, then](bool cancelled) {
    if (cancelled) return then(absl::CancelledError("client shut down while routing again"));
    // Only the refused table's layout: the others did not move (a refusal of one of them
    // comes with its own name).
    const std::optional<ErrorDetail> detail = GetDetail(why);
    const std::string variable = detail.has_value() ? detail->variable() : std::string();
    RefreshLayoutsAsync(variable, [this, why, reroutes, give_up, then](const absl::Status& s) {
      if (s.code() == absl::StatusCode::kFailedPrecondition) {
        // The table's shards do not tile its buckets yet (one is between its old shard and
        // its new one): again, a little later.
        return AfterBucketMoved(
            WithDetail(Annotate(s, "rebuilding the layout after a bucket move"),
                       GetDetail(why).value_or(ErrorDetail())),
            reroutes + 1, give_up, then);
      }
      then(s);
    });
  });
}

void PsDataPath::PullRowsManyAsync(std::vector<RowsPullTarget> targets, const PullOptions& options,
                                   PullVersions* versions, StatusCallback done) {
  PullRowsAttempt(std::make_shared<std::vector<RowsPullTarget>>(std::move(targets)), options,
                  versions, 0, absl::Now() + calls_->options().rpc_timeout, std::move(done));
}

void PsDataPath::PullRowsAttempt(std::shared_ptr<std::vector<RowsPullTarget>> all_targets,
                                 const PullOptions& options, PullVersions* versions,
                                 int reroutes, absl::Time give_up, StatusCallback outer_done) {
  const std::vector<RowsPullTarget>& targets = *all_targets;
  StatusCallback done = [this, all_targets, options, versions, reroutes, give_up,
                         outer_done](const absl::Status& s) {
    if (!IsBucketMoved(s)) return outer_done(s);
    AfterBucketMoved(s, reroutes, give_up,
                     [this, all_targets, options, versions, reroutes, give_up,
                      outer_done](const absl::Status& refreshed) {
                       if (!refreshed.ok()) return outer_done(refreshed);
                       PullRowsAttempt(all_targets, options, versions, reroutes + 1, give_up,
                                       outer_done);
                     });
  };
  // Each table's rows are split by shard (and into chunks of at most max_chunk_bytes), as
  // one PullRows each would be; then a ps's chunks go out together, in batches of at most
  // max_chunk_bytes: one PullRowsBatch per ps for a step's every table, where a call per
  // table and shard would cost a round trip and gRPC's per-call work each.
  struct Batch {
    PullRowsBatchRequest request;
    PullRowsBatchResponse response;
    std::vector<absl::Span<char>> outs;  // each row's place in the callers' memory, in order
    int64_t bytes = 0;
  };
  CallBatches<Batch> batches(calls_->num_ps(), chunk_bytes());
  for (const RowsPullTarget& target : targets) {
    absl::StatusOr<VariableLayout> layout = layouts_->Get(target.name);
    if (!layout.ok()) return done(layout.status());
    const int64_t width = layout->row_width;
    if (static_cast<int64_t>(target.out.size()) !=
        static_cast<int64_t>(target.ids.size()) * width) {
      return done(absl::InvalidArgumentError(absl::StrCat(
          "variable \"", target.name, "\": row pull of ", target.ids.size(), " ids of width ",
          width, " needs ", target.ids.size() * width, " output floats, got ", target.out.size())));
    }
    const size_t row_bytes = static_cast<size_t>(width) * sizeof(float);
    absl::Status routed = RouteRows(
        *layout, target.ids, /*every_shard=*/false,
        [&](int shard, std::vector<int64_t> local, std::vector<int64_t> positions) {
          for (RowChunk& chunk :
               SplitRows(std::move(local), std::move(positions), MaxRows(width, chunk_bytes()),
                         /*keep_duplicates_together=*/false)) {
            const int64_t bytes = static_cast<int64_t>(chunk.ids.size() * row_bytes);
            Batch* batch = batches.For(layout->shards[shard].ps, bytes);
            PullRowsRequest* item = batch->request.add_pulls();
            item->set_shard(layout->shards[shard].spec.name());
            SetRowIds(chunk.ids, item->mutable_ids_bytes());
            item->set_min_version(options.min_version);
            item->set_wait_timeout_ms(absl::ToInt64Milliseconds(options.wait_timeout));
            item->set_exact_version(options.exact_version);
            // The rows go from the reply straight to where the caller wants them.
            for (int64_t position : chunk.positions) {
              batch->outs.emplace_back(
                  reinterpret_cast<char*>(target.out.data() + position * width), row_bytes);
            }
          }
        });
    if (!routed.ok()) return done(routed);
  }
  auto seen = std::make_shared<VersionsSeen>();
  auto fan = PullFanout(batches.size(), seen, versions, std::move(done));
  // All at once: a step's row batches are one per ps (and max_chunk_bytes), and small.
  calls_->IssueParts<Batch>(
      batches.Take(), /*window_size=*/0, calls_->Deadline() + options.wait_timeout,
      [](PsInterface* target, Batch* batch, absl::Time deadline, StatusCallback done) {
        if (batch->request.pulls_size() == 1) {  // a call of its own is cheaper
          batch->response.Clear();
          target->PullRowsIntoAsync(&batch->request.pulls(0), batch->response.add_pulls(),
                                    batch->outs, deadline, std::move(done));
          return;
        }
        target->PullRowsBatchIntoAsync(&batch->request, &batch->response, batch->outs, deadline,
                                       std::move(done));
      },
      RecordVersions<Batch>(seen, versions),
      std::move(fan));
}

void PsDataPath::PushRowsManyAsync(std::vector<RowsPushSource> sources, const PushOptions& options,
                                   StatusCallback done) {
  // Requests built as one PushRows each would be, then batched per ps as PullRowsManyAsync
  // batches its pulls.
  auto items = std::make_shared<RowPushItems>();
  for (const RowsPushSource& source : sources) {
    std::vector<std::pair<int, PushRowsRequest>> built;
    const absl::Status status = AddRowPushes(source, options, &built);
    for (auto& [ps, request] : built) {
      items->push_back({ps, source.name, std::move(request)});
    }
    if (!status.ok()) {
      for (RowPushItem& item : *items) buffers_.Put(std::move(*item.request.mutable_data()));
      return done(status);
    }
  }
  SendRowPushes(std::move(items), options, 0, absl::Now() + calls_->options().rpc_timeout,
                std::move(done));
}

void PsDataPath::SendRowPushes(std::shared_ptr<RowPushItems> items, const PushOptions& options,
                               int reroutes, absl::Time give_up, StatusCallback done) {
  struct Batch {
    PushRowsBatchRequest request;
    PushRowsBatchResponse response;
    std::vector<std::string> variables;  // each item's
    int64_t bytes = 0;
  };
  CallBatches<Batch> batches(calls_->num_ps(), chunk_bytes());
  for (RowPushItem& item : *items) {
    // The rows are written: the request may move (its data string with it).
    Batch* batch = batches.For(item.ps, static_cast<int64_t>(item.request.data().size()));
    *batch->request.add_pushes() = std::move(item.request);
    batch->variables.push_back(std::move(item.variable));
  }
  items.reset();
  // The requests refused because a bucket moved, to route again once all are back.
  struct Refused {
    absl::Mutex mu;
    std::shared_ptr<RowPushItems> items = std::make_shared<RowPushItems>();
    absl::Status why;
  };
  auto refused = std::make_shared<Refused>();
  auto fan = Fanout::Make(batches.size(), [this, refused, options, reroutes, give_up,
                                           done](const absl::Status& s) {
    if (refused->items->empty()) return done(s);
    if (!s.ok()) {
      for (RowPushItem& item : *refused->items) {
        buffers_.Put(std::move(*item.request.mutable_data()));
      }
      return done(s);
    }
    RerouteRowPushesAsync(refused->items, refused->why, options, reroutes, give_up, done);
  });
  calls_->IssueParts<Batch>(
      batches.Take(), /*window_size=*/0, calls_->Deadline(),
      [](PsInterface* target, Batch* batch, absl::Time deadline, StatusCallback done) {
        if (batch->request.pushes_size() == 1) {
          batch->response.Clear();
          target->PushRowsAsync(&batch->request.pushes(0), batch->response.add_pushes(), deadline,
                                std::move(done));
          return;
        }
        target->PushRowsBatchAsync(&batch->request, &batch->response, deadline, std::move(done));
      },
      [this, refused](Batch* batch, const absl::Status& s) {
        const int n = batch->request.pushes_size();
        const int first = IsBucketMoved(s) ? FirstUnapplied(s, n) : n;
        for (int i = 0; i < first; ++i) {
          buffers_.Put(std::move(*batch->request.mutable_pushes(i)->mutable_data()));
        }
        if (first == n) return s;
        absl::MutexLock lock(&refused->mu);
        for (int i = first; i < n; ++i) {
          refused->items->push_back(
              {0, batch->variables[i], std::move(*batch->request.mutable_pushes(i))});
        }
        refused->why = s;
        return absl::OkStatus();
      },
      std::move(fan));
}

void PsDataPath::RerouteRowPushesAsync(std::shared_ptr<RowPushItems> unapplied, absl::Status why,
                                       const PushOptions& options, int reroutes,
                                       absl::Time give_up, StatusCallback done) {
  AfterBucketMoved(why, reroutes, give_up, [this, unapplied, options, reroutes, give_up,
                                            done](const absl::Status& refreshed) {
    auto release = [this, unapplied] {
      for (RowPushItem& item : *unapplied) buffers_.Put(std::move(*item.request.mutable_data()));
    };
    if (!refreshed.ok()) {
      release();
      return done(refreshed);
    }
    std::map<std::string, std::vector<const PushRowsRequest*>> by_variable;
    for (const RowPushItem& item : *unapplied) by_variable[item.variable].push_back(&item.request);
    auto items = std::make_shared<RowPushItems>();
    for (const auto& entry : by_variable) {
      const std::string& variable = entry.first;
      const std::vector<const PushRowsRequest*>& requests = entry.second;
      absl::StatusOr<VariableLayout> layout = layouts_->Get(variable);
      absl::StatusOr<std::vector<std::pair<int, PushRowsRequest>>> routed =
          layout.ok() ? RerouteRowPushes(
                            requests, *layout, options.has_sync,
                            MaxRows(layout->row_width, chunk_bytes()),
                            [&](const std::string& shard, int64_t chunk) {
                              // Ids of their own: a shard that refused a request may have
                              // applied another of the same call under the ids it had.
                              PushOptions salted = options;
                              if (salted.idempotency_key != 0) {
                                salted.idempotency_key ^=
                                    0x9E3779B97F4A7C15ULL *
                                    static_cast<uint64_t>(layout->routing_version + 1);
                              }
                              return ids_->ForPush(salted, variable, shard, -1 - chunk);
                            })
                      : absl::StatusOr<std::vector<std::pair<int, PushRowsRequest>>>(
                            layout.status());
      if (!routed.ok()) {
        release();
        return done(routed.status());
      }
      for (auto& [ps, request] : *routed) items->push_back({ps, variable, std::move(request)});
    }
    release();
    SendRowPushes(std::move(items), options, reroutes + 1, give_up, done);
  });
}

absl::Status PsDataPath::AddRowPushes(const RowsPushSource& source, const PushOptions& options,
                                      std::vector<std::pair<int, PushRowsRequest>>* items) {
  ASSIGN_OR_RETURN(VariableLayout layout, layouts_->Get(source.name));
  const std::string& name = source.name;
  const absl::Span<const float> grads = source.grads;
  const int64_t width = layout.row_width;
  if (static_cast<int64_t>(grads.size()) != static_cast<int64_t>(source.ids.size()) * width) {
    return absl::InvalidArgumentError(absl::StrCat(
        "variable \"", name, "\": row push of ", source.ids.size(), " ids of width ", width,
        " needs ", source.ids.size() * width, " gradient floats, got ", grads.size()));
  }
  const int64_t max_rows = MaxRows(width, chunk_bytes());
  const size_t row_bytes = static_cast<size_t>(width) * sizeof(float);
  // A SYNC replica's share of a step is one request per shard, even an empty one.
  return RouteRows(
      layout, source.ids, /*every_shard=*/options.has_sync,
      [&](int shard, std::vector<int64_t> local, std::vector<int64_t> positions) {
        const VariableLayout::Shard& target = layout.shards[shard];
        // Duplicate ids are summed here, in order of appearance, as the ps would sum them
        // (the same float additions in the same order): the request carries each row once,
        // and the ps applies it where it lies instead of summing into a copy of its own.
        std::vector<int64_t> unique;
        std::vector<uint32_t> slot;
        const bool repeats = UniqueIds(local, target.rows, &unique, &slot);
        const int64_t n = static_cast<int64_t>(unique.size());
        // Unique row u goes to chunk u / rows_per_chunk, at row u % rows_per_chunk. A SYNC
        // push sends its whole share as one request.
        const int64_t rows_per_chunk = options.has_sync ? std::max<int64_t>(1, n) : max_rows;
        const int64_t num_chunks = std::max<int64_t>(1, (n + rows_per_chunk - 1) / rows_per_chunk);
        const size_t first = items->size();
        for (int64_t c = 0; c < num_chunks; ++c) {
          PushRowsRequest request;
          // Chunk c's id is keyed by -1 - c: the same chunks, so the same ids, on a re-run.
          request.set_request_id(ids_->ForPush(options, name, target.spec.name(), -1 - c));
          request.set_shard(target.spec.name());
          const int64_t begin = c * rows_per_chunk;
          const int64_t end = std::min(n, begin + rows_per_chunk);
          SetRowIds(absl::MakeConstSpan(unique.data() + begin, static_cast<size_t>(end - begin)),
                    request.mutable_ids_bytes());
          std::string* data = request.mutable_data();
          *data = buffers_.Get();
          data->resize(static_cast<size_t>(end - begin) * row_bytes);
          if (options.has_sync) *request.mutable_sync() = options.sync;
          request.set_generation(options.generation);
          request.set_base_version(BaseVersion(options, target.spec.name()));
          if (options.step.has_value()) request.set_step(*options.step);
          request.set_routing_version(layout.routing_version);
          items->emplace_back(target.ps, std::move(request));
        }
        // The chunks' row bytes, now that the requests stay where they are until all are
        // written.
        std::vector<char*> chunk_data;
        for (size_t k = first; k < items->size(); ++k) {
          chunk_data.push_back(&(*(*items)[k].second.mutable_data())[0]);
        }
        int64_t numbered = 0;  // unique rows seen so far: a slot of this number is new
        for (size_t k = 0; k < local.size(); ++k) {
          const int64_t u = repeats ? slot[k] : static_cast<int64_t>(k);
          float* row =
              reinterpret_cast<float*>(chunk_data[static_cast<size_t>(u / rows_per_chunk)] +
                                       static_cast<size_t>(u % rows_per_chunk) * row_bytes);
          const float* g = grads.data() + positions[k] * width;
          if (u == numbered) {
            std::memcpy(row, g, row_bytes);
            ++numbered;
          } else {
            for (int64_t j = 0; j < width; ++j) row[j] += g[j];
          }
        }
      });
}

void PsDataPath::AssignAsync(const std::string& name, absl::Span<const float> values,
                             StatusCallback done) {
  absl::StatusOr<VariableLayout> layout = layouts_->GetDense(name, "assign", values.size());
  if (!layout.ok()) return done(layout.status());
  struct Chunk {
    AssignRequest request;
    AssignResponse response;
  };
  std::vector<std::pair<int, std::unique_ptr<Chunk>>> chunks;
  ForEachChunk(
      *layout, chunk_bytes(), [&](const VariableLayout::Shard& shard, int64_t begin, int64_t end) {
        auto chunk = std::make_unique<Chunk>();
        chunk->request.set_request_id(ids_->Next());
        chunk->request.set_shard(shard.spec.name());
        chunk->request.set_row_begin(begin);
        chunk->request.set_row_end(end);
        std::string* data = chunk->request.mutable_data();
        *data = buffers_.Get();
        data->assign(reinterpret_cast<const char*>(values.data() +
                                                   (shard.row_offset + begin) * layout->row_width),
                     (end - begin) * layout->row_width * 4);
        chunks.emplace_back(shard.ps, std::move(chunk));
      });
  auto fan = Fanout::Make(chunks.size(), std::move(done));
  for (auto& [ps, chunk_ptr] : chunks) {
    Chunk* chunk = chunk_ptr.release();
    calls_->Call<AssignRequest, AssignResponse>(
        ps, PsCalls::Addresses::kLayoutShards, &PsInterface::AssignAsync, &chunk->request,
        &chunk->response, calls_->Deadline(), [this, chunk, fan](const absl::Status& s) {
          buffers_.Put(std::move(*chunk->request.mutable_data()));
          delete chunk;
          fan->Finish(s);
        });
  }
}

}  // namespace shardps
