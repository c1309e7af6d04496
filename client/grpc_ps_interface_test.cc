// GrpcPsInterface and PsClient over real gRPC, against a scripted PsService on 127.0.0.1:
// the control-plane calls reach the server and back, and a typed error detail the ps sets
// (or the client adds for a ps it cannot reach) arrives with the status.
#include "client/grpc_ps_interface.h"

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/ps_client.h"
#include "common/error_detail.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/protocol.h"

namespace shardps {
namespace {

// Answers the control plane from a script; PushRows is refused as a ps at a later
// generation refuses it; Health answers UNAVAILABLE (as a ps shutting down would) while
// `down` is set.
class ScriptedPs final : public PsService::CallbackService {
 public:
  grpc::ServerUnaryReactor* SetGeneration(grpc::CallbackServerContext* ctx,
                                          const SetGenerationRequest* request,
                                          SetGenerationResponse* response) override {
    response->set_generation(request->generation() + 1000);
    return Ok(ctx);
  }
  grpc::ServerUnaryReactor* DropShards(grpc::CallbackServerContext* ctx,
                                       const DropShardsRequest* request,
                                       DropShardsResponse* response) override {
    response->set_dropped(request->variables_size());
    return Ok(ctx);
  }
  grpc::ServerUnaryReactor* Snapshot(grpc::CallbackServerContext* ctx,
                                     const SnapshotRequest* request,
                                     SnapshotResponse* response) override {
    response->add_shards()->mutable_spec()->set_name(request->path());
    return Ok(ctx);
  }
  grpc::ServerUnaryReactor* SnapshotStatus(grpc::CallbackServerContext* ctx,
                                           const SnapshotStatusRequest* request,
                                           SnapshotStatusResponse* response) override {
    response->set_state(SnapshotStatusResponse::DONE);
    response->set_bytes_written(request->checkpoint_id() * 10);
    return Ok(ctx);
  }
  grpc::ServerUnaryReactor* Restore(grpc::CallbackServerContext* ctx, const RestoreRequest* request,
                                    RestoreResponse* response) override {
    response->set_bytes_read(static_cast<int64_t>(request->manifest().size()));
    return Ok(ctx);
  }
  grpc::ServerUnaryReactor* PushRows(grpc::CallbackServerContext* ctx,
                                     const PushRowsRequest* request, PushRowsResponse*) override {
    ErrorDetail detail;
    detail.set_kind(ErrorDetail::STALE_GENERATION);
    detail.set_generation(request->generation() + 1);
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpcStatus(WithDetail(
        absl::AbortedError(absl::StrCat("generation ", request->generation(), " is stale")),
        detail)));
    return reactor;
  }
  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* ctx, const HealthRequest* request,
                                   HealthResponse* response) override {
    auto* reactor = ctx->DefaultReactor();
    absl::MutexLock lock(&mu_);
    ++health_calls_;
    if (down_) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down"));
    } else {
      response->set_status(request->from_chief() ? "SERVING (chief)" : "SERVING");
      reactor->Finish(grpc::Status::OK);
    }
    return reactor;
  }

  void SetDown(bool down) {
    absl::MutexLock lock(&mu_);
    down_ = down;
  }
  int health_calls() {
    absl::MutexLock lock(&mu_);
    return health_calls_;
  }

 private:
  static grpc::ServerUnaryReactor* Ok(grpc::CallbackServerContext* ctx) {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  absl::Mutex mu_;
  bool down_ ABSL_GUARDED_BY(mu_) = false;
  int health_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

class GrpcPsInterfaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(&builder);
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = "127.0.0.1:" + std::to_string(port);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  template <typename Call>
  static absl::Status Wait(Call call) {
    absl::Notification done;
    absl::Status result;
    call([&](const absl::Status& s) {
      result = s;
      done.Notify();
    });
    done.WaitForNotification();
    return result;
  }

  ScriptedPs service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

// A ps's row calls, scripted: each PullRows row is 2 floats, {id, -id}; records which field
// carried each request's ids. As a ps of this release it says that it reads ids_bytes; as one
// of an earlier release (`advertise` false) it reads only `ids`, as such a ps would.
class RowPs final : public PsService::CallbackService {
 public:
  explicit RowPs(bool advertise) : advertise_(advertise) {}

  grpc::ServerUnaryReactor* PullRows(grpc::CallbackServerContext* ctx,
                                     const PullRowsRequest* request,
                                     PullRowsResponse* response) override {
    if (advertise_) ctx->AddInitialMetadata(kRowIdsBytesMetadataKey, "1");
    std::vector<float> rows;
    for (int64_t id : Read(*request)) {
      rows.push_back(static_cast<float>(id));
      rows.push_back(-static_cast<float>(id));
    }
    response->set_data(rows.data(), rows.size() * sizeof(float));
    response->set_version(7);
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::ServerUnaryReactor* PushRows(grpc::CallbackServerContext* ctx,
                                     const PushRowsRequest* request,
                                     PushRowsResponse* response) override {
    if (advertise_) ctx->AddInitialMetadata(kRowIdsBytesMetadataKey, "1");
    pushed_ids_ = Read(*request);
    pushed_data_ = request->data();
    response->set_version(8);
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  // "ids" or "ids_bytes" for each request so far.
  std::vector<std::string> forms() {
    absl::MutexLock lock(&mu_);
    return forms_;
  }
  std::vector<int64_t> pushed_ids_;
  std::string pushed_data_;

 private:
  template <typename Request>
  std::vector<int64_t> Read(const Request& request) {
    absl::MutexLock lock(&mu_);
    forms_.push_back(request.ids_bytes().empty() ? "ids" : "ids_bytes");
    std::vector<int64_t> ids(request.ids().begin(), request.ids().end());
    if (!advertise_) return ids;  // an earlier release knows no ids_bytes
    const size_t n = request.ids_bytes().size() / sizeof(int64_t);
    ids.resize(ids.size() + n);
    if (n > 0) std::memcpy(&ids[ids.size() - n], request.ids_bytes().data(), n * 8);
    return ids;
  }

  const bool advertise_;
  absl::Mutex mu_;
  std::vector<std::string> forms_ ABSL_GUARDED_BY(mu_);
};

// Row calls through GrpcPsInterface, ids given as ids_bytes (as PsClient gives them), to a ps
// that does or does not read that field: the rows come back right either way, and the raw
// form goes only to a ps that has said it reads it.
void CheckRowCalls(bool advertise, const std::vector<std::string>& expected_forms) {
  RowPs service(advertise);
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(&builder);
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  std::unique_ptr<PsInterface> ps =
      NewGrpcPsInterface("ps:0", "127.0.0.1:" + std::to_string(port), 1);
  const std::vector<int64_t> ids = {5, 3, 5, 900000000000};
  std::string raw(ids.size() * sizeof(int64_t), '\0');
  std::memcpy(&raw[0], ids.data(), raw.size());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  for (int call = 0; call < 2; ++call) {
    PullRowsRequest request;
    request.set_shard("e");
    request.set_ids_bytes(raw);
    PullRowsResponse response;
    std::vector<float> out(ids.size() * 2, 0.0f);
    std::vector<absl::Span<char>> outs;
    // Rows in reverse order of the request: each lands where its span says.
    for (size_t k = 0; k < ids.size(); ++k) {
      outs.emplace_back(reinterpret_cast<char*>(&out[(ids.size() - 1 - k) * 2]),
                        2 * sizeof(float));
    }
    absl::Notification done;
    absl::Status status;
    ps->PullRowsIntoAsync(&request, &response, outs, deadline, [&](const absl::Status& s) {
      status = s;
      done.Notify();
    });
    done.WaitForNotification();
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(response.version(), 7);
    EXPECT_TRUE(response.data().empty());
    for (size_t k = 0; k < ids.size(); ++k) {
      EXPECT_EQ(out[(ids.size() - 1 - k) * 2], static_cast<float>(ids[k])) << k;
      EXPECT_EQ(out[(ids.size() - 1 - k) * 2 + 1], -static_cast<float>(ids[k])) << k;
    }
  }
  PushRowsRequest push;
  push.set_request_id(1);
  push.set_shard("e");
  push.set_ids_bytes(raw);
  std::string data(64 << 10, '\0');  // large enough to be sent without a copy
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  push.set_data(data);
  PushRowsResponse pushed;
  absl::Notification done;
  absl::Status status;
  ps->PushRowsAsync(&push, &pushed, deadline, [&](const absl::Status& s) {
    status = s;
    done.Notify();
  });
  done.WaitForNotification();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(pushed.version(), 8);
  EXPECT_EQ(service.pushed_ids_, ids);
  EXPECT_TRUE(service.pushed_data_ == data);
  EXPECT_EQ(service.forms(), expected_forms);
  server->Shutdown();
}

TEST(GrpcPsInterfaceRowsTest, AnEarlierPsGetsPackedIds) {
  CheckRowCalls(/*advertise=*/false, {"ids", "ids", "ids"});
}

TEST(GrpcPsInterfaceRowsTest, APsThatReadsIdsBytesGetsThemAfterItsFirstReply) {
  CheckRowCalls(/*advertise=*/true, {"ids", "ids_bytes", "ids_bytes"});
}

TEST_F(GrpcPsInterfaceTest, ControlCallsReachTheServerAndBack) {
  std::unique_ptr<PsInterface> ps = NewGrpcPsInterface("ps:0", address_);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  SetGenerationRequest generation;
  generation.set_generation(4);
  SetGenerationResponse generation_reply;
  ASSERT_TRUE(Wait([&](StatusCallback done) {
                ps->SetGenerationAsync(&generation, &generation_reply, deadline, done);
              }).ok());
  EXPECT_EQ(generation_reply.generation(), 1004);

  DropShardsRequest drop;
  drop.add_variables("a");
  drop.add_variables("b");
  DropShardsResponse drop_reply;
  ASSERT_TRUE(Wait([&](StatusCallback done) {
                ps->DropShardsAsync(&drop, &drop_reply, deadline, done);
              }).ok());
  EXPECT_EQ(drop_reply.dropped(), 2);

  SnapshotRequest snapshot;
  snapshot.set_path("/ck/1/ps0.safetensors");
  SnapshotResponse snapshot_reply;
  ASSERT_TRUE(Wait([&](StatusCallback done) {
                ps->SnapshotAsync(&snapshot, &snapshot_reply, deadline, done);
              }).ok());
  ASSERT_EQ(snapshot_reply.shards_size(), 1);
  EXPECT_EQ(snapshot_reply.shards(0).spec().name(), "/ck/1/ps0.safetensors");

  SnapshotStatusRequest status;
  status.set_checkpoint_id(3);
  SnapshotStatusResponse status_reply;
  ASSERT_TRUE(Wait([&](StatusCallback done) {
                ps->SnapshotStatusAsync(&status, &status_reply, deadline, done);
              }).ok());
  EXPECT_EQ(status_reply.state(), SnapshotStatusResponse::DONE);
  EXPECT_EQ(status_reply.bytes_written(), 30);

  RestoreRequest restore;
  restore.set_manifest("/ck/1/manifest.json");
  RestoreResponse restore_reply;
  ASSERT_TRUE(Wait([&](StatusCallback done) {
                ps->RestoreAsync(&restore, &restore_reply, deadline, done);
              }).ok());
  EXPECT_EQ(restore_reply.bytes_read(), 19);
}

TEST_F(GrpcPsInterfaceTest, TheDetailAPsSetsArrivesWithItsStatus) {
  std::unique_ptr<PsInterface> ps = NewGrpcPsInterface("ps:0", address_);
  PushRowsRequest push;
  push.set_generation(3);
  PushRowsResponse push_reply;
  absl::Status s = Wait([&](StatusCallback done) {
    ps->PushRowsAsync(&push, &push_reply, absl::Now() + absl::Seconds(30), done);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(s.message(), "generation 3 is stale");
  std::optional<ErrorDetail> detail = GetDetail(s);
  ASSERT_TRUE(detail.has_value()) << s;
  EXPECT_EQ(detail->kind(), ErrorDetail::STALE_GENERATION);
  EXPECT_EQ(detail->generation(), 4);
}

TEST_F(GrpcPsInterfaceTest, PsClientControlPlaneOverGrpcNamesAnUnavailablePs) {
  PsClient::Options options;
  options.initial_backoff = absl::Milliseconds(1);
  options.max_backoff = absl::Milliseconds(2);
  auto client = NewGrpcPsClient({address_}, options, 1);
  ASSERT_TRUE(client.ok()) << client.status();

  std::vector<RestoreResponse> restored;
  ASSERT_TRUE((*client)->RestoreAll(RestoreRequest(), &restored).ok());
  std::vector<absl::Status> statuses;
  std::vector<HealthResponse> health;
  (*client)->HealthEach(true, absl::Seconds(10), &statuses, &health);
  ASSERT_TRUE(statuses[0].ok()) << statuses[0];
  EXPECT_EQ(health[0].status(), "SERVING (chief)");

  service_.SetDown(true);
  const int before = service_.health_calls();
  absl::Status s = (*client)->Health(&health);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "ps:0 (" + address_ + "): shutting down");
  std::optional<ErrorDetail> detail = GetDetail(s);
  ASSERT_TRUE(detail.has_value()) << s;
  EXPECT_EQ(detail->kind(), ErrorDetail::PS_UNAVAILABLE);
  EXPECT_EQ(detail->ps_task(), 0);
  EXPECT_EQ(service_.health_calls() - before, options.max_attempts);
}

}  // namespace
}  // namespace shardps
