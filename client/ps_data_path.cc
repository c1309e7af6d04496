#include "client/ps_data_path.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/call_batches.h"
#include "client/row_chunks.h"
#include "client/variable_layout.h"
#include "client/versions_seen.h"
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

void PsDataPath::PullRowsManyAsync(std::vector<RowsPullTarget> targets, const PullOptions& options,
                                   PullVersions* versions, StatusCallback done) {
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
  std::vector<std::pair<int, PushRowsRequest>> items;
  for (const RowsPushSource& source : sources) {
    absl::Status built = AddRowPushes(source, options, &items);
    if (!built.ok()) {
      for (auto& [ps, item] : items) buffers_.Put(std::move(*item.mutable_data()));
      return done(built);
    }
  }
  struct Batch {
    PushRowsBatchRequest request;
    PushRowsBatchResponse response;
    int64_t bytes = 0;
  };
  CallBatches<Batch> batches(calls_->num_ps(), chunk_bytes());
  for (auto& [ps, item] : items) {
    // The rows are written: the request may move (its data string with it).
    Batch* batch = batches.For(ps, static_cast<int64_t>(item.data().size()));
    *batch->request.add_pushes() = std::move(item);
  }
  auto fan = Fanout::Make(batches.size(), std::move(done));
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
      [this](Batch* batch, const absl::Status& s) {
        for (PushRowsRequest& item : *batch->request.mutable_pushes()) {
          buffers_.Put(std::move(*item.mutable_data()));
        }
        return s;
      },
      std::move(fan));
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
