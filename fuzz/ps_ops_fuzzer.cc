// Fuzz target: sequences of ps operations against one ShardStore, driven by
// FuzzedDataProvider: shards created (dense or dynamic, any optimizer, ASYNC or SYNC) beside
// the fixture's (fuzz/ps_fixture.h), pulls and pushes of rows and row ranges (single and
// batched, with sync tags, base versions, generations, steps and repeated request ids),
// assigns, generations, holds, snapshots and their statuses, checkpoints written and
// restored (or re-initialized), shards dropped and listed. Each operation is made of
// well-formed values most of the time and of arbitrary ones otherwise, so that sequences
// reach deep into the store; every reply must be an answer, never a crash, and a successful
// pull must answer the bytes of the rows it asked for.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz/fuzz_files.h"
#include "fuzz/fuzzed_data_provider.h"
#include "fuzz/ps_fixture.h"
#include "proto/ps.pb.h"

namespace shardps {
namespace {

constexpr int kMaxOps = 48;

class Ops {
 public:
  Ops(FuzzedDataProvider& in, PsFixture& ps) : in_(in), ps_(ps) {}

  void Run() {
    for (int op = 0; op < kMaxOps && in_.remaining_bytes() > 0; ++op) {
      switch (in_.ConsumeIntegralInRange(0, 20)) {
        case 0: CreateShard(); break;
        case 1: { PullRequest r; FillPull(&r); ps_.Pull(r); break; }
        case 2: {
          PullBatchRequest r;
          for (int i = Small(0, 3); i > 0; --i) FillPull(r.add_pulls());
          ps_.PullBatch(r);
          break;
        }
        case 3: { PullRowsRequest r; FillPullRows(&r); ps_.PullRows(r); break; }
        case 4: {
          PullRowsBatchRequest r;
          for (int i = Small(0, 3); i > 0; --i) FillPullRows(r.add_pulls());
          ps_.PullRowsBatch(r);
          break;
        }
        case 5: case 6: { PushRequest r; FillPush(&r); ps_.Push(r); break; }
        case 7: PushBatch(); break;
        case 8: case 9: { PushRowsRequest r; FillPushRows(&r); ps_.PushRows(r); break; }
        case 10: {
          PushRowsBatchRequest r;
          for (int i = Small(0, 3); i > 0; --i) FillPushRows(r.add_pushes());
          ps_.PushRowsBatch(r);
          break;
        }
        case 11: Assign(); break;
        case 12: {
          SetGenerationRequest r;
          r.set_generation(Small(-1, 3));
          SetGenerationResponse response;
          (void)ps_.store().SetGeneration(r, &response);
          break;
        }
        case 13: {
          HoldPushesRequest r;
          r.set_generation(Small(0, 2));
          r.set_from_step(Small(-1, 4));
          r.set_timeout_ms(Small(0, 3));  // short: a held push is waited for
          HoldPushesResponse response;
          (void)ps_.store().HoldPushes(r, &response);
          break;
        }
        case 14: {
          SnapshotRequest r;
          r.set_checkpoint_id(Small(1, 4));
          r.set_generation(Small(0, 2));
          r.set_incremental_since(Small(0, 3));
          if (in_.ConsumeBool()) r.set_held_from_step(Small(-1, 4));
          ps_.Snapshot(r);
          break;
        }
        case 15: {
          SnapshotStatusRequest r;
          r.set_checkpoint_id(Small(0, 4));
          SnapshotStatusResponse response;
          (void)ps_.store().SnapshotStatus(r, &response);
          break;
        }
        case 16: CheckpointAndRestore(); break;
        case 17: {
          DropShardsRequest r;
          if (in_.ConsumeBool()) r.set_all(true);
          for (int i = Small(0, 2); i > 0; --i) r.add_variables(ShardName());
          DropShardsResponse response;
          (void)ps_.store().DropShards(r, &response);
          break;
        }
        case 18: {
          ListShardsRequest r;
          if (in_.ConsumeBool()) r.set_variable(ShardName());
          ListShardsResponse response;
          (void)ps_.store().ListShards(r, &response);
          break;
        }
        case 19: { HealthResponse response; ps_.store().Health(&response); break; }
        case 20: {
          CreateShardsRequest r;
          for (const ShardSpec& spec : FixtureShardSpecs()) *r.add_shards() = spec;
          CreateShardsResponse response;
          (void)ps_.store().CreateShards(r, &response);
          break;
        }
      }
    }
  }

 private:
  int Small(int lo, int hi) { return in_.ConsumeIntegralInRange(lo, hi); }

  // A row index or id: mostly small, sometimes anything.
  int64_t Row() {
    return in_.ConsumeProbability<float>() < 0.9f ? Small(-1, 9) : in_.ConsumeIntegral<int64_t>();
  }

  // Rows of [begin, end) (-1 when the difference does not fit an int64).
  static int64_t Rows(int64_t begin, int64_t end) {
    int64_t rows;
    return __builtin_sub_overflow(end, begin, &rows) ? -1 : rows;
  }

  std::string ShardName() {
    static const char* const kNames[] = {"dense", "sync", "stale", "scalar", "table",
                                         "ftrl",  "a",    "b",     "c",      ""};
    return kNames[Small(0, 9)];
  }

  // Floats for `rows` x `width`, mostly well-formed; sometimes a byte short or non-finite.
  std::string Floats(int64_t count) {
    std::string bytes;
    const int mode = Small(0, 9);
    if (count < 0 || count > 256) count = Small(0, 16);
    for (int64_t i = 0; i < count; ++i) {
      float f = static_cast<float>(Small(-100, 100)) / 16.0f;
      if (mode == 0) f = in_.ConsumeFloatingPoint<float>();
      bytes.append(reinterpret_cast<const char*>(&f), sizeof(f));
    }
    if (mode == 1 && !bytes.empty()) bytes.pop_back();
    return bytes;
  }

  void FillPull(PullRequest* r) {
    r->set_shard(ShardName());
    r->set_row_begin(Row());
    r->set_row_end(Row());
    if (in_.ConsumeBool()) {
      r->set_min_version(Small(0, 4));
      r->set_wait_timeout_ms(Small(0, 2));  // 0: until Shutdown, at the end
      r->set_exact_version(in_.ConsumeBool());
    }
  }

  void FillIds(google::protobuf::RepeatedField<int64_t>* ids, std::string* ids_bytes) {
    const bool raw = in_.ConsumeBool();
    for (int i = Small(0, 5); i > 0; --i) {
      const int64_t id = Row();
      if (raw) {
        ids_bytes->append(reinterpret_cast<const char*>(&id), sizeof(id));
      } else {
        ids->Add(id);
      }
    }
    if (raw && in_.ConsumeProbability<float>() < 0.1f) ids_bytes->push_back('x');
  }

  void FillPullRows(PullRowsRequest* r) {
    r->set_shard(ShardName());
    FillIds(r->mutable_ids(), r->mutable_ids_bytes());
    if (in_.ConsumeBool()) {
      r->set_min_version(Small(0, 4));
      r->set_wait_timeout_ms(Small(0, 2));
      r->set_exact_version(in_.ConsumeBool());
    }
  }

  // The common fields of a mutating request: a request id from a few (repeats are
  // duplicates), and sometimes a sync tag, generation, base version and step.
  template <typename Request>
  void FillUpdate(Request* r) {
    r->set_request_id(static_cast<uint64_t>(Small(0, 12)));
    r->set_shard(ShardName());
    if (in_.ConsumeBool()) {
      r->mutable_sync()->set_step(Small(-1, 4));
      r->mutable_sync()->set_replica(Small(-1, 2));
    }
    if (in_.ConsumeBool()) r->set_generation(Small(0, 3));
    if (in_.ConsumeBool()) r->set_base_version(Small(-1, 5));
    if (in_.ConsumeBool()) r->set_step(Small(-1, 4));
  }

  void FillPush(PushRequest* r) {
    FillUpdate(r);
    r->set_row_begin(Row());
    r->set_row_end(Row());
    const int64_t rows = Rows(r->row_begin(), r->row_end());
    r->set_data(Floats(rows > 0 && rows <= 16 ? rows * Small(1, 4) : Small(0, 40)));
  }

  void FillPushRows(PushRowsRequest* r) {
    FillUpdate(r);
    FillIds(r->mutable_ids(), r->mutable_ids_bytes());
    const int64_t ids = r->ids_size() + static_cast<int64_t>(r->ids_bytes().size() / 8);
    r->set_data(Floats(ids * Small(1, 4)));
  }

  void PushBatch() {
    PushBatchRequest r;
    for (int i = Small(0, 3); i > 0; --i) {
      PushRequest* item = r.add_pushes();
      FillPush(item);
      r.add_data_bytes(static_cast<int64_t>(item->data().size()) + (Small(0, 9) == 0 ? 1 : 0));
      r.mutable_data()->append(item->data());
      item->clear_data();
    }
    ps_.PushBatch(r);
  }

  void Assign() {
    AssignRequest r;
    r.set_request_id(static_cast<uint64_t>(Small(0, 12)));
    r.set_shard(ShardName());
    r.set_row_begin(Row());
    r.set_row_end(Row());
    const int64_t rows = Rows(r.row_begin(), r.row_end());
    r.set_data(Floats(rows > 0 && rows <= 16 ? rows * Small(1, 4) : Small(0, 40)));
    r.set_reset_slots(in_.ConsumeBool());
    if (in_.ConsumeBool()) r.set_generation(Small(0, 3));
    AssignResponse response;
    (void)ps_.store().Assign(r, &response);
  }

  void CreateShard() {
    ShardSpec s;
    const std::string name = ShardName();
    s.set_name(name);
    s.set_variable(in_.ConsumeBool() ? name : "");
    s.set_num_parts(Small(0, 2));
    const bool dynamic = Small(0, 3) == 0;
    const int64_t rows = dynamic ? 0 : Small(-1, 12);
    const int64_t width = Small(0, 6);
    for (int64_t d : {rows, width}) s.mutable_shape()->add_dim(d);
    for (int64_t d : {rows, width}) s.mutable_full_shape()->add_dim(d);
    s.mutable_initializer()->set_type(static_cast<InitializerSpec::Type>(Small(0, 6)));
    s.mutable_initializer()->set_seed(static_cast<uint64_t>(Small(0, 3)));
    OptimizerSpec* o = s.mutable_optimizer();
    o->set_type(static_cast<OptimizerSpec::Type>(Small(0, 6)));
    o->set_learning_rate(in_.ConsumeBool() ? 0.1 : in_.ConsumeFloatingPoint<double>());
    if (in_.ConsumeBool()) o->set_momentum(0.9);
    if (in_.ConsumeBool()) {
      o->set_decay_rate(0.5);
      o->set_decay_steps(Small(-1, 3));
    }
    if (in_.ConsumeBool()) {
      s.mutable_update()->set_mode(UpdateSpec::SYNC);
      s.mutable_update()->set_num_replicas(Small(0, 3));
      s.mutable_update()->set_replicas_to_aggregate(Small(0, 3));
    } else if (in_.ConsumeBool()) {
      s.mutable_update()->set_staleness_lr(UpdateSpec::INVERSE);
      s.mutable_update()->set_delay_compensation(Small(0, 2));
      s.mutable_update()->set_delay_compensation_adaptive(in_.ConsumeBool());
      s.mutable_update()->set_retained_versions(Small(0, 3));
    }
    if (dynamic) {
      DynamicSpec* d = s.mutable_dynamic();
      d->set_num_buckets(Small(0, 8));
      d->set_bucket_begin(Small(-1, 4));
      d->set_bucket_end(Small(0, 9));
      d->set_admit_after(Small(0, 3));
      d->set_ttl_steps(Small(0, 3));
      d->set_max_rows(Small(0, 4));
    }
    CreateShardsRequest r;
    r.set_request_id(static_cast<uint64_t>(Small(0, 3)));
    *r.add_shards() = s;
    CreateShardsResponse response;
    (void)ps_.store().CreateShards(r, &response);
  }

  void CheckpointAndRestore() {
    RestoreRequest r;
    r.set_generation(Small(0, 3));
    if (in_.ConsumeBool()) {
      absl::StatusOr<std::string> manifest = ps_.WriteCheckpoint(Small(5, 7), Small(0, 2));
      if (!manifest.ok()) return;
      r.set_manifest(*manifest);
    }
    for (int i = Small(0, 3); i > 0; --i) r.add_shards(ShardName());
    if (in_.ConsumeBool()) (*r.mutable_variable_map())[ShardName()] = ShardName();
    r.set_params_only(in_.ConsumeBool());
    RestoreResponse response;
    (void)ps_.store().Restore(r, &response);
  }

  FuzzedDataProvider& in_;
  PsFixture& ps_;
};

}  // namespace
}  // namespace shardps

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  shardps::PsFixture ps(shardps::FuzzTempDir());
  shardps::Ops(in, ps).Run();
  return 0;
}
