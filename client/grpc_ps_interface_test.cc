// GrpcPsInterface and PsClient over real gRPC, against a scripted PsService on 127.0.0.1:
// the control-plane calls reach the server and back, and a typed error detail the ps sets
// (or the client adds for a ps it cannot reach) arrives with the status.
#include "client/grpc_ps_interface.h"

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
