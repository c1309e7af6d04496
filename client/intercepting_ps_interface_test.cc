#include "client/intercepting_ps_interface.h"

#include <memory>
#include <string>
#include <vector>

#include "client/local_ps_interface.h"
#include "gtest/gtest.h"
#include "ps_server/shard_store.h"

namespace shardps {
namespace {

absl::Status Health(PsInterface* ps, HealthResponse* response) {
  HealthRequest request;
  absl::Status result = absl::InternalError("not called back");
  ps->HealthAsync(&request, response, absl::InfiniteFuture(),
                  [&result](const absl::Status& s) { result = s; });  // local: completes inline
  return result;
}

TEST(InterceptingPsInterfaceTest, PassesThroughAnswersAndReplaces) {
  ShardStore::Options a_options;
  a_options.task_index = 4;
  auto a = *ShardStore::Create(a_options);
  ShardStore::Options b_options;
  b_options.task_index = 5;
  auto b = *ShardStore::Create(b_options);
  InterceptingPsInterface ps("ps:4", NewLocalPsInterface("a", a.get()));
  EXPECT_EQ(ps.name(), "ps:4");

  HealthResponse response;
  ASSERT_TRUE(Health(&ps, &response).ok());
  EXPECT_EQ(response.task_index(), 4);  // from the store behind it

  std::vector<std::string> seen;
  ps.SetInterceptor([&seen](absl::string_view method, const google::protobuf::Message& request,
                            google::protobuf::Message* response,
                            absl::Time) -> std::optional<absl::Status> {
    seen.emplace_back(method);
    if (method == "Health") {
      static_cast<HealthResponse*>(response)->set_status("SCRIPTED");
      return absl::UnavailableError("down");
    }
    return std::nullopt;
  });
  response.Clear();
  EXPECT_EQ(Health(&ps, &response).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(response.status(), "SCRIPTED");
  ListShardsRequest list;
  ListShardsResponse listed;
  absl::Status listed_status = absl::InternalError("not called back");
  ps.ListShardsAsync(&list, &listed, absl::InfiniteFuture(),
                     [&](const absl::Status& s) { listed_status = s; });
  EXPECT_TRUE(listed_status.ok()) << listed_status;  // let through
  EXPECT_EQ(seen, (std::vector<std::string>{"Health", "ListShards"}));

  ps.SetInterceptor(nullptr);
  ps.SetInner(NewLocalPsInterface("b", b.get()));
  ASSERT_TRUE(Health(&ps, &response).ok());
  EXPECT_EQ(response.task_index(), 5);

  ps.SetInner(nullptr);
  EXPECT_EQ(Health(&ps, &response).code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace shardps
