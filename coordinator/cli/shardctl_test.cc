// shardctl as a process: its command line, exit codes and messages, without a chief and
// against a scripted in-process CoordinatorService; `export` of checkpoints written here with
// the checkpoint library. Tests against the real chief live with the chief's integration
// tests.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pty.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/manifest.h"
#include "checkpoint/safetensors.h"
#include "common/test_files.h"
#include "gmock/gmock.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string ShardctlPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/shardps/coordinator/cli/shardctl");
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(TestTmpDir(), "/", name);
  std::ofstream(path) << text;
  return path;
}

// Runs shardctl with `args` in an environment holding only PATH and `env` (so no TF_CONFIG
// leaks in), and waits at most 60 s. With `tty`, its stdout is a pseudo-terminal.
Result RunShardctl(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                   bool tty = false) {
  static int run_count = 0;
  const std::string base = absl::StrCat(TestTmpDir(), "/shardctl_run_", ++run_count);
  const std::string out_path = base + ".out";
  const std::string err_path = base + ".err";
  std::vector<std::string> argv_storage = {ShardctlPath()};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<std::string> env_storage = {"PATH=/usr/bin:/bin"};
  env_storage.insert(env_storage.end(), env.begin(), env.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  int pty_master = -1;
  int pty_slave = -1;
  if (tty && openpty(&pty_master, &pty_slave, nullptr, nullptr, nullptr) != 0) {
    ADD_FAILURE() << "openpty failed";
    return Result();
  }
  const pid_t pid = fork();
  if (pid == 0) {
    const int out = tty ? pty_slave : open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int in = open("/dev/null", O_RDONLY);
    if (out < 0 || err < 0 || in < 0) _exit(120);
    dup2(in, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    execve(argv[0], argv.data(), envp.data());
    _exit(121);
  }
  Result result;
  if (pid < 0) {
    ADD_FAILURE() << "fork failed";
    return result;
  }
  std::string tty_output;
  if (tty) {
    close(pty_slave);
    fcntl(pty_master, F_SETFL, O_NONBLOCK);
  }
  const auto drain_tty = [&] {
    char buffer[4096];
    ssize_t n;
    while (tty && (n = read(pty_master, buffer, sizeof(buffer))) > 0) tty_output.append(buffer, n);
  };
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    drain_tty();
    if (absl::Now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "shardctl did not exit within 60 s";
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  drain_tty();
  if (tty) close(pty_master);
  result.out = tty ? tty_output : ReadFileBytes(out_path);
  result.err = ReadFileBytes(err_path);
  EXPECT_NE(result.exit_code, 121) << "cannot exec " << argv_storage[0];
  return result;
}

// A port nothing listens on: bound, read back and closed.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  close(fd);
  return ntohs(addr.sin_port);
}

std::string Describe(const Result& r) {
  return absl::StrCat("exit ", r.exit_code, "\nstdout:\n", r.out, "\nstderr:\n", r.err);
}

TEST(ShardctlTest, HelpListsCommands) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"}, std::vector<std::string>{"help"},
        std::vector<std::string>{"-h"}}) {
    Result r = RunShardctl(args);
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    for (const char* command :
         {"submit JOB.json", "status", "watch", "add-steps N", "cancel", "checkpoint",
          "validate JOB.json", "export CKPT OUT", "--chief", "exit codes", "--fresh", "--resume"}) {
      EXPECT_THAT(r.out, HasSubstr(command)) << Describe(r);
    }
  }
}

TEST(ShardctlTest, EveryCommandHasHelp) {
  for (const char* command :
       {"submit", "status", "watch", "add-steps", "cancel", "checkpoint", "validate", "export"}) {
    Result r = RunShardctl({command, "--help"});
    EXPECT_EQ(r.exit_code, 0) << command << ": " << Describe(r);
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("usage: shardctl ", command))) << Describe(r);
    EXPECT_THAT(r.out, HasSubstr("--chief")) << Describe(r);
    EXPECT_THAT(r.out, HasSubstr("--json")) << Describe(r);
    Result h = RunShardctl({"help", command});
    EXPECT_EQ(h.exit_code, 0) << Describe(h);
    EXPECT_EQ(h.out, r.out);
  }
  EXPECT_THAT(RunShardctl({"submit", "--help"}).out, HasSubstr("--watch"));
  EXPECT_THAT(RunShardctl({"submit", "--help"}).out, HasSubstr("--fresh"));
  EXPECT_THAT(RunShardctl({"submit", "--help"}).out, HasSubstr("--resume"));
  EXPECT_THAT(RunShardctl({"checkpoint", "--help"}).out, HasSubstr("(default: 600)"));
  EXPECT_THAT(RunShardctl({"export", "--help"}).out, HasSubstr("--slots"));
  EXPECT_THAT(RunShardctl({"status", "--help"}).out, Not(HasSubstr("--slots")));
  EXPECT_THAT(RunShardctl({"validate", "--help"}).out, HasSubstr("--workers"));
}

TEST(ShardctlTest, BadCommandLinesExit2) {
  Result none = RunShardctl({});
  EXPECT_EQ(none.exit_code, 2) << Describe(none);
  EXPECT_THAT(none.err, HasSubstr("usage: shardctl"));

  Result unknown = RunShardctl({"frobnicate"});
  EXPECT_EQ(unknown.exit_code, 2) << Describe(unknown);
  EXPECT_THAT(unknown.err, HasSubstr("unknown command \"frobnicate\""));

  Result flag = RunShardctl({"status", "--bogus"});
  EXPECT_EQ(flag.exit_code, 2) << Describe(flag);
  EXPECT_THAT(flag.err, HasSubstr("--bogus"));

  // --watch belongs to submit only.
  EXPECT_EQ(RunShardctl({"status", "--watch", "--chief=127.0.0.1:1"}).exit_code, 2);
  EXPECT_EQ(RunShardctl({"status", "extra", "--chief=127.0.0.1:1"}).exit_code, 2);
  EXPECT_EQ(RunShardctl({"submit"}).exit_code, 2);
  EXPECT_EQ(RunShardctl({"status", "--timeout=0", "--chief=127.0.0.1:1"}).exit_code, 2);
  EXPECT_EQ(RunShardctl({"status", "--timeout=abc", "--chief=127.0.0.1:1"}).exit_code, 2);
  EXPECT_EQ(RunShardctl({"status", "--chief=localhost"}).exit_code, 2);

  Result steps = RunShardctl({"add-steps", "many", "--chief=127.0.0.1:1"});
  EXPECT_EQ(steps.exit_code, 2) << Describe(steps);
  EXPECT_THAT(steps.err, HasSubstr("positive integer"));
  EXPECT_EQ(RunShardctl({"add-steps", "0", "--chief=127.0.0.1:1"}).exit_code, 2);

  for (const char* n : {"0", "x", "3.5", "100001"}) {
    Result scale = RunShardctl({"scale-ps", n, "--chief=127.0.0.1:1"});
    EXPECT_EQ(scale.exit_code, 2) << Describe(scale);
    EXPECT_THAT(scale.err, HasSubstr("scale-ps: N must be a number of ps tasks")) << n;
  }
  EXPECT_EQ(RunShardctl({"scale-ps", "--chief=127.0.0.1:1"}).exit_code, 2);
  EXPECT_EQ(RunShardctl({"scale-ps", "-2", "--chief=127.0.0.1:1"}).exit_code, 2);  // a flag
  Result timeout = RunShardctl({"scale-ps", "3", "--ps_timeout=0", "--chief=127.0.0.1:1"});
  EXPECT_EQ(timeout.exit_code, 2) << Describe(timeout);
  EXPECT_THAT(timeout.err, HasSubstr("--ps_timeout"));
  // --ps_addresses belongs to scale-ps only.
  EXPECT_EQ(RunShardctl({"status", "--ps_addresses=a:1", "--chief=127.0.0.1:1"}).exit_code, 2);
  for (const char* bad : {"--pause=-1", "--pause=61", "--per_switch=0"}) {
    Result live = RunShardctl({"scale-ps", "3", "--live", bad, "--chief=127.0.0.1:1"});
    EXPECT_EQ(live.exit_code, 2) << Describe(live);
    EXPECT_THAT(live.err, HasSubstr("scale-ps --live: --per_switch must be >= 1")) << bad;
  }
  EXPECT_EQ(RunShardctl({"status", "--live", "--chief=127.0.0.1:1"}).exit_code, 2);
}

TEST(ShardctlTest, NoChiefAddressExits2) {
  Result r = RunShardctl({"status"});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("--chief"));

  Result bad = RunShardctl({"status"}, {"TF_CONFIG={\"cluster\": 3}"});
  EXPECT_EQ(bad.exit_code, 2) << Describe(bad);
  EXPECT_THAT(bad.err, HasSubstr("TF_CONFIG"));
}

TEST(ShardctlTest, ValidateBadJobExits2NamingTheField) {
  const std::string path =
      WriteFile("bad_job.json", R"({"model": "mlp:64", "optimizer": {"learning_rate": -1}})");
  Result r = RunShardctl({"validate", path});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("\"optimizer.learning_rate\": must be > 0, got -1"));
  EXPECT_THAT(r.err, HasSubstr(path));

  const std::string typo = WriteFile("typo_job.json", R"({"model": "softmax", "epoch": 2})");
  Result t = RunShardctl({"validate", typo});
  EXPECT_EQ(t.exit_code, 2) << Describe(t);
  EXPECT_THAT(t.err, HasSubstr("did you mean \"epochs\"?"));

  const std::string broken = WriteFile("broken_job.json", "{\"model\": ");
  Result b = RunShardctl({"validate", broken});
  EXPECT_EQ(b.exit_code, 2) << Describe(b);
  EXPECT_THAT(b.err, HasSubstr("invalid JSON"));

  Result missing = RunShardctl({"validate", TestTmpDir() + "/no_such_job.json"});
  EXPECT_EQ(missing.exit_code, 2) << Describe(missing);
  EXPECT_THAT(missing.err, HasSubstr("no_such_job.json"));
}

TEST(ShardctlTest, ValidateGoodJobPrintsDefaults) {
  const std::string path =
      WriteFile("good_job.json", R"({"name": "fm", "model": "mlp:64", "mode": "sync"})");
  Result r = RunShardctl({"validate", path, "--workers=3"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("valid job \"fm\""));
  EXPECT_THAT(r.out, HasSubstr("\"num_replicas\": 3"));
  EXPECT_THAT(r.out, HasSubstr("\"batch_size\": 128"));

  Result json = RunShardctl({"--json", "validate", path});
  EXPECT_EQ(json.exit_code, 0) << Describe(json);
  EXPECT_THAT(json.out, HasSubstr(R"("mode":"sync","num_replicas":2,)"));

  // --workers also bounds num_replicas; submit leaves that check to the chief.
  const std::string wide = WriteFile(
      "wide_job.json", R"({"name": "fm", "model": "mlp:64", "mode": "sync", "num_replicas": 4})");
  Result narrow = RunShardctl({"validate", wide, "--workers=3"});
  EXPECT_EQ(narrow.exit_code, 2) << Describe(narrow);
  EXPECT_THAT(narrow.err,
              HasSubstr(R"("num_replicas": must be <= the number of workers (3) in sync mode)"));
  EXPECT_EQ(RunShardctl({"validate", wide, "--workers=4"}).exit_code, 0);
}

TEST(ShardctlTest, SubmitOfBadJobExits2WithoutAChief) {
  const std::string path = WriteFile("bad_mode.json", R"({"model": "softmax", "mode": "syncc"})");
  Result r = RunShardctl({"submit", path});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("\"mode\": unknown \"syncc\""));
}

TEST(ShardctlTest, UnreachableChiefExits3NamingTheAddress) {
  const std::string address = absl::StrCat("127.0.0.1:", FreePort());
  Result status = RunShardctl({"status", "--chief=" + address, "--timeout=5"});
  EXPECT_EQ(status.exit_code, 3) << Describe(status);
  EXPECT_THAT(status.err, HasSubstr(address));
  EXPECT_THAT(status.err, HasSubstr("cannot reach the chief"));

  // Every command that talks to the chief.
  const std::string job = WriteFile("ok_job.json", R"({"model": "softmax"})");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"watch"}, std::vector<std::string>{"submit", job, "--watch"},
        std::vector<std::string>{"add-steps", "10"}, std::vector<std::string>{"cancel"},
        std::vector<std::string>{"checkpoint"}, std::vector<std::string>{"status", "--json"}}) {
    std::vector<std::string> full = args;
    full.push_back("--chief=" + address);
    full.push_back("--timeout=5");
    Result r = RunShardctl(full);
    EXPECT_EQ(r.exit_code, 3) << args[0] << ": " << Describe(r);
    EXPECT_THAT(r.err, HasSubstr(address)) << Describe(r);
    EXPECT_THAT(r.out, Not(HasSubstr("submitted")));
  }
}

TEST(ShardctlTest, ChiefFromTfConfig) {
  const std::string address = absl::StrCat("127.0.0.1:", FreePort());
  const std::string config =
      absl::StrCat(R"({"cluster": {"chief": [")", address, R"("], "ps": ["127.0.0.1:1"]},)",
                   R"( "task": {"type": "evaluator", "index": 0}})");
  Result env = RunShardctl({"status", "--timeout=5"}, {"TF_CONFIG=" + config});
  EXPECT_EQ(env.exit_code, 3) << Describe(env);
  EXPECT_THAT(env.err, HasSubstr(address));

  const std::string file = WriteFile("tf_config.json", config);
  Result flag = RunShardctl({"status", "--timeout=5", "--tf_config=" + file});
  EXPECT_EQ(flag.exit_code, 3) << Describe(flag);
  EXPECT_THAT(flag.err, HasSubstr(address));

  // --chief wins over TF_CONFIG.
  const std::string other = absl::StrCat("127.0.0.1:", FreePort());
  Result both = RunShardctl({"status", "--timeout=5", "--chief", other}, {"TF_CONFIG=" + config});
  EXPECT_EQ(both.exit_code, 3) << Describe(both);
  EXPECT_THAT(both.err, HasSubstr(other));
}

// A chief that answers from a script: GetStatus walks through `statuses` (repeating the last
// one), SubmitJob rejects a job named "reject-me" as the real chief rejects a bad job.
class FakeChief final : public CoordinatorService::Service {
 public:
  explicit FakeChief(std::vector<JobStatus> statuses) : statuses_(std::move(statuses)) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~FakeChief() override { server_->Shutdown(); }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  std::string submitted() {
    absl::MutexLock lock(&mu_);
    return submitted_;
  }
  int cancels() {
    absl::MutexLock lock(&mu_);
    return cancels_;
  }
  SubmitJobRequest::Resume resume() {
    absl::MutexLock lock(&mu_);
    return resume_;
  }
  int status_calls() {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(next_);
  }
  // What Checkpoint answers: `info` when `status` is OK.
  void SetCheckpointAnswer(grpc::Status status, CheckpointInfo info = CheckpointInfo()) {
    absl::MutexLock lock(&mu_);
    checkpoint_status_ = std::move(status);
    checkpoint_ = std::move(info);
  }
  std::string checkpoint_job_id() {
    absl::MutexLock lock(&mu_);
    return checkpoint_job_id_;
  }

  grpc::Status SubmitJob(grpc::ServerContext*, const SubmitJobRequest* request,
                         SubmitJobResponse* response) override {
    absl::MutexLock lock(&mu_);
    if (request->job_json().find("reject-me") != std::string::npos) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "job: \"data_dir\": no such directory");
    }
    submitted_ = request->job_json();
    resume_ = request->resume();
    response->set_job_id("fm-1");
    response->set_total_steps(4690);
    // A job named "resumed" resumes from a checkpoint; one named "finished" had finished.
    if (request->job_json().find("\"resumed\"") != std::string::npos) {
      response->set_resumed_at_step(1200);
      response->set_resumed_from("checkpoint 7 (/ckpt/fm/ckpt-7)");
    }
    if (request->job_json().find("\"finished\"") != std::string::npos) {
      response->set_resumed_at_step(4690);
      response->set_already_finished(true);
      response->set_resumed_from("checkpoint 12 (/ckpt/fm/ckpt-12)");
    }
    return grpc::Status::OK;
  }
  grpc::Status Checkpoint(grpc::ServerContext*, const CheckpointRequest* request,
                          CheckpointResponse* response) override {
    absl::MutexLock lock(&mu_);
    checkpoint_job_id_ = request->job_id();
    if (checkpoint_status_.ok()) *response->mutable_checkpoint() = checkpoint_;
    return checkpoint_status_;
  }
  grpc::Status GetStatus(grpc::ServerContext*, const GetStatusRequest*,
                         JobStatus* response) override {
    absl::MutexLock lock(&mu_);
    *response = statuses_[std::min(next_, statuses_.size() - 1)];
    ++next_;
    return grpc::Status::OK;
  }
  grpc::Status AddSteps(grpc::ServerContext*, const AddStepsRequest* request,
                        AddStepsResponse* response) override {
    response->set_total_steps(4690 + request->steps());
    return grpc::Status::OK;
  }
  grpc::Status CancelJob(grpc::ServerContext*, const CancelJobRequest*,
                         CancelJobResponse*) override {
    absl::MutexLock lock(&mu_);
    ++cancels_;
    return grpc::Status::OK;
  }

 private:
  absl::Mutex mu_;
  std::vector<JobStatus> statuses_;
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  std::string submitted_ ABSL_GUARDED_BY(mu_);
  int cancels_ ABSL_GUARDED_BY(mu_) = 0;
  SubmitJobRequest::Resume resume_ ABSL_GUARDED_BY(mu_) = SubmitJobRequest::AUTO;
  grpc::Status checkpoint_status_ ABSL_GUARDED_BY(mu_);
  CheckpointInfo checkpoint_ ABSL_GUARDED_BY(mu_);
  std::string checkpoint_job_id_ ABSL_GUARDED_BY(mu_);
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

JobStatus Status(JobStatus::State state, int64_t steps_done, bool with_eval) {
  JobStatus s;
  s.set_state(state);
  s.set_job_id("fm-1");
  s.set_name("fm");
  s.set_steps_done(steps_done);
  s.set_total_steps(4690);
  s.set_steps_per_epoch(469);
  s.set_elapsed_s(95.34);
  s.set_steps_per_sec(312.4);
  s.set_loss(0.4123);
  s.set_accuracy(0.861);
  s.set_mode("SYNC");
  s.set_training_done(steps_done == 4690);
  if (with_eval) {
    s.set_has_eval(true);
    s.mutable_last_eval()->set_step(steps_done);
    s.mutable_last_eval()->set_accuracy(0.8912);
    s.mutable_last_eval()->set_loss(0.3051);
  }
  WorkerInfo* w = s.add_workers();
  w->set_address("localhost:2223");
  w->set_state("busy");
  w->set_backend("cpu");
  w->set_steps_done(steps_done);
  return s;
}

TEST(ShardctlTest, SubmitAndWatchToSuccess) {
  FakeChief chief({Status(JobStatus::RUNNING, 1234, false), Status(JobStatus::RUNNING, 3000, true),
                   Status(JobStatus::RUNNING, 4690, true),
                   Status(JobStatus::SUCCEEDED, 4690, true)});
  const std::string job = WriteFile("watch_job.json", R"({"name": "fm", "model": "softmax"})");
  Result r =
      RunShardctl({"submit", job, "--watch", "--interval=0.01", "--chief=" + chief.address()});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(chief.submitted(), HasSubstr("\"name\": \"fm\""));
  EXPECT_THAT(r.out, HasSubstr("submitted job fm-1 to " + chief.address() + ": 4690 steps\n"));
  // Not a terminal: plain lines, no carriage returns.
  EXPECT_THAT(r.out, HasSubstr("step 1234/4690 epoch 3/10 steps/s 312.4"));
  EXPECT_THAT(r.out, HasSubstr("eval_acc 0.891"));
  EXPECT_THAT(r.out, Not(HasSubstr("\r")));
  EXPECT_THAT(r.out, HasSubstr("job fm-1 SUCCEEDED\nfinal test accuracy: 0.8912 (loss 0.3051) "
                               "after 10 epochs, 4690 steps, 95.3 s, mode sync\n"));
}

TEST(ShardctlTest, WatchOnATerminalRedrawsOneLine) {
  FakeChief chief({Status(JobStatus::RUNNING, 1234, false), Status(JobStatus::RUNNING, 3000, true),
                   Status(JobStatus::SUCCEEDED, 4690, true)});
  Result r = RunShardctl({"watch", "--interval=0.01", "--chief=" + chief.address()}, {},
                         /*tty=*/true);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("\r[##........] 1234/4690 steps  epoch 3/10"));
  EXPECT_THAT(r.out, HasSubstr("\r[######....] 3000/4690 steps"));
  EXPECT_THAT(r.out, HasSubstr("eval 0.891"));
  EXPECT_THAT(r.out, Not(HasSubstr("step 1234/4690")));  // no plain lines
  EXPECT_THAT(r.out, HasSubstr("final test accuracy: 0.8912"));
}

TEST(ShardctlTest, SubmitJsonPrintsIdAndSteps) {
  FakeChief chief({Status(JobStatus::RUNNING, 0, false)});
  const std::string job = WriteFile("json_job.json", R"({"model": "softmax"})");
  Result r = RunShardctl({"submit", job, "--json", "--chief=" + chief.address()});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(r.out, "{\"job_id\":\"fm-1\",\"total_steps\":4690}\n");
}

TEST(ShardctlTest, JobRejectedByChiefExits2) {
  FakeChief chief({Status(JobStatus::NO_JOB, 0, false)});
  const std::string job =
      WriteFile("reject_job.json", R"({"name": "reject-me", "model": "softmax"})");
  Result r = RunShardctl({"submit", job, "--chief=" + chief.address()});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("job: \"data_dir\": no such directory"));
}

TEST(ShardctlTest, WatchOfFailedOrCancelledJobExits4) {
  for (JobStatus::State end : {JobStatus::FAILED, JobStatus::CANCELLED}) {
    JobStatus last = Status(end, 1234, true);
    last.set_error("worker 0 failed");
    FakeChief chief({Status(JobStatus::RUNNING, 1000, false), last});
    Result r = RunShardctl({"watch", "--interval=0.01", "--chief=" + chief.address()});
    EXPECT_EQ(r.exit_code, 4) << Describe(r);
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("job fm-1 ", JobStatus::State_Name(end),
                                              ": worker 0 failed\n")));
    EXPECT_THAT(r.out, HasSubstr("stopped after 2.63 epochs, 1234/4690 steps"));
  }
}

TEST(ShardctlTest, WatchWaitsForAJob) {
  // A chief started with --job serves before it has submitted the job.
  FakeChief chief({Status(JobStatus::NO_JOB, 0, false), Status(JobStatus::NO_JOB, 0, false),
                   Status(JobStatus::SUCCEEDED, 4690, true)});
  Result r = RunShardctl({"watch", "--interval=0.01", "--chief=" + chief.address()});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("waiting for a job"));
  EXPECT_THAT(r.out, HasSubstr("final test accuracy"));
}

TEST(ShardctlTest, WatchWithoutJobExits1) {
  FakeChief chief({Status(JobStatus::NO_JOB, 0, false)});
  Result r =
      RunShardctl({"watch", "--interval=0.01", "--job_wait=0.2", "--chief=" + chief.address()});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("no job on the chief at " + chief.address()));
}

TEST(ShardctlTest, WatchedJobReplacedExits1) {
  JobStatus other = Status(JobStatus::RUNNING, 10, false);
  other.set_job_id("fm-2");
  FakeChief chief({Status(JobStatus::RUNNING, 1000, false), other});
  Result r = RunShardctl({"watch", "--interval=0.01", "--chief=" + chief.address()});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("job fm-1 is no longer the chief's job (now fm-2)"));
}

TEST(ShardctlTest, WatchJsonPrintsStatusLines) {
  FakeChief chief(
      {Status(JobStatus::RUNNING, 100, false), Status(JobStatus::SUCCEEDED, 4690, true)});
  Result r = RunShardctl({"watch", "--json", "--interval=0.01", "--chief=" + chief.address()});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("{\"state\":\"RUNNING\""));
  EXPECT_THAT(r.out, HasSubstr("{\"state\":\"SUCCEEDED\""));
  EXPECT_THAT(r.out, Not(HasSubstr("final test accuracy")));
}

TEST(ShardctlTest, StatusAddStepsAndCancel) {
  FakeChief chief({Status(JobStatus::RUNNING, 1234, true)});
  Result text = RunShardctl({"status", "--chief=" + chief.address()});
  EXPECT_EQ(text.exit_code, 0) << Describe(text);
  EXPECT_THAT(text.out, HasSubstr("state      RUNNING\n"));
  EXPECT_THAT(text.out, HasSubstr("localhost:2223"));

  Result json = RunShardctl({"status", "--json", "--chief=" + chief.address()});
  EXPECT_EQ(json.exit_code, 0) << Describe(json);
  EXPECT_THAT(json.out, HasSubstr("\"job_id\": \"fm-1\""));
  EXPECT_THAT(json.out, HasSubstr("\"workers\": ["));

  Result add = RunShardctl({"add-steps", "100", "--chief=" + chief.address()});
  EXPECT_EQ(add.exit_code, 0) << Describe(add);
  EXPECT_THAT(add.out, HasSubstr("4790 steps"));
  Result add_json = RunShardctl({"add-steps", "10", "--json", "--chief=" + chief.address()});
  EXPECT_EQ(add_json.out, "{\"total_steps\":4700}\n");

  Result cancel = RunShardctl({"cancel", "--chief=" + chief.address()});
  EXPECT_EQ(cancel.exit_code, 0) << Describe(cancel);
  EXPECT_EQ(chief.cancels(), 1);
}

TEST(ShardctlTest, FreshAndResumeAreExclusive) {
  FakeChief chief({Status(JobStatus::NO_JOB, 0, false)});
  const std::string job = WriteFile("either_job.json", R"({"model": "softmax"})");
  Result r = RunShardctl({"submit", job, "--fresh", "--resume", "--chief=" + chief.address()});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("--fresh or --resume, not both"));
  EXPECT_EQ(chief.submitted(), "");  // nothing was sent
  // Each belongs to submit.
  EXPECT_EQ(RunShardctl({"status", "--fresh", "--chief=" + chief.address()}).exit_code, 2);
}

TEST(ShardctlTest, SubmitSendsTheResumeChoice) {
  FakeChief chief({Status(JobStatus::RUNNING, 0, false)});
  const std::string job = WriteFile("choice_job.json", R"({"model": "softmax"})");
  for (const auto& [flag, want] : std::vector<std::pair<std::string, SubmitJobRequest::Resume>>{
           {"--fresh", SubmitJobRequest::FRESH},
           {"--resume", SubmitJobRequest::RESUME},
           {"--json", SubmitJobRequest::AUTO}}) {
    Result r = RunShardctl({"submit", job, flag, "--chief=" + chief.address()});
    EXPECT_EQ(r.exit_code, 0) << flag << ": " << Describe(r);
    EXPECT_EQ(chief.resume(), want) << flag;
  }
}

TEST(ShardctlTest, SubmitSaysWhereItResumed) {
  FakeChief chief({Status(JobStatus::RUNNING, 1200, false)});
  const std::string job =
      WriteFile("resumed_job.json", R"({"name": "resumed", "model": "softmax"})");
  Result r = RunShardctl({"submit", job, "--chief=" + chief.address()});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(r.out, "resumed job fm-1 on " + chief.address() +
                       " at step 1200 of 4690, from checkpoint 7 (/ckpt/fm/ckpt-7)\n");
  Result json = RunShardctl({"submit", job, "--json", "--chief=" + chief.address()});
  EXPECT_EQ(json.exit_code, 0) << Describe(json);
  EXPECT_EQ(json.out,
            "{\"job_id\":\"fm-1\",\"resumed_at_step\":1200,\"resumed_from\":\"checkpoint 7 "
            "(/ckpt/fm/ckpt-7)\",\"total_steps\":4690}\n");
}

TEST(ShardctlTest, SubmitOfAFinishedJobTrainsNothingAndExits0) {
  FakeChief chief({Status(JobStatus::RUNNING, 0, false)});
  const std::string job =
      WriteFile("finished_job.json", R"({"name": "finished", "model": "softmax"})");
  Result r =
      RunShardctl({"submit", job, "--watch", "--interval=0.01", "--chief=" + chief.address()});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(r.out,
            "job fm-1 already finished; nothing to train (checkpoint 12 (/ckpt/fm/ckpt-12))\n");
  EXPECT_EQ(chief.status_calls(), 0);  // not watched: there is nothing to watch
  Result json = RunShardctl({"submit", job, "--json", "--chief=" + chief.address()});
  EXPECT_THAT(json.out, HasSubstr("\"already_finished\":true"));
}

TEST(ShardctlTest, CheckpointPrintsTheCommittedCheckpoint) {
  FakeChief chief({Status(JobStatus::RUNNING, 1200, false)});
  CheckpointInfo info;
  info.set_id(7);
  info.set_path("/ckpt/fm/ckpt-7");
  info.set_steps_done(1200);
  info.set_unix_time(1.8e9);
  info.set_bytes(12897484);
  info.set_write_seconds(0.84);
  info.set_pause_ms(12);
  chief.SetCheckpointAnswer(grpc::Status::OK, info);
  Result r = RunShardctl({"checkpoint", "--chief=" + chief.address()});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(r.out,
            "checkpoint 7: /ckpt/fm/ckpt-7, 1200 steps, 12.3 MiB, written in 0.84 s (paused 12 "
            "ms)\n");
  Result json =
      RunShardctl({"checkpoint", "--json", "--job_id=fm-1", "--chief=" + chief.address()});
  EXPECT_EQ(json.exit_code, 0) << Describe(json);
  EXPECT_EQ(chief.checkpoint_job_id(), "fm-1");
  EXPECT_THAT(json.out, HasSubstr("\"id\":7"));
  EXPECT_THAT(json.out, HasSubstr("\"path\":\"/ckpt/fm/ckpt-7\""));
  EXPECT_THAT(json.out, HasSubstr("\"bytes\":12897484"));
  EXPECT_THAT(json.out, HasSubstr("\"steps_done\":1200"));
}

TEST(ShardctlTest, CheckpointErrorsExit1WithTheMessage) {
  FakeChief chief({Status(JobStatus::RUNNING, 1200, false)});
  for (const grpc::Status& answer :
       {grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                     "job fm-1 has no checkpoint dir (\"checkpoint\" in the job file)"),
        grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no job \"fm-9\""),
        grpc::Status(grpc::StatusCode::DATA_LOSS,
                     "ps 1: write /ckpt/fm/ckpt-8/ps-1.safetensors: "
                     "No space left on device")}) {
    chief.SetCheckpointAnswer(answer);
    Result r = RunShardctl({"checkpoint", "--chief=" + chief.address()});
    EXPECT_EQ(r.exit_code, 1) << Describe(r);
    EXPECT_THAT(r.err, HasSubstr("Checkpoint failed: "));
    EXPECT_THAT(r.err, HasSubstr(answer.error_message()));
    EXPECT_EQ(r.out, "");
  }
}

// A status that shows a job not advancing, with everything the durable state adds.
JobStatus PausedStatus() {
  JobStatus s = Status(JobStatus::RUNNING, 1234, true);
  s.set_phase("paused: ps 1 (127.0.0.1:9) unreachable for 12 s: connection refused");
  s.set_generation(2);
  for (int i = 0; i < 2; ++i) {
    PsInfo* ps = s.add_ps();
    ps->set_index(i);
    ps->set_address(absl::StrCat("127.0.0.1:", 8 + i));
    ps->set_state(i == 1 ? "unreachable" : "up");
    ps->set_incarnation(0xabc + i);
    ps->set_generation(2);
    if (i == 1) {
      ps->set_error("connection refused");
      ps->set_down_s(12);
    }
  }
  s.set_has_checkpoint(true);
  s.mutable_last_checkpoint()->set_id(7);
  s.mutable_last_checkpoint()->set_steps_done(1200);
  s.mutable_last_checkpoint()->set_path("/ckpt/fm/ckpt-7");
  RecoveryInfo* r = s.add_recoveries();
  r->set_cause("ps 0 restarted (incarnation abc)");
  r->set_action("rolled back to checkpoint 7");
  r->set_steps_lost(20);
  r->set_seconds(2.5);
  s.set_steps_lost(20);
  s.set_resumed_from("live ps state");
  return s;
}

TEST(ShardctlTest, StatusShowsWhyAJobIsNotAdvancing) {
  FakeChief chief({PausedStatus()});
  Result text = RunShardctl({"status", "--chief=" + chief.address()});
  EXPECT_EQ(text.exit_code, 0) << Describe(text);
  EXPECT_THAT(text.out, HasSubstr("state      RUNNING, NOT ADVANCING: paused: ps 1 "
                                  "(127.0.0.1:9) unreachable for 12 s: connection refused\n"));
  EXPECT_THAT(text.out, HasSubstr("resumed    from live ps state\n"));
  EXPECT_THAT(text.out, HasSubstr("checkpoint 7 at 1200 steps"));
  EXPECT_THAT(text.out, HasSubstr("recoveries 1 recovery, 20 steps lost\n"));
  EXPECT_THAT(text.out, HasSubstr("ps 0 restarted (incarnation abc): rolled back to checkpoint 7"));
  EXPECT_THAT(text.out, HasSubstr("ps         2 (generation 2)\n"));
  EXPECT_THAT(text.out, HasSubstr("12s  connection refused\n"));

  Result json = RunShardctl({"status", "--json", "--chief=" + chief.address()});
  EXPECT_EQ(json.exit_code, 0) << Describe(json);
  EXPECT_THAT(json.out, HasSubstr("\"phase\": \"paused: ps 1"));
  EXPECT_THAT(json.out, HasSubstr("\"recoveries\": ["));
  EXPECT_THAT(json.out, HasSubstr("\"last_checkpoint\": {"));
}

TEST(ShardctlTest, WatchShowsAPauseInsteadOfProgress) {
  for (bool tty : {false, true}) {
    FakeChief chief({Status(JobStatus::RUNNING, 1000, false), PausedStatus(),
                     Status(JobStatus::SUCCEEDED, 4690, true)});
    Result r = RunShardctl({"watch", "--interval=0.01", "--chief=" + chief.address()}, {}, tty);
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    EXPECT_THAT(r.out, HasSubstr(tty ? "\r1234/4690 steps  NOT ADVANCING: paused: ps 1"
                                     : "step 1234/4690 epoch 3/10 NOT ADVANCING: paused: ps 1"))
        << Describe(r);
    EXPECT_THAT(r.out, HasSubstr("final test accuracy: 0.8912"));
  }
}

// A chief restarted mid-watch has no job until it resumes ours from its checkpoint dir.
TEST(ShardctlTest, WatchRidesOutAChiefRestart) {
  FakeChief chief({Status(JobStatus::RUNNING, 1000, false), Status(JobStatus::NO_JOB, 0, false),
                   Status(JobStatus::NO_JOB, 0, false), Status(JobStatus::RUNNING, 1200, false),
                   Status(JobStatus::SUCCEEDED, 4690, true)});
  Result r = RunShardctl({"watch", "--interval=0.01", "--chief=" + chief.address()});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("the chief at " + chief.address() +
                               " has no job (restarted?); "
                               "waiting up to 120 s for it to come back"));
  EXPECT_THAT(r.err, HasSubstr("the chief is back"));
  EXPECT_THAT(r.out, HasSubstr("final test accuracy: 0.8912"));

  // It gives up after --job_wait (or --timeout, if longer).
  JobStatus none;  // as a chief without a job answers
  FakeChief gone({Status(JobStatus::RUNNING, 1000, false), none});
  Result g = RunShardctl(
      {"watch", "--interval=0.05", "--job_wait=0", "--timeout=0.5", "--chief=" + gone.address()});
  EXPECT_EQ(g.exit_code, 1) << Describe(g);
  EXPECT_THAT(g.err, HasSubstr("job fm-1 is no longer the chief's job (now none)"));
}

// Submit checks the file locally but leaves the cluster's worker count to the chief.
TEST(ShardctlTest, SubmitLeavesReplicasAgainstWorkersToTheChief) {
  const std::string wide =
      WriteFile("wide_submit.json",
                R"({"name": "fm", "model": "mlp:64", "mode": "sync", "num_replicas": 64})");
  FakeChief chief({Status(JobStatus::RUNNING, 0, false)});
  Result submitted = RunShardctl({"submit", wide, "--chief=" + chief.address()});
  EXPECT_EQ(submitted.exit_code, 0) << Describe(submitted);
  EXPECT_THAT(chief.submitted(), HasSubstr("\"num_replicas\": 64"));
}

// A committed checkpoint 7 of job "fm-1" under `dir`, as 2 ps tasks write it:
// "fm/dense_0/kernel" [4, 3] in two shards (rows 0-1 on ps 0, rows 2-3 on ps 1) and
// "fm/dense_0/bias" [3] on ps 1, each with Adam's slots. Element i of the kernel is i, of its
// adam_m 100 + i, of its adam_v 200 + i; of the bias 1000 + i (slots 1100 + i, 1200 + i).
// Returns the checkpoint's own directory.
std::string WriteCheckpoint(const std::string& dir) {
  absl::StatusOr<CheckpointDir> opened = CheckpointDir::Open(dir, /*create=*/true);
  EXPECT_TRUE(opened.ok()) << opened.status();
  if (!opened.ok()) return "";
  absl::StatusOr<std::string> path = opened->Prepare(7);
  EXPECT_TRUE(path.ok()) << path.status();
  if (!path.ok()) return "";

  const auto values = [](float base, int begin, int end) {
    std::vector<float> out;
    for (int i = begin; i < end; ++i) out.push_back(base + i);
    return out;
  };
  // Per ps: the tensors (name, shape, values) it holds.
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<float> data;
  };
  std::vector<std::vector<Tensor>> per_ps(2);
  const std::vector<std::string> slots = {"adam_m", "adam_v"};
  const auto add = [&](int ps, const std::string& shard, std::vector<int64_t> shape, float base,
                       int begin, int end) {
    per_ps[ps].push_back({shard, shape, values(base, begin, end)});
    per_ps[ps].push_back({shard + "/adam_m", shape, values(base + 100, begin, end)});
    per_ps[ps].push_back({shard + "/adam_v", shape, values(base + 200, begin, end)});
  };
  add(0, "fm/dense_0/kernel/part_0", {2, 3}, 0, 0, 6);
  add(1, "fm/dense_0/kernel/part_1", {2, 3}, 0, 6, 12);
  add(1, "fm/dense_0/bias/part_0", {3}, 1000, 0, 3);

  Manifest manifest;
  manifest.checkpoint_id = 7;
  manifest.job_id = "fm-1";
  manifest.unix_time = 1.8e9;
  manifest.job_json = R"({"name":"fm","model":"softmax"})";
  manifest.progress.steps_done = 1200;
  manifest.progress.total_steps = 4690;
  manifest.progress.steps_per_epoch = 469;
  for (int ps = 0; ps < 2; ++ps) {
    std::vector<TensorToWrite> tensors;
    for (const Tensor& t : per_ps[ps]) {
      TensorToWrite w;
      w.name = t.name;
      w.shape = t.shape;
      w.pieces.push_back(absl::string_view(reinterpret_cast<const char*>(t.data.data()),
                                           t.data.size() * sizeof(float)));
      tensors.push_back(std::move(w));
    }
    absl::StatusOr<DataFileInfo> file = WriteSafetensors(
        absl::StrCat(*path, "/", CheckpointDir::DataFileName(ps, 2)), std::move(tensors));
    EXPECT_TRUE(file.ok()) << file.status();
    if (!file.ok()) return "";
    manifest.files.push_back(*file);
  }
  const auto shard = [&](const std::string& name, int part, int num_parts, int64_t row_offset,
                         int64_t rows, int ps) {
    ManifestShard s;
    s.name = name;
    s.part = part;
    s.num_parts = num_parts;
    s.row_offset = row_offset;
    s.rows = rows;
    s.ps = ps;
    s.version = 1200;
    s.file = CheckpointDir::DataFileName(ps, 2);
    s.tensors = {{"", name}, {"adam_m", name + "/adam_m"}, {"adam_v", name + "/adam_v"}};
    return s;
  };
  ManifestVariable kernel;
  kernel.name = "fm/dense_0/kernel";
  kernel.shape = {4, 3};
  kernel.partitioner = "fixed:2";
  kernel.slots = slots;
  kernel.optimizer.set_type(OptimizerSpec::ADAM);
  kernel.shards = {shard("fm/dense_0/kernel/part_0", 0, 2, 0, 2, 0),
                   shard("fm/dense_0/kernel/part_1", 1, 2, 2, 2, 1)};
  ManifestVariable bias;
  bias.name = "fm/dense_0/bias";
  bias.shape = {3};
  bias.partitioner = "fixed:2";
  bias.slots = slots;
  bias.optimizer.set_type(OptimizerSpec::ADAM);
  bias.shards = {shard("fm/dense_0/bias/part_0", 0, 1, 0, 3, 1)};
  manifest.variables = {kernel, bias};
  absl::Status committed = opened->Commit(manifest);
  EXPECT_TRUE(committed.ok()) << committed;
  return *path;
}

// The floats of `name` in the safetensors file at `path`, with its shape.
std::vector<float> ReadTensor(const std::string& path, const std::string& name,
                              std::vector<int64_t>* shape) {
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return {};
  const TensorInfo* tensor = (*file)->Find(name);
  EXPECT_NE(tensor, nullptr) << name << " not in " << path;
  if (tensor == nullptr) return {};
  shape->assign(tensor->shape().begin(), tensor->shape().end());
  const int64_t bytes = tensor->data_end() - tensor->data_begin();
  std::vector<float> out(bytes / sizeof(float));
  absl::Status read = (*file)->ReadRange(*tensor, 0, bytes, reinterpret_cast<char*>(out.data()));
  EXPECT_TRUE(read.ok()) << read;
  return out;
}

std::vector<std::string> TensorNames(const std::string& path) {
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  std::vector<std::string> names;
  if (file.ok()) {
    for (const TensorInfo& t : (*file)->tensors()) names.push_back(t.name());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(ShardctlExportTest, WritesWholeVariablesByName) {
  const std::string dir = TestTmpDir() + "/export_whole";
  const std::string checkpoint = WriteCheckpoint(dir);
  ASSERT_FALSE(checkpoint.empty());
  const std::string out = TestTmpDir() + "/export_whole.safetensors";
  // The checkpoint dir (its newest checkpoint), the checkpoint, or its manifest.
  for (const std::string& source : {dir, checkpoint, checkpoint + "/manifest.json"}) {
    Result r = RunShardctl({"export", source, out});
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    EXPECT_THAT(r.out, HasSubstr("exported checkpoint 7 of job fm-1 (1200 steps): 2 variables, "));
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat(" to ", out, "\n")));
    EXPECT_EQ(TensorNames(out), (std::vector<std::string>{"fm/dense_0/bias", "fm/dense_0/kernel"}));
    std::vector<int64_t> shape;
    EXPECT_EQ(ReadTensor(out, "fm/dense_0/kernel", &shape),
              (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
    EXPECT_EQ(shape, (std::vector<int64_t>{4, 3}));
    EXPECT_EQ(ReadTensor(out, "fm/dense_0/bias", &shape), (std::vector<float>{1000, 1001, 1002}));
    EXPECT_EQ(shape, (std::vector<int64_t>{3}));
  }
}

TEST(ShardctlExportTest, SlotsOnRequest) {
  const std::string dir = TestTmpDir() + "/export_slots";
  ASSERT_FALSE(WriteCheckpoint(dir).empty());
  const std::string out = TestTmpDir() + "/export_slots.safetensors";
  Result r = RunShardctl({"export", dir, out, "--slots", "--json"});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("\"checkpoint_id\":7"));
  EXPECT_THAT(r.out, HasSubstr("\"variables\":2"));
  EXPECT_THAT(r.out, HasSubstr("\"slots\":true"));
  EXPECT_EQ(TensorNames(out),
            (std::vector<std::string>{"fm/dense_0/bias", "fm/dense_0/bias/adam_m",
                                      "fm/dense_0/bias/adam_v", "fm/dense_0/kernel",
                                      "fm/dense_0/kernel/adam_m", "fm/dense_0/kernel/adam_v"}));
  std::vector<int64_t> shape;
  EXPECT_EQ(ReadTensor(out, "fm/dense_0/kernel/adam_v", &shape),
            (std::vector<float>{200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211}));
  EXPECT_EQ(shape, (std::vector<int64_t>{4, 3}));
}

TEST(ShardctlExportTest, BadArgumentsExit2) {
  const std::string dir = TestTmpDir() + "/export_args";
  ASSERT_FALSE(WriteCheckpoint(dir).empty());
  Result one = RunShardctl({"export", dir});
  EXPECT_EQ(one.exit_code, 2) << Describe(one);
  EXPECT_THAT(one.err, HasSubstr("export: expected CKPT OUT, got 1 arguments"));
  EXPECT_EQ(RunShardctl({"export", dir, "a", "b"}).exit_code, 2);
  Result into_dir = RunShardctl({"export", dir, TestTmpDir()});
  EXPECT_EQ(into_dir.exit_code, 2) << Describe(into_dir);
  EXPECT_THAT(into_dir.err, HasSubstr("is a directory; give the file to write"));
  Result no_dir = RunShardctl({"export", dir, TestTmpDir() + "/no/such/dir/model.safetensors"});
  EXPECT_EQ(no_dir.exit_code, 2) << Describe(no_dir);
  EXPECT_THAT(no_dir.err, HasSubstr("no directory \"" + TestTmpDir() + "/no/such/dir\""));
  EXPECT_EQ(RunShardctl({"export", dir, "out.safetensors", "--bogus"}).exit_code, 2);
}

TEST(ShardctlExportTest, MissingOrCorruptCheckpointExits1NamingTheFile) {
  const std::string out = TestTmpDir() + "/export_bad.safetensors";
  const std::string missing = TestTmpDir() + "/no_such_checkpoint";
  Result gone = RunShardctl({"export", missing, out});
  EXPECT_EQ(gone.exit_code, 1) << Describe(gone);
  EXPECT_THAT(gone.err, HasSubstr("no_such_checkpoint"));

  // A flipped bit in the first tensor of ps 1's file (kernel rows 2-3), past its header.
  const std::string dir = TestTmpDir() + "/export_corrupt";
  const std::string checkpoint = WriteCheckpoint(dir);
  ASSERT_FALSE(checkpoint.empty());
  const std::string data = checkpoint + "/" + CheckpointDir::DataFileName(1, 2);
  {
    std::fstream file(data, std::ios::in | std::ios::out | std::ios::binary);
    unsigned char length[8] = {};
    file.read(reinterpret_cast<char*>(length), 8);
    uint64_t header_bytes = 0;
    for (int i = 7; i >= 0; --i) header_bytes = header_bytes << 8 | length[i];
    const std::streamoff at = static_cast<std::streamoff>(8 + header_bytes + 5);
    char byte = 0;
    file.seekg(at);
    file.read(&byte, 1);
    byte ^= 0x40;
    file.seekp(at);
    file.write(&byte, 1);
    ASSERT_TRUE(file.good());
  }
  Result corrupt = RunShardctl({"export", dir, out});
  EXPECT_EQ(corrupt.exit_code, 1) << Describe(corrupt);
  EXPECT_THAT(corrupt.err, HasSubstr("ps-00001-of-00002.safetensors"));
  EXPECT_THAT(corrupt.out, Not(HasSubstr("exported")));

  // A manifest that is not one.
  const std::string broken = TestTmpDir() + "/export_broken";
  const std::string broken_checkpoint = WriteCheckpoint(broken);
  ASSERT_FALSE(broken_checkpoint.empty());
  std::ofstream(broken_checkpoint + "/manifest.json") << "{\"format\": \"shardps-checkpoint\"";
  Result bad_manifest = RunShardctl({"export", broken_checkpoint, out});
  EXPECT_EQ(bad_manifest.exit_code, 1) << Describe(bad_manifest);
  EXPECT_THAT(bad_manifest.err, HasSubstr("manifest.json"));
}

}  // namespace
}  // namespace shardps
