// SwitchablePsClient over two sets of in-process ps tasks: calls follow the switch, the
// layout is the current set's, and a call in flight keeps the client it began on.
#include "client/switchable_ps_client.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "client/intercepting_ps_interface.h"
#include "client/local_ps_interface.h"
#include "gtest/gtest.h"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"
#include "ps_server/shard_store.h"

namespace shardps {
namespace {

VariableDef Def(const std::string& name, int64_t n) {
  VariableDef def;
  def.name = name;
  def.shape = {n};
  def.initializer.set_type(InitializerSpec::ZEROS);
  def.optimizer.set_type(OptimizerSpec::SGD);
  def.optimizer.set_learning_rate(1.0);
  return def;
}

class SwitchablePsClientTest : public ::testing::Test {
 protected:
  // A client of `n` new stores (kept in stores_), the first one's calls intercepted.
  std::shared_ptr<PsClient> NewSet(int n, InterceptingPsInterface** first = nullptr) {
    std::vector<std::unique_ptr<PsInterface>> ps;
    for (int i = 0; i < n; ++i) {
      stores_.push_back(*ShardStore::Create({}));
      std::unique_ptr<PsInterface> local =
          NewLocalPsInterface("ps:" + std::to_string(i), stores_.back().get());
      if (i == 0 && first != nullptr) {
        auto intercepting =
            std::make_unique<InterceptingPsInterface>("ps:0", std::move(local));
        *first = intercepting.get();
        local = std::move(intercepting);
      }
      ps.push_back(std::move(local));
    }
    return std::shared_ptr<PsClient>(*PsClient::Create(std::move(ps), {}));
  }

  absl::Status Create(PsClient& client, const VariableDef& def) {
    auto partitioner = *ParsePartitioner("fixed:" + std::to_string(client.num_ps()));
    auto placer = *ParsePlacement("round_robin", client.num_ps());
    return client.CreateVariables({def}, *partitioner, placer.get());
  }

  std::vector<std::unique_ptr<ShardStore>> stores_;
};

TEST_F(SwitchablePsClientTest, CallsGoToTheCurrentSet) {
  std::shared_ptr<PsClient> two = NewSet(2);
  std::shared_ptr<PsClient> three = NewSet(3);
  SwitchablePsClient client(two);
  ASSERT_EQ(client.num_ps(), 2);
  ASSERT_TRUE(Create(client, Def("v", 6)).ok());
  ASSERT_TRUE(client.Push("v", std::vector<float>(6, 1.0f)).ok());  // v = -1

  EXPECT_EQ(client.Switch(three), two);
  EXPECT_EQ(client.num_ps(), 3);
  EXPECT_EQ(client.current(), three);
  // The new set holds nothing yet: its layout is its own.
  EXPECT_FALSE(client.GetLayout("v").ok());
  ASSERT_TRUE(Create(client, Def("v", 6)).ok());
  EXPECT_EQ(client.GetLayout("v")->shards.size(), 3u);
  std::vector<float> out(6, 5.0f);
  ASSERT_TRUE(client.Pull("v", absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, std::vector<float>(6, 0.0f));  // the new set's, not the old's -1
  // The old set kept its state.
  ASSERT_TRUE(two->Pull("v", absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, std::vector<float>(6, -1.0f));
}

TEST_F(SwitchablePsClientTest, ACallInFlightFinishesOnTheSetItBeganOn) {
  InterceptingPsInterface* first = nullptr;
  std::shared_ptr<PsClient> two = NewSet(2, &first);
  SwitchablePsClient client(two);
  ASSERT_TRUE(Create(client, Def("v", 4)).ok());
  absl::Notification entered, release;
  // (The interceptor runs on the calling thread: the push is sent from another.)
  first->SetInterceptor([&](absl::string_view method, const google::protobuf::Message&,
                            google::protobuf::Message*, absl::Time) -> std::optional<absl::Status> {
    if (absl::StartsWith(method, "Push")) {
      entered.Notify();
      release.WaitForNotification();
    }
    return std::nullopt;
  });
  std::vector<float> grad(4, 2.0f);
  absl::Notification done;
  absl::Status pushed = absl::UnknownError("not run");
  std::thread sender([&] {
    client.PushAsync({{"v", grad}}, {}, [&](const absl::Status& s) {
      pushed = s;
      done.Notify();
    });
  });
  entered.WaitForNotification();
  std::weak_ptr<PsClient> old = two;
  client.Switch(NewSet(1));
  two.reset();
  EXPECT_FALSE(old.expired());  // the push in flight holds it
  release.Notify();
  sender.join();
  done.WaitForNotification();
  EXPECT_TRUE(pushed.ok()) << pushed;
}

}  // namespace
}  // namespace shardps
