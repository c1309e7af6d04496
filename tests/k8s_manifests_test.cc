// deploy/k8s/ checked offline (no API server can run here):
//
// - EntrypointRejectsBadEnvironment: deploy/k8s/entrypoint.sh with a bad or missing variable
//   prints one line naming it and exits 2 (the daemons' bad-configuration code, which the
//   manifests' podFailurePolicy turns into a failed Job). Needs nothing but bash.
// - ManifestsValidateAgainstKubernetesSchemas: tests/k8s_manifests_check.py --check=schemas
//   (Kubernetes' JSON schemas, strict, from kubernetes-validate; the JobSet's and TFJob's
//   embedded Job and pod templates as core objects, their CRD fields and cert-manager's Issuers
//   and Certificates against the APIs' fields; every pod's TLS Secret, flags and health-port
//   probes; what schemas cannot see), on the real manifests and on a copy with mistakes put in.
// - EveryPodsTfConfigIsAcceptedByItsDaemon: --check=tf_config, every pod of every form rendered
//   as Kubernetes would, the entrypoint dry-run, the real daemons' --validate_config with
//   certificates made as tls.yaml says, which name every pod's DNS name (openssl verify).
// - WithTlsOffEveryDaemonSaysInsecure: generate.py --tls off (no cert-manager), both checks.
//
// The last two need the virtualenv of deploy/python_env.sh (PyYAML, kubernetes-validate), named
// by SHARDPS_VENV (deploy/test.sh passes it); without it they are skipped, saying so:
//   bazel test //tests:k8s_manifests_test --test_env=SHARDPS_VENV=$(deploy/python_env.sh)
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/process.h"

namespace shardps {
namespace testing {
namespace {

namespace fs = std::filesystem;

#define SKIP_WITHOUT_VENV(python)                                                               \
  std::string why;                                                                              \
  const std::string python = VenvPython(&why);                                                  \
  if (python.empty()) {                                                                         \
    GTEST_SKIP() << "\n*** SKIPPED: no Python virtualenv with kubernetes-validate and PyYAML: " \
                 << why                                                                         \
                 << ". The Kubernetes manifests in deploy/k8s are NOT validated. Run:\n***   "  \
                    "bazel test //tests:k8s_manifests_test "                                    \
                    "--test_env=SHARDPS_VENV=$(deploy/python_env.sh)\n";                        \
  }

// The JSON of the line "RESULT {...}" that the script prints last; null when none.
nlohmann::json ParseResult(const std::string& output) {
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::ConsumePrefix(&line, "RESULT ")) {
      return nlohmann::json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    }
  }
  return nullptr;
}

std::string K8sDir() { return BinaryPath("deploy/k8s"); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The daemons, for --check=tf_config.
std::vector<std::string> BinArgs() {
  return {"--bin", "chief=" + BinaryPath("coordinator/chief"),
          "--bin", "ps=" + BinaryPath("ps_server/ps"),
          "--bin", "worker=" + BinaryPath("worker/worker"),
          "--bin", "evaluator=" + BinaryPath("evaluator/evaluator")};
}

// Runs the entrypoint in a clean environment holding only `vars` (and PATH), dry-run.
int RunEntrypoint(const std::vector<std::string>& vars, std::string* output) {
  std::vector<std::string> args = {"-i", "PATH=/usr/bin:/bin", "SHARDPS_ENTRYPOINT_DRY_RUN=1",
                                   "HOSTNAME=test-host"};
  args.insert(args.end(), vars.begin(), vars.end());
  args.push_back(K8sDir() + "/entrypoint.sh");
  args.push_back("--long_lived");
  return RunCommand("/usr/bin/env", args, {}, output).value_or(-1);
}

TEST(K8sManifestsTest, EntrypointRejectsBadEnvironment) {
  const std::vector<std::string> good = {"SHARDPS_NUM_PS=2", "SHARDPS_NUM_WORKERS=2"};
  std::string out;
  // The good case first, so that the bad ones fail for their variable alone.
  {
    std::vector<std::string> vars = good;
    vars.push_back("HOSTNAME=shardps-ps-1");
    ASSERT_EQ(RunEntrypoint(vars, &out), 0) << out;
    EXPECT_NE(out.find(R"("ps": ["shardps-ps-0.shardps-ps.default.svc:2222", )"
                       R"("shardps-ps-1.shardps-ps.default.svc:2222"])"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find(R"("task": {"type": "ps", "index": 1})"), std::string::npos) << out;
    EXPECT_NE(out.find("EXEC /usr/local/bin/ps --long_lived"), std::string::npos) << out;
  }
  // A worker StatefulSet scaled up past SHARDPS_NUM_WORKERS: ordinal 3 lists the workers up to
  // itself (and joins the chief's job: docs/elastic.md).
  {
    std::vector<std::string> vars = good;
    vars.push_back("HOSTNAME=shardps-worker-3");
    ASSERT_EQ(RunEntrypoint(vars, &out), 0) << out;
    EXPECT_NE(out.find(R"("shardps-worker-3.shardps-worker.default.svc:2222"])"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find(R"("task": {"type": "worker", "index": 3})"), std::string::npos) << out;
  }
  // So is a ps StatefulSet: ordinal 2 of 2 lists the ps up to itself (shardctl scale-ps then
  // moves the job onto it).
  {
    std::vector<std::string> vars = good;
    vars.push_back("HOSTNAME=shardps-ps-2");
    ASSERT_EQ(RunEntrypoint(vars, &out), 0) << out;
    EXPECT_NE(out.find(R"("shardps-ps-2.shardps-ps.default.svc:2222"])"), std::string::npos)
        << out;
    EXPECT_NE(out.find(R"("task": {"type": "ps", "index": 2})"), std::string::npos) << out;
  }
  struct Case {
    std::vector<std::string> vars;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"HOSTNAME=web-0"}, "SHARDPS_ROLE is not set and the hostname \"web-0\""},
      {{"SHARDPS_ROLE=boss"}, "SHARDPS_ROLE=\"boss\": must be chief, ps, worker or evaluator"},
      {{"SHARDPS_ROLE=ps"}, "no task index: SHARDPS_TASK_INDEX and JOB_COMPLETION_INDEX"},
      {{"HOSTNAME=shardps-chief-1"}, "task index 1 is out of range for 1 chief task(s)"},
      {{"HOSTNAME=shardps-ps-0", "SHARDPS_TASK_INDEX=01"}, "SHARDPS_TASK_INDEX: \"01\""},
      {{"HOSTNAME=shardps-ps-0", "SHARDPS_NUM_PS=0"}, "SHARDPS_NUM_PS=\"0\": must be"},
      {{"HOSTNAME=shardps-ps-0", "SHARDPS_NUM_WORKERS="}, "SHARDPS_NUM_WORKERS is not set"},
      {{"HOSTNAME=shardps-ps-0", "SHARDPS_EVALUATOR=yes"}, "SHARDPS_EVALUATOR=\"yes\""},
      {{"HOSTNAME=shardps-evaluator-0"}, "SHARDPS_EVALUATOR is not 1"},
      {{"HOSTNAME=shardps-ps-0", "POD_NAMESPACE=Team_A"}, "POD_NAMESPACE=\"Team_A\""},
      {{"HOSTNAME=shardps-ps-0", "SHARDPS_PORT=70000"}, "SHARDPS_PORT=\"70000\""},
      {{"HOSTNAME=j-ps-1-0", "JOBSET_NAME=j"}, "job index 1, but each replicated job"},
      {{"TF_CONFIG={\"cluster\": {}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
        "SHARDPS_ROLE=ps"},
       "SHARDPS_ROLE=\"ps\" but TF_CONFIG's task.type is \"worker\""},
  };
  for (const Case& c : cases) {
    std::vector<std::string> vars = good;
    vars.insert(vars.end(), c.vars.begin(), c.vars.end());
    EXPECT_EQ(RunEntrypoint(vars, &out), 2) << absl::StrJoin(c.vars, " ") << "\n" << out;
    EXPECT_NE(out.find(c.message), std::string::npos) << absl::StrJoin(c.vars, " ") << "\n" << out;
    EXPECT_EQ(out.find("EXEC"), std::string::npos) << out;
  }
}

TEST(K8sManifestsTest, ManifestsValidateAgainstKubernetesSchemas) {
  SKIP_WITHOUT_VENV(python);
  std::string out;
  ASSERT_EQ(RunCommand(python,
                       {"tests/k8s_manifests_check.py", "--check=schemas", "--k8s_dir", K8sDir(),
                        "--repo", BinaryPath("")},
                       {}, &out, absl::Seconds(120))
                .value_or(-1),
            0)
      << out;
  std::cout << out;
  const nlohmann::json result = ParseResult(out);
  ASSERT_TRUE(result.is_object()) << out;
  EXPECT_EQ(result.value("problems", -1), 0);
  // common.yaml (PVC, ConfigMap), cluster.yaml (4 Services, 3 StatefulSets, a PDB),
  // workers-gpu.yaml and workers-cpu.yaml (a StatefulSet each), workers-python.yaml (the
  // workers' and the evaluator's StatefulSets), submit-job.yaml (a Job).
  EXPECT_EQ(result.value("validated", 0), 15) << out;
  EXPECT_EQ(result["kinds"].value("Service", 0), 4);
  EXPECT_EQ(result["kinds"].value("StatefulSet", 0), 7);
  // The JobSet's 4 Job templates and the TFJob's 4 pod templates.
  EXPECT_EQ(result.value("crd_templates_validated", 0), 8) << out;
  // tls.yaml: the self-signed Issuer, the CA Certificate, the CA Issuer, and the Certificates
  // of chief, ps, worker, evaluator and admin.
  EXPECT_EQ(result.value("tls", false), true) << out;
  EXPECT_EQ(result.value("cert_manager_objects", 0), 8) << out;

  // The checks can fail: a copy with a misspelled field (core schema), a JobSet field under a
  // wrong name and a podFailurePolicy beside restartPolicy OnFailure; a Certificate field
  // under a wrong name, a certificate mounted by subPath, a daemon without mutual TLS.
  const std::string bad = FreshTempDir("k8s_bad");
  fs::create_directories(bad);
  for (const auto& entry : fs::directory_iterator(K8sDir())) {
    fs::copy_file(entry.path(), bad + "/" + entry.path().filename().string());
  }
  auto edit = [&](const std::string& name, const std::string& from, const std::string& to) {
    std::ifstream in(bad + "/" + name);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << name << ": " << from;
    text.replace(at, from.size(), to);
    fs::permissions(bad + "/" + name, fs::perms::owner_write, fs::perm_options::add);
    std::ofstream(bad + "/" + name) << text;
  };
  edit("cluster.yaml", "  podManagementPolicy: Parallel\n",
       "  podManagementPolicy: Parallel\n  replica: 3\n");
  edit("jobset.yaml", "enableDNSHostnames: true", "enableDnsHostnames: true");
  edit("jobset.yaml", "            restartPolicy: Never", "            restartPolicy: OnFailure");
  edit("tls.yaml", "  renewBefore: \"720h\"\n", "  renewBefore: \"720h\"\n  dnsName: x\n");
  edit("cluster.yaml", "          mountPath: /etc/shardps/tls\n",
       "          mountPath: /etc/shardps/tls\n          subPath: tls.crt\n");
  edit("tfjob.yaml", "            - \"--tls_client_auth\"\n", "");
  EXPECT_EQ(RunCommand(python,
                       {"tests/k8s_manifests_check.py", "--check=schemas", "--k8s_dir", bad,
                        "--repo", BinaryPath("")},
                       {}, &out, absl::Seconds(120))
                .value_or(-1),
            1)
      << out;
  EXPECT_NE(out.find("StatefulSet/shardps-chief: schema 1.29.0: spec: Additional properties are "
                     "not allowed ('replica' was unexpected)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("field 'enableDnsHostnames' is not one of"), std::string::npos) << out;
  EXPECT_NE(out.find("replicatedJobs[chief]: podFailurePolicy needs the pod's restartPolicy: "
                     "Never"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("tls.yaml: Certificate/shardps-chief spec: field 'dnsName' is not one of"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("StatefulSet/shardps-chief: /etc/shardps/tls is mounted with a subPath"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("TFJob/shardps-tf tfReplicaSpecs.Chief: args lack ['--tls_client_auth']"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("generate.py --check"), std::string::npos) << out;
}

TEST(K8sManifestsTest, EveryPodsTfConfigIsAcceptedByItsDaemon) {
  SKIP_WITHOUT_VENV(python);
  std::string out;
  std::vector<std::string> args = {"tests/k8s_manifests_check.py", "--check=tf_config",
                                   "--k8s_dir", K8sDir(), "--entrypoint",
                                   K8sDir() + "/entrypoint.sh"};
  for (const std::string& arg : BinArgs()) args.push_back(arg);
  ASSERT_EQ(RunCommand(python, args, {}, &out, absl::Seconds(240)).value_or(-1), 0) << out;
  std::cout << out;
  const nlohmann::json result = ParseResult(out);
  ASSERT_TRUE(result.is_object()) << out;
  EXPECT_EQ(result.value("problems", -1), 0);
  // 1 chief + 2 ps + 2 workers + 1 evaluator, in each of: the StatefulSets with GPU workers,
  // with CPU workers, with Python workers and evaluator, the JobSet and the TFJob.
  EXPECT_EQ(result.value("pods", 0), 5 * 6) << out;
  // Every pod's DNS name is named by the certificate it mounts: 6 in each StatefulSet form and
  // the JobSet, 5 in the TFJob (its evaluator is in no TF_CONFIG).
  EXPECT_EQ(result.value("tls_names_verified", 0), 6 * 4 + 5) << out;

  // The check can fail: in a copy, the JobSet's chief counts 3 ps where the ps Job runs 2, and
  // the ps' certificate lacks the name of the StatefulSets' ps pods.
  const std::string bad = FreshTempDir("k8s_bad_counts");
  fs::create_directories(bad);
  for (const auto& entry : fs::directory_iterator(K8sDir())) {
    fs::copy_file(entry.path(), bad + "/" + entry.path().filename().string());
  }
  std::string text;
  {
    std::ifstream in(bad + "/jobset.yaml");
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  const std::string from = "- name: SHARDPS_NUM_PS\n                value: \"2\"";
  const size_t at = text.find(from);  // the first: the chief's
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, from.size(), "- name: SHARDPS_NUM_PS\n                value: \"3\"");
  fs::permissions(bad + "/jobset.yaml", fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(bad + "/jobset.yaml") << text;
  text = ReadFile(bad + "/tls.yaml");
  const std::string wildcard = "  - \"*.shardps-ps.default.svc\"\n";
  const size_t w = text.find(wildcard);
  ASSERT_NE(w, std::string::npos) << text;
  text.erase(w, wildcard.size());
  fs::permissions(bad + "/tls.yaml", fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(bad + "/tls.yaml") << text;
  args[3] = bad;  // --k8s_dir
  EXPECT_EQ(RunCommand(python, args, {}, &out, absl::Seconds(240)).value_or(-1), 1) << out;
  EXPECT_NE(out.find("jobset.yaml: pod shardps-job-chief-0-0: cluster.ps[2] "
                     "'shardps-job-ps-0-2.shardps-job.shardps-test.svc:2222' is no pod"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("workers-gpu.yaml: shardps-ps-0.shardps-ps.shardps-test.svc: the certificate "
                     "its pod mounts (shardps-ps-tls) does not name "
                     "shardps-ps-0.shardps-ps.default.svc"),
            std::string::npos)
      << out;
}

TEST(K8sManifestsTest, WithTlsOffEveryDaemonSaysInsecure) {
  SKIP_WITHOUT_VENV(python);
  // For a cluster without cert-manager: generate.py --tls off into a directory of its own.
  const std::string off = FreshTempDir("k8s_tls_off");
  std::string out;
  ASSERT_EQ(RunCommand(python, {K8sDir() + "/generate.py", "--tls", "off", "--out", off}, {},
                       &out)
                .value_or(-1),
            0)
      << out;
  EXPECT_FALSE(fs::exists(off + "/tls.yaml"));
  EXPECT_NE(ReadFile(off + "/cluster.yaml").find("- \"--insecure\"\n"), std::string::npos);
  EXPECT_EQ(ReadFile(off + "/cluster.yaml").find("--tls_"), std::string::npos);
  ASSERT_EQ(RunCommand(python,
                       {"tests/k8s_manifests_check.py", "--check=schemas", "--k8s_dir", off,
                        "--repo", BinaryPath(""), "--generator", K8sDir() + "/generate.py"},
                       {}, &out, absl::Seconds(120))
                .value_or(-1),
            0)
      << out;
  nlohmann::json result = ParseResult(out);
  ASSERT_TRUE(result.is_object()) << out;
  EXPECT_EQ(result.value("tls", true), false) << out;
  EXPECT_EQ(result.value("validated", 0), 15) << out;
  std::vector<std::string> args = {"tests/k8s_manifests_check.py", "--check=tf_config",
                                   "--k8s_dir", off, "--entrypoint",
                                   K8sDir() + "/entrypoint.sh"};
  for (const std::string& arg : BinArgs()) args.push_back(arg);
  ASSERT_EQ(RunCommand(python, args, {}, &out, absl::Seconds(240)).value_or(-1), 0) << out;
  result = ParseResult(out);
  ASSERT_TRUE(result.is_object()) << out;
  EXPECT_EQ(result.value("pods", 0), 5 * 6) << out;

  // And the committed manifests are TLS on: the check refuses them as --tls off's output.
  ASSERT_TRUE(fs::remove(off + "/cluster.yaml"));
  fs::copy_file(K8sDir() + "/cluster.yaml", off + "/cluster.yaml");
  EXPECT_EQ(RunCommand(python,
                       {"tests/k8s_manifests_check.py", "--check=schemas", "--k8s_dir", off,
                        "--repo", BinaryPath(""), "--generator", K8sDir() + "/generate.py"},
                       {}, &out, absl::Seconds(120))
                .value_or(-1),
            1)
      << out;
  EXPECT_NE(out.find("StatefulSet/shardps-ps: no tls.yaml (TLS off), but the container does not "
                     "say --insecure"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace testing
}  // namespace shardps
