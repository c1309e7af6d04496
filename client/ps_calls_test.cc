#include "client/ps_calls.h"

#include <atomic>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "client/intercepting_ps_interface.h"
#include "client/local_ps_interface.h"
#include "common/error_detail.h"
#include "gtest/gtest.h"
#include "ps_server/shard_store.h"

namespace shardps {
namespace {

// Two in-process ps tasks, each behind an interceptor the test scripts.
class PsCallsTest : public ::testing::Test {
 protected:
  void Start(const PsClientOptions& options) {
    std::vector<std::unique_ptr<PsInterface>> ps;
    for (int i = 0; i < 2; ++i) {
      stores_.push_back(*ShardStore::Create({}));
      auto intercepting = std::make_unique<InterceptingPsInterface>(
          "ps:" + std::to_string(i),
          NewLocalPsInterface("ps:" + std::to_string(i), stores_.back().get()));
      intercepting_.push_back(intercepting.get());
      ps.push_back(std::move(intercepting));
    }
    calls_ = std::make_unique<PsCalls>(std::move(ps), options);
  }

  // Health of ps `ps` through CallWithRetries, with Options::max_attempts.
  absl::Status Health(int ps) {
    HealthRequest request;
    HealthResponse response;
    absl::Notification done;
    absl::Status result;
    calls_->Call<HealthRequest, HealthResponse>(ps, PsCalls::Addresses::kPs,
                                                &PsInterface::HealthAsync, &request, &response,
                                                calls_->Deadline(), [&](const absl::Status& s) {
                                                  result = s;
                                                  done.Notify();
                                                });
    done.WaitForNotification();
    return result;
  }

  std::vector<std::unique_ptr<ShardStore>> stores_;
  std::vector<InterceptingPsInterface*> intercepting_;
  std::unique_ptr<PsCalls> calls_;
};

PsClientOptions FastRetries(int max_attempts) {
  PsClientOptions options;
  options.max_attempts = max_attempts;
  options.initial_backoff = absl::Milliseconds(1);
  options.max_backoff = absl::Milliseconds(4);
  return options;
}

TEST_F(PsCallsTest, RetriesUnavailableUntilItAnswers) {
  Start(FastRetries(5));
  std::atomic<int> attempts{0};
  intercepting_[1]->SetInterceptor([&](absl::string_view, const google::protobuf::Message&,
                                       google::protobuf::Message*,
                                       absl::Time) -> std::optional<absl::Status> {
    if (++attempts < 3) return absl::UnavailableError("connection refused");
    return std::nullopt;
  });
  EXPECT_TRUE(Health(1).ok());
  EXPECT_EQ(attempts.load(), 3);
}

TEST_F(PsCallsTest, TheLastFailureNamesThePsWithItsDetail) {
  Start(FastRetries(2));
  std::atomic<int> attempts{0};
  intercepting_[1]->SetInterceptor([&](absl::string_view, const google::protobuf::Message&,
                                       google::protobuf::Message*, absl::Time) {
    ++attempts;
    return std::optional<absl::Status>(absl::UnavailableError("connection refused"));
  });
  const absl::Status s = Health(1);
  EXPECT_EQ(attempts.load(), 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(s.message(), "ps:1")) << s;
  const auto detail = GetDetail(s);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->kind(), ErrorDetail::PS_UNAVAILABLE);
  EXPECT_EQ(detail->ps_task(), 1);
  // Other codes are not retried.
  attempts = 0;
  intercepting_[1]->SetInterceptor([&](absl::string_view, const google::protobuf::Message&,
                                       google::protobuf::Message*, absl::Time) {
    ++attempts;
    return std::optional<absl::Status>(absl::InvalidArgumentError("bad"));
  });
  EXPECT_EQ(Health(1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(attempts.load(), 1);
}

TEST_F(PsCallsTest, EachPsTellsWhichPsFailed) {
  Start(FastRetries(1));
  intercepting_[0]->SetInterceptor(
      [](absl::string_view, const google::protobuf::Message&, google::protobuf::Message*,
         absl::Time) { return std::optional<absl::Status>(absl::UnavailableError("down")); });
  std::vector<HealthRequest> requests(2);
  std::vector<HealthResponse> responses;
  std::vector<absl::Status> statuses;
  calls_->EachPs<HealthRequest, HealthResponse>(&PsInterface::HealthAsync, requests, &responses,
                                                absl::Seconds(30), 1, &statuses);
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(statuses[1].ok()) << statuses[1];
  EXPECT_EQ(responses[1].status(), "SERVING");
  const absl::Status all = calls_->AllPs<HealthRequest, HealthResponse>(
      &PsInterface::HealthAsync, requests, &responses, absl::Seconds(30));
  EXPECT_EQ(DetailKind(all), ErrorDetail::PS_UNAVAILABLE);
  EXPECT_EQ(GetDetail(all)->ps_task(), 0);
}

TEST_F(PsCallsTest, DestroyingItCancelsACallWaitingToRetry) {
  PsClientOptions options = FastRetries(5);
  options.initial_backoff = absl::Seconds(20);
  options.max_backoff = absl::Seconds(20);
  Start(options);
  absl::Notification tried;
  intercepting_[0]->SetInterceptor([&](absl::string_view, const google::protobuf::Message&,
                                       google::protobuf::Message*, absl::Time) {
    if (!tried.HasBeenNotified()) tried.Notify();
    return std::optional<absl::Status>(absl::UnavailableError("down"));
  });
  HealthRequest request;
  HealthResponse response;
  absl::Status result;
  bool finished = false;
  calls_->Call<HealthRequest, HealthResponse>(0, PsCalls::Addresses::kPs, &PsInterface::HealthAsync,
                                              &request, &response, absl::Now() + absl::Minutes(5),
                                              [&](const absl::Status& s) {
                                                result = s;
                                                finished = true;
                                              });
  tried.WaitForNotification();
  EXPECT_FALSE(finished);
  calls_.reset();
  ASSERT_TRUE(finished);
  EXPECT_EQ(result.code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(absl::StrContains(result.message(), "ps:0: client shut down during retry")) << result;
}

TEST_F(PsCallsTest, IssuePartsCompletesEveryPartOnce) {
  Start(FastRetries(1));
  struct Part {
    HealthRequest request;
    HealthResponse response;
  };
  PsCalls::Parts<Part> parts;
  for (int i = 0; i < 5; ++i) parts.emplace_back(i % 2, std::make_unique<Part>());
  std::atomic<int> completed{0};
  absl::Notification done;
  absl::Status result;
  auto fan = Fanout::Make(parts.size(), [&](const absl::Status& s) {
    result = s;
    done.Notify();
  });
  calls_->IssueParts<Part>(
      std::move(parts), /*window_size=*/1, calls_->Deadline(),
      [](PsInterface* target, Part* part, absl::Time deadline, StatusCallback done) {
        target->HealthAsync(&part->request, &part->response, deadline, std::move(done));
      },
      [&](Part* part, const absl::Status& s) {
        EXPECT_EQ(part->response.status(), "SERVING");
        ++completed;
        return s;
      },
      std::move(fan));
  done.WaitForNotification();
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_EQ(completed.load(), 5);
}

}  // namespace
}  // namespace shardps
