// Every daemon (chief, ps, worker, and the evaluator, which listens only for this) answers gRPC's standard health protocol
// (grpc.health.v1.Health/Check) on its TF_CONFIG address, as Kubernetes' gRPC probes call it:
// SERVING for the server as a whole (the service "", what a probe without a service name
// asks), NOT_FOUND for a service name it does not report. Real daemons as processes.
// With --health_port, a daemon whose main port speaks mutual TLS answers the same check in
// plaintext on that port, and nothing else there (the port Kubernetes' probes use).
#include <signal.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "proto/health.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "tests/process.h"
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

TEST(HealthTest, TheHealthPortAnswersInPlaintextBesideATlsPortAndServesNothingElse) {
  const std::string address = LoopbackAddress();
  const std::string host = address.substr(0, address.rfind(':'));
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port)) << address;
  // The port beside the task's on the task's own loopback address, which no other test takes.
  const std::string health = absl::StrCat(host, ":", port + 1);
  const std::string tls = FreshTempDir("tls");
  std::string out;
  ASSERT_EQ(RunCommand(BinaryPath("deploy/certs.sh"),
                       {tls, absl::StrCat("ps=IP:", host, ",URI:spiffe://shardps/ps/0")}, {}, &out)
                .value_or(-1),
            0)
      << out;
  const std::map<std::string, std::string> env = {
      {"TF_CONFIG", MakeTfConfig(
                        {{"chief", {"127.0.0.1:1"}}, {"ps", {address}}, {"worker", {"127.0.0.1:3"}}},
                        "ps", 0)},
      {"SHARDPS_TLS_CERT_FILE", tls + "/ps.crt"},
      {"SHARDPS_TLS_KEY_FILE", tls + "/ps.key"},
      {"SHARDPS_TLS_CA_FILE", tls + "/ca.crt"},
      {"SHARDPS_TLS_CLIENT_AUTH", "true"}};
  auto ps = Process::Start(BinaryPath("ps_server/ps"),
                           {"--long_lived", absl::StrCat("--health_port=", port + 1)}, env,
                           FreshTempDir("ps") + ".log");
  ASSERT_TRUE(ps.ok()) << ps.status();
  ASSERT_TRUE((*ps)->WaitForLog("serving on", absl::Seconds(60))) << (*ps)->Log();
  EXPECT_TRUE(absl::StrContains((*ps)->Log(), absl::StrCat("health checks on ", health,
                                                           " (plaintext, grpc.health.v1 only)")))
      << (*ps)->Log();
  EXPECT_TRUE(absl::StrContains((*ps)->Log(), "client certificates of the CA required"))
      << (*ps)->Log();

  // The health port: SERVING, in plaintext; NOT_FOUND for a service name, as on the main port.
  HealthCheckResponse whole, missing;
  grpc::Status s = Check(health, "", &whole);
  ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << (*ps)->Log();
  EXPECT_EQ(whole.status(), HealthCheckResponse::SERVING);
  EXPECT_EQ(Check(health, "shardps.PsService", &missing).error_code(),
            grpc::StatusCode::NOT_FOUND);
  // ... and nothing else: the ps' own service is not there.
  {
    auto stub = PsService::NewStub(grpc::CreateChannel(health, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    ListShardsResponse response;
    s = stub->ListShards(&ctx, ListShardsRequest(), &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << s.error_message();
  }
  // The main port speaks TLS only: the same plaintext check fails there.
  {
    auto stub = Health::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    EXPECT_EQ(stub->Check(&ctx, HealthCheckRequest(), &whole).error_code(),
              grpc::StatusCode::UNAVAILABLE);
  }

  // A port that is taken: the daemon says which and exits 1 (docs/exit-codes.md).
  auto second = Process::Start(BinaryPath("ps_server/ps"),
                               {"--long_lived", absl::StrCat("--health_port=", port + 1)},
                               {{"TF_CONFIG", MakeTfConfig({{"chief", {"127.0.0.1:1"}},
                                                            {"ps", {absl::StrCat(host, ":", port + 2)}},
                                                            {"worker", {"127.0.0.1:3"}}},
                                                           "ps", 0)}},
                               FreshTempDir("ps_second") + ".log");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)->Wait(absl::Seconds(60)).value_or(-1), 1) << (*second)->Log();
  EXPECT_TRUE(absl::StrContains((*second)->Log(),
                                absl::StrCat("--health_port: cannot listen on ", health)))
      << (*second)->Log();

  (*ps)->Signal(SIGTERM);
  EXPECT_EQ((*ps)->Wait(absl::Seconds(30)).value_or(-1), 0) << (*ps)->Log();  // idle, long-lived
}

}  // namespace
}  // namespace testing
}  // namespace shardps
