#include "tests/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "tests/wait.h"

extern char** environ;

namespace shardps {
namespace testing {

absl::StatusOr<std::unique_ptr<Process>> Process::Start(
    const std::string& binary, const std::vector<std::string>& args,
    const std::map<std::string, std::string>& env, const std::string& log_path) {
  if (access(binary.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("binary not found or not executable: ", binary));
  }
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    // Children must not inherit a blocked signal mask from test threads.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(binary.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  return std::unique_ptr<Process>(new Process(pid, log_path));
}

Process::~Process() {
  if (Running()) {
    Signal(SIGKILL);
    (void)Wait(absl::Seconds(10));
  }
}

void Process::Signal(int sig) {
  if (!exit_code_.has_value()) kill(pid_, sig);
}

bool Process::Running() {
  if (exit_code_.has_value()) return false;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return r == 0;
}

absl::StatusOr<int> Process::Wait(absl::Duration timeout) {
  if (!PollUntil([this] { return !Running(); }, absl::Now() + timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("process ", pid_, " still running after ", absl::FormatDuration(timeout)));
  }
  return *exit_code_;
}

std::string Process::Log() const { return ReadWholeFile(log_path_); }

bool Process::WaitForLog(absl::string_view text, absl::Duration timeout) const {
  return WaitForFileText(log_path_, text, absl::Now() + timeout);
}

absl::StatusOr<int> RunCommand(const std::string& binary, const std::vector<std::string>& args,
                               const std::map<std::string, std::string>& env,
                               std::string* output, absl::Duration timeout) {
  static int counter = 0;
  std::string log = absl::StrCat(TempDir(), "/cmd_", getpid(), "_", counter++, ".log");
  auto process = Process::Start(binary, args, env, log);
  if (!process.ok()) return process.status();
  absl::StatusOr<int> code = (*process)->Wait(timeout);
  if (output != nullptr) *output = (*process)->Log();
  return code;
}

int PickFreePort() {
  static std::set<int>* used = new std::set<int>;
  for (int attempt = 0; attempt < 100; ++attempt) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    int port = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      socklen_t len = sizeof(addr);
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
      port = ntohs(addr.sin_port);
    }
    close(fd);
    if (port != 0 && used->insert(port).second) return port;
  }
  return 0;
}

namespace {

// Whether a TCP socket can bind `ip`:`port` now (SO_REUSEADDR, as gRPC servers bind).
bool Bindable(uint32_t ip, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(ip);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

}  // namespace

std::string LoopbackAddress() {
  static absl::Mutex mu;
  static uint32_t next = 0;  // the next address to hand out, host order; 0: none chosen yet
  static int port = 0;
  absl::MutexLock lock(&mu);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    if (next == 0 || (next & 0xff) == 255) {
      std::random_device random;
      std::mt19937 gen(random() ^ static_cast<uint32_t>(getpid()));
      // 127.64.0.0/10: 127.A.B.0/24 with A in 64..127, leaving 127.0.x.x (localhost's) alone.
      next = (127u << 24) | ((64u + gen() % 64u) << 16) | ((gen() % 256u) << 8) | 1u;
      if (port == 0) port = 20000 + static_cast<int>(gen() % 10000u);
    }
    const uint32_t ip = next++;
    if (!Bindable(ip, port)) continue;
    return absl::StrCat(ip >> 24, ".", (ip >> 16) & 0xff, ".", (ip >> 8) & 0xff, ".", ip & 0xff,
                        ":", port);
  }
  return "";
}

std::string VenvPython(std::string* why) {
  const char* venv = std::getenv("SHARDPS_VENV");
  if (venv == nullptr || *venv == '\0') {
    *why = "SHARDPS_VENV is not set";
    return "";
  }
  const std::string python = absl::StrCat(venv, "/bin/python");
  if (::access(python.c_str(), X_OK) != 0) {
    *why = absl::StrCat("SHARDPS_VENV=", venv, " has no bin/python");
    return "";
  }
  return python;
}

std::string BinaryPath(const std::string& target_path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir != nullptr) {
    return absl::StrCat(srcdir, "/", workspace != nullptr ? workspace : "shardps", "/",
                        target_path);
  }
  return absl::StrCat("bazel-bin/", target_path);
}

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string FreshTempDir(const std::string& name) {
  const std::string dir = absl::StrCat(TempDir(), "/", name);
  std::string output;
  (void)RunCommand("/bin/rm", {"-rf", dir}, {}, &output);
  return dir;
}

std::string SelfPath() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

void SetUpRunfilesForBazelRun(const char* argv0, const std::string& probe,
                              const std::string& tmp_prefix) {
  if (std::getenv("TEST_SRCDIR") == nullptr) {
    std::vector<std::string> candidates;
    if (const char* dir = std::getenv("RUNFILES_DIR")) candidates.push_back(dir);
    candidates.push_back(absl::StrCat(argv0, ".runfiles"));
    candidates.push_back(absl::StrCat(SelfPath(), ".runfiles"));
    for (const std::string& dir : candidates) {
      if (access(absl::StrCat(dir, "/shardps/", probe).c_str(), X_OK) == 0) {
        setenv("TEST_SRCDIR", dir.c_str(), 1);
        setenv("TEST_WORKSPACE", "shardps", 1);
        break;
      }
    }
  }
  if (std::getenv("TEST_TMPDIR") == nullptr) {
    std::string tmpl = absl::StrCat("/tmp/", tmp_prefix, ".XXXXXX");
    if (mkdtemp(tmpl.data()) != nullptr) setenv("TEST_TMPDIR", tmpl.c_str(), 1);
  }
}

std::string MakeTfConfig(const std::map<std::string, std::vector<std::string>>& cluster,
                         const std::string& type, int index) {
  std::vector<std::string> jobs;
  for (const auto& [job, addresses] : cluster) {
    std::vector<std::string> quoted;
    for (const std::string& a : addresses) quoted.push_back(absl::StrCat("\"", a, "\""));
    jobs.push_back(absl::StrCat("\"", job, "\": [", absl::StrJoin(quoted, ", "), "]"));
  }
  return absl::StrCat("{\"cluster\": {", absl::StrJoin(jobs, ", "), "}, \"task\": {\"type\": \"",
                      type, "\", \"index\": ", index, "}}");
}

}  // namespace testing
}  // namespace shardps
