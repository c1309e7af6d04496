// deploy/image checked offline: deploy/image/build.sh builds the images from the binaries Bazel
// built for this test (fastbuild, passed with --bin: no second build), then
//
// - CpuImageHasTheDaemonsAndNoCuda: the CPU image's layer, unpacked from the archive as a
//   runtime would, has the daemons, the entrypoint, the data set and the job files, and no
//   CUDA library at all. Needs tar only.
// - ArchiveIsReadByRealTools: skopeo reads the archive in both of its formats (OCI and
//   Docker's) and umoci unpacks the OCI layout into a runtime bundle. Skipped, saying so,
//   when neither is installed (deploy/image/tools.sh installs them).
// - DaemonsRunInTheCpuImage: each daemon's --help and --validate_config with a TF_CONFIG,
//   the entrypoint's dry run, the entrypoint exec'ing each daemon's --validate_config with
//   deploy/k8s's TLS flags on certificates where a pod mounts them, and a worker with
//   --backend=auto and mutual TLS (SHARDPS_TLS_* in its environment) that starts on the CPU
//   (logging why: no CUDA plugin in this image) and exits 5 on SIGTERM — in `podman run`
//   where it works and in a chroot into the
//   unpacked image (with its own /proc, as a container has), saying which ran. Skipped when
//   neither can run here (no podman and not root).
// - GpuImageLoadsTheCudaPlugin: the GPU image adds only the plugin and cudart, cuBLAS and
//   cuBLASLt (no driver library) on the CPU image's very layer; in a chroot into it the
//   worker loads the plugin and, with no GPU driver in the image, reports "no CUDA device"
//   under --backend=gpu and trains on the CPU under auto. Skipped without root (chroot).
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/process.h"
#include "tests/wait.h"

namespace shardps {
namespace testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kPath[] = "PATH=/usr/local/bin:/usr/bin:/bin";
const std::vector<std::string> kDaemons = {"ps", "worker", "chief", "evaluator"};

// `name` on PATH, or "".
std::string Which(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  for (const char* dir : {"/usr/sbin", "/sbin"}) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int RunTool(const std::string& binary, const std::vector<std::string>& args, std::string* output,
            absl::Duration timeout = absl::Seconds(120)) {
  return RunCommand(binary, args, {}, output, timeout).value_or(-1);
}

// One image built by build.sh: its entry in images.json, and its file system unpacked from the
// archive's layers (in order, as a runtime unpacks them).
struct Image {
  nlohmann::json info;
  std::string archive;
  std::string rootfs;
};

// build.sh into `out`; returns images.json, or null with the reason in *error.
nlohmann::json BuildImages(const std::vector<std::string>& flags, const std::string& out,
                           std::string* error) {
  std::vector<std::string> args = {BinaryPath("deploy/image/build.sh"),
                                   "--bin",
                                   BinaryPath(""),
                                   "--out",
                                   out,
                                   "--tag",
                                   "test",
                                   "--no_install"};
  args.insert(args.end(), flags.begin(), flags.end());
  std::string output;
  const absl::Time start = absl::Now();
  const int rc = RunTool("/bin/bash", args, &output, absl::Seconds(240));
  std::cout << "build.sh " << absl::StrJoin(flags, " ") << " (" << absl::Now() - start << "):\n"
            << output;
  if (rc != 0) {
    *error = absl::StrCat("build.sh exited ", rc, ":\n", output);
    return nullptr;
  }
  return nlohmann::json::parse(ReadFile(out + "/images.json"), nullptr, false);
}

// Unpacks the image in `archive` into `rootfs` as a runtime does: its Docker manifest.json, then
// each layer in order, streamed out of the archive (no second copy of a 600 MB layer on disk).
absl::Status Unpack(const std::string& archive, const std::string& rootfs) {
  fs::create_directories(rootfs);
  std::string out;
  if (RunTool("/usr/bin/tar", {"-xOf", archive, "manifest.json"}, &out) != 0) {
    return absl::InternalError(absl::StrCat("tar -xOf ", archive, " manifest.json: ", out));
  }
  const nlohmann::json manifest = nlohmann::json::parse(out, nullptr, false);
  if (!manifest.is_array() || manifest.size() != 1) {
    return absl::InternalError(absl::StrCat(archive, ": manifest.json is not one image: ", out));
  }
  for (const auto& layer : manifest[0]["Layers"]) {
    // tar -p as root: owners and modes as the layer has them, as a runtime unpacks.
    const std::string script =
        absl::StrCat("set -o pipefail; tar -xOf '", archive, "' '", layer.get<std::string>(),
                     "' | gzip -dcf | tar -xpf - -C '", rootfs, "'");
    if (RunTool("/bin/bash", {"-c", script}, &out) != 0) {
      return absl::InternalError(absl::StrCat(script, ": ", out));
    }
  }
  return absl::OkStatus();
}

// Files under `root` whose name starts with one of the CUDA libraries' names.
std::vector<std::string> CudaFiles(const std::string& root) {
  std::vector<std::string> found;
  for (auto it =
           fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied);
       it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    for (const char* prefix : {"libcuda", "libcublas", "libcudart", "libshardps_cuda", "libnv"}) {
      if (absl::StartsWith(name, prefix)) found.push_back(it->path().string());
    }
  }
  return found;
}

// How a command runs inside the image: `podman run` or chroot.
class Runner {
 public:
  virtual ~Runner() = default;
  virtual std::string Name() const = 0;
  // Whether the image's processes see a /proc (and so /proc/self/exe), as in a container.
  virtual bool HasProc() const { return true; }
  // binary and args that run `argv` (argv[0] a path in the image) in the image with only the
  // image's PATH and `env` set. With `entrypoint`, argv is the image entrypoint's arguments.
  virtual std::pair<std::string, std::vector<std::string>> Command(
      const std::map<std::string, std::string>& env, const std::vector<std::string>& argv,
      bool entrypoint) const = 0;

  // Makes the host's directory `host_dir` appear at `in_image` for the commands run after, as
  // a pod's mounted Secret.
  virtual void AddDirectory(const std::string& host_dir, const std::string& in_image) = 0;

  int Run(const std::map<std::string, std::string>& env, const std::vector<std::string>& argv,
          std::string* output, bool entrypoint = false) const {
    auto [binary, args] = Command(env, argv, entrypoint);
    return RunTool(binary, args, output, absl::Seconds(60));
  }
};

// chroot into an unpacked image; with unshare (a mount namespace of its own), a fresh /proc
// there, as a container has (the worker looks for the CUDA plugin beside /proc/self/exe).
class ChrootRunner : public Runner {
 public:
  ChrootRunner(std::string rootfs, bool mount_proc)
      : rootfs_(std::move(rootfs)), mount_proc_(mount_proc) {}
  std::string Name() const override {
    return mount_proc_ ? "chroot (unshare --mount-proc)" : "chroot (no /proc)";
  }
  bool HasProc() const override { return mount_proc_; }
  void AddDirectory(const std::string& host_dir, const std::string& in_image) override {
    fs::create_directories(rootfs_ + in_image);
    fs::copy(host_dir, rootfs_ + in_image,
             fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  }
  std::pair<std::string, std::vector<std::string>> Command(
      const std::map<std::string, std::string>& env, const std::vector<std::string>& argv,
      bool entrypoint) const override {
    std::vector<std::string> args;
    if (mount_proc_) args = {"--mount", "--mount-proc=" + rootfs_ + "/proc", Which("chroot")};
    args.push_back(rootfs_);
    args.insert(args.end(), {"/usr/bin/env", "-i", kPath});
    for (const auto& [k, v] : env) args.push_back(absl::StrCat(k, "=", v));
    if (entrypoint) args.push_back("/usr/local/bin/shardps-entrypoint");
    args.insert(args.end(), argv.begin(), argv.end());
    return {mount_proc_ ? Which("unshare") : Which("chroot"), args};
  }

 private:
  const std::string rootfs_;
  const bool mount_proc_;
};

// podman run on a private store in the test's temp dir, without network. The ulimits: podman
// asks for more open files and processes than this sandbox's hard limits allow, which fails
// (the runtime cannot raise them); runc, where installed, because crun refuses this machine's
// hybrid cgroups. Its run dir is under /tmp (podman takes at most 50 characters there) and
// removed at the end.
class PodmanRunner : public Runner {
 public:
  PodmanRunner(const std::string& store, std::string image)
      : image_(std::move(image)), store_(store) {
    char run_dir[] = "/tmp/shardps-podman.XXXXXX";
    if (mkdtemp(run_dir) != nullptr) run_dir_ = run_dir;
    global_ = {"--root", store + "/root", "--runroot", run_dir_, "--storage-driver", "vfs"};
    if (!Which("runc").empty()) global_.insert(global_.end(), {"--runtime", Which("runc")});
  }
  ~PodmanRunner() override {
    std::error_code ignored;
    if (!run_dir_.empty()) fs::remove_all(run_dir_, ignored);
    fs::remove_all(store_, ignored);
  }
  std::string Name() const override { return "podman run"; }
  const std::vector<std::string>& global() const { return global_; }
  void AddDirectory(const std::string& host_dir, const std::string& in_image) override {
    volumes_.push_back(absl::StrCat("--volume=", host_dir, ":", in_image, ":ro"));
  }
  std::pair<std::string, std::vector<std::string>> Command(
      const std::map<std::string, std::string>& env, const std::vector<std::string>& argv,
      bool entrypoint) const override {
    std::vector<std::string> args = global_;
    args.insert(args.end(), {"run", "--rm", "--network=none", "--ulimit", "nofile=4096:4096",
                             "--ulimit", "nproc=4096:4096"});
    args.insert(args.end(), volumes_.begin(), volumes_.end());
    for (const auto& [k, v] : env) {
      if (k == "HOSTNAME") {
        args.push_back("--hostname=" + v);
      } else {
        args.push_back(absl::StrCat("--env=", k, "=", v));
      }
    }
    if (!entrypoint) args.push_back("--entrypoint=" + argv[0]);
    args.push_back(image_);
    args.insert(args.end(), argv.begin() + (entrypoint ? 0 : 1), argv.end());
    return {Which("podman"), args};
  }

 private:
  const std::string image_;
  const std::string store_;  // removed at the end
  std::string run_dir_;
  std::vector<std::string> global_;
  std::vector<std::string> volumes_;  // --volume=HOST:IMAGE:ro
};

class ImageTest : public ::testing::Test {
 protected:
  // The CPU image, built and unpacked once for the cases that use it.
  static void SetUpTestSuite() {
    std::string error;
    const std::string out = FreshTempDir("cpu_image");
    const nlohmann::json images = BuildImages({}, out, &error);
    if (!images.is_object()) {
      build_error_ = new std::string(error.empty() ? "images.json is not JSON" : error);
      return;
    }
    cpu_ =
        new Image{images["images"][0], images["images"][0].value("archive", ""), out + "/rootfs"};
    if (absl::Status s = Unpack(cpu_->archive, cpu_->rootfs); !s.ok()) {
      build_error_ = new std::string(s.ToString());
    }
  }

  static void TearDownTestSuite() {
    if (cpu_ != nullptr) {
      std::error_code ignored;
      fs::remove_all(fs::path(cpu_->rootfs).parent_path(), ignored);
    }
  }

  void SetUp() override {
    if (build_error_ != nullptr) FAIL() << *build_error_;
    ASSERT_NE(cpu_, nullptr);
  }

  // Whether chroot works here (root, or CAP_SYS_CHROOT), and whether unshare can give the
  // chroot its own /proc; the runner, or null with the reason in *why.
  static std::unique_ptr<Runner> Chroot(const std::string& rootfs, std::string* why) {
    if (Which("chroot").empty()) {
      *why = "no chroot on PATH";
      return nullptr;
    }
    std::string out;
    for (bool mount_proc : {true, false}) {
      if (mount_proc && Which("unshare").empty()) continue;
      auto runner = std::make_unique<ChrootRunner>(rootfs, mount_proc);
      if (runner->Run({}, {"/usr/local/bin/ps", "--help"}, &out) == 0) return runner;
      *why = absl::StrCat(runner->Name(), " failed: ", out);
    }
    return nullptr;
  }

  static Image* cpu_;
  static std::string* build_error_;
};

Image* ImageTest::cpu_ = nullptr;
std::string* ImageTest::build_error_ = nullptr;

TEST_F(ImageTest, CpuImageHasTheDaemonsAndNoCuda) {
  const nlohmann::json& info = cpu_->info;
  EXPECT_EQ(info.value("name", ""), "shardps:test");
  EXPECT_EQ(info["layers"].size(), 1u);
  // gzip layers: the archive is smaller than what it unpacks to.
  EXPECT_LT(info.value("compressed_bytes", 0), info.value("uncompressed_bytes", 0));
  EXPECT_EQ(info["cuda_libraries"].size(), 0u);
  const std::string root = cpu_->rootfs;
  for (const std::string& f :
       {"/usr/local/bin/ps", "/usr/local/bin/worker", "/usr/local/bin/chief",
        "/usr/local/bin/evaluator", "/usr/local/bin/shardctl", "/usr/local/bin/shardps-entrypoint",
        "/usr/bin/bash", "/usr/bin/env", "/usr/lib64/ld-linux-x86-64.so.2"}) {
    EXPECT_EQ(access((root + f).c_str(), X_OK), 0) << f;
  }
  for (const std::string& f : {"/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
                               "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz",
                               "/etc/shardps/jobs/fashion_mlp.json", "/etc/nsswitch.conf",
                               "/usr/share/doc/libc6/copyright"}) {
    EXPECT_TRUE(fs::is_regular_file(root + f)) << f;
  }
  EXPECT_EQ(fs::status(root + "/tmp").permissions() & fs::perms::sticky_bit, fs::perms::sticky_bit);
  // The entrypoint is the repository's, byte for byte.
  EXPECT_EQ(ReadFile(root + "/usr/local/bin/shardps-entrypoint"),
            ReadFile(BinaryPath("deploy/k8s/entrypoint.sh")));
  EXPECT_THAT(CudaFiles(root), ::testing::IsEmpty());
  // The check can fail: the same walk over the GPU plugin's own directory finds it.
  EXPECT_THAT(CudaFiles(BinaryPath("model/cuda_plugin")), Not(::testing::IsEmpty()));
}

TEST_F(ImageTest, ArchiveIsReadByRealTools) {
  const std::string skopeo = Which("skopeo");
  const std::string umoci = Which("umoci");
  if (skopeo.empty() && umoci.empty()) {
    GTEST_SKIP() << "\n*** SKIPPED: neither skopeo nor umoci is installed: the image archive is "
                    "NOT checked by a container tool. Run deploy/image/tools.sh (apt) first.\n";
  }
  std::string out;
  if (skopeo.empty()) {
    std::cout << "*** skopeo is not installed: not checked with skopeo\n";
  } else {
    for (const std::string transport : {"oci-archive:", "docker-archive:"}) {
      ASSERT_EQ(RunTool(skopeo, {"inspect", transport + cpu_->archive}, &out), 0) << out;
      const nlohmann::json inspect = nlohmann::json::parse(out, nullptr, false);
      ASSERT_TRUE(inspect.is_object()) << out;
      EXPECT_EQ(inspect.value("Architecture", ""), "amd64");
      EXPECT_EQ(inspect["Layers"].size(), 1u) << out;
      if (transport == "oci-archive:") {
        EXPECT_EQ(inspect.value("Digest", ""), cpu_->info.value("manifest_digest", "?"));
      }
    }
    ASSERT_EQ(RunTool(skopeo, {"inspect", "--config", "oci-archive:" + cpu_->archive}, &out), 0);
    const nlohmann::json config = nlohmann::json::parse(out, nullptr, false);
    EXPECT_EQ(config["config"]["Entrypoint"],
              nlohmann::json::array({"/usr/local/bin/shardps-entrypoint"}));
    std::cout << "skopeo " << skopeo << " reads the archive as oci-archive and docker-archive\n";
  }
  if (umoci.empty()) {
    std::cout << "*** umoci is not installed: not unpacked with umoci\n";
  } else {
    const std::string dir = FreshTempDir("umoci");
    fs::create_directories(dir + "/layout");
    ASSERT_EQ(RunTool("/usr/bin/tar", {"-xf", cpu_->archive, "-C", dir + "/layout"}, &out), 0);
    ASSERT_EQ(RunTool(umoci, {"unpack", "--image", dir + "/layout:test", dir + "/bundle"}, &out), 0)
        << out;
    const nlohmann::json bundle =
        nlohmann::json::parse(ReadFile(dir + "/bundle/config.json"), nullptr, false);
    EXPECT_EQ(bundle["process"]["args"][0], "/usr/local/bin/shardps-entrypoint") << bundle;
    EXPECT_EQ(access((dir + "/bundle/rootfs/usr/local/bin/worker").c_str(), X_OK), 0);
    std::cout << "umoci " << umoci << " unpacks the OCI layout into a runtime bundle\n";
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
}

// Starts the image's worker with `backend_flag` under `runner`, at `address`, waits until it
// serves (or has exited), and stops it with SIGTERM; returns its log and its exit code in
// *exit_code.
std::string StartAndStopWorker(const Runner& runner, const std::string& address,
                               const std::string& backend_flag, int* exit_code,
                               std::map<std::string, std::string> env = {}) {
  env["TF_CONFIG"] =
      MakeTfConfig({{"chief", {"127.0.0.1:1"}}, {"ps", {"127.0.0.1:2"}}, {"worker", {address}}},
                   "worker", 0);
  auto [binary, args] =
      runner.Command(env, {"/usr/local/bin/worker", backend_flag, "--threads=2"}, false);
  static int count = 0;
  const std::string log = absl::StrCat(TempDir(), "/worker_", count++, ".log");
  auto worker = Process::Start(binary, args, {}, log);
  if (!worker.ok()) return worker.status().ToString();
  PollUntil([&] { return absl::StrContains((*worker)->Log(), "serving on") || !(*worker)->Running(); },
            absl::Now() + absl::Seconds(60), absl::Milliseconds(50));
  (*worker)->Signal(SIGTERM);
  *exit_code = (*worker)->Wait(absl::Seconds(30)).value_or(-1);
  return (*worker)->Log();
}

// Where deploy/k8s mounts a pod's certificate (its role's Secret), and the flags it gives.
constexpr char kTlsDir[] = "/etc/shardps/tls";
const std::vector<std::string> kTlsFlags = {
    "--tls_cert_file=/etc/shardps/tls/tls.crt", "--tls_key_file=/etc/shardps/tls/tls.key",
    "--tls_ca_file=/etc/shardps/tls/ca.crt", "--tls_client_auth"};

// Everything the CPU image must do under `runner`. `host_network`: the runner shares this
// machine's network (chroot), so the worker takes an address of its own.
void CheckDaemons(Runner& runner, bool host_network) {
  SCOPED_TRACE(runner.Name());
  std::string out;
  const std::string address = host_network ? LoopbackAddress() : "127.0.0.1:2222";
  // A certificate for the worker's address and its pod's name, its role, as a pod's Secret
  // holds it (tls.crt, tls.key, ca.crt), made by deploy/certs.sh and put where pods mount it.
  const std::string tls = FreshTempDir("tls");
  ASSERT_EQ(RunTool(BinaryPath("deploy/certs.sh"),
                    {tls, absl::StrCat("tls=IP:", address.substr(0, address.rfind(':')),
                                       ",DNS:shardps-worker-0.shardps-worker.default.svc,"
                                       "URI:spiffe://shardps/worker")},
                    &out),
            0)
      << out;
  runner.AddDirectory(tls, kTlsDir);
  for (const std::string& daemon : {"ps", "worker", "chief", "evaluator", "shardctl"}) {
    EXPECT_EQ(runner.Run({}, {"/usr/local/bin/" + daemon, "--help"}, &out), 0) << daemon << out;
    EXPECT_THAT(out, HasSubstr("usage: " + daemon)) << daemon;
  }
  const std::map<std::string, std::vector<std::string>> cluster = {
      {"chief", {"shardps-chief-0.shardps-chief.default.svc:2222"}},
      {"ps",
       {"shardps-ps-0.shardps-ps.default.svc:2222", "shardps-ps-1.shardps-ps.default.svc:2222"}},
      {"worker", {"shardps-worker-0.shardps-worker.default.svc:2222"}},
      {"evaluator", {"shardps-evaluator-0.shardps-evaluator.default.svc:2222"}}};
  for (const std::string& daemon : kDaemons) {
    const int index = daemon == "ps" ? 1 : 0;
    EXPECT_EQ(runner.Run({{"TF_CONFIG", MakeTfConfig(cluster, daemon, index)}},
                         {"/usr/local/bin/" + daemon, "--validate_config"}, &out),
              0)
        << daemon << out;
    EXPECT_THAT(out, HasSubstr(absl::StrCat("TF_CONFIG OK: ", daemon, ":", index, " at ",
                                            cluster.at(daemon)[index])))
        << daemon;
    // The entrypoint as Kubernetes runs it: the pod's hostname and the cluster's sizes, and
    // the daemon it execs checks the TF_CONFIG it wrote.
    const std::map<std::string, std::string> pod = {
        {"HOSTNAME", absl::StrCat("shardps-", daemon, "-", index)},
        {"SHARDPS_NUM_PS", "2"},
        {"SHARDPS_NUM_WORKERS", "1"},
        {"SHARDPS_EVALUATOR", "1"}};
    std::vector<std::string> validate = {"--validate_config"};
    validate.insert(validate.end(), kTlsFlags.begin(), kTlsFlags.end());
    EXPECT_EQ(runner.Run(pod, validate, &out, /*entrypoint=*/true), 0) << daemon << out;
    EXPECT_THAT(out, HasSubstr(absl::StrCat("TF_CONFIG OK: ", daemon, ":", index, " at ",
                                            cluster.at(daemon)[index])))
        << daemon;
    std::map<std::string, std::string> dry = pod;
    dry["SHARDPS_ENTRYPOINT_DRY_RUN"] = "1";
    EXPECT_EQ(runner.Run(dry, {"--long_lived"}, &out, /*entrypoint=*/true), 0) << daemon << out;
    EXPECT_THAT(out, HasSubstr(absl::StrCat("EXEC /usr/local/bin/", daemon, " --long_lived")));
    EXPECT_THAT(out, HasSubstr(absl::StrCat("\"task\": {\"type\": \"", daemon,
                                            "\", \"index\": ", index, "}")));
  }

  // A worker starts with --backend=auto, on the CPU, saying why, serving mutual TLS with the
  // certificate from its environment, and stops on SIGTERM.
  int exit_code = -1;
  const std::string log =
      StartAndStopWorker(runner, address, "--backend=auto", &exit_code,
                         {{"SHARDPS_TLS_CERT_FILE", absl::StrCat(kTlsDir, "/tls.crt")},
                          {"SHARDPS_TLS_KEY_FILE", absl::StrCat(kTlsDir, "/tls.key")},
                          {"SHARDPS_TLS_CA_FILE", absl::StrCat(kTlsDir, "/ca.crt")},
                          {"SHARDPS_TLS_CLIENT_AUTH", "true"}});
  EXPECT_THAT(log, HasSubstr(absl::StrCat("TLS on ", address,
                                          ": on, client certificates of the CA required; CA ",
                                          kTlsDir, "/ca.crt")));
  EXPECT_THAT(log,
              HasSubstr(absl::StrCat("serving on ", address, ", backend cpu (Eigen, 2 threads)")));
  EXPECT_THAT(log, HasSubstr("compute backend auto: using the CPU, the GPU backend is not "
                             "available: no CUDA plugin (libshardps_cuda.so)"));
  if (runner.HasProc()) {
    EXPECT_THAT(log, HasSubstr("found; tried /usr/local/bin/libshardps_cuda.so: cannot open "
                               "shared object file: No such file or directory; "
                               "/usr/local/bin/../lib/shardps/libshardps_cuda.so: cannot open"));
  }
  EXPECT_EQ(exit_code, 5) << log;  // stopped by a signal (docs/exit-codes.md)
  std::cout << "--- " << runner.Name() << ": worker --backend=auto in the CPU image:\n" << log;
}

TEST_F(ImageTest, DaemonsRunInTheCpuImage) {
  std::vector<std::string> ran, not_ran;
  std::string out;
  if (Which("podman").empty()) {
    not_ran.push_back("podman run: podman is not installed (deploy/image/tools.sh)");
  } else {
    PodmanRunner podman(FreshTempDir("podman"), "docker.io/library/shardps:test");
    std::vector<std::string> load = podman.global();
    load.insert(load.end(), {"load", "-i", cpu_->archive});
    if (RunTool(Which("podman"), load, &out) != 0) {
      ADD_FAILURE() << "podman load -i " << cpu_->archive << " failed:\n" << out;
    } else if (podman.Run({}, {"/usr/local/bin/ps", "--help"}, &out) != 0) {
      not_ran.push_back("podman run: fails here: " + out);
    } else {
      CheckDaemons(podman, /*host_network=*/false);
      ran.push_back(podman.Name());
    }
  }
  std::string why;
  std::unique_ptr<Runner> chroot = Chroot(cpu_->rootfs, &why);
  if (chroot == nullptr) {
    not_ran.push_back("chroot: " + why);
  } else {
    CheckDaemons(*chroot, /*host_network=*/true);
    ran.push_back(chroot->Name());
  }
  std::cout << "\nran the CPU image's binaries in: "
            << (ran.empty() ? "nothing" : absl::StrJoin(ran, " and ")) << "\n";
  for (const std::string& r : not_ran) std::cout << "not in " << r << "\n";
  if (ran.empty()) {
    GTEST_SKIP() << "\n*** SKIPPED: the image's binaries did NOT run: "
                 << absl::StrJoin(not_ran, "; ") << "\n";
  }
}

TEST_F(ImageTest, GpuImageLoadsTheCudaPlugin) {
  // Layers left uncompressed: gzip of cuBLASLt's 540 MB would take this test half a minute.
  std::string error;
  const std::string out = FreshTempDir("gpu_image");
  // 2 GB (layout, archive, file system): removed at the end, passed or not.
  struct RemoveAtEnd {
    std::string dir;
    ~RemoveAtEnd() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  } remove_at_end{out};
  const nlohmann::json images = BuildImages({"--gpu", "--compression", "none"}, out, &error);
  ASSERT_TRUE(images.is_object()) << error;
  ASSERT_EQ(images["images"].size(), 2u);
  const nlohmann::json& cpu = images["images"][0];
  const nlohmann::json& gpu = images["images"][1];
  EXPECT_EQ(gpu.value("name", ""), "shardps:test-gpu");
  ASSERT_EQ(gpu["layers"].size(), 2u);
  // One layer shared with the CPU image (and, as layers are reproducible, with the gzip'd
  // build's once uncompressed: the same diff).
  EXPECT_EQ(gpu["layers"][0]["digest"], cpu["layers"][0]["digest"]);
  EXPECT_EQ(gpu["layers"][0]["uncompressed"], cpu_->info["layers"][0]["uncompressed"]);
  EXPECT_EQ(gpu["cuda_libraries"],
            nlohmann::json::array({"libcublas.so.13", "libcublasLt.so.13", "libcudart.so.13"}));
  const std::string gpu_layer = ReadFile(gpu.value("files", ""));
  for (const std::string& lib :
       {"libshardps_cuda.so", "libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13"}) {
    EXPECT_THAT(gpu_layer, HasSubstr(" /usr/local/lib/shardps/" + lib + "  <- ")) << lib;
  }
  // The driver comes from the node (the NVIDIA container toolkit), never from the image.
  EXPECT_THAT(gpu_layer, Not(HasSubstr("libcuda.so")));

  const std::string rootfs = out + "/rootfs";
  const absl::Status unpacked = Unpack(gpu.value("archive", ""), rootfs);
  ASSERT_TRUE(unpacked.ok()) << unpacked;
  std::string why;
  std::unique_ptr<Runner> chroot = Chroot(rootfs, &why);
  if (chroot == nullptr || chroot->Name() != "chroot (unshare --mount-proc)") {
    GTEST_SKIP() << "\n*** SKIPPED: the GPU image's worker did NOT run: " << why
                 << " (needs chroot and unshare: root)\n";
  }
  std::cout << "running the GPU image's worker in: " << chroot->Name()
            << " (not podman: its vfs store would copy the 600 MB layer twice)\n";
  const std::map<std::string, std::string> env = {
      {"TF_CONFIG",
       MakeTfConfig(
           {{"chief", {"127.0.0.1:1"}}, {"ps", {"127.0.0.1:2"}}, {"worker", {LoopbackAddress()}}},
           "worker", 0)}};
  std::string log;
  // The plugin loads (cudart and cuBLAS resolve inside the image), and without a driver the
  // CUDA runtime sees no device: the error of a node without a GPU, not of a missing plugin.
  EXPECT_EQ(chroot->Run(env, {"/usr/local/bin/worker", "--backend=gpu"}, &log), 1) << log;
  EXPECT_THAT(log, HasSubstr("creating the compute backend: no CUDA device")) << log;
  EXPECT_THAT(log, Not(HasSubstr("no CUDA plugin")));
  std::cout << "--- worker --backend=gpu in the GPU image:\n" << log;
  // Under auto, the plugin loads and sees no device: the CPU, with no word of a missing plugin.
  int exit_code = -1;
  const std::string address = LoopbackAddress();
  log = StartAndStopWorker(*chroot, address, "--backend=auto", &exit_code);
  EXPECT_THAT(log,
              HasSubstr(absl::StrCat("serving on ", address, ", backend cpu (Eigen, 2 threads)")));
  EXPECT_THAT(log, Not(HasSubstr("GPU backend is not available")));
  EXPECT_EQ(exit_code, 5) << log;
  // Every library the plugin needs resolves inside the image (what ldd does, by the image's
  // own dynamic loader: the image has no ldd).
  auto [binary, args] = chroot->Command(
      {{"LD_TRACE_LOADED_OBJECTS", "1"}},
      {"/usr/lib64/ld-linux-x86-64.so.2", "/usr/local/lib/shardps/libshardps_cuda.so"}, false);
  ASSERT_EQ(RunTool(binary, args, &log), 0) << log;
  EXPECT_THAT(log, Not(HasSubstr("not found"))) << log;
  EXPECT_THAT(log, HasSubstr("libcublasLt.so.13 => /usr/local/lib/shardps/libcublasLt.so.13"))
      << log;
}

}  // namespace
}  // namespace testing
}  // namespace shardps
