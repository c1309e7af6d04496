// The ps fuzz targets' fixture (ps_fixture.h).
#include "fuzz/ps_fixture.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "checkpoint/manifest.h"
#include "math/optimizer.h"

namespace shardps {
namespace {

ShardSpec Dense(const std::string& name, std::vector<int64_t> shape, OptimizerSpec::Type type) {
  ShardSpec s;
  s.set_name(name);
  s.set_variable(name);
  s.set_num_parts(1);
  for (int64_t d : shape) {
    s.mutable_shape()->add_dim(d);
    s.mutable_full_shape()->add_dim(d);
  }
  s.mutable_initializer()->set_type(InitializerSpec::RANDOM_UNIFORM);
  s.mutable_initializer()->set_seed(7);
  s.mutable_optimizer()->set_type(type);
  s.mutable_optimizer()->set_learning_rate(0.1);
  return s;
}

// Aborts with the request and what is wrong with the reply (a bug, not a bad input).
[[noreturn]] void BadReply(const google::protobuf::Message& request, absl::string_view why) {
  std::fprintf(stderr, "%.*s\nrequest: %s\n", static_cast<int>(why.size()), why.data(),
               request.ShortDebugString().c_str());
  std::abort();
}

int64_t Elements(const TensorShape& shape) {
  int64_t n = 1;
  for (int64_t d : shape.dim()) n *= d;
  return n;
}

}  // namespace

std::vector<ShardSpec> FixtureShardSpecs() {
  std::vector<ShardSpec> specs;
  specs.push_back(Dense("dense", {8, 4}, OptimizerSpec::ADAM));
  ShardSpec sync = Dense("sync", {4, 2}, OptimizerSpec::SGD);
  sync.mutable_update()->set_mode(UpdateSpec::SYNC);
  sync.mutable_update()->set_num_replicas(2);
  specs.push_back(sync);
  ShardSpec stale = Dense("stale", {6, 3}, OptimizerSpec::MOMENTUM);
  stale.mutable_optimizer()->set_momentum(0.9);
  stale.mutable_update()->set_staleness_lr(UpdateSpec::INVERSE);
  stale.mutable_update()->set_delay_compensation(0.5);
  stale.mutable_update()->set_retained_versions(3);
  specs.push_back(stale);
  specs.push_back(Dense("scalar", {}, OptimizerSpec::SGD));
  ShardSpec table = Dense("table", {0, 4}, OptimizerSpec::ADAGRAD);
  DynamicSpec* dynamic = table.mutable_dynamic();
  dynamic->set_num_buckets(16);
  dynamic->set_bucket_begin(0);
  dynamic->set_bucket_end(16);
  dynamic->set_admit_after(2);
  dynamic->set_max_rows(32);
  dynamic->set_ttl_steps(50);
  specs.push_back(table);
  ShardSpec ftrl = Dense("ftrl", {5, 2}, OptimizerSpec::FTRL);
  ftrl.mutable_optimizer()->set_decay_rate(0.5);
  ftrl.mutable_optimizer()->set_decay_steps(3);
  specs.push_back(ftrl);
  return specs;
}

PsFixture::PsFixture(std::string dir) : dir_(std::move(dir)) {
  ShardStore::Options options;
  options.memory_budget_bytes = int64_t{64} << 20;
  options.max_reply_bytes = int64_t{4} << 20;
  options.request_id_window = 32;
  options.incarnation = 1;
  absl::StatusOr<std::unique_ptr<ShardStore>> store = ShardStore::Create(options);
  if (!store.ok()) BadReply(CreateShardsRequest(), store.status().ToString());
  store_ = *std::move(store);
  CreateShardsRequest request;
  request.set_request_id(1);
  for (const ShardSpec& spec : FixtureShardSpecs()) *request.add_shards() = spec;
  CreateShardsResponse response;
  const absl::Status status = store_->CreateShards(request, &response);
  if (!status.ok()) BadReply(request, status.ToString());
}

PsFixture::~PsFixture() {
  store_->Shutdown();
  for (const auto& done : pending_) done->WaitForNotification();
  store_.reset();
}

std::shared_ptr<absl::Notification> PsFixture::NewPending() {
  pending_.push_back(std::make_shared<absl::Notification>());
  return pending_.back();
}

void PsFixture::Admit(std::optional<int64_t> step, std::function<void()> apply) {
  absl::Notification applied;
  store_->AdmitPush(step, [&] {
    apply();
    applied.Notify();
  });
  applied.WaitForNotification();
}

void PsFixture::Pull(const PullRequest& request) {
  struct Call {
    PullRequest request;
    PullResponse response;
    PulledBytes pulled;
  };
  auto call = std::make_shared<Call>();
  call->request = request;
  auto done = NewPending();
  store_->Pull(call->request, &call->response, &call->pulled, [call, done](const absl::Status& s) {
    if (s.ok()) {
      int64_t bytes = 0;
      for (absl::string_view piece : call->pulled.pieces) {
        bytes += static_cast<int64_t>(piece.size());
      }
      if (!call->response.data().empty() || bytes != 4 * Elements(call->response.shape())) {
        BadReply(call->request, absl::StrCat("a pull answered ", bytes, " bytes for shape ",
                                             call->response.shape().ShortDebugString()));
      }
    }
    done->Notify();
  });
}

void PsFixture::PullBatch(const PullBatchRequest& request) {
  struct Call {
    PullBatchRequest request;
    std::vector<PullResponse> responses;
    std::vector<PulledBytes> pulled;
  };
  auto call = std::make_shared<Call>();
  call->request = request;
  auto done = NewPending();
  store_->PullBatch(call->request, &call->responses, &call->pulled,
                    [call, done](const absl::Status& s) {
                      if (s.ok() && (call->responses.size() !=
                                         static_cast<size_t>(call->request.pulls_size()) ||
                                     call->pulled.size() != call->responses.size())) {
                        BadReply(call->request, "a pull batch answered another number of items");
                      }
                      done->Notify();
                    });
}

void PsFixture::PullRows(const PullRowsRequest& request) {
  struct Call {
    PullRowsRequest request;
    PullRowsResponse response;
  };
  auto call = std::make_shared<Call>();
  call->request = request;
  auto done = NewPending();
  store_->PullRows(call->request, &call->response, [call, done](const absl::Status& s) {
    const size_t ids = static_cast<size_t>(call->request.ids_size()) +
                       call->request.ids_bytes().size() / sizeof(int64_t);
    if (s.ok() && (ids == 0) != call->response.data().empty()) {
      BadReply(call->request, absl::StrCat("a row pull of ", ids, " ids answered ",
                                           call->response.data().size(), " bytes"));
    }
    done->Notify();
  });
}

void PsFixture::PullRowsBatch(const PullRowsBatchRequest& request) {
  struct Call {
    PullRowsBatchRequest request;
    std::vector<PullRowsResponse> responses;
    std::vector<PullRowsResponse*> items;
  };
  auto call = std::make_shared<Call>();
  call->request = request;
  call->responses.resize(static_cast<size_t>(request.pulls_size()));
  for (PullRowsResponse& r : call->responses) call->items.push_back(&r);
  auto done = NewPending();
  store_->PullRowsBatch(call->request, call->items, [call, done](const absl::Status&) {
    done->Notify();
  });
}

void PsFixture::Push(const PushRequest& request) {
  Admit(request.has_step() ? std::optional<int64_t>(request.step()) : std::nullopt, [&] {
    PushResponse response;
    (void)store_->Push(request, &response);
  });
}

void PsFixture::PushBatch(const PushBatchRequest& request) {
  // As the service parses it: the request without its bytes, and the bytes in pieces.
  PushBatchRequest header = request;
  header.clear_data();
  const absl::string_view data = request.data();
  const size_t split = std::min<size_t>(data.size(), 5);
  const absl::string_view pieces[] = {data.substr(0, split), data.substr(split)};
  Admit(JobStepOf(header.pushes_size() > 0 ? header.pushes(0) : PushRequest()), [&] {
    PushBatchResponse response;
    (void)store_->PushBatch(header, pieces, &response);
  });
}

void PsFixture::PushRows(const PushRowsRequest& request) {
  Admit(JobStepOf(request), [&] {
    PushRowsResponse response;
    (void)store_->PushRows(request, &response);
  });
}

void PsFixture::PushRowsBatch(const PushRowsBatchRequest& request) {
  Admit(JobStepOf(request.pushes_size() > 0 ? request.pushes(0) : PushRowsRequest()), [&] {
    PushRowsBatchResponse response;
    (void)store_->PushRowsBatch(request, &response);
  });
}

void PsFixture::Snapshot(SnapshotRequest request) {
  request.set_path(absl::StrCat(dir_, "/snapshot-", request.checkpoint_id() & 7, ".safetensors"));
  SnapshotResponse response;
  (void)store_->Snapshot(request, &response);
}

absl::StatusOr<std::string> PsFixture::WriteCheckpoint(int64_t checkpoint_id,
                                                       int64_t generation) {
  const std::string dir = absl::StrCat(dir_, "/ckpt-", checkpoint_id);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  std::filesystem::create_directories(dir, ignored);
  const std::string file = "ps-00000-of-00001.safetensors";
  SnapshotRequest request;
  request.set_checkpoint_id(checkpoint_id);
  request.set_path(absl::StrCat(dir, "/", file));
  request.set_generation(generation);
  SnapshotResponse snapshot;
  absl::Status status = store_->Snapshot(request, &snapshot);
  if (!status.ok()) return status;
  SnapshotStatusRequest status_request;
  status_request.set_checkpoint_id(checkpoint_id);
  SnapshotStatusResponse written;
  do {
    status = store_->SnapshotStatus(status_request, &written);
    if (!status.ok()) return status;
    if (written.state() == SnapshotStatusResponse::WRITING) usleep(200);
  } while (written.state() == SnapshotStatusResponse::WRITING);
  if (written.state() != SnapshotStatusResponse::DONE) {
    return absl::InternalError(absl::StrCat("snapshot ", checkpoint_id, ": ", written.error()));
  }
  Manifest manifest;
  manifest.checkpoint_id = checkpoint_id;
  manifest.job_id = "fuzz-job";
  manifest.generation = generation;
  manifest.job_json = "{}";
  manifest.files.push_back(written.file());
  for (const ShardInfo& info : snapshot.shards()) {
    const ShardSpec& spec = info.spec();
    if (spec.has_dynamic()) continue;
    ManifestVariable v;
    v.name = spec.variable();
    v.shape.assign(spec.full_shape().dim().begin(), spec.full_shape().dim().end());
    v.partitioner = "fixed_shards:1";
    absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = Optimizer::Create(spec.optimizer());
    if (!optimizer.ok()) return optimizer.status();
    for (int s = 0; s < (*optimizer)->num_slots(); ++s) {
      v.slots.emplace_back((*optimizer)->slot_name(s));
    }
    v.optimizer = spec.optimizer();
    v.initializer = spec.initializer();
    v.update = spec.update();
    ManifestShard shard;
    shard.name = spec.name();
    shard.part = spec.part();
    shard.num_parts = spec.num_parts();
    shard.row_offset = spec.row_offset();
    shard.rows = spec.shape().dim_size() == 0 ? 1 : spec.shape().dim(0);
    shard.version = info.version();
    shard.file = file;
    shard.tensors[""] = spec.name();
    for (const std::string& slot : v.slots) shard.tensors[slot] = spec.name() + "/" + slot;
    v.shards.push_back(shard);
    manifest.variables.push_back(std::move(v));
  }
  const std::string path = dir + "/manifest.json";
  std::ofstream(path) << ManifestToJson(manifest);
  return path;
}

}  // namespace shardps
