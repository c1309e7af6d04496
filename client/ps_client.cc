#include "client/ps_client.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <queue>
#include <thread>
#include <utility>

#include "absl/base/config.h"
#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/grpc_ps_interface.h"
#include "client/ps_call_error.h"
#include "client/row_chunks.h"
#include "ps_server/unique_ids.h"
#include "common/error_detail.h"
#include "common/fanout.h"
#include "common/status_macros.h"

namespace shardps {
namespace {

// Runs closures at a given time on one thread of its own: backoff for retries, without
// sleeping on an RPC completion thread.
class DelayQueue {
 public:
  DelayQueue() : thread_([this] { Loop(); }) {}
  ~DelayQueue() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }

  // fn(false) runs at `when`; fn(true) runs instead if the queue is destroyed first.
  void RunAt(absl::Time when, std::function<void(bool cancelled)> fn) {
    absl::MutexLock lock(&mu_);
    queue_.push(Item{when, seq_++, std::move(fn)});
  }

 private:
  struct Item {
    absl::Time when;
    uint64_t seq;
    std::function<void(bool)> fn;
    bool operator>(const Item& o) const {
      return when != o.when ? when > o.when : seq > o.seq;
    }
  };

  void Loop() {
    absl::MutexLock lock(&mu_);
    while (true) {
      absl::Time wake = queue_.empty() ? absl::Now() + absl::Milliseconds(100)
                                       : queue_.top().when;
      // Also wakes for an item added to run before `wake`, whose time is then waited for
      // (else a 1 ms backoff could wait out the 100 ms of an empty queue).
      auto ready = [this, &wake]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || (!queue_.empty() && (queue_.top().when <= absl::Now() ||
                                             queue_.top().when < wake));
      };
      mu_.AwaitWithDeadline(absl::Condition(&ready), wake);
      if (stop_) break;
      if (queue_.empty() || queue_.top().when > absl::Now()) continue;
      Item item = queue_.top();
      queue_.pop();
      mu_.Unlock();
      item.fn(false);
      mu_.Lock();
    }
    // Closures still queued on shutdown are told so: their calls fail as CANCELLED.
    while (!queue_.empty()) {
      Item item = queue_.top();
      queue_.pop();
      mu_.Unlock();
      item.fn(true);
      mu_.Lock();
    }
  }

  absl::Mutex mu_;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// Recycles the byte buffers that carry tensors in chunk messages (pulled and pushed bytes), so
// that repeated transfers reuse memory that is already allocated and faulted in: a fresh
// multi-MiB allocation per chunk costs the kernel a page fault and a page zeroing per 4 KiB,
// more than the copy into it. A pulled chunk is parsed into a recycled string (protobuf's
// parser keeps a string's capacity), a pushed chunk is copied into one. Keeps at most
// kMaxBytes of capacity; buffers too small to matter are not kept.
//
// Thread-safety: thread-safe.
class BufferPool {
 public:
  std::string Get() {
    absl::MutexLock lock(&mu_);
    if (free_.empty()) return std::string();
    std::string buffer = std::move(free_.back());
    free_.pop_back();
    bytes_ -= buffer.capacity();
    return buffer;
  }

  void Put(std::string buffer) {
    const size_t capacity = buffer.capacity();
    if (capacity < kMinBytes) return;
    absl::MutexLock lock(&mu_);
    if (bytes_ + capacity > kMaxBytes) return;  // freed after the lock is released
    bytes_ += capacity;
    free_.push_back(std::move(buffer));
  }

 private:
  static constexpr size_t kMinBytes = 64 << 10;
  static constexpr size_t kMaxBytes = size_t{128} << 20;

  absl::Mutex mu_;
  std::vector<std::string> free_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// The versions a pull's parts saw (PullVersions), gathered as the parts complete, on any
// thread.
class VersionsSeen {
 public:
  void Add(const std::string& shard, int64_t version) {
    absl::MutexLock lock(&mu_);
    min_ = std::min(min_, version);
    max_ = std::max(max_, version);
    auto [it, inserted] = shards_.emplace(shard, version);
    if (!inserted) it->second = std::min(it->second, version);
  }
  // REQUIRES: every part has completed.
  void Fill(PullVersions* out) {
    absl::MutexLock lock(&mu_);
    out->min_version = min_;
    out->max_version = max_;
    out->shards = std::move(shards_);
  }

 private:
  absl::Mutex mu_;
  int64_t min_ ABSL_GUARDED_BY(mu_) = INT64_MAX;
  int64_t max_ ABSL_GUARDED_BY(mu_) = INT64_MIN;
  std::map<std::string, int64_t> shards_ ABSL_GUARDED_BY(mu_);
};

// Groups the chunks of a pull or push by ps into batches of at most `max_bytes` (and at
// least one chunk) each: one call per ps for a step's many small shards, several calls in
// parallel for a large transfer. `Batch` has a `bytes` member.
template <typename Batch>
class Batches {
 public:
  Batches(int num_ps, int64_t max_bytes) : open_(static_cast<size_t>(num_ps)), max_(max_bytes) {}

  // The batch for a chunk of `bytes` bound for ps `ps`.
  Batch* For(int ps, int64_t bytes) {
    Batch*& open = open_[static_cast<size_t>(ps)];
    if (open == nullptr || (open->bytes > 0 && open->bytes + bytes > max_)) {
      all_.emplace_back(ps, std::make_unique<Batch>());
      open = all_.back().second.get();
    }
    open->bytes += bytes;
    return open;
  }

  size_t size() const { return all_.size(); }

  // Every batch with its ps, handing over their ownership.
  std::vector<std::pair<int, std::unique_ptr<Batch>>> Take() { return std::move(all_); }

 private:
  std::vector<Batch*> open_;
  std::vector<std::pair<int, std::unique_ptr<Batch>>> all_;
  const int64_t max_;
};

// Starts calls to each ps with at most `window` of them in flight per ps (0: no limit);
// each finished call starts the next one queued for its ps. A window serves one Pull or
// Push only, so calls of different operations never wait on each other (a pull waiting for a
// version could otherwise hold back the push that produces it).
//
// Thread-safety: thread-safe.
class CallWindow : public std::enable_shared_from_this<CallWindow> {
 public:
  // Runs a call; it must run `next` once, when the call has finished.
  using Call = std::function<void(std::function<void()> next)>;

  CallWindow(int num_ps, int window) : queues_(static_cast<size_t>(num_ps)), window_(window) {}

  void Add(int ps, Call call) { queues_[static_cast<size_t>(ps)].push_back(std::move(call)); }

  // Starts the first calls of every ps. Call once, after every Add.
  void Start() {
    for (size_t ps = 0; ps < queues_.size(); ++ps) {
      const size_t first = window_ <= 0 ? queues_[ps].size()
                                        : std::min(queues_[ps].size(), static_cast<size_t>(window_));
      for (size_t i = 0; i < first; ++i) StartNext(ps);
    }
  }

 private:
  void StartNext(size_t ps) {
    Call call;
    {
      absl::MutexLock lock(&mu_);
      if (queues_[ps].empty()) return;
      call = std::move(queues_[ps].front());
      queues_[ps].pop_front();
    }
    call([self = shared_from_this(), ps] { self->StartNext(ps); });
  }

  absl::Mutex mu_;
  std::vector<std::deque<Call>> queues_ ABSL_GUARDED_BY(mu_);
  const int window_;
};

// A DEADLINE_EXCEEDED that arrives this close to the call's deadline is the deadline's
// (gRPC's timer and absl::Now() read different clocks); one earlier is the ps's own answer.
constexpr absl::Duration kDeadlineSlack = absl::Milliseconds(5);

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

class PsClientImpl : public PsClient {
 public:
  PsClientImpl(std::vector<std::unique_ptr<PsInterface>> ps, const Options& options)
      : ps_(std::move(ps)), options_(options) {
    absl::BitGen gen;
    request_id_base_ = absl::Uniform<uint64_t>(gen) & ~uint64_t{0xffffffff};
  }

  int num_ps() const override { return static_cast<int>(ps_.size()); }
  using PsClient::SnapshotAll;

  absl::Status CreateVariables(const std::vector<VariableDef>& defs,
                               const Partitioner& partitioner, Placer* placer) override {
    std::vector<CreateShardsRequest> requests(ps_.size());
    std::vector<VariableLayout> layouts;
    for (const VariableDef& def : defs) {
      if (def.name.empty()) return absl::InvalidArgumentError("variable name is empty");
      for (size_t i = def.dynamic.has_value() ? 1 : 0; i < def.shape.size(); ++i) {
        if (def.shape[i] <= 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "variable \"", def.name, "\": shape[", i, "] is ", def.shape[i],
              "; dimensions must be positive"));
        }
      }
      if (def.dynamic.has_value()) {
        ASSIGN_OR_RETURN(VariableLayout layout, PlaceDynamic(def, &requests));
        layouts.push_back(std::move(layout));
        continue;
      }
      std::vector<ShardSlice> slices;
      if (def.shape.empty()) {
        slices.push_back(ShardSlice{def.name, 0, 1, 0, {}});
      } else {
        absl::StatusOr<int> n = partitioner.NumShards(def.shape, DataType::kFloat32);
        if (!n.ok()) return Annotate(n.status(), absl::StrCat("variable \"", def.name, "\""));
        ASSIGN_OR_RETURN(slices, SliceVariable(def.name, def.shape, *n));
      }
      VariableLayout layout = MakeLayout(def.name, def.shape);
      for (const ShardSlice& slice : slices) {
        ShardSpec spec;
        spec.set_name(slice.name);
        spec.set_variable(def.name);
        spec.set_part(slice.part);
        spec.set_num_parts(slice.num_parts);
        spec.set_row_offset(slice.row_offset);
        for (int64_t d : slice.shape) spec.mutable_shape()->add_dim(d);
        for (int64_t d : def.shape) spec.mutable_full_shape()->add_dim(d);
        *spec.mutable_initializer() = def.initializer;
        *spec.mutable_optimizer() = def.optimizer;
        *spec.mutable_update() = def.update;
        int64_t shard_rows = slice.shape.empty() ? 1 : slice.shape[0];
        int ps = placer->Place(shard_rows * layout.row_width * 4);
        if (ps < 0 || ps >= num_ps()) {
          return absl::InternalError(absl::StrCat("placer chose ps ", ps, " of ", num_ps()));
        }
        *requests[ps].add_shards() = spec;
        layout.shards.push_back({spec, ps, slice.row_offset, shard_rows});
      }
      layouts.push_back(std::move(layout));
    }
    std::vector<CreateShardsResponse> responses(ps_.size());
    absl::Notification done;
    absl::Status result;
    auto fan = Fanout::Make(num_ps(), [&](const absl::Status& s) {
      result = s;
      done.Notify();
    });
    for (int p = 0; p < num_ps(); ++p) {
      requests[p].set_request_id(NextRequestId());
      Call<CreateShardsRequest, CreateShardsResponse>(
          p, Addresses::kPs, &PsInterface::CreateShardsAsync, &requests[p], &responses[p],
          Deadline(),
          [fan](const absl::Status& s) { fan->Finish(s); });
    }
    done.WaitForNotification();
    RETURN_IF_ERROR(result);
    absl::MutexLock lock(&mu_);
    for (VariableLayout& layout : layouts) layouts_[layout.name] = std::move(layout);
    return absl::OkStatus();
  }

  absl::Status Discover() override {
    std::vector<ListShardsRequest> requests(ps_.size());
    std::vector<ListShardsResponse> responses(ps_.size());
    absl::Notification done;
    absl::Status result;
    auto fan = Fanout::Make(num_ps(), [&](const absl::Status& s) {
      result = s;
      done.Notify();
    });
    for (int p = 0; p < num_ps(); ++p) {
      Call<ListShardsRequest, ListShardsResponse>(
          p, Addresses::kPs, &PsInterface::ListShardsAsync, &requests[p], &responses[p],
          Deadline(),
          [fan](const absl::Status& s) { fan->Finish(s); });
    }
    done.WaitForNotification();
    RETURN_IF_ERROR(result);
    std::map<std::string, VariableLayout> layouts;
    for (int p = 0; p < num_ps(); ++p) {
      for (const ShardInfo& info : responses[p].shards()) {
        const ShardSpec& spec = info.spec();
        auto it = layouts.find(spec.variable());
        if (it == layouts.end()) {
          std::vector<int64_t> shape(spec.full_shape().dim().begin(),
                                     spec.full_shape().dim().end());
          it = layouts.emplace(spec.variable(), MakeLayout(spec.variable(), shape)).first;
        }
        if (spec.has_dynamic()) {
          it->second.dynamic = true;
          it->second.num_buckets = spec.dynamic().num_buckets();
          it->second.shards.push_back({spec, p, 0, 0,
                                       BucketRange{spec.dynamic().bucket_begin(),
                                                   spec.dynamic().bucket_end()}});
          continue;
        }
        int64_t rows = spec.shape().dim_size() == 0 ? 1 : spec.shape().dim(0);
        it->second.shards.push_back({spec, p, spec.row_offset(), rows});
      }
    }
    for (auto& [name, layout] : layouts) {
      if (layout.dynamic) {
        RETURN_IF_ERROR(CheckBucketsTiled(&layout));
        continue;
      }
      std::sort(layout.shards.begin(), layout.shards.end(),
                [](const VariableLayout::Shard& a, const VariableLayout::Shard& b) {
                  return a.row_offset < b.row_offset;
                });
      int64_t next = 0;
      for (const auto& shard : layout.shards) {
        if (shard.row_offset != next) {
          return absl::FailedPreconditionError(absl::StrCat(
              "variable \"", name, "\": shards do not tile its rows (expected a shard at row ",
              next, ", found \"", shard.spec.name(), "\" at row ", shard.row_offset,
              "); is a ps task missing?"));
        }
        next += shard.rows;
      }
      if (next != layout.rows) {
        return absl::FailedPreconditionError(absl::StrCat(
            "variable \"", name, "\": shards cover ", next, " of ", layout.rows,
            " rows; is a ps task missing?"));
      }
    }
    absl::MutexLock lock(&mu_);
    for (auto& [name, layout] : layouts) layouts_[name] = std::move(layout);
    return absl::OkStatus();
  }

  absl::StatusOr<VariableLayout> GetLayout(const std::string& name) const override {
    absl::MutexLock lock(&mu_);
    auto it = layouts_.find(name);
    if (it == layouts_.end()) {
      return absl::NotFoundError(absl::StrCat(
          "variable \"", name, "\" is not known to this client (create it or Discover())"));
    }
    return it->second;
  }

  std::vector<std::string> VariableNames() const override {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> names;
    for (const auto& [name, layout] : layouts_) names.push_back(name);
    return names;
  }

  void PullAsync(std::vector<PullTarget> targets, const PullOptions& options,
                 PullVersions* versions, StatusCallback done) override {
    struct Batch {
      PullBatchRequest request;
      PullBatchResponse response;
      std::vector<absl::Span<char>> outs;
      int64_t bytes = 0;
    };
    Batches<Batch> batches(num_ps(), options_.max_chunk_bytes);
    for (const PullTarget& target : targets) {
      absl::StatusOr<VariableLayout> layout = DenseLayout(target.name, "pull", target.out.size());
      if (!layout.ok()) return done(layout.status());
      ForEachChunk(*layout, [&](const VariableLayout::Shard& shard, int64_t begin,
                                int64_t end) {
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
    auto fan = Fanout::Make(batches.size(), [versions, seen, done](const absl::Status& s) {
      if (s.ok() && versions != nullptr) seen->Fill(versions);
      done(s);
    });
    IssueParts<Batch>(
        batches.Take(), options_.calls_in_flight_per_ps, Deadline() + options.wait_timeout,
        [](PsInterface* target, Batch* batch, absl::Time deadline, StatusCallback done) {
          target->PullBatchAsync(&batch->request, &batch->response, batch->outs, deadline,
                                 std::move(done));
        },
        [seen, versions](Batch* batch, const absl::Status& s) {
          if (!s.ok() || versions == nullptr) return s;
          const int n = std::min(batch->request.pulls_size(), batch->response.pulls_size());
          for (int i = 0; i < n; ++i) {
            seen->Add(batch->request.pulls(i).shard(), batch->response.pulls(i).version());
          }
          return s;
        },
        std::move(fan));
  }

  void PushAsync(std::vector<PushSource> sources, const PushOptions& options,
                 StatusCallback done) override {
    struct Batch {
      PushBatchRequest request;
      PushBatchResponse response;
      std::vector<absl::Span<const char>> data;  // in the caller's gradients, sent from there
      int64_t bytes = 0;
    };
    Batches<Batch> batches(num_ps(), options_.max_chunk_bytes);
    for (const PushSource& source : sources) {
      absl::StatusOr<VariableLayout> layout = DenseLayout(source.name, "push", source.grad.size());
      if (!layout.ok()) return done(layout.status());
      ForEachChunk(*layout, [&](const VariableLayout::Shard& shard, int64_t begin,
                                int64_t end) {
        const int64_t bytes = (end - begin) * layout->row_width * sizeof(float);
        Batch* batch = batches.For(shard.ps, bytes);
        PushRequest* item = batch->request.add_pushes();
        item->set_request_id(RequestId(options, source.name, shard.spec.name(), begin));
        item->set_shard(shard.spec.name());
        item->set_row_begin(begin);
        item->set_row_end(end);
        if (options.has_sync) *item->mutable_sync() = options.sync;
        item->set_generation(options.generation);
        item->set_base_version(BaseVersion(options, shard.spec.name()));
        const float* src = source.grad.data() + (shard.row_offset + begin) * layout->row_width;
        batch->data.push_back(absl::MakeConstSpan(reinterpret_cast<const char*>(src), bytes));
      });
    }
    auto fan = Fanout::Make(batches.size(), std::move(done));
    IssueParts<Batch>(
        batches.Take(), options_.calls_in_flight_per_ps, Deadline(),
        [](PsInterface* target, Batch* batch, absl::Time deadline, StatusCallback done) {
          target->PushBatchAsync(&batch->request, batch->data, &batch->response, deadline,
                                 std::move(done));
        },
        [](Batch*, const absl::Status& s) { return s; }, std::move(fan));
  }

  void PullRowsManyAsync(std::vector<RowsPullTarget> targets, const PullOptions& options,
                         PullVersions* versions, StatusCallback done) override {
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
    Batches<Batch> batches(num_ps(), options_.max_chunk_bytes);
    for (const RowsPullTarget& target : targets) {
      absl::StatusOr<VariableLayout> layout = GetLayout(target.name);
      if (!layout.ok()) return done(layout.status());
      const int64_t width = layout->row_width;
      if (static_cast<int64_t>(target.out.size()) !=
          static_cast<int64_t>(target.ids.size()) * width) {
        return done(absl::InvalidArgumentError(absl::StrCat(
            "variable \"", target.name, "\": row pull of ", target.ids.size(), " ids of width ",
            width, " needs ", target.ids.size() * width, " output floats, got ",
            target.out.size())));
      }
      const size_t row_bytes = static_cast<size_t>(width) * sizeof(float);
      absl::Status routed = RouteRows(
          *layout, target.ids, /*every_shard=*/false,
          [&](int shard, std::vector<int64_t> local, std::vector<int64_t> positions) {
            for (RowChunk& chunk : SplitRows(std::move(local), std::move(positions),
                                             MaxRows(width),
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
    auto fan = Fanout::Make(batches.size(), [versions, seen, done](const absl::Status& s) {
      if (s.ok() && versions != nullptr) seen->Fill(versions);
      done(s);
    });
    // All at once: a step's row batches are one per ps (and max_chunk_bytes), and small.
    IssueParts<Batch>(
        batches.Take(), /*window_size=*/0, Deadline() + options.wait_timeout,
        [](PsInterface* target, Batch* batch, absl::Time deadline, StatusCallback done) {
          if (batch->request.pulls_size() == 1) {  // a call of its own is cheaper
            batch->response.Clear();
            target->PullRowsIntoAsync(&batch->request.pulls(0), batch->response.add_pulls(),
                                      batch->outs, deadline, std::move(done));
            return;
          }
          target->PullRowsBatchIntoAsync(&batch->request, &batch->response, batch->outs,
                                         deadline, std::move(done));
        },
        [seen, versions](Batch* batch, const absl::Status& s) {
          if (!s.ok() || versions == nullptr) return s;
          const int n = std::min(batch->request.pulls_size(), batch->response.pulls_size());
          for (int i = 0; i < n; ++i) {
            seen->Add(batch->request.pulls(i).shard(), batch->response.pulls(i).version());
          }
          return s;
        },
        std::move(fan));
  }

  void PushRowsManyAsync(std::vector<RowsPushSource> sources, const PushOptions& options,
                         StatusCallback done) override {
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
    Batches<Batch> batches(num_ps(), options_.max_chunk_bytes);
    for (auto& [ps, item] : items) {
      // The rows are written: the request may move (its data string with it).
      Batch* batch = batches.For(ps, static_cast<int64_t>(item.data().size()));
      *batch->request.add_pushes() = std::move(item);
    }
    auto fan = Fanout::Make(batches.size(), std::move(done));
    IssueParts<Batch>(
        batches.Take(), /*window_size=*/0, Deadline(),
        [](PsInterface* target, Batch* batch, absl::Time deadline, StatusCallback done) {
          if (batch->request.pushes_size() == 1) {
            batch->response.Clear();
            target->PushRowsAsync(&batch->request.pushes(0), batch->response.add_pushes(),
                                  deadline, std::move(done));
            return;
          }
          target->PushRowsBatchAsync(&batch->request, &batch->response, deadline,
                                     std::move(done));
        },
        [this](Batch* batch, const absl::Status& s) {
          for (PushRowsRequest& item : *batch->request.mutable_pushes()) {
            buffers_.Put(std::move(*item.mutable_data()));
          }
          return s;
        },
        std::move(fan));
  }

  // Appends the row pushes of `source` to *items, each with its ps: one request per shard
  // chunk of at most max_chunk_bytes, or a SYNC replica's whole share of a shard as one
  // (even an empty one); duplicate ids summed here.
  absl::Status AddRowPushes(const RowsPushSource& source, const PushOptions& options,
                            std::vector<std::pair<int, PushRowsRequest>>* items) {
    ASSIGN_OR_RETURN(VariableLayout layout, GetLayout(source.name));
    const std::string& name = source.name;
    const absl::Span<const float> grads = source.grads;
    const int64_t width = layout.row_width;
    if (static_cast<int64_t>(grads.size()) != static_cast<int64_t>(source.ids.size()) * width) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable \"", name, "\": row push of ", source.ids.size(), " ids of width ", width,
          " needs ", source.ids.size() * width, " gradient floats, got ", grads.size()));
    }
    const int64_t max_rows = MaxRows(width);
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
            request.set_request_id(RequestId(options, name, target.spec.name(), -1 - c));
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
            float* row = reinterpret_cast<float*>(
                chunk_data[static_cast<size_t>(u / rows_per_chunk)] +
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

  void AssignAsync(const std::string& name, absl::Span<const float> values,
                   StatusCallback done) override {
    absl::StatusOr<VariableLayout> layout = DenseLayout(name, "assign", values.size());
    if (!layout.ok()) return done(layout.status());
    struct Chunk {
      AssignRequest request;
      AssignResponse response;
    };
    std::vector<std::pair<int, std::unique_ptr<Chunk>>> chunks;
    ForEachChunk(*layout, [&](const VariableLayout::Shard& shard, int64_t begin,
                              int64_t end) {
      auto chunk = std::make_unique<Chunk>();
      chunk->request.set_request_id(NextRequestId());
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
      Call<AssignRequest, AssignResponse>(ps, Addresses::kLayoutShards,
                                          &PsInterface::AssignAsync, &chunk->request,
                                          &chunk->response, Deadline(),
                                          [this, chunk, fan](const absl::Status& s) {
                                            buffers_.Put(
                                                std::move(*chunk->request.mutable_data()));
                                            delete chunk;
                                            fan->Finish(s);
                                          });
    }
  }

  absl::Status Health(std::vector<HealthResponse>* responses) override {
    std::vector<HealthRequest> requests(ps_.size());
    return AllPs<HealthRequest, HealthResponse>(&PsInterface::HealthAsync, requests, responses,
                                                options_.rpc_timeout);
  }

  absl::Status ShutdownAll(const std::string& reason) override {
    std::vector<ShutdownRequest> requests(ps_.size());
    for (auto& r : requests) r.set_reason(reason);
    std::vector<ShutdownResponse> responses;
    return AllPs<ShutdownRequest, ShutdownResponse>(&PsInterface::ShutdownAsync, requests,
                                                    &responses, options_.rpc_timeout);
  }

  void HealthEach(bool from_chief, absl::Duration timeout, std::vector<absl::Status>* statuses,
                  std::vector<HealthResponse>* responses) override {
    std::vector<HealthRequest> requests(ps_.size());
    for (auto& r : requests) r.set_from_chief(from_chief);
    EachPs<HealthRequest, HealthResponse>(&PsInterface::HealthAsync, requests, responses,
                                          timeout, /*max_attempts=*/1, statuses);
  }

  absl::Status SetGenerationAll(int64_t generation) override {
    std::vector<SetGenerationRequest> requests(ps_.size());
    for (auto& r : requests) r.set_generation(generation);
    std::vector<SetGenerationResponse> responses;
    return AllPs<SetGenerationRequest, SetGenerationResponse>(
        &PsInterface::SetGenerationAsync, requests, &responses, options_.rpc_timeout);
  }

  absl::Status DropShardsAll(const DropShardsRequest& request) override {
    std::vector<DropShardsRequest> requests(ps_.size(), request);
    std::vector<DropShardsResponse> responses;
    absl::Status status = AllPs<DropShardsRequest, DropShardsResponse>(
        &PsInterface::DropShardsAsync, requests, &responses, options_.rpc_timeout);
    // Whatever the outcome, some ps may have dropped them: the layouts are no longer known.
    absl::MutexLock lock(&mu_);
    if (request.all()) {
      layouts_.clear();
    } else {
      for (const std::string& variable : request.variables()) layouts_.erase(variable);
    }
    return status;
  }

  absl::Status SnapshotAll(int64_t checkpoint_id, const std::vector<std::string>& path_per_ps,
                           int64_t generation, int64_t incremental_since,
                           std::vector<SnapshotResponse>* responses) override {
    if (static_cast<int>(path_per_ps.size()) != num_ps()) {
      return absl::InvalidArgumentError(absl::StrCat("snapshot ", checkpoint_id, ": ",
                                                     path_per_ps.size(), " paths for ",
                                                     num_ps(), " ps tasks"));
    }
    std::vector<SnapshotRequest> requests(ps_.size());
    for (int p = 0; p < num_ps(); ++p) {
      requests[p].set_checkpoint_id(checkpoint_id);
      requests[p].set_path(path_per_ps[p]);
      requests[p].set_generation(generation);
      requests[p].set_incremental_since(incremental_since);
    }
    return AllPs<SnapshotRequest, SnapshotResponse>(&PsInterface::SnapshotAsync, requests,
                                                    responses, options_.rpc_timeout);
  }

  absl::Status SnapshotStatusAll(int64_t checkpoint_id,
                                 std::vector<SnapshotStatusResponse>* responses) override {
    std::vector<SnapshotStatusRequest> requests(ps_.size());
    for (auto& r : requests) r.set_checkpoint_id(checkpoint_id);
    return AllPs<SnapshotStatusRequest, SnapshotStatusResponse>(
        &PsInterface::SnapshotStatusAsync, requests, responses, options_.rpc_timeout);
  }

  absl::Status RestoreAll(const RestoreRequest& request,
                          std::vector<RestoreResponse>* responses) override {
    std::vector<RestoreRequest> requests(ps_.size(), request);
    return AllPs<RestoreRequest, RestoreResponse>(&PsInterface::RestoreAsync, requests,
                                                  responses, options_.restore_timeout);
  }

 private:
  template <typename Req, typename Resp>
  using Method = void (PsInterface::*)(const Req*, Resp*, absl::Time, StatusCallback);

  // What a call addresses, for the typed detail of its failure (client/ps_call_error.h):
  // the ps itself, or shards the layout places on it (NOT_FOUND then means it lost them).
  enum class Addresses { kPs, kLayoutShards };

  // An operation's parts, each with the ps it goes to.
  template <typename Part>
  using Parts = std::vector<std::pair<int, std::unique_ptr<Part>>>;

  // Sends every part to its ps (with retries; they address layout shards), at most `window`
  // of them to a ps at once (0: all). When a part's call is back,
  // complete(part, status) gives the part's final status (it may check or copy out the
  // reply, and release buffers); then the part is freed and `fan` told.
  template <typename Part>
  void IssueParts(Parts<Part> parts, int window_size, absl::Time deadline,
                  std::function<void(PsInterface*, Part*, absl::Time, StatusCallback)> issue,
                  std::function<absl::Status(Part*, const absl::Status&)> complete,
                  std::shared_ptr<Fanout> fan) {
    auto window = std::make_shared<CallWindow>(num_ps(), window_size);
    for (auto& [ps, owned] : parts) {
      Part* part = owned.release();
      window->Add(ps, [this, ps = ps, part, deadline, issue, complete,
                       fan](std::function<void()> next) {
        CallWithRetries(
            ps, Addresses::kLayoutShards,
            [issue, part](PsInterface* target, absl::Time deadline, StatusCallback done) {
              issue(target, part, deadline, std::move(done));
            },
            deadline, options_.max_attempts,
            [part, complete, fan, next = std::move(next)](const absl::Status& s) {
              next();
              absl::Status status = complete(part, s);
              delete part;
              fan->Finish(status);
            });
      });
    }
    window->Start();
  }

  // Issues one RPC to a ps task: issue(target, deadline, done).
  using Issue = std::function<void(PsInterface* target, absl::Time deadline, StatusCallback done)>;

  // Issues one RPC to ps `ps`, retrying UNAVAILABLE with exponential backoff (same request,
  // so the same request id) until max_attempts or the deadline. The final error names the
  // ps and carries a typed detail (PsCallError).
  void CallWithRetries(int ps, Addresses addresses, Issue issue, absl::Time deadline,
                       int max_attempts, StatusCallback done, int attempt = 1) {
    PsInterface* target = ps_[ps].get();
    Issue again = issue;  // kept for a retry
    issue(target, deadline,
          [this, ps, addresses, issue = std::move(again), deadline, max_attempts,
           done = std::move(done), attempt](const absl::Status& s) mutable {
            if (s.code() == absl::StatusCode::kUnavailable && attempt < max_attempts) {
              absl::Duration backoff = options_.initial_backoff;
              for (int i = 1; i < attempt && backoff < options_.max_backoff; ++i) backoff *= 2;
              backoff = std::min(backoff, options_.max_backoff);
              absl::Time when = absl::Now() + backoff;
              if (when < deadline) {
                retries_.RunAt(when, [this, ps, addresses, issue = std::move(issue), deadline,
                                      max_attempts, done = std::move(done),
                                      attempt](bool cancelled) mutable {
                  if (cancelled) {
                    done(absl::CancelledError(
                        absl::StrCat(ps_[ps]->name(), ": client shut down during retry")));
                    return;
                  }
                  CallWithRetries(ps, addresses, std::move(issue), deadline, max_attempts,
                                  std::move(done), attempt + 1);
                });
                return;
              }
            }
            PsCall call;
            call.ps_task = ps;
            call.ps_name = ps_[ps]->name();
            call.layout_shards = addresses == Addresses::kLayoutShards;
            call.deadline_passed = absl::Now() >= deadline - kDeadlineSlack;
            done(PsCallError(s, call));
          });
  }

  template <typename Req, typename Resp>
  void Call(int ps, Addresses addresses, Method<Req, Resp> method, const Req* request,
            Resp* response, absl::Time deadline, StatusCallback done) {
    CallWithRetries(
        ps, addresses,
        [method, request, response](PsInterface* target, absl::Time deadline,
                                    StatusCallback done) {
          (target->*method)(request, response, deadline, std::move(done));
        },
        deadline, options_.max_attempts, std::move(done));
  }

  // Calls `method` on every ps at once, requests[k] to ps k, each call with its own deadline
  // `timeout` from now, and waits for all: (*statuses)[k] and (*responses)[k] are ps k's.
  template <typename Req, typename Resp>
  void EachPs(Method<Req, Resp> method, const std::vector<Req>& requests,
              std::vector<Resp>* responses, absl::Duration timeout, int max_attempts,
              std::vector<absl::Status>* statuses) {
    responses->assign(ps_.size(), Resp());
    statuses->assign(ps_.size(), absl::OkStatus());
    absl::Notification done;
    auto fan = Fanout::Make(ps_.size(), [&done](const absl::Status&) { done.Notify(); });
    const absl::Time deadline = absl::Now() + timeout;
    for (int p = 0; p < num_ps(); ++p) {
      CallWithRetries(
          p, Addresses::kPs,
          [method, request = &requests[p], response = &(*responses)[p]](
              PsInterface* target, absl::Time deadline, StatusCallback done) {
            (target->*method)(request, response, deadline, std::move(done));
          },
          deadline, max_attempts,
          [fan, status = &(*statuses)[p]](const absl::Status& s) {
            *status = s;  // each ps its own element; the fan orders it before the wait ends
            fan->Finish(s);
          });
    }
    done.WaitForNotification();
  }

  // EachPs with the client's retries, answering OK or the failure of the lowest task.
  template <typename Req, typename Resp>
  absl::Status AllPs(Method<Req, Resp> method, const std::vector<Req>& requests,
                     std::vector<Resp>* responses, absl::Duration timeout) {
    std::vector<absl::Status> statuses;
    EachPs(method, requests, responses, timeout, options_.max_attempts, &statuses);
    for (const absl::Status& s : statuses) RETURN_IF_ERROR(s);
    return absl::OkStatus();
  }

  static VariableLayout MakeLayout(const std::string& name, const std::vector<int64_t>& shape) {
    VariableLayout layout;
    layout.name = name;
    layout.shape = shape;
    if (shape.size() == 2 && shape[0] == 0) {  // a dynamic table: [0, dim]
      layout.row_width = shape[1];
      return layout;
    }
    layout.num_elements = NumElements(shape);
    layout.rows = shape.empty() ? 1 : shape[0];
    layout.row_width = layout.num_elements / layout.rows;
    return layout;
  }

  // A dynamic table's shards: shard i on ps i, holding the i-th run of its buckets.
  absl::StatusOr<VariableLayout> PlaceDynamic(const VariableDef& def,
                                              std::vector<CreateShardsRequest>* requests) const {
    const DynamicTableDef& d = *def.dynamic;
    const std::string where = absl::StrCat("dynamic table \"", def.name, "\": ");
    if (def.shape.size() != 2 || def.shape[0] != 0 || def.shape[1] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "shape must be [0, dim] with dim > 0, got [", absl::StrJoin(def.shape, ","),
          "]"));
    }
    if (d.num_buckets < num_ps()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "num_buckets ", d.num_buckets, " is below the ", num_ps(),
          " ps tasks it is spread over"));
    }
    if (d.max_rows < 0 || d.ttl_steps < 0 || d.admit_after < 0 || d.admit_after > 255) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "max_rows (", d.max_rows, ") and ttl_steps (", d.ttl_steps,
          ") must be >= 0 and admit_after (", d.admit_after, ") in [0, 255]"));
    }
    VariableLayout layout = MakeLayout(def.name, def.shape);
    layout.dynamic = true;
    layout.num_buckets = d.num_buckets;
    const std::vector<BucketRange> ranges = SplitBuckets(d.num_buckets, num_ps());
    for (int p = 0; p < num_ps(); ++p) {
      ShardSpec spec;
      spec.set_name(num_ps() == 1 ? def.name : absl::StrCat(def.name, "/part_", p));
      spec.set_variable(def.name);
      spec.set_part(p);
      spec.set_num_parts(num_ps());
      for (int64_t dim : def.shape) {
        spec.mutable_shape()->add_dim(dim);
        spec.mutable_full_shape()->add_dim(dim);
      }
      *spec.mutable_initializer() = def.initializer;
      *spec.mutable_optimizer() = def.optimizer;
      *spec.mutable_update() = def.update;
      DynamicSpec* dyn = spec.mutable_dynamic();
      dyn->set_num_buckets(d.num_buckets);
      dyn->set_bucket_begin(ranges[p].begin);
      dyn->set_bucket_end(ranges[p].end);
      dyn->set_admit_after(d.admit_after);
      dyn->set_ttl_steps(d.ttl_steps);
      // The table's budget in shares of its buckets, rounded up (no shard gets 0: no budget).
      dyn->set_max_rows(d.max_rows == 0 ? 0
                                        : (d.max_rows * (ranges[p].end - ranges[p].begin) +
                                           d.num_buckets - 1) / d.num_buckets);
      *(*requests)[p].add_shards() = spec;
      layout.shards.push_back({spec, p, 0, 0, ranges[p]});
    }
    return layout;
  }

  // A discovered dynamic table's shards, sorted, must hold every bucket exactly once.
  static absl::Status CheckBucketsTiled(VariableLayout* layout) {
    std::sort(layout->shards.begin(), layout->shards.end(),
              [](const VariableLayout::Shard& a, const VariableLayout::Shard& b) {
                return a.buckets.begin < b.buckets.begin;
              });
    int32_t next = 0;
    for (const auto& shard : layout->shards) {
      if (shard.buckets.begin != next ||
          shard.spec.dynamic().num_buckets() != layout->num_buckets) {
        return absl::FailedPreconditionError(absl::StrCat(
            "dynamic table \"", layout->name, "\": shards do not tile its ",
            layout->num_buckets, " buckets (expected a shard from bucket ", next, ", found \"",
            shard.spec.name(), "\" holding [", shard.buckets.begin, ", ", shard.buckets.end,
            ") of ", shard.spec.dynamic().num_buckets(), "); is a ps task missing?"));
      }
      next = shard.buckets.end;
    }
    if (next != layout->num_buckets) {
      return absl::FailedPreconditionError(absl::StrCat(
          "dynamic table \"", layout->name, "\": shards hold buckets [0, ", next, ") of ",
          layout->num_buckets, "; is a ps task missing?"));
    }
    return absl::OkStatus();
  }

  // Calls fn(shard, row_begin, row_end) for every chunk of every shard, rows relative to
  // the shard, each chunk at most max_chunk_bytes (and at least one row).
  template <typename Fn>
  void ForEachChunk(const VariableLayout& layout, Fn fn) const {
    int64_t row_bytes = layout.row_width * 4;
    int64_t rows_per_chunk = std::max<int64_t>(1, options_.max_chunk_bytes / row_bytes);
    for (const VariableLayout::Shard& shard : layout.shards) {
      for (int64_t begin = 0; begin < shard.rows; begin += rows_per_chunk) {
        fn(shard, begin, std::min(shard.rows, begin + rows_per_chunk));
      }
    }
  }

  // Groups ids by shard: fn(shard index, ids local to the shard, positions in `ids`), for
  // each shard that has ids, or for every shard when `every_shard`.
  template <typename Fn>
  absl::Status RouteRows(const VariableLayout& layout, absl::Span<const int64_t> ids,
                         bool every_shard, Fn fn) const {
    std::vector<std::vector<int64_t>> local(layout.shards.size());
    std::vector<std::vector<int64_t>> positions(layout.shards.size());
    // Random ids spread evenly: room for a fair share and some, so that few vectors regrow.
    const size_t share = ids.size() / layout.shards.size() + ids.size() / 16 + 16;
    for (size_t s = 0; s < layout.shards.size(); ++s) {
      local[s].reserve(share);
      positions[s].reserve(share);
    }
    if (layout.dynamic) {
      // Keys stay keys: the ps finds their rows. Shards are in bucket order.
      for (size_t i = 0; i < ids.size(); ++i) {
        const int32_t bucket = BucketOf(ids[i], layout.num_buckets);
        auto it = std::upper_bound(
            layout.shards.begin(), layout.shards.end(), bucket,
            [](int32_t b, const VariableLayout::Shard& s) { return b < s.buckets.begin; });
        const size_t shard = (it - layout.shards.begin()) - 1;
        local[shard].push_back(ids[i]);
        positions[shard].push_back(i);
      }
    }
    for (size_t i = 0; !layout.dynamic && i < ids.size(); ++i) {
      int64_t id = ids[i];
      if (id < 0 || id >= layout.rows) {
        return absl::InvalidArgumentError(absl::StrCat(
            "variable \"", layout.name, "\": row id ", id, " at position ", i,
            " is out of range [0, ", layout.rows, ")"));
      }
      // Shards are in row order: the last one whose offset is <= id.
      auto it = std::upper_bound(
          layout.shards.begin(), layout.shards.end(), id,
          [](int64_t v, const VariableLayout::Shard& s) { return v < s.row_offset; });
      size_t shard = (it - layout.shards.begin()) - 1;
      local[shard].push_back(id - layout.shards[shard].row_offset);
      positions[shard].push_back(i);
    }
    for (size_t s = 0; s < layout.shards.size(); ++s) {
      if (every_shard || !local[s].empty()) fn(s, std::move(local[s]), std::move(positions[s]));
    }
    return absl::OkStatus();
  }

  // A request's row ids in their raw form (PullRowsRequest.ids_bytes,
  // PushRowsRequest.ids_bytes): little-endian int64s, copied as they lie. The transport turns
  // them into the packed `ids` field for a ps that does not read ids_bytes.
  static void SetRowIds(absl::Span<const int64_t> ids, std::string* bytes) {
    static_assert(ABSL_IS_LITTLE_ENDIAN, "ids_bytes holds little-endian int64s");
    bytes->assign(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int64_t));
  }

  // Rows of `width` floats in one request of at most max_chunk_bytes (at least one).
  int64_t MaxRows(int64_t width) const {
    return std::max<int64_t>(1, options_.max_chunk_bytes /
                                    (width * static_cast<int64_t>(sizeof(float))));
  }

  // The layout of a variable for a whole-variable `what` (pull, push, assign) of `floats`
  // values; NOT_FOUND for an unknown variable, INVALID_ARGUMENT for a wrong size.
  absl::StatusOr<VariableLayout> DenseLayout(const std::string& name, const char* what,
                                             size_t floats) const {
    absl::StatusOr<VariableLayout> layout = GetLayout(name);
    if (layout.ok() && layout->dynamic) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable \"", layout->name, "\" is a dynamic table: it has no whole value to ", what,
          "; read and write it by key (PullRowsAsync, PushRowsAsync)"));
    }
    if (layout.ok() && static_cast<int64_t>(floats) != layout->num_elements) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable \"", layout->name, "\": ", what, " needs ", layout->num_elements,
          " floats (shape [", absl::StrJoin(layout->shape, ","), "]), got ", floats));
    }
    return layout;
  }

  absl::Time Deadline() const { return absl::Now() + options_.rpc_timeout; }

  // The base version a push to `shard` carries (PushOptions::base_versions; 0: unknown).
  static int64_t BaseVersion(const PushOptions& options, const std::string& shard) {
    if (options.base_versions == nullptr) return 0;
    auto it = options.base_versions->shards.find(shard);
    return it == options.base_versions->shards.end() ? 0 : it->second;
  }

  // A fresh id, or one derived from the caller's idempotency key and what the request covers.
  uint64_t RequestId(const PushOptions& options, const std::string& variable,
                     const std::string& shard, int64_t row_begin) {
    if (options.idempotency_key == 0) return NextRequestId();
    // A hash that is the same in every process (absl::Hash is seeded per process): a step
    // re-run by another worker must produce the same ids for the ps to recognise it.
    uint64_t h = 14695981039346656037ull;  // FNV-1a
    auto mix = [&h](const void* data, size_t n) {
      const unsigned char* p = static_cast<const unsigned char*>(data);
      for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    };
    mix(&options.idempotency_key, sizeof(options.idempotency_key));
    mix(variable.data(), variable.size() + 1);  // with the terminating NUL as a separator
    mix(shard.data(), shard.size() + 1);
    mix(&row_begin, sizeof(row_begin));
    // SplitMix64 finalizer spreads FNV's weak high bits.
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h == 0 ? 1 : h;
  }

  uint64_t NextRequestId() {
    return request_id_base_ | (next_request_.fetch_add(1, std::memory_order_relaxed) + 1);
  }

  const std::vector<std::unique_ptr<PsInterface>> ps_;
  const Options options_;
  uint64_t request_id_base_ = 0;
  std::atomic<uint64_t> next_request_{0};
  mutable absl::Mutex mu_;
  std::map<std::string, VariableLayout> layouts_ ABSL_GUARDED_BY(mu_);
  BufferPool buffers_;
  DelayQueue retries_;  // last: destroyed first, flushing pending retries
};

absl::Status Wait(const std::function<void(StatusCallback)>& start) {
  absl::Notification done;
  absl::Status result;
  start([&](const absl::Status& s) {
    result = s;
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Create(
    std::vector<std::unique_ptr<PsInterface>> ps, const Options& options) {
  if (ps.empty()) return absl::InvalidArgumentError("PsClient needs at least one ps task");
  for (size_t i = 0; i < ps.size(); ++i) {
    if (ps[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("ps task ", i, " is null"));
    }
  }
  if (options.max_chunk_bytes < 4) {
    return absl::InvalidArgumentError("PsClient::Options.max_chunk_bytes must be >= 4");
  }
  if (options.max_attempts < 1) {
    return absl::InvalidArgumentError("PsClient::Options.max_attempts must be >= 1");
  }
  if (options.restore_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("PsClient::Options.restore_timeout must be positive");
  }
  return std::unique_ptr<PsClient>(new PsClientImpl(std::move(ps), options));
}

absl::Status PsClient::Pull(const std::string& name, absl::Span<float> out,
                            const PullOptions& options, PullVersions* versions) {
  return PullMany({PullTarget{name, out}}, options, versions);
}

absl::Status PsClient::PullMany(std::vector<PullTarget> targets, const PullOptions& options,
                                PullVersions* versions) {
  return Wait([&](StatusCallback done) {
    PullAsync(std::move(targets), options, versions, std::move(done));
  });
}

absl::Status PsClient::Push(const std::string& name, absl::Span<const float> grad,
                            const PushOptions& options) {
  return PushMany({PushSource{name, grad}}, options);
}

absl::Status PsClient::PushMany(std::vector<PushSource> sources, const PushOptions& options) {
  return Wait(
      [&](StatusCallback done) { PushAsync(std::move(sources), options, std::move(done)); });
}

absl::Status PsClient::PullRows(const std::string& name, absl::Span<const int64_t> ids,
                                absl::Span<float> out, const PullOptions& options,
                                PullVersions* versions) {
  return Wait([&](StatusCallback done) {
    PullRowsAsync(name, ids, out, options, versions, std::move(done));
  });
}

absl::Status PsClient::PushRows(const std::string& name, absl::Span<const int64_t> ids,
                                absl::Span<const float> grads, const PushOptions& options) {
  return Wait(
      [&](StatusCallback done) { PushRowsAsync(name, ids, grads, options, std::move(done)); });
}

absl::Status PsClient::PullRowsMany(std::vector<RowsPullTarget> targets,
                                    const PullOptions& options, PullVersions* versions) {
  return Wait([&](StatusCallback done) {
    PullRowsManyAsync(std::move(targets), options, versions, std::move(done));
  });
}

absl::Status PsClient::PushRowsMany(std::vector<RowsPushSource> sources,
                                    const PushOptions& options) {
  return Wait([&](StatusCallback done) {
    PushRowsManyAsync(std::move(sources), options, std::move(done));
  });
}

absl::Status PsClient::Assign(const std::string& name, absl::Span<const float> values) {
  return Wait([&](StatusCallback done) { AssignAsync(name, values, std::move(done)); });
}

absl::StatusOr<std::unique_ptr<PsClient>> NewGrpcPsClient(
    const std::vector<std::string>& ps_addresses, const PsClient::Options& options,
    int connections_per_ps) {
  std::vector<std::unique_ptr<PsInterface>> ps;
  for (size_t i = 0; i < ps_addresses.size(); ++i) {
    ps.push_back(NewGrpcPsInterface(absl::StrCat("ps:", i, " (", ps_addresses[i], ")"),
                                    ps_addresses[i], connections_per_ps));
  }
  return PsClient::Create(std::move(ps), options);
}

}  // namespace shardps
