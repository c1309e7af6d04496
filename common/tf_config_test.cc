#include "common/tf_config.h"

#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// JSON with single quotes for readability in the tests.
std::string J(absl::string_view single_quoted) {
  return absl::StrReplaceAll(single_quoted, {{"'", "\""}});
}

constexpr char kCluster[] =
    "{'chief': ['chief-0:2222'], 'worker': ['worker-0:2222', 'worker-1:2222'], "
    "'ps': ['ps-0:2222', 'ps-1:2222'], 'evaluator': ['eval-0:2222']}";

std::string WithTask(absl::string_view cluster, absl::string_view task) {
  return J(absl::StrCat("{'cluster': ", cluster, ", 'task': ", task, "}"));
}

TfConfig ParseOk(const std::string& json) {
  absl::StatusOr<TfConfig> config = ParseTfConfig(json);
  EXPECT_TRUE(config.ok()) << config.status() << "\n" << json;
  return config.ok() ? *config : TfConfig();
}

// Asserts an INVALID_ARGUMENT one-line error that starts with "TF_CONFIG: <field>: ".
void ExpectError(const std::string& json, absl::string_view field,
                 absl::string_view detail = "") {
  absl::StatusOr<TfConfig> config = ParseTfConfig(json);
  ASSERT_FALSE(config.ok()) << json;
  const std::string message(config.status().message());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << message;
  EXPECT_THAT(message, StartsWith(absl::StrCat("TF_CONFIG: ", field, ": "))) << json;
  EXPECT_THAT(message, HasSubstr(detail)) << json;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(TfConfigTest, ParsesAFullCluster) {
  TfConfig config = ParseOk(WithTask(kCluster, "{'type': 'ps', 'index': 1}"));
  EXPECT_EQ(config.task_type, "ps");
  EXPECT_EQ(config.task_index, 1);
  EXPECT_EQ(config.NumTasks("worker"), 2);
  EXPECT_EQ(config.NumTasks("chief"), 1);
  EXPECT_EQ(config.NumTasks("nothing"), 0);
  EXPECT_TRUE(config.Tasks("nothing").empty());
  EXPECT_THAT(config.Tasks("ps"), ElementsAre("ps-0:2222", "ps-1:2222"));
  EXPECT_EQ(*config.Address("worker", 1), "worker-1:2222");
  EXPECT_EQ(config.TaskAddress(), "ps-1:2222");
  EXPECT_EQ(config.DebugString(), "ps:1 at ps-1:2222");
  EXPECT_EQ(config.rpc_layer, "");
  EXPECT_EQ(config.environment, "");
}

TEST(TfConfigTest, DebugStringExample) {
  TfConfig config = ParseOk(
      J("{'cluster': {'ps': ['localhost:2222']}, 'task': {'type': 'ps', 'index': 0}}"));
  EXPECT_EQ(config.DebugString(), "ps:0 at localhost:2222");
}

TEST(TfConfigTest, AddressErrors) {
  TfConfig config = ParseOk(WithTask(kCluster, "{'type': 'ps', 'index': 0}"));
  EXPECT_EQ(config.Address("master", 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(config.Address("worker", 2).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(config.Address("worker", -1).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(TfConfigTest, KubeflowTfJobStyle) {
  // What Kubeflow's TFJob operator writes into each pod.
  TfConfig config = ParseOk(J(
      "{'cluster': {'ps': ['mnist-ps-0.kubeflow.svc:2222'], "
      "'worker': ['mnist-worker-0.kubeflow.svc:2222', 'mnist-worker-1.kubeflow.svc:2222'], "
      "'chief': ['mnist-chief-0.kubeflow.svc:2222']}, "
      "'task': {'type': 'worker', 'index': 1}, 'environment': 'cloud'}"));
  EXPECT_EQ(config.environment, "cloud");
  EXPECT_EQ(config.TaskAddress(), "mnist-worker-1.kubeflow.svc:2222");
}

// TFJob with enableDynamicWorker writes the worker job sparse: each worker knows itself (and
// joins the chief's job: docs/elastic.md).
TEST(TfConfigTest, SparseWorkerJob) {
  const std::string cluster =
      "{'chief': ['chief-0:2222'], 'ps': ['ps-0:2222'], 'worker': {'3': 'worker-3:2222'}}";
  TfConfig config = ParseOk(WithTask(cluster, "{'type': 'worker', 'index': 3}"));
  EXPECT_EQ(config.TaskAddress(), "worker-3:2222");
  EXPECT_EQ(config.NumTasks("worker"), 0);
  EXPECT_EQ(config.sparse_workers.size(), 1u);
  EXPECT_EQ(ParseOk(WithTask(cluster, "{'type': 'ps', 'index': 0}")).TaskAddress(), "ps-0:2222");
  ExpectError(WithTask(cluster, "{'type': 'worker', 'index': 0}"), "task.index",
              "not a task of the sparse");
  ExpectError(WithTask("{'ps': ['ps-0:2222'], 'worker': {'x': 'w:1'}}",
                       "{'type': 'ps', 'index': 0}"),
              "cluster.worker.x", "task indices");
  ExpectError(WithTask("{'ps': ['ps-0:2222'], 'worker': {'1': 'ps-0:2222'}}",
                       "{'type': 'ps', 'index': 0}"),
              "cluster.ps[0]", "same address as cluster.worker.1");
  // Only the worker job may be sparse.
  ExpectError(WithTask("{'ps': {'0': 'ps-0:2222'}}", "{'type': 'ps', 'index': 0}"), "cluster.ps",
              "must be a list");
}

TEST(TfConfigTest, IndexMayBeAStringOfDigits) {
  TfConfig config = ParseOk(WithTask(kCluster, "{'type': 'worker', 'index': '1'}"));
  EXPECT_EQ(config.task_index, 1);
  EXPECT_EQ(config.TaskAddress(), "worker-1:2222");
}

TEST(TfConfigTest, Ipv6AndIpv4Addresses) {
  TfConfig config = ParseOk(J(
      "{'cluster': {'ps': ['[::1]:2222', '[fe80::1%eth0]:2223', '[2001:db8::7]:2224'], "
      "'worker': ['127.0.0.1:2225', 'LOCALHOST:2226']}, "
      "'task': {'type': 'ps', 'index': 0}, 'rpc_layer': 'grpc'}"));
  EXPECT_EQ(config.TaskAddress(), "[::1]:2222");
  EXPECT_EQ(config.rpc_layer, "grpc");
}

TEST(TfConfigTest, EvaluatorMayBeOutsideTheCluster) {
  TfConfig config = ParseOk(J(
      "{'cluster': {'chief': ['c:1'], 'worker': ['w:1'], 'ps': ['p:1']}, "
      "'task': {'type': 'evaluator', 'index': 0}}"));
  EXPECT_EQ(config.task_type, "evaluator");
  EXPECT_EQ(config.TaskAddress(), "");
  EXPECT_EQ(config.DebugString(), "evaluator:0 (not in cluster)");
  EXPECT_EQ(config.Address("evaluator", 0).status().code(), absl::StatusCode::kNotFound);
}

TEST(TfConfigTest, IgnoresKeysTensorFlowIgnores) {
  // Cloud ML Engine adds task.trial; Estimator configs carry model_dir and session_master.
  TfConfig config = ParseOk(J(
      "{'cluster': {'ps': ['p:1'], 'worker': ['w:1']}, "
      "'task': {'type': 'worker', 'index': 0, 'trial': '3'}, "
      "'model_dir': '/tmp/m', 'session_master': '', 'rpc_layer': '', 'environment': null}"));
  EXPECT_EQ(config.TaskAddress(), "w:1");
}

TEST(TfConfigTest, InvalidJson) {
  ExpectError("", "invalid JSON");
  ExpectError("{", "invalid JSON");
  ExpectError(J("{'cluster': {'ps': ['a:1']},\n 'task': {'type': 'ps' 'index': 0}}"),
              "invalid JSON");
  ExpectError("\xff\xfe", "invalid JSON");
  absl::StatusOr<TfConfig> config = ParseTfConfig("[]");
  EXPECT_EQ(config.status().message(), "TF_CONFIG: must be a JSON object, got array");
  config = ParseTfConfig("3");
  EXPECT_EQ(config.status().message(), "TF_CONFIG: must be a JSON object, got integer");
}

TEST(TfConfigTest, ClusterShape) {
  ExpectError(J("{'task': {'type': 'ps', 'index': 0}}"), "cluster", "missing");
  ExpectError(WithTask("['p:1']", "{'type': 'ps', 'index': 0}"), "cluster",
              "must be an object");
  ExpectError(WithTask("{'ps': ['p:1'], 'master': ['m:1']}", "{'type': 'ps', 'index': 0}"),
              "cluster.master", "unknown job \"master\"");
  ExpectError(WithTask("{'ps': 'p:1'}", "{'type': 'ps', 'index': 0}"), "cluster.ps",
              "must be a list of \"host:port\" strings, got string");
  ExpectError(WithTask("{'ps': {'0': 'p:1'}}", "{'type': 'ps', 'index': 0}"), "cluster.ps",
              "got object");
  ExpectError(WithTask("{'ps': ['p:1', 2222]}", "{'type': 'ps', 'index': 0}"), "cluster.ps[1]",
              "must be a \"host:port\" string, got integer");
  ExpectError(WithTask("{'ps': ['p:1', null]}", "{'type': 'ps', 'index': 0}"), "cluster.ps[1]",
              "got null");
}

TEST(TfConfigTest, OneChiefOneEvaluatorAndSomePs) {
  ExpectError(WithTask("{'chief': ['a:1', 'b:1'], 'ps': ['p:1']}", "{'type': 'ps', 'index': 0}"),
              "cluster.chief", "at most one chief task is allowed, got 2");
  ExpectError(
      WithTask("{'evaluator': ['a:1', 'b:1'], 'ps': ['p:1']}", "{'type': 'ps', 'index': 0}"),
      "cluster.evaluator", "at most one evaluator");
  ExpectError(WithTask("{'worker': ['w:1']}", "{'type': 'worker', 'index': 0}"), "cluster.ps",
              "at least one ps task is required");
  ExpectError(WithTask("{'worker': ['w:1'], 'ps': []}", "{'type': 'worker', 'index': 0}"),
              "cluster.ps", "at least one ps task is required");
}

TEST(TfConfigTest, BadAddresses) {
  const std::string task = "{'type': 'ps', 'index': 0}";
  auto with_ps = [&](absl::string_view address) {
    return WithTask(absl::StrCat("{'ps': ['p:1', '", address, "']}"), task);
  };
  absl::StatusOr<TfConfig> config = ParseTfConfig(with_ps("localhost:99999"));
  EXPECT_EQ(config.status().message(),
            "TF_CONFIG: cluster.ps[1]: \"localhost:99999\": port must be 1..65535");
  ExpectError(with_ps("localhost:0"), "cluster.ps[1]", "port must be 1..65535");
  ExpectError(with_ps("localhost:-1"), "cluster.ps[1]", "port must be 1..65535");
  ExpectError(with_ps("localhost:http"), "cluster.ps[1]", "port must be 1..65535");
  ExpectError(with_ps("localhost:"), "cluster.ps[1]", "port must be 1..65535");
  ExpectError(with_ps("localhost:22 "), "cluster.ps[1]", "port must be 1..65535");
  ExpectError(with_ps("localhost"), "cluster.ps[1]", "missing :port");
  ExpectError(with_ps(""), "cluster.ps[1]", "address is empty");
  ExpectError(with_ps(":2222"), "cluster.ps[1]", "host is empty");
  ExpectError(with_ps("::1:2222"), "cluster.ps[1]", "IPv6 address must be in brackets");
  ExpectError(with_ps("[::1]"), "cluster.ps[1]", "expected [ipv6]:port");
  ExpectError(with_ps("[::1:2222"), "cluster.ps[1]", "no closing ']'");
  ExpectError(with_ps("[]:2222"), "cluster.ps[1]", "not a valid IPv6 address");
  ExpectError(with_ps("[zz::1]:2222"), "cluster.ps[1]", "not a valid IPv6 address");
  ExpectError(with_ps("[::1]:70000"), "cluster.ps[1]", "port must be 1..65535");
  ExpectError(with_ps("grpc://ps-1:2222"), "cluster.ps[1]", "without a scheme");
  ExpectError(with_ps("ps 1:2222"), "cluster.ps[1]", "host has an invalid character ' '");
  ExpectError(with_ps("ps\\n1:2222"), "cluster.ps[1]", "\"ps\\n1:2222\"");  // Escaped.
}

TEST(TfConfigTest, DuplicateAddressesNameBothTasks) {
  ExpectError(
      WithTask("{'chief': ['h:1'], 'worker': ['w:1', 'p:2'], 'ps': ['p:1', 'p:2']}",
               "{'type': 'ps', 'index': 0}"),
      "cluster.ps[1]", "\"p:2\": same address as cluster.worker[1]");
  ExpectError(WithTask("{'ps': ['p:1', 'P:1']}", "{'type': 'ps', 'index': 0}"), "cluster.ps[1]",
              "same address as cluster.ps[0]");
  ExpectError(WithTask("{'chief': ['p:1'], 'ps': ['p:1']}", "{'type': 'ps', 'index': 0}"),
              "cluster.ps[0]", "same address as cluster.chief[0]");
}

TEST(TfConfigTest, TaskType) {
  const std::string cluster = "{'ps': ['p:1'], 'worker': ['w:1']}";
  ExpectError(J(absl::StrCat("{'cluster': ", cluster, "}")), "task", "missing");
  ExpectError(WithTask(cluster, "'ps'"), "task", "must be an object");
  ExpectError(WithTask(cluster, "{'index': 0}"), "task.type", "missing");
  ExpectError(WithTask(cluster, "{'type': 1, 'index': 0}"), "task.type", "must be a string");
  ExpectError(WithTask(cluster, "{'type': 'master', 'index': 0}"), "task.type",
              "unknown job \"master\"; expected chief, worker, ps or evaluator");
  ExpectError(WithTask(cluster, "{'type': '', 'index': 0}"), "task.type", "unknown job \"\"");
  ExpectError(WithTask(cluster, "{'type': 'chief', 'index': 0}"), "task.type",
              "\"chief\" has no tasks in cluster");
}

TEST(TfConfigTest, TaskIndex) {
  ExpectError(WithTask(kCluster, "{'type': 'worker'}"), "task.index", "missing");
  absl::StatusOr<TfConfig> config = ParseTfConfig(WithTask(kCluster, "{'type': 'worker', 'index': 3}"));
  EXPECT_EQ(config.status().message(),
            "TF_CONFIG: task.index: 3 is out of range for \"worker\" (2 tasks)");
  ExpectError(WithTask(kCluster, "{'type': 'worker', 'index': 2}"), "task.index",
              "2 is out of range for \"worker\" (2 tasks)");
  ExpectError(WithTask(kCluster, "{'type': 'worker', 'index': '2'}"), "task.index",
              "out of range");
  ExpectError(WithTask(kCluster, "{'type': 'evaluator', 'index': 1}"), "task.index",
              "1 is out of range for \"evaluator\" (1 task)");
  ExpectError(WithTask(kCluster, "{'type': 'worker', 'index': -1}"), "task.index",
              "-1 must be >= 0");
  ExpectError(WithTask(kCluster, "{'type': 'worker', 'index': 1.5}"), "task.index",
              "must be an integer, got 1.5");
  ExpectError(WithTask(kCluster, "{'type': 'worker', 'index': '-1'}"), "task.index",
              "\"-1\" is not a non-negative integer");
  ExpectError(WithTask(kCluster, "{'type': 'worker', 'index': 'one'}"), "task.index",
              "\"one\" is not a non-negative integer");
  ExpectError(WithTask(kCluster, "{'type': 'worker', 'index': ''}"), "task.index",
              "\"\" is not a non-negative integer");
  ExpectError(WithTask(kCluster, "{'type': 'worker', 'index': null}"), "task.index",
              "got null");
  ExpectError(WithTask(kCluster, "{'type': 'worker', 'index': 18446744073709551615}"),
              "task.index", "18446744073709551615 is out of range");
  ExpectError(WithTask(kCluster, "{'type': 'worker', 'index': '99999999999999999999'}"),
              "task.index", "is not a non-negative integer");
  ExpectError(WithTask("{'ps': ['p:1']}", "{'type': 'evaluator', 'index': 99999999999}"),
              "task.index", "too large");
  ExpectError(WithTask("{'ps': ['p:1']}", "{'type': 'evaluator', 'index': -2}"), "task.index",
              "must be >= 0");
}

TEST(TfConfigTest, RpcLayerAndEnvironment) {
  const std::string base = "{'cluster': {'ps': ['p:1']}, 'task': {'type': 'ps', 'index': 0}";
  ExpectError(J(base + ", 'rpc_layer': 'grpc+verbs'}"), "rpc_layer",
              "\"grpc+verbs\" is not supported; only \"grpc\"");
  ExpectError(J(base + ", 'rpc_layer': 1}"), "rpc_layer", "must be a string");
  ExpectError(J(base + ", 'environment': ['cloud']}"), "environment", "must be a string");
  EXPECT_EQ(ParseOk(J(base + ", 'environment': 'google'}")).environment, "google");
}

TEST(TfConfigTest, NeverCrashesOnMalformedInput) {
  const std::string valid = WithTask(kCluster, "{'type': 'ps', 'index': 1}");
  std::mt19937 rng(12345);
  auto check = [](const std::string& input) {
    absl::StatusOr<TfConfig> config = ParseTfConfig(input);
    if (!config.ok()) {
      const std::string message(config.status().message());
      EXPECT_THAT(message, StartsWith("TF_CONFIG: ")) << input;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  };
  for (int i = 0; i < 2000; ++i) {
    std::string input = valid;
    const int edits = 1 + rng() % 4;
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % input.size();
      switch (rng() % 4) {
        case 0: input[pos] = static_cast<char>(rng() % 256); break;
        case 1: input.erase(pos, 1 + rng() % 8); break;
        case 2: input.insert(pos, 1, "{}[]\":,0-9 x\\"[rng() % 14]); break;
        case 3: input.resize(pos); break;
      }
      if (input.empty()) input = "{";
    }
    check(input);
  }
  for (int i = 0; i < 500; ++i) {
    std::string input(rng() % 64, ' ');
    for (char& c : input) c = static_cast<char>(rng() % 256);
    check(input);
  }
  check(std::string(100000, '['));
  check(std::string(100000, '[') + std::string(100000, ']'));
  check(std::string("{\"cluster\": {\"ps\": [\"a:1\"]}, \"task\": {\"type\": \"ps\", "
                    "\"index\": 0}}\0garbage", 60));
}

class LoadTfConfigTest : public ::testing::Test {
 protected:
  std::string WriteFile(const std::string& name, const std::string& contents) {
    const char* dir = std::getenv("TEST_TMPDIR");
    const std::string path = absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
    std::ofstream(path) << contents;
    return path;
  }

  const std::string ps_config_ =
      J("{'cluster': {'ps': ['p:1'], 'worker': ['w:1']}, 'task': {'type': 'ps', 'index': 0}}");
  const std::string worker_config_ =
      J("{'cluster': {'ps': ['p:1'], 'worker': ['w:1']}, 'task': {'type': 'worker', "
        "'index': 0}}");
};

TEST_F(LoadTfConfigTest, InlineFlagWinsOverEnvironment) {
  absl::StatusOr<TfConfig> config = LoadTfConfig(ps_config_, worker_config_.c_str());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->task_type, "ps");
  config = LoadTfConfig("  " + ps_config_, nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
}

TEST_F(LoadTfConfigTest, FlagNamesAFile) {
  const std::string path = WriteFile("tf_config.json", ps_config_);
  absl::StatusOr<TfConfig> config = LoadTfConfig(path, worker_config_.c_str());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->task_type, "ps");
}

TEST_F(LoadTfConfigTest, EnvironmentWhenNoFlag) {
  absl::StatusOr<TfConfig> config = LoadTfConfig("", worker_config_.c_str());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->task_type, "worker");
}

TEST_F(LoadTfConfigTest, Errors) {
  absl::StatusOr<TfConfig> config = LoadTfConfig("", nullptr);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(config.status().message(), "TF_CONFIG is not set and --tf_config was not given");
  EXPECT_EQ(LoadTfConfig("", "").status().code(), absl::StatusCode::kFailedPrecondition);

  config = LoadTfConfig("/nonexistent/tf_config.json", worker_config_.c_str());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr("--tf_config file \"/nonexistent/tf_config.json\": cannot open"));

  const char* dir = std::getenv("TEST_TMPDIR");
  config = LoadTfConfig(dir != nullptr ? dir : "/tmp", nullptr);
  EXPECT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("--tf_config file"));

  const std::string bad = WriteFile("bad.json", J("{'cluster': {'ps': ['p:0']}}"));
  config = LoadTfConfig(bad, nullptr);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(config.status().message()),
              StartsWith("TF_CONFIG: cluster.ps[0]: \"p:0\": port must be 1..65535"));
  EXPECT_THAT(std::string(config.status().message()), HasSubstr(bad));

  config = LoadTfConfig(J("{'cluster': {}}"), nullptr);
  EXPECT_EQ(config.status().message(),
            "TF_CONFIG: cluster.ps: at least one ps task is required (in --tf_config)");

  config = LoadTfConfig("", "not json");
  EXPECT_THAT(std::string(config.status().message()), StartsWith("TF_CONFIG: invalid JSON"));
}

}  // namespace
}  // namespace shardps
