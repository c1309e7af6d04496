// shardctl: the command-line client of the chief's CoordinatorService.
//
//   shardctl submit JOB.json [--watch] [--fresh|--resume]   shardctl status [--json]
//   shardctl watch        shardctl add-steps N               shardctl cancel
//   shardctl checkpoint   shardctl validate JOB.json   shardctl export CKPT OUT [--slots]
//   shardctl workers      shardctl scale-ps N [--ps_addresses=A,B,..] [--ps_timeout=S]
//   shardctl scale-ps N --live [--per_switch=K] [--pause=S]   (adds ps, no checkpoint)
//   shardctl move-buckets VARIABLE N --from_shard=I --to_shard=J [--per_switch=K] [--pause=S]
//   shardctl move-buckets VARIABLE --balance [--tolerance=T]     (and [--freeze=S])
//
// The chief is --chief=host:port, or the chief of the TF_CONFIG cluster (--tf_config or the
// TF_CONFIG environment variable). Exit codes: 0 ok; 1 other errors; 2 bad command line or
// invalid job file (found here or by the chief); 3 chief unreachable; 4 the watched job ended
// FAILED or CANCELLED.
//
// Formatting lives in progress.h; this file holds the command line and the calls to the chief
// (client/chief_interface.h).
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "checkpoint/checkpoint_reader.h"
#include "client/chief_interface.h"
#include "client/grpc_chief_interface.h"
#include "checkpoint/manifest.h"
#include "common/flags.h"
#include "common/protocol_version.h"
#include "common/tf_config.h"
#include "coordinator/cli/progress.h"
#include "coordinator/job_spec.h"
#include "proto/coordinator.pb.h"
#include "rpc/auth.h"
#include "rpc/tls.h"

namespace shardps {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitUnreachable = 3;
constexpr int kExitInterrupted = 130;

constexpr double kCheckpointTimeoutS = 600;

// Set by SIGINT while watching, so that the progress line is ended cleanly.
volatile std::sig_atomic_t g_interrupted = 0;
void OnInterrupt(int) { g_interrupted = 1; }

struct Options {
  // Global.
  std::string chief;
  std::string tf_config;
  bool json = false;
  double timeout_s = 10;
  std::string test_protocol_version;
  // submit, watch.
  bool watch = false;
  double interval_s = 0.5;
  // submit.
  bool fresh = false;
  bool resume = false;
  // watch.
  double job_wait_s = 120;
  // add-steps, cancel.
  std::string job_id;
  // validate.
  int64_t workers = 2;
  // export.
  bool slots = false;
  // scale-ps.
  std::string ps_addresses;
  double ps_timeout_s = 60;
  bool live = false;
  // move-buckets.
  int64_t from_shard = -1;
  int64_t to_shard = -1;
  double freeze_s = 10;
  int64_t per_switch = 1;
  bool balance = false;
  double pause_s = 0.025;
  double tolerance = 0.1;
  // TLS to the chief (rpc/tls.h): its CA, and a certificate for mutual TLS.
  TlsOptions tls;
  // A bearer token for the chief's roles (rpc/auth.h): --auth_token_file.
  AuthOptions auth;
};

struct Command {
  const char* name;
  const char* args;  // positional arguments, for usage
  const char* summary;
  bool watch_flags;  // --interval (and --watch for submit)
  bool job_id_flag;
  bool workers_flag;
};

constexpr Command kCommands[] = {
    {"submit", "JOB.json", "submit a job file to the chief; --watch follows it to the end", true,
     false, false},
    {"status", "", "show the chief's job: progress, checkpoints, recoveries, ps and workers", false,
     false, false},
    {"watch", "", "follow the current job until it ends, with a progress line", true, false, false},
    {"workers", "", "list the workers: address, state, steps, and whether each joined", false,
     false, false},
    {"add-steps", "N", "add N steps to the current job", false, true, false},
    {"cancel", "", "cancel the current job", false, true, false},
    {"checkpoint", "", "checkpoint the current job now; prints the committed checkpoint", false,
     true, false},
    {"scale-ps", "N", "move the current job onto N ps tasks (a drain, a checkpoint, a re-sharded "
     "restore); with --live, add (or remove) ps for its dynamic tables without a checkpoint",
     false, true,
     false},
    {"move-buckets", "VARIABLE [N]", "move N buckets of a dynamic table from --from_shard to "
     "the next shard, --to_shard, while the job trains; or, with --balance, as many as even "
     "out the rows its shards hold", false, true, false},
    {"validate", "JOB.json", "check a job file locally, without a chief; prints it with defaults",
     false, false, true},
    {"export", "CKPT OUT", "write a checkpoint's variables, whole, to one safetensors file", false,
     false, false},
};

const Command* FindCommand(absl::string_view name) {
  for (const Command& command : kCommands) {
    if (name == command.name) return &command;
  }
  return nullptr;
}

Options DefaultOptions(const Command& command) {
  Options o;
  // A checkpoint answers once it is committed, which for a large model takes minutes.
  if (std::string(command.name) == "checkpoint" || std::string(command.name) == "scale-ps") {
    o.timeout_s = kCheckpointTimeoutS;  // a scale drains, checkpoints and restores
  }
  // A live scale balances whole tables onto the new ps: larger runs of buckets per switch.
  if (std::string(command.name) == "scale-ps") o.per_switch = 64;
  return o;
}

// `command` null registers every flag, to find the command among the arguments.
void RegisterFlags(FlagParser& parser, Options& o, const Command* command) {
  parser.AddString("chief", &o.chief,
                   "the chief's host:port; empty: the chief in --tf_config or $TF_CONFIG");
  parser.AddString("tf_config", &o.tf_config,
                   "TF_CONFIG JSON, or the path of a file holding it; empty: $TF_CONFIG");
  parser.AddBool("json", &o.json, "machine-readable JSON output");
  parser.AddDouble("timeout", &o.timeout_s, "seconds to wait for each RPC to the chief");
  parser.AddString("test_protocol_version", &o.test_protocol_version,
                   "test aid: claim this wire protocol version (\"MIN-CURRENT\" or \"CURRENT\") "
                   "instead of the build's, as a shardctl of another release would");
  o.tls.AddFlags(&parser);
  o.auth.AddFlags(&parser, /*server=*/false);
  if (command == nullptr || command->watch_flags) {
    parser.AddDouble("interval", &o.interval_s, "seconds between status polls while watching");
  }
  if (command == nullptr || std::string(command->name) == "watch") {
    parser.AddDouble("job_wait", &o.job_wait_s,
                     "seconds to wait for a job when the chief has none yet (a chief started "
                     "with --job submits it once its ps tasks are up), and for a chief that "
                     "went away while watching to come back with the job");
  }
  if (command == nullptr || std::string(command->name) == "submit") {
    parser.AddBool("watch", &o.watch, "follow the job until it ends, like `shardctl watch`");
    parser.AddBool("fresh", &o.fresh,
                   "start from step 0 even if the job's checkpoint dir holds its state (which is "
                   "removed)");
    parser.AddBool("resume", &o.resume,
                   "resume from the job's checkpoint dir, and fail if it holds nothing to resume "
                   "(with neither flag: resume if it holds the job's state)");
  }
  if (command == nullptr || command->job_id_flag) {
    parser.AddString("job_id", &o.job_id, "the job to act on (default: the current job)");
  }
  if (command == nullptr || std::string(command->name) == "export") {
    parser.AddBool("slots", &o.slots,
                   "also write each variable's optimizer slots (\"NAME/adam_m\", ...)");
  }
  if (command == nullptr || std::string(command->name) == "scale-ps") {
    parser.AddString("ps_addresses", &o.ps_addresses,
                     "the N ps' addresses, comma-separated, in task order, the job's own first "
                     "(default: the first N of the chief's TF_CONFIG ps job)");
    parser.AddDouble("ps_timeout", &o.ps_timeout_s,
                     "seconds the new ps may take to answer before the scale is refused (the "
                     "call waits this long on top of --timeout)");
    parser.AddBool("live", &o.live,
                   "add ps without a checkpoint: each dynamic table gets a shard on each new ps "
                   "and its buckets are balanced onto them while the job trains (dense "
                   "variables stay where they are); or remove ps added so, their buckets "
                   "moved off first");
  }
  if (command != nullptr && std::string(command->name) == "scale-ps") {
    parser.AddInt("per_switch", &o.per_switch,
                  "--live: buckets that switch together as the tables are balanced");
    parser.AddDouble("pause", &o.pause_s,
                     "--live: seconds to wait between one switch and the next run's copy (0 to "
                     "60)");
  }
  if (command == nullptr || std::string(command->name) == "move-buckets") {
    parser.AddInt("from_shard", &o.from_shard, "the table's shard the buckets leave (required)");
    parser.AddInt("to_shard", &o.to_shard,
                  "the shard next to it that takes them: from_shard - 1 or + 1 (required)");
    parser.AddInt("per_switch", &o.per_switch,
                  "buckets that switch together (each switch makes every worker route again "
                  "once: a larger run costs the job less)");
    parser.AddDouble("pause", &o.pause_s,
                     "seconds to wait between one switch and the next run's copy: a slower move "
                     "that takes less of the job's time (0 to 60; 0: as fast as it goes)");
    parser.AddBool("balance", &o.balance,
                   "plan the moves that even out the rows the table's shards hold, and run "
                   "them (no N, --from_shard or --to_shard)");
    parser.AddDouble("tolerance", &o.tolerance,
                     "--balance: leave the table as it is while its largest shard holds at most "
                     "(1 + this) times the mean");
    parser.AddDouble("freeze", &o.freeze_s,
                     "seconds a source may hold a bucket frozen before it takes it back (a "
                     "switch takes milliseconds)");
  }
  if (command == nullptr || command->workers_flag) {
    parser.AddInt("workers", &o.workers,
                  "number of workers to assume (in sync mode the default of num_replicas, and "
                  "its upper bound)");
  }
}

// "shardctl submit JOB.json", for the command's usage line.
std::string ProgramName(const Command& command) {
  return absl::StrCat("shardctl ", command.name, command.args[0] ? " " : "", command.args);
}

std::string TopLevelUsage() {
  std::string out =
      "usage: shardctl COMMAND [ARGS] [flags]\n"
      "Submits, follows and controls training jobs on a shardps chief.\n\n"
      "commands:\n";
  for (const Command& command : kCommands) {
    std::string call = absl::StrCat(command.name, command.args[0] ? " " : "", command.args);
    absl::StrAppend(&out, "  ", call, std::string(call.size() < 20 ? 20 - call.size() : 1, ' '),
                    command.summary, "\n");
  }
  absl::StrAppend(
      &out,
      "  help [COMMAND]      show this help, or a command's\n\n"
      "global flags:\n"
      "  --chief=HOST:PORT   the chief (default: the chief in --tf_config or $TF_CONFIG)\n"
      "  --tf_config=JSON|FILE  the cluster, in TF_CONFIG format (default: $TF_CONFIG)\n"
      "  --json              machine-readable JSON output\n"
      "  --timeout=SECONDS   seconds to wait for each RPC (default: 10; checkpoint: 600;\n"
      "                      scale-ps: 600 after its --ps_timeout)\n\n"
      "A job whose checkpoint dir already holds its state resumes from it: submit --fresh\n"
      "starts it over from step 0, --resume fails when there is nothing to resume.\n\n"
      "exit codes: 0 ok, 1 error, 2 bad command line or invalid job file (found here or by the\n"
      "chief), 3 chief unreachable, 4 the watched job FAILED or was CANCELLED.\n\n"
      "Run \"shardctl COMMAND --help\" for a command's flags.\n");
  return out;
}

int UsageError(absl::string_view message) {
  std::cerr << "shardctl: " << message << "\n(run \"shardctl --help\" for usage)\n";
  return kExitUsage;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read job file \"", path, "\""));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading \"", path, "\""));
  return text.str();
}

// host:port with a port in 1..65535 (IPv6 hosts in brackets).
bool LooksLikeAddress(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return false;
  int port = 0;
  return absl::SimpleAtoi(address.substr(colon + 1), &port) && port >= 1 && port <= 65535;
}

// The chief's address from the flags or TF_CONFIG; errors are configuration errors (exit 2).
absl::StatusOr<std::string> ChiefAddress(const Options& o) {
  if (!o.chief.empty()) {
    if (!LooksLikeAddress(o.chief)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--chief: \"", o.chief, "\" is not host:port with a port 1..65535"));
    }
    return o.chief;
  }
  const char* env = std::getenv("TF_CONFIG");
  if (o.tf_config.empty() && (env == nullptr || env[0] == '\0')) {
    return absl::InvalidArgumentError(
        "no chief address: pass --chief=host:port, or --tf_config / TF_CONFIG with a chief");
  }
  absl::StatusOr<TfConfig> config = LoadTfConfig(o.tf_config, env);
  if (!config.ok()) return absl::InvalidArgumentError(config.status().message());
  absl::StatusOr<std::string> address = config->Address("chief", 0);
  if (!address.ok()) {
    return absl::InvalidArgumentError("TF_CONFIG: cluster has no \"chief\"; pass --chief");
  }
  return *address;
}

// Prints a failed RPC and returns the exit code for it. INVALID_ARGUMENT is a bad command
// line or job file (exit 2) when `invalid_argument_is_usage`, else an error like any other.
int ReportRpcError(const absl::Status& status, const std::string& address, absl::string_view what,
                   double timeout_s, bool invalid_argument_is_usage = true) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
      std::cerr << "shardctl: cannot reach the chief at " << address << ": " << status.message()
                << "\n(is the chief running there? set --chief or TF_CONFIG)\n";
      return kExitUnreachable;
    case absl::StatusCode::kDeadlineExceeded:
      std::cerr << "shardctl: the chief at " << address << " did not answer " << what << " within "
                << timeout_s << " s (--timeout)\n";
      return kExitUnreachable;
    case absl::StatusCode::kInvalidArgument:
      if (!invalid_argument_is_usage) break;
      std::cerr << "shardctl: " << status.message() << "\n";
      return kExitUsage;
    default:
      break;
  }
  std::cerr << "shardctl: " << what << " failed: " << absl::StatusCodeToString(status.code())
            << ": " << status.message() << "\n";
  return kExitError;
}

int TerminalWidth() {
  winsize size{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

// Sleeps `seconds`, waking early on SIGINT.
void InterruptibleSleep(double seconds) {
  const absl::Time end = absl::Now() + absl::Seconds(seconds);
  while (!g_interrupted && absl::Now() < end) {
    absl::SleepFor(std::min(absl::Milliseconds(50), end - absl::Now()));
  }
}

// One watch of a job: what it has seen, and what it prints for each status answer. Run polls
// the chief (ChiefInterface::WaitFor) until the job ends; every answer goes to OnAnswer, which
// ends the watch by returning an error once exit_code_ is set.
class JobWatch {
 public:
  // `job_id` empty: the chief's current job, waited for up to --job_wait seconds when there
  // is none yet.
  JobWatch(const Options& o, const std::string& address, std::string job_id)
      : o_(o),
        address_(address),
        watched_(std::move(job_id)),
        tty_(isatty(STDOUT_FILENO) && !o.json),
        job_deadline_(absl::Now() + absl::Seconds(o.job_wait_s)),
        // Once reached, the chief may go away and come back (a supervisor restarts it, and it
        // resumes the job from its checkpoint dir): ride that out for this long.
        outage_limit_(absl::Seconds(std::max(o.timeout_s, o.job_wait_s))) {}

  int Run(ChiefInterface& chief) {
    g_interrupted = 0;
    struct sigaction action {};
    action.sa_handler = OnInterrupt;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    ChiefInterface::WaitOptions options;
    options.poll_interval = absl::Seconds(o_.interval_s);
    options.call_timeout = absl::Seconds(o_.timeout_s);
    options.sleep = [](absl::Duration d) { InterruptibleSleep(absl::ToDoubleSeconds(d)); };
    options.on_answer = [this](const absl::StatusOr<JobStatus>& answer) {
      return OnAnswer(answer);
    };
    (void)chief.WaitFor([](const JobStatus&) { return false; }, absl::InfiniteFuture(),
                        options);
    return exit_code_;
  }

 private:
  absl::Status OnAnswer(const absl::StatusOr<JobStatus>& answer) {
    if (g_interrupted) {
      EndLine();
      std::cerr << "shardctl: interrupted; the job goes on (\"shardctl cancel\" stops it)\n";
      return End(kExitInterrupted);
    }
    if (!answer.ok()) return OnFailedCall(answer.status());
    reached_ = true;
    if (answer->state() == JobStatus::NO_JOB) return OnNoJob();
    if (said_outage_) std::cerr << "shardctl: the chief is back\n";
    outage_since_ = absl::InfiniteFuture();
    said_outage_ = false;
    if (watched_.empty()) watched_ = answer->job_id();
    if (answer->job_id() != watched_) {
      EndLine();
      std::cerr << "shardctl: job " << watched_ << " is no longer the chief's job (now "
                << (answer->job_id().empty() ? "none" : answer->job_id()) << ")\n";
      return End(kExitError);
    }
    if (absl::Status s = Show(*answer); !s.ok()) return s;
    if (!IsTerminal(answer->state())) return absl::OkStatus();
    EndLine();
    if (!o_.json) std::cout << FinalSummary(*answer) << std::flush;
    return End(WatchExitCode(*answer));
  }

  // A chief once reached that stops answering is waited for; else the call's error ends it.
  // CANCELLED is the chief going away too: a chief stopped by SIGTERM cancels the calls in
  // flight as its server shuts down (a Ctrl-C of this watch was handled before).
  absl::Status OnFailedCall(const absl::Status& rpc) {
    const bool transient = rpc.code() == absl::StatusCode::kUnavailable ||
                           rpc.code() == absl::StatusCode::kDeadlineExceeded ||
                           rpc.code() == absl::StatusCode::kCancelled;
    if (transient && reached_ &&
        RideOut(absl::StrCat("lost the chief at ", address_, " (", rpc.message(), ")"))) {
      return absl::OkStatus();
    }
    EndLine();
    return End(ReportRpcError(rpc, address_, "GetStatus", o_.timeout_s));
  }

  absl::Status OnNoJob() {
    if (watched_.empty()) {
      if (absl::Now() >= job_deadline_) {
        std::cerr << "shardctl: no job on the chief at " << address_ << "\n";
        return End(kExitError);
      }
      if (!said_waiting_) {
        std::cerr << "shardctl: waiting for a job on the chief at " << address_ << "...\n";
        said_waiting_ = true;
      }
      return absl::OkStatus();
    }
    // A restarted chief has no job until it has resumed ours.
    if (RideOut(absl::StrCat("the chief at ", address_, " has no job (restarted?)"))) {
      return absl::OkStatus();
    }
    EndLine();
    std::cerr << "shardctl: job " << watched_ << " is no longer the chief's job (now none)\n";
    return End(kExitError);
  }

  // The progress line: redrawn on a terminal, else a plain or JSON line now and then.
  absl::Status Show(const JobStatus& status) {
    const double now_s = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
    if (tty_) {
      std::cout << "\r" << TerminalProgressLine(status, TerminalWidth() - 1) << "\x1b[K"
                << std::flush;
      line_open_ = true;
    } else if (throttle_.Due(status, now_s)) {
      if (o_.json) {
        absl::StatusOr<std::string> json = StatusJson(status, /*pretty=*/false);
        if (!json.ok()) {
          std::cerr << "shardctl: " << json.status().message() << "\n";
          return End(kExitError);
        }
        std::cout << *json << "\n" << std::flush;
      } else {
        std::cout << PlainProgressLine(status) << "\n" << std::flush;
      }
    }
    return absl::OkStatus();
  }

  // Whether to wait out an outage that started now or earlier, saying so once.
  bool RideOut(absl::string_view what) {
    if (outage_since_ == absl::InfiniteFuture()) outage_since_ = absl::Now();
    if (absl::Now() - outage_since_ >= outage_limit_) return false;
    if (!said_outage_) {
      EndLine();
      std::cerr << "shardctl: " << what << "; waiting up to "
                << absl::ToDoubleSeconds(outage_limit_) << " s for it to come back...\n";
      said_outage_ = true;
    }
    return true;
  }

  // Ends a progress line left without its newline on the terminal.
  void EndLine() {
    if (line_open_) std::cout << "\n" << std::flush;
    line_open_ = false;
  }

  absl::Status End(int exit_code) {
    exit_code_ = exit_code;
    return absl::CancelledError("the watch ended");
  }

  const Options& o_;
  const std::string address_;
  std::string watched_;
  const bool tty_;
  const absl::Time job_deadline_;
  const absl::Duration outage_limit_;
  PlainProgressThrottle throttle_{2.0};
  bool said_waiting_ = false;
  bool reached_ = false;
  absl::Time outage_since_ = absl::InfiniteFuture();  // chief unreachable or without our job
  bool said_outage_ = false;
  bool line_open_ = false;  // a progress line without its newline is on the terminal
  int exit_code_ = kExitError;
};

int Watch(ChiefInterface& chief, const Options& o, const std::string& job_id) {
  return JobWatch(o, chief.address(), job_id).Run(chief);
}

int RunValidate(const Options& o, const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return UsageError(text.status().message());
  absl::StatusOr<JobSpec> spec = ParseJobSpec(*text, static_cast<int>(o.workers));
  if (!spec.ok()) {
    std::cerr << "shardctl: " << path << ": " << spec.status().message() << "\n";
    return kExitUsage;
  }
  if (o.json) {
    std::cout << JobSpecToJson(*spec) << "\n";
  } else {
    std::cout << path << ": valid job \"" << spec->name() << "\"; with defaults:\n"
              << JobSpecToJson(*spec, 2) << "\n";
  }
  return kExitOk;
}

// The job file's text, validated locally so that a bad file fails fast, without a chief, on
// what the chief would reject anyway. Returns an exit code on failure.
absl::StatusOr<std::string> ReadJobFile(const std::string& path, int* exit_code) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    *exit_code = UsageError(text.status().message());
    return text.status();
  }
  // The cluster's worker count is the chief's to check (num_replicas in sync mode).
  if (absl::StatusOr<JobSpec> spec = ParseJobSpec(*text, /*num_workers=*/0); !spec.ok()) {
    std::cerr << "shardctl: " << path << ": " << spec.status().message() << "\n";
    *exit_code = kExitUsage;
    return spec.status();
  }
  return text;
}

int RunSubmit(ChiefInterface& chief, const Options& o, const std::string& text) {
  SubmitJobRequest request;
  request.set_job_json(text);
  request.set_resume(o.fresh    ? SubmitJobRequest::FRESH
                     : o.resume ? SubmitJobRequest::RESUME
                                : SubmitJobRequest::AUTO);
  absl::StatusOr<SubmitJobResponse> submitted =
      chief.SubmitJob(request, absl::Seconds(o.timeout_s));
  if (!submitted.ok()) {
    return ReportRpcError(submitted.status(), chief.address(), "SubmitJob", o.timeout_s);
  }
  const SubmitJobResponse& response = *submitted;
  const bool resumed = response.resumed_at_step() > 0 || !response.resumed_from().empty();
  if (o.json) {
    nlohmann::json out = {{"job_id", response.job_id()}, {"total_steps", response.total_steps()}};
    if (resumed) {
      out["resumed_at_step"] = response.resumed_at_step();
      out["resumed_from"] = response.resumed_from();
    }
    if (response.already_finished()) out["already_finished"] = true;
    std::cout << out.dump() << "\n" << std::flush;
  } else if (response.already_finished()) {
    std::cout << "job " << response.job_id() << " already finished; nothing to train"
              << (response.resumed_from().empty() ? "" : " (" + response.resumed_from() + ")")
              << "\n"
              << std::flush;
  } else if (resumed) {
    std::cout << "resumed job " << response.job_id() << " on " << chief.address() << " at step "
              << response.resumed_at_step() << " of " << response.total_steps()
              << (response.resumed_from().empty() ? "" : ", from " + response.resumed_from())
              << "\n"
              << std::flush;
  } else {
    std::cout << "submitted job " << response.job_id() << " to " << chief.address() << ": "
              << response.total_steps() << " steps\n"
              << std::flush;
  }
  if (!o.watch || response.already_finished()) return kExitOk;
  return Watch(chief, o, response.job_id());
}

double NowUnixSeconds() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

int RunStatus(ChiefInterface& chief, const Options& o) {
  absl::StatusOr<JobStatus> answer = chief.GetStatus(absl::Seconds(o.timeout_s));
  if (!answer.ok()) {
    return ReportRpcError(answer.status(), chief.address(), "GetStatus", o.timeout_s);
  }
  const JobStatus& status = *answer;
  if (o.json) {
    absl::StatusOr<std::string> json = StatusJson(status, /*pretty=*/true);
    if (!json.ok()) {
      std::cerr << "shardctl: " << json.status().message() << "\n";
      return kExitError;
    }
    std::cout << *json << "\n";
  } else {
    std::cout << StatusText(status, NowUnixSeconds());
  }
  return kExitOk;
}

// The workers table in detail (elastic workers: docs/elastic.md); --json: the status' workers.
int RunWorkers(ChiefInterface& chief, const Options& o) {
  absl::StatusOr<JobStatus> answer = chief.GetStatus(absl::Seconds(o.timeout_s));
  if (!answer.ok()) {
    return ReportRpcError(answer.status(), chief.address(), "GetStatus", o.timeout_s);
  }
  if (o.json) {
    JobStatus workers;
    *workers.mutable_workers() = answer->workers();
    workers.set_worker_joins(answer->worker_joins());
    workers.set_worker_leaves(answer->worker_leaves());
    absl::StatusOr<std::string> json = StatusJson(workers, /*pretty=*/true);
    if (!json.ok()) {
      std::cerr << "shardctl: " << json.status().message() << "\n";
      return kExitError;
    }
    std::cout << *json << "\n";
    return kExitOk;
  }
  std::cout << WorkersTable(*answer, /*detail=*/true);
  return kExitOk;
}

int RunAddSteps(ChiefInterface& chief, const Options& o, int64_t steps) {
  AddStepsRequest request;
  request.set_job_id(o.job_id);
  request.set_steps(steps);
  absl::StatusOr<AddStepsResponse> response = chief.AddSteps(request, absl::Seconds(o.timeout_s));
  if (!response.ok()) {
    return ReportRpcError(response.status(), chief.address(), "AddSteps", o.timeout_s);
  }
  if (o.json) {
    std::cout << nlohmann::json{{"total_steps", response->total_steps()}}.dump() << "\n";
  } else {
    std::cout << "added " << steps << " steps; the job now has " << response->total_steps()
              << " steps\n";
  }
  return kExitOk;
}

int RunCancel(ChiefInterface& chief, const Options& o) {
  CancelJobRequest request;
  request.set_job_id(o.job_id);
  if (absl::Status s = chief.CancelJob(request, absl::Seconds(o.timeout_s)); !s.ok()) {
    return ReportRpcError(s, chief.address(), "CancelJob", o.timeout_s);
  }
  const std::string which = o.job_id.empty() ? "the current job" : "job " + o.job_id;
  if (o.json) {
    std::cout << nlohmann::json{{"cancelled", true}, {"job_id", o.job_id}}.dump() << "\n";
  } else {
    std::cout << "cancelled " << which << "\n";
  }
  return kExitOk;
}

// Takes a checkpoint now and waits (up to --timeout) until it is committed.
int RunCheckpoint(ChiefInterface& chief, const Options& o) {
  CheckpointRequest request;
  request.set_job_id(o.job_id);
  absl::StatusOr<CheckpointInfo> checkpoint = chief.Checkpoint(request, absl::Seconds(o.timeout_s));
  if (!checkpoint.ok()) {
    return ReportRpcError(checkpoint.status(), chief.address(), "Checkpoint", o.timeout_s,
                          /*invalid_argument_is_usage=*/false);
  }
  const CheckpointInfo& c = *checkpoint;
  if (o.json) {
    nlohmann::json out = {{"id", c.id()},
                          {"path", c.path()},
                          {"steps_done", c.steps_done()},
                          {"unix_time", c.unix_time()},
                          {"bytes", c.bytes()},
                          {"write_seconds", c.write_seconds()},
                          {"pause_ms", c.pause_ms()},
                          {"final", c.final()}};
    std::cout << out.dump() << "\n";
  } else {
    std::cout << CheckpointLine(c) << "\n";
  }
  return kExitOk;
}

// Moves the job onto `num_ps` ps and waits (up to --ps_timeout plus --timeout) until
// training resumed there.
int RunScalePs(ChiefInterface& chief, const Options& o, int num_ps) {
  ScalePsRequest request;
  request.set_job_id(o.job_id);
  request.set_num_ps(num_ps);
  for (absl::string_view a : absl::StrSplit(o.ps_addresses, ',', absl::SkipEmpty())) {
    request.add_ps_addresses(std::string(a));
  }
  request.set_timeout_ms(static_cast<int64_t>(o.ps_timeout_s * 1000));
  request.set_live(o.live);
  if (o.live) {
    request.set_per_switch(static_cast<int32_t>(o.per_switch));
    request.set_pause_ms(static_cast<int64_t>(o.pause_s * 1000));
  }
  // The chief may wait --ps_timeout for the new ps before the drain, checkpoint and restore
  // that --timeout covers: a --ps_timeout longer than --timeout must not end the call while
  // the chief still waits (or moves the job).
  const double deadline_s = o.ps_timeout_s + o.timeout_s;
  absl::StatusOr<ScalePsResponse> r = chief.ScalePs(request, absl::Seconds(deadline_s));
  if (!r.ok()) {
    // The chief's own DEADLINE_EXCEEDED names the new ps that did not answer (--ps_timeout):
    // a refused scale, not a silent chief.
    if (absl::IsDeadlineExceeded(r.status()) &&
        absl::StrContains(r.status().message(), "did not answer")) {
      std::cerr << "shardctl: scale-ps failed: " << r.status().message() << "\n";
      return kExitError;
    }
    return ReportRpcError(r.status(), chief.address(), "ScalePs", deadline_s);
  }
  if (o.json) {
    nlohmann::json out = {{"from_ps", r->from_ps()},
                          {"to_ps", r->to_ps()},
                          {"layout_version", r->layout_version()},
                          {"checkpoint_id", r->checkpoint_id()},
                          {"steps_done", r->steps_done()},
                          {"bytes_moved", r->bytes_moved()},
                          {"pause_s", r->pause_s()},
                          {"seconds", r->seconds()},
                          {"live", r->live()},
                          {"tables", r->tables()},
                          {"buckets_moved", r->buckets_moved()},
                          {"rows_moved", r->rows_moved()},
                          {"balance_s", r->balance_s()}};
    std::cout << out.dump() << "\n";
  } else {
    std::cout << ScaleLine(*r) << "\n";
  }
  return kExitOk;
}

// Moves buckets of a dynamic table and waits until they moved.
int RunMoveBuckets(ChiefInterface& chief, const Options& o, const std::string& variable,
                   int count) {
  MoveTableBucketsRequest request;
  request.set_job_id(o.job_id);
  request.set_variable(variable);
  request.set_from_shard(static_cast<int32_t>(o.from_shard));
  request.set_to_shard(static_cast<int32_t>(o.to_shard));
  request.set_count(count);
  request.set_freeze_ms(static_cast<int64_t>(o.freeze_s * 1000));
  request.set_per_switch(static_cast<int32_t>(o.per_switch));
  request.set_pause_ms(static_cast<int64_t>(o.pause_s * 1000));
  if (o.balance) {
    request.clear_from_shard();
    request.clear_to_shard();
    request.set_balance(true);
    request.set_tolerance(o.tolerance);
  }
  absl::StatusOr<MoveTableBucketsResponse> r =
      chief.MoveTableBuckets(request, absl::Seconds(o.timeout_s));
  if (!r.ok()) return ReportRpcError(r.status(), chief.address(), "MoveTableBuckets", o.timeout_s);
  if (o.json) {
    nlohmann::json out = {{"variable", r->variable()},      {"from_shard", r->from_shard()},
                          {"to_shard", r->to_shard()},      {"from_ps", r->from_ps()},
                          {"to_ps", r->to_ps()},            {"buckets", r->buckets()},
                          {"rows", r->rows()},              {"bytes", r->bytes()},
                          {"seconds", r->seconds()},        {"frozen_s", r->frozen_s()},
                          {"routing_version", r->routing_version()},
                          {"steps_before", r->steps_before()},
                          {"steps_after", r->steps_after()}};
    if (o.balance) {
      out["moves"] = std::vector<std::string>(r->moves().begin(), r->moves().end());
      out["imbalance_before"] = r->imbalance_before();
      out["imbalance_after"] = r->imbalance_after();
    }
    std::cout << out.dump() << "\n";
  } else {
    std::cout << BucketMoveLine(*r) << "\n";
  }
  return kExitOk;
}

// OUT of `export`, checked before anything is read: a directory, or a file in a directory
// that does not exist, is a bad command line.
absl::Status CheckExportOutput(const std::string& out) {
  if (out.empty()) return absl::InvalidArgumentError("export: OUT must not be empty");
  struct stat info {};
  if (stat(out.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("export: OUT \"", out, "\" is a directory; give the file to write, e.g. \"",
                     absl::StripSuffix(out, "/"), "/model.safetensors\""));
  }
  const size_t slash = out.rfind('/');
  const std::string parent =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : out.substr(0, slash));
  if (stat(parent.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("export: OUT \"", out, "\": no directory \"", parent, "\""));
  }
  return absl::OkStatus();
}

// Writes the checkpoint at `checkpoint` (a checkpoint dir, one checkpoint's dir, or its
// manifest.json) whole and un-sharded into `out`.
int RunExport(const Options& o, const std::string& checkpoint, const std::string& out) {
  if (checkpoint.empty()) return UsageError("export: CKPT must not be empty");
  if (absl::Status s = CheckExportOutput(out); !s.ok()) return UsageError(s.message());
  // Opened here to name the checkpoint exported; exported from its manifest, so that a
  // checkpoint committed meanwhile in the same directory cannot change what is written.
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader = CheckpointReader::Open(checkpoint);
  if (!reader.ok()) {
    std::cerr << "shardctl: export: " << reader.status().message() << "\n";
    return kExitError;
  }
  const Manifest& manifest = (*reader)->manifest();
  if (absl::Status s = ExportCheckpoint((*reader)->manifest_path(), out, o.slots); !s.ok()) {
    std::cerr << "shardctl: export: " << s.message() << "\n";
    return kExitError;
  }
  struct stat info {};
  const int64_t bytes = stat(out.c_str(), &info) == 0 ? static_cast<int64_t>(info.st_size) : 0;
  if (o.json) {
    nlohmann::json json = {{"checkpoint", (*reader)->manifest_path()},
                           {"checkpoint_id", manifest.checkpoint_id},
                           {"job_id", manifest.job_id},
                           {"steps_done", manifest.progress.steps_done},
                           {"variables", manifest.variables.size()},
                           {"slots", o.slots},
                           {"out", out},
                           {"bytes", bytes}};
    std::cout << json.dump() << "\n";
  } else {
    std::cout << "exported checkpoint " << manifest.checkpoint_id << " of job " << manifest.job_id
              << " (" << manifest.progress.steps_done << " steps): " << manifest.variables.size()
              << (manifest.variables.size() == 1 ? " variable" : " variables")
              << (o.slots ? " with their slots" : "") << ", " << FormatBytes(bytes) << ", to "
              << out << "\n";
  }
  return kExitOk;
}

// Positional arguments a command takes: the words of its `args`, those in [brackets]
// optional (counted in the most, not the fewest).
size_t NumArgs(const Command& command, bool fewest = false) {
  const std::vector<absl::string_view> words = absl::StrSplit(command.args, ' ', absl::SkipEmpty());
  size_t n = 0;
  for (absl::string_view w : words) n += !(fewest && absl::StartsWith(w, "["));
  return n;
}

constexpr int kGoOn = -1;

// The first pass over the arguments, with every flag known: finds the command, or answers
// help and usage itself. Returns kGoOn with *command set, or the exit code.
int FindCommandInArgs(const std::vector<std::string>& args, const Command** command) {
  Options scratch;
  FlagParser finder("shardctl", "");
  RegisterFlags(finder, scratch, nullptr);
  std::vector<std::string> positional;
  if (absl::Status s = finder.Parse(args, &positional); !s.ok()) return UsageError(s.message());
  if (positional.empty()) {
    if (finder.help_requested()) {
      std::cout << TopLevelUsage();
      return kExitOk;
    }
    std::cerr << TopLevelUsage();
    return kExitUsage;
  }
  if (positional[0] == "help") {
    if (positional.size() == 1) {
      std::cout << TopLevelUsage();
      return kExitOk;
    }
    const Command* about = FindCommand(positional[1]);
    if (about == nullptr) {
      return UsageError(absl::StrCat("unknown command \"", positional[1], "\""));
    }
    Options o = DefaultOptions(*about);
    FlagParser parser(ProgramName(*about), about->summary);
    RegisterFlags(parser, o, about);
    std::cout << parser.Usage();
    return kExitOk;
  }
  *command = FindCommand(positional[0]);
  if (*command == nullptr) {
    std::vector<std::string> names;
    for (const Command& c : kCommands) names.push_back(c.name);
    return UsageError(absl::StrCat("unknown command \"", positional[0], "\" (expected ",
                                   absl::StrJoin(names, ", "), ")"));
  }
  return kGoOn;
}

// Checks the flags' values (exit 2 on a bad one); applies --test_protocol_version.
int CheckOptions(const Options& o) {
  if (!(o.timeout_s > 0)) return UsageError("--timeout must be > 0");
  if (!(o.interval_s > 0)) return UsageError("--interval must be > 0");
  if (!(o.job_wait_s >= 0)) return UsageError("--job_wait must be >= 0");
  if (o.workers < 1 || o.workers > 1000000) return UsageError("--workers must be 1..1000000");
  if (o.fresh && o.resume) return UsageError("submit: give --fresh or --resume, not both");
  if (absl::Status tls = o.tls.Validate(); !tls.ok()) return UsageError(tls.message());
  SetProcessTls(o.tls);
  if (absl::Status auth = SetProcessAuth(o.auth, o.tls); !auth.ok()) {
    return UsageError(auth.message());
  }
  if (!o.test_protocol_version.empty()) {
    absl::StatusOr<ProtocolRange> range = ParseProtocolHeader(o.test_protocol_version);
    if (!range.ok()) return UsageError(absl::StrCat("--test_protocol_version: ", range.status().message()));
    SetLocalProtocolForTesting(*range);
  }
  return kGoOn;
}

// The second pass: only the command's flags, and its positional arguments (the command's
// name left out). Returns kGoOn, or the exit code.
int ParseCommandLine(const Command& command, const std::vector<std::string>& args, Options* o,
                     std::vector<std::string>* positional) {
  *o = DefaultOptions(command);
  FlagParser parser(ProgramName(command), command.summary);
  RegisterFlags(parser, *o, &command);
  const int parsed = HandleParseResult(parser, parser.Parse(args, positional));
  if (parsed >= 0) return parsed;
  positional->erase(positional->begin());  // the command
  const size_t expected_args = NumArgs(command);
  if (positional->size() > expected_args || positional->size() < NumArgs(command, true)) {
    return UsageError(
        expected_args == 0
            ? absl::StrCat(command.name, ": unexpected argument \"", (*positional)[0], "\"")
            : absl::StrCat(command.name, ": expected ", command.args, ", got ",
                           positional->size(), " arguments"));
  }
  return CheckOptions(*o);
}

// The commands that talk to the chief.
int RunWithChief(const std::string& name, const Options& o,
                 const std::vector<std::string>& positional) {
  std::string job_text;
  if (name == "submit") {
    int exit_code = kExitError;
    absl::StatusOr<std::string> text = ReadJobFile(positional[0], &exit_code);
    if (!text.ok()) return exit_code;
    job_text = *std::move(text);
  }
  int64_t steps = 0;
  if (name == "add-steps" && (!absl::SimpleAtoi(positional[0], &steps) || steps <= 0)) {
    return UsageError(
        absl::StrCat("add-steps: N must be a positive integer, got \"", positional[0], "\""));
  }
  int64_t num_ps = 0;
  if (name == "scale-ps" &&
      (!absl::SimpleAtoi(positional[0], &num_ps) || num_ps < 1 || num_ps > 100000)) {
    return UsageError(absl::StrCat("scale-ps: N must be a number of ps tasks (1..100000), got \"",
                                   positional[0], "\""));
  }
  if (name == "scale-ps" && !(o.ps_timeout_s > 0)) {
    return UsageError("scale-ps: --ps_timeout must be > 0");
  }
  if (name == "scale-ps" && o.live && (o.per_switch < 1 || !(o.pause_s >= 0 && o.pause_s <= 60))) {
    return UsageError(absl::StrCat("scale-ps --live: --per_switch must be >= 1 and --pause in "
                                   "[0, 60], got ", o.per_switch, " and ", o.pause_s));
  }
  int64_t buckets = 0;
  if (name == "move-buckets" && o.balance) {
    if (positional.size() != 1 || o.from_shard >= 0 || o.to_shard >= 0) {
      return UsageError("move-buckets --balance: plans its own moves; give the VARIABLE only "
                        "(no N, --from_shard or --to_shard)");
    }
    if (!(o.tolerance > 0)) return UsageError("move-buckets: --tolerance must be > 0");
    if (!(o.freeze_s > 0)) return UsageError("move-buckets: --freeze must be > 0");
    if (o.per_switch < 1) return UsageError("move-buckets: --per_switch must be >= 1");
  } else if (name == "move-buckets") {
    if (positional.size() != 2) {
      return UsageError("move-buckets: expected VARIABLE N (or VARIABLE --balance)");
    }
    if (!absl::SimpleAtoi(positional[1], &buckets) || buckets < 1 || buckets > 1000000) {
      return UsageError(absl::StrCat("move-buckets: N must be a number of buckets (1..1000000), "
                                     "got \"", positional[1], "\""));
    }
    if (o.from_shard < 0 || o.to_shard < 0 ||
        (o.to_shard != o.from_shard + 1 && o.to_shard != o.from_shard - 1)) {
      return UsageError(absl::StrCat(
          "move-buckets: --from_shard and --to_shard must name neighbouring shards of the "
          "table (to_shard = from_shard - 1 or + 1), got ", o.from_shard, " and ", o.to_shard));
    }
    if (!(o.freeze_s > 0)) return UsageError("move-buckets: --freeze must be > 0");
    if (o.per_switch < 1 || o.per_switch > buckets) {
      return UsageError(absl::StrCat("move-buckets: --per_switch must be in [1, N], got ",
                                     o.per_switch));
    }
  }
  if (name == "move-buckets" && !(o.pause_s >= 0 && o.pause_s <= 60)) {
    return UsageError(absl::StrCat("move-buckets: --pause must be in [0, 60] seconds, got ",
                                   o.pause_s));
  }
  absl::StatusOr<std::string> address = ChiefAddress(o);
  if (!address.ok()) return UsageError(address.status().message());
  const std::unique_ptr<ChiefInterface> chief = NewGrpcChiefInterface(*address);
  if (name == "submit") return RunSubmit(*chief, o, job_text);
  if (name == "status") return RunStatus(*chief, o);
  if (name == "workers") return RunWorkers(*chief, o);
  if (name == "watch") return Watch(*chief, o, /*job_id=*/"");
  if (name == "add-steps") return RunAddSteps(*chief, o, steps);
  if (name == "cancel") return RunCancel(*chief, o);
  if (name == "checkpoint") return RunCheckpoint(*chief, o);
  if (name == "scale-ps") return RunScalePs(*chief, o, static_cast<int>(num_ps));
  if (name == "move-buckets") {
    return RunMoveBuckets(*chief, o, positional[0], static_cast<int>(buckets));
  }
  return UsageError(absl::StrCat("unknown command \"", name, "\""));
}

int Main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const Command* command = nullptr;
  if (const int rc = FindCommandInArgs(args, &command); rc != kGoOn) return rc;
  Options o;
  std::vector<std::string> positional;
  if (const int rc = ParseCommandLine(*command, args, &o, &positional); rc != kGoOn) return rc;
  const std::string name = command->name;
  if (name == "validate") return RunValidate(o, positional[0]);
  if (name == "export") return RunExport(o, positional[0], positional[1]);
  return RunWithChief(name, o, positional);
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) { return shardps::Main(argc, argv); }
