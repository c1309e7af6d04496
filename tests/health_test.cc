// Every daemon (chief, ps, worker, and the evaluator, which listens only for this) answers gRPC's standard health protocol
// (grpc.health.v1.Health/Check) on its TF_CONFIG address, as Kubernetes' gRPC probes call it:
// SERVING for the server as a whole (the service "", what a probe without a service name
// asks), NOT_FOUND for a service name it does not report. Real daemons as processes.
#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "proto/health.grpc.pb.h"
#include "tests/training_cluster.h"

namespace shardps {
namespace testing {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

// Check(service) on `address`: the status code and the response.
grpc::Status Check(const std::string& address, const std::string& service,
                   HealthCheckResponse* response) {
  auto stub = Health::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  ctx.set_wait_for_ready(true);  // a worker may still be binding its port
  HealthCheckRequest request;
  request.set_service(service);
  return stub->Check(&ctx, request, response);
}

TEST(HealthTest, EveryDaemonAnswersTheStandardHealthCheck) {
  TrainingCluster::Options options;
  options.num_ps = 1;
  options.num_workers = 1;
  options.evaluator = true;
  auto cluster = TrainingCluster::Start(options);  // no job: the daemons just serve
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  const std::string worker = c->worker_addresses().at(0);
  struct Case {
    std::string who, address;
  };
  for (const Case& k : {Case{"chief", c->chief_address()}, Case{"ps", c->ps_addresses().at(0)},
                        Case{"worker", worker}, Case{"evaluator", c->evaluator_address()}}) {
    HealthCheckResponse whole, missing;
    grpc::Status s = Check(k.address, "", &whole);
    ASSERT_TRUE(s.ok()) << k.who << ": " << s.error_message() << "\n" << c->Logs();
    EXPECT_EQ(whole.status(), HealthCheckResponse::SERVING) << k.who;
    s = Check(k.address, "shardps.NoSuchService", &missing);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << k.who;
  }
}

}  // namespace
}  // namespace testing
}  // namespace shardps
