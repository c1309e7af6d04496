// The gRPC adapter of the ps with a stranger's values: pulls whose row ranges would overflow
// when the adapter sizes them are answered with an error (under UBSan in the clang stage, the
// arithmetic itself is checked).
#include "ps_server/rpc/grpc_ps_service.h"

#include <limits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"
#include "ps_server/shard_store.h"
#include "rpc/executor.h"
#include "rpc/grpc_util.h"
#include "rpc/protocol.h"

namespace shardps {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TEST(GrpcPsServiceTest, RangesThatWouldOverflowAreRefusedNotComputed) {
  std::unique_ptr<ShardStore> store = *ShardStore::Create({});
  Executor executor(1);
  std::unique_ptr<grpc::Service> service =
      NewGrpcPsService(store.get(), &executor, PsServiceOptions());
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = PsService::NewStub(NewChannel(absl::StrCat("127.0.0.1:", port)));

  for (auto [begin, end] : {std::pair<int64_t, int64_t>{-1, kMax}, {kMin, kMax}, {kMax, kMin},
                            {kMin, 1}, {5, 3}}) {
    PullRequest pull;
    pull.set_shard("w");
    pull.set_row_begin(begin);
    pull.set_row_end(end);
    grpc::ClientContext ctx;
    AttachProtocolVersion(&ctx);
    PullResponse response;
    EXPECT_FALSE(stub->Pull(&ctx, pull, &response).ok()) << begin << ".." << end;

    PullBatchRequest batch;
    *batch.add_pulls() = pull;
    *batch.add_pulls() = pull;  // two such items: their sum would overflow too
    grpc::ClientContext batch_ctx;
    AttachProtocolVersion(&batch_ctx);
    PullBatchResponse batch_response;
    EXPECT_FALSE(stub->PullBatch(&batch_ctx, batch, &batch_response).ok()) << begin << ".." << end;
  }
  server->Shutdown();
}

}  // namespace
}  // namespace shardps
