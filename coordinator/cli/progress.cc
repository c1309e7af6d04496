#include "coordinator/cli/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"

namespace shardps {
namespace {

constexpr int kBarWidth = 10;

bool TrainingFinishedAwaitingEval(const JobStatus& status) {
  return status.state() == JobStatus::RUNNING && status.training_done();
}

std::string Percent(int64_t done, int64_t total) {
  if (total <= 0) return "";
  return absl::StrFormat(" (%.1f%%)", 100.0 * static_cast<double>(done) / total);
}

// "10 epochs", "1 epoch", "2.63 epochs"; "" when steps_per_epoch is unknown.
std::string EpochsDone(const JobStatus& status) {
  if (status.steps_per_epoch() <= 0) return "";
  const int64_t spe = status.steps_per_epoch();
  if (status.steps_done() % spe == 0) {
    const int64_t n = status.steps_done() / spe;
    return absl::StrCat(n, n == 1 ? " epoch" : " epochs");
  }
  return absl::StrFormat("%.2f epochs", static_cast<double>(status.steps_done()) / spe);
}

std::string ModeDetail(const JobStatus& status) {
  std::string mode = ModeName(status);
  if (!status.has_job()) return mode;
  if (status.job().mode() == JobSpec::SYNC) {
    absl::StrAppend(&mode, ", ", status.job().num_replicas(), " replicas per step");
    if (status.job().sync_backup_workers() > 0) {
      absl::StrAppend(&mode, ", the first ",
                      status.job().num_replicas() - status.job().sync_backup_workers(),
                      " applied");
    }
  } else if (status.job().mode() == JobSpec::STALE) {
    absl::StrAppend(&mode, ", staleness ", status.job().staleness());
  }
  return mode;
}

std::string JobDetail(const JobSpec& job) {
  std::string optimizer = absl::AsciiStrToLower(OptimizerSpec::Type_Name(job.optimizer().type()));
  return absl::StrFormat("%s, batch %d, %s lr %g, %s, backend %s", job.model(), job.batch_size(),
                         optimizer, job.optimizer().learning_rate(), job.dataset(), job.backend());
}

}  // namespace

std::string WorkersTable(const JobStatus& status, bool detail) {
  if (status.workers().empty()) return "workers    none\n";
  size_t address_width = std::string("ADDRESS").size();
  size_t state_width = std::string("STATE").size();
  size_t backend_width = std::string("BACKEND").size();
  for (const WorkerInfo& w : status.workers()) {
    address_width = std::max(address_width, w.address().size());
    state_width = std::max(state_width, w.state().size());
    backend_width = std::max(backend_width, w.backend().size());
  }
  const auto row = [&](absl::string_view index, absl::string_view address, absl::string_view state,
                       absl::string_view backend, absl::string_view steps,
                       absl::string_view failures, absl::string_view source,
                       absl::string_view joins) {
    std::string line = absl::StrFormat("  %5s  %-*s  %-*s  %-*s  %10s  %8s", index, address_width,
                                       address, state_width, state, backend_width, backend, steps,
                                       failures);
    if (detail) absl::StrAppend(&line, absl::StrFormat("  %-9s  %5s", source, joins));
    return absl::StrCat(line, "\n");
  };
  std::string out = absl::StrCat("workers    ", status.workers_size());
  if (status.worker_joins() > 0 || status.worker_leaves() > 0) {
    // Elastic workers (docs/elastic.md): since the chief started.
    absl::StrAppend(&out, " (", status.worker_joins(), " joins, ", status.worker_leaves(),
                    " leaves)");
  }
  absl::StrAppend(&out, "\n");
  absl::StrAppend(&out, row("INDEX", "ADDRESS", "STATE", "BACKEND", "STEPS", "FAILURES", "SOURCE",
                            "JOINS"));
  for (const WorkerInfo& w : status.workers()) {
    absl::StrAppend(&out, row(absl::StrCat(w.index()), w.address(), w.state(),
                              w.backend().empty() ? "-" : w.backend(), absl::StrCat(w.steps_done()),
                              absl::StrCat(w.failures()),
                              w.source().empty() ? "tf_config" : w.source(),
                              absl::StrCat(w.joins())));
  }
  // Why each failed or unreachable worker is so, below the table (one line each; an error can
  // be long).
  for (const WorkerInfo& w : status.workers()) {
    if ((w.state() == "failed" || w.state() == "unreachable") && !w.error().empty()) {
      absl::StrAppend(&out, "  worker ", w.index(), ": ", w.error(), "\n");
    }
  }
  return out;
}

namespace {

bool AllPsUp(const JobStatus& status) {
  return std::all_of(status.ps().begin(), status.ps().end(),
                     [](const PsInfo& ps) { return ps.state() == "up"; });
}

// The ps tasks; DOWN and ERROR columns only while some ps is not up.
std::string PsTable(const JobStatus& status) {
  if (status.ps().empty()) return "";
  const bool trouble = !AllPsUp(status);
  std::string header = absl::StrCat("ps         ", status.ps_size());
  if (status.generation() > 0) absl::StrAppend(&header, " (generation ", status.generation(), ")");
  // After a scale-ps (docs/elastic.md): which layout the job is on.
  if (status.layout_version() > 1) {
    absl::StrAppend(&header, " (layout version ", status.layout_version(), ")");
  }
  absl::StrAppend(&header, "\n");
  size_t address_width = std::string("ADDRESS").size();
  size_t state_width = std::string("STATE").size();
  for (const PsInfo& ps : status.ps()) {
    address_width = std::max(address_width, ps.address().size());
    state_width = std::max(state_width, ps.state().size());
  }
  const auto row = [&](absl::string_view index, absl::string_view address, absl::string_view state,
                       absl::string_view incarnation, absl::string_view generation,
                       absl::string_view bytes, absl::string_view down, absl::string_view error) {
    std::string line = absl::StrFormat("  %5s  %-*s  %-*s  %16s  %10s  %10s", index, address_width,
                                       address, state_width, state, incarnation, generation, bytes);
    if (trouble) absl::StrAppend(&line, absl::StrFormat("  %6s  %s", down, error));
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return absl::StrCat(line, "\n");
  };
  absl::StrAppend(&header, row("INDEX", "ADDRESS", "STATE", "INCARNATION", "GENERATION", "BYTES",
                               "DOWN", "ERROR"));
  for (const PsInfo& ps : status.ps()) {
    const bool up = ps.state() == "up";
    absl::StrAppend(&header,
                    row(absl::StrCat(ps.index()), ps.address(), ps.state(),
                        ps.incarnation() == 0 ? "-" : absl::StrFormat("%x", ps.incarnation()),
                        absl::StrCat(ps.generation()), FormatBytes(ps.bytes()),
                        up ? "-" : FormatDuration(ps.down_s()), up ? "" : ps.error()));
  }
  return header;
}

// "7 at 1200 steps, 2m05s ago, 12.3 MiB, written in 0.84 s": no age when `now_unix_s` <= 0.
std::string CheckpointDetail(const CheckpointInfo& c, double now_unix_s) {
  std::string out =
      absl::StrCat(c.id(), c.final() ? " (final)" : "", " at ", c.steps_done(), " steps");
  if (now_unix_s > 0 && c.unix_time() > 0) {
    absl::StrAppend(&out, ", ", FormatDuration(std::max(0.0, now_unix_s - c.unix_time())), " ago");
  }
  absl::StrAppend(&out, ", ", FormatBytes(c.bytes()),
                  absl::StrFormat(", written in %.2f s", c.write_seconds()));
  return out;
}

std::string RecoveriesSummary(const JobStatus& status) {
  const int n = status.recoveries_size();
  return absl::StrCat(n, n == 1 ? " recovery, " : " recoveries, ", status.steps_lost(),
                      status.steps_lost() == 1 ? " step lost" : " steps lost");
}

// The most recent recoveries, one a line, newest last.
constexpr int kRecoveriesShown = 5;
std::string RecoveryLines(const JobStatus& status, double now_unix_s) {
  std::string out;
  const int n = status.recoveries_size();
  if (n > kRecoveriesShown) {
    absl::StrAppend(&out, "  (", n - kRecoveriesShown, " earlier not shown)\n");
  }
  for (int i = std::max(0, n - kRecoveriesShown); i < n; ++i) {
    const RecoveryInfo& r = status.recoveries(i);
    std::string when;
    if (now_unix_s > 0 && r.unix_time() > 0) {
      when = absl::StrCat(FormatDuration(std::max(0.0, now_unix_s - r.unix_time())), " ago: ");
    }
    absl::StrAppend(&out, "  ", when, r.cause(), ": ", r.action(), ", ", r.steps_lost(),
                    r.steps_lost() == 1 ? " step lost" : " steps lost",
                    absl::StrFormat(", %.1f s", r.seconds()), "\n");
  }
  return out;
}

}  // namespace

std::string StateName(JobStatus::State state) {
  const std::string& name = JobStatus::State_Name(state);
  return name.empty() ? absl::StrCat("STATE_", static_cast<int>(state)) : name;
}

bool IsTerminal(JobStatus::State state) {
  return state == JobStatus::SUCCEEDED || state == JobStatus::CANCELLED ||
         state == JobStatus::FAILED;
}

int WatchExitCode(const JobStatus& status) {
  switch (status.state()) {
    case JobStatus::SUCCEEDED:
      return 0;
    case JobStatus::FAILED:
    case JobStatus::CANCELLED:
      return 4;
    default:
      return 1;
  }
}

std::string ModeName(const JobStatus& status) {
  if (!status.mode().empty()) return absl::AsciiStrToLower(status.mode());
  if (status.has_job()) return absl::AsciiStrToLower(JobSpec::Mode_Name(status.job().mode()));
  return "";
}

std::optional<double> EtaSeconds(const JobStatus& status) {
  if (status.state() != JobStatus::RUNNING) return std::nullopt;
  const int64_t remaining = status.total_steps() - status.steps_done();
  if (remaining <= 0) return 0.0;
  if (!(status.steps_per_sec() > 0)) return std::nullopt;
  return static_cast<double>(remaining) / status.steps_per_sec();
}

bool NotAdvancing(const JobStatus& status) {
  return status.state() == JobStatus::RUNNING && !status.phase().empty();
}

std::string FormatClock(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const int64_t total = static_cast<int64_t>(std::llround(seconds));
  const int64_t h = total / 3600;
  const int64_t m = (total / 60) % 60;
  const int64_t s = total % 60;
  if (h > 0) return absl::StrFormat("%d:%02d:%02d", h, m, s);
  return absl::StrFormat("%d:%02d", m, s);
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t total = static_cast<int64_t>(std::llround(seconds));
  if (total < 60) return absl::StrCat(total, "s");
  if (total < 3600) return absl::StrFormat("%dm%02ds", total / 60, total % 60);
  return absl::StrFormat("%dh%02dm", total / 3600, (total / 60) % 60);
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::optional<EpochProgress> Epochs(const JobStatus& status) {
  const int64_t spe = status.steps_per_epoch();
  if (spe <= 0) return std::nullopt;
  EpochProgress epochs;
  epochs.total = std::max<int64_t>(1, (status.total_steps() + spe - 1) / spe);
  // A sync job rounds its steps up to whole sync steps, which can spill one step into an
  // epoch that the job file did not ask for; show the epochs asked for (until steps are added).
  if (status.job().epochs() > 0 && status.total_steps() - status.job().epochs() * spe <
                                       std::max(1, status.job().num_replicas())) {
    epochs.total = status.job().epochs();
  }
  epochs.current = std::clamp<int64_t>(status.steps_done() / spe + 1, 1, epochs.total);
  return epochs;
}

std::string ProgressBar(int64_t done, int64_t total, int width) {
  int filled = 0;
  if (total > 0 && done > 0) {
    filled = static_cast<int>(std::min<int64_t>(width, done * width / total));
  }
  return absl::StrCat("[", std::string(filled, '#'), std::string(width - filled, '.'), "]");
}

std::string TerminalProgressLine(const JobStatus& status, int max_width) {
  // Each part with the order in which it is dropped to fit max_width (higher goes first).
  std::vector<std::pair<int, std::string>> parts;
  if (NotAdvancing(status)) {
    // No bar, speed or ETA: nothing here may look like progress.
    parts.emplace_back(0, absl::StrCat(status.steps_done(), "/", status.total_steps(), " steps"));
    parts.emplace_back(0,
                       absl::StrCat(status.training_done() ? "training done: " : "NOT ADVANCING: ",
                                    status.phase()));
  } else {
    parts.emplace_back(
        0, absl::StrCat(ProgressBar(status.steps_done(), status.total_steps(), kBarWidth), " ",
                        status.steps_done(), "/", status.total_steps(), " steps"));
    if (std::optional<EpochProgress> e = Epochs(status)) {
      parts.emplace_back(3, absl::StrCat("epoch ", e->current, "/", e->total));
    }
    if (status.steps_per_sec() > 0) {
      parts.emplace_back(7, absl::StrFormat("%.1f steps/s", status.steps_per_sec()));
    }
    if (status.steps_done() > 0) {
      parts.emplace_back(8, absl::StrFormat("loss %.4f", status.loss()));
      parts.emplace_back(9, absl::StrFormat("acc %.3f", status.accuracy()));
    }
    if (status.has_eval()) {
      parts.emplace_back(2, status.last_eval().auc() > 0
                                ? absl::StrFormat("eval auc %.4f", status.last_eval().auc())
                                : absl::StrFormat("eval %.3f", status.last_eval().accuracy()));
    }
    if (status.has_checkpoint()) {
      parts.emplace_back(5, absl::StrCat("ckpt ", status.last_checkpoint().id()));
    }
    if (status.recoveries_size() > 0) parts.emplace_back(6, RecoveriesSummary(status));
    if (TrainingFinishedAwaitingEval(status)) {
      parts.emplace_back(1, "final eval...");
    } else if (status.state() == JobStatus::RUNNING) {
      std::optional<double> eta = EtaSeconds(status);
      parts.emplace_back(1, absl::StrCat("ETA ", eta ? FormatClock(*eta) : "--:--"));
    } else {
      parts.emplace_back(1, StateName(status.state()));
    }
    if (!status.checkpoint_error().empty()) parts.emplace_back(1, "CHECKPOINT FAILED");
  }
  const auto join = [&parts] {
    std::vector<absl::string_view> texts;
    for (const auto& part : parts) texts.push_back(part.second);
    return absl::StrJoin(texts, "  ");
  };
  std::string line = join();
  while (max_width > 0 && static_cast<int>(line.size()) > max_width && parts.size() > 1) {
    auto first_to_drop = std::max_element(
        parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    if (first_to_drop->first == 0) break;  // what is left is cut instead
    parts.erase(first_to_drop);
    line = join();
  }
  if (max_width > 0 && static_cast<int>(line.size()) > max_width) line.resize(max_width);
  return line;
}

std::string PlainProgressLine(const JobStatus& status) {
  std::string line = absl::StrCat("step ", status.steps_done(), "/", status.total_steps());
  if (std::optional<EpochProgress> e = Epochs(status)) {
    absl::StrAppend(&line, " epoch ", e->current, "/", e->total);
  }
  if (NotAdvancing(status)) {
    absl::StrAppend(
        &line, status.training_done() ? " training done: " : " NOT ADVANCING: ", status.phase());
    return line;
  }
  absl::StrAppend(&line, absl::StrFormat(" steps/s %.1f", status.steps_per_sec()));
  if (status.steps_done() > 0) {
    absl::StrAppend(&line,
                    absl::StrFormat(" loss %.4f acc %.3f", status.loss(), status.accuracy()));
  }
  if (status.has_eval()) {
    absl::StrAppend(&line, absl::StrFormat(" eval_acc %.3f", status.last_eval().accuracy()));
    if (status.last_eval().auc() > 0) {
      absl::StrAppend(&line, absl::StrFormat(" eval_auc %.4f", status.last_eval().auc()));
    }
    if (status.last_eval().auc_ceiling() > 0) {
      absl::StrAppend(&line, absl::StrFormat(" (ceiling %.4f)", status.last_eval().auc_ceiling()));
    }
  }
  if (status.has_checkpoint()) absl::StrAppend(&line, " ckpt ", status.last_checkpoint().id());
  if (status.recoveries_size() > 0) {
    absl::StrAppend(&line, " recoveries ", status.recoveries_size(), " steps_lost ",
                    status.steps_lost());
  }
  if (TrainingFinishedAwaitingEval(status)) {
    absl::StrAppend(&line, " training done, waiting for the final evaluation");
  } else if (status.state() == JobStatus::RUNNING) {
    std::optional<double> eta = EtaSeconds(status);
    absl::StrAppend(&line, " eta ", eta ? FormatDuration(*eta) : "?");
  } else {
    absl::StrAppend(&line, " state ", StateName(status.state()));
  }
  if (!status.checkpoint_error().empty()) {
    absl::StrAppend(&line, " CHECKPOINT FAILED: ", status.checkpoint_error());
  }
  return line;
}

std::string StatusText(const JobStatus& status, double now_unix_s) {
  std::string out;
  const auto field = [&out](absl::string_view label, absl::string_view value) {
    absl::StrAppend(&out, absl::StrFormat("%-10s %s\n", label, value));
  };
  if (status.state() == JobStatus::NO_JOB) {
    field("state", "NO_JOB (no job submitted yet)");
    absl::StrAppend(&out, PsTable(status), WorkersTable(status));
    return out;
  }
  field("job", absl::StrCat(status.job_id(), " (\"", status.name(), "\")"));
  if (NotAdvancing(status)) {
    field("state", absl::StrCat(StateName(status.state()),
                                status.training_done() ? ", training done: " : ", NOT ADVANCING: ",
                                status.phase()));
  } else {
    field("state", StateName(status.state()));
  }
  if (!status.error().empty()) field("error", status.error());
  field("mode", ModeDetail(status));
  if (status.has_job()) field("model", JobDetail(status.job()));
  if (!status.resumed_from().empty()) {
    field("resumed", absl::StrCat("from ", status.resumed_from()));
  }
  std::string progress = absl::StrCat(status.steps_done(), "/", status.total_steps(), " steps",
                                      Percent(status.steps_done(), status.total_steps()));
  if (std::optional<EpochProgress> e = Epochs(status)) {
    absl::StrAppend(&progress, ", epoch ", e->current, "/", e->total, " (",
                    status.steps_per_epoch(), " steps each)");
  }
  if (TrainingFinishedAwaitingEval(status)) {
    absl::StrAppend(&progress, ", training done, waiting for the final evaluation");
  }
  field("progress", progress);
  field("speed", absl::StrFormat("%.1f steps/s, %.1f examples/s", status.steps_per_sec(),
                                 status.examples_per_sec()));
  if (status.pull_ms() + status.compute_ms() + status.push_ms() > 0) {
    field("step time", absl::StrFormat("pull %.2f ms, compute %.2f ms, push %.2f ms (workers)",
                                       status.pull_ms(), status.compute_ms(), status.push_ms()));
  }
  std::string time = absl::StrCat(FormatClock(status.elapsed_s()), " elapsed");
  if (status.state() == JobStatus::RUNNING && !status.training_done()) {
    std::optional<double> eta = EtaSeconds(status);
    absl::StrAppend(&time, ", ETA ", eta ? FormatClock(*eta) : "unknown");
  }
  field("time", time);
  if (status.steps_done() > 0) {
    field("training", absl::StrFormat("loss %.4f, accuracy %.4f (recent steps)", status.loss(),
                                      status.accuracy()));
  }
  if (status.has_eval()) {
    const EvalMetrics& eval = status.last_eval();
    field("eval", absl::StrFormat("accuracy %.4f, loss %.4f at step %d (%d examples)",
                                  eval.accuracy(), eval.loss(), eval.step(), eval.examples()));
  } else {
    field("eval", "none yet");
  }
  if (status.has_checkpoint()) {
    field("checkpoint", CheckpointDetail(status.last_checkpoint(), now_unix_s));
  } else if (!status.job().checkpoint().dir().empty()) {
    field("checkpoint", absl::StrCat("none yet (to ", status.job().checkpoint().dir(), ")"));
  }
  if (!status.checkpoint_error().empty()) {
    field("ckpt error", absl::StrCat("CHECKPOINT FAILED: ", status.checkpoint_error()));
  }
  if (status.recoveries_size() > 0) {
    field("recoveries", RecoveriesSummary(status));
    absl::StrAppend(&out, RecoveryLines(status, now_unix_s));
  }
  if (status.steps_requeued() > 0) {
    field("requeued", absl::StrCat(status.steps_requeued(), " steps (after worker failures)"));
  }
  if (status.bucket_moves() + status.bucket_moves_failed() > 0) {
    field("bucket moves",
          absl::StrCat(status.bucket_moves(), " done (", status.buckets_moved(), " buckets), ",
                       status.bucket_moves_failed(), " failed; last: ",
                       BucketMoveLine(status.last_bucket_move())));
  }
  if (status.ps_scales() + status.ps_scales_failed() > 0) {
    field("scales", absl::StrCat(status.ps_scales(), " done, ", status.ps_scales_failed(),
                                 " failed; last: ", ScaleLine(status.last_scale())));
  }
  absl::StrAppend(&out, PsTable(status), WorkersTable(status));
  return out;
}

std::string FinalSummary(const JobStatus& status) {
  std::string out = absl::StrCat("job ", status.job_id(), " ", StateName(status.state()));
  if (!status.error().empty()) absl::StrAppend(&out, ": ", status.error());
  absl::StrAppend(&out, "\n");

  std::vector<std::string> clauses;
  if (std::string epochs = EpochsDone(status); !epochs.empty()) clauses.push_back(epochs);
  if (status.state() == JobStatus::SUCCEEDED) {
    clauses.push_back(absl::StrCat(status.steps_done(), " steps"));
  } else {
    clauses.push_back(absl::StrCat(status.steps_done(), "/", status.total_steps(), " steps"));
  }
  clauses.push_back(absl::StrFormat("%.1f s", status.elapsed_s()));
  if (std::string mode = ModeName(status); !mode.empty()) clauses.push_back("mode " + mode);
  const std::string after = absl::StrCat("after ", absl::StrJoin(clauses, ", "));

  const EvalMetrics& eval = status.last_eval();
  if (status.state() == JobStatus::SUCCEEDED && status.has_eval()) {
    std::string auc;  // click models
    if (eval.auc() > 0) auc = absl::StrFormat(", AUC %.4f", eval.auc());
    if (eval.auc_ceiling() > 0) absl::StrAppend(&auc, absl::StrFormat(" (ceiling %.4f)", eval.auc_ceiling()));
    absl::StrAppend(&out, absl::StrFormat("final test accuracy: %.4f (loss %.4f%s) %s\n",
                                          eval.accuracy(), eval.loss(), auc, after));
  } else if (status.state() == JobStatus::SUCCEEDED) {
    absl::StrAppend(&out, "no final evaluation reported; ",
                    absl::StrFormat("training accuracy %.4f (loss %.4f) %s\n", status.accuracy(),
                                    status.loss(), after));
  } else {
    absl::StrAppend(&out, "stopped ", after, "\n");
    if (status.has_eval()) {
      absl::StrAppend(&out, absl::StrFormat("last test accuracy: %.4f (loss %.4f) at step %d\n",
                                            eval.accuracy(), eval.loss(), eval.step()));
    }
  }
  if (status.has_checkpoint()) {
    const CheckpointInfo& c = status.last_checkpoint();
    absl::StrAppend(&out, c.final() ? "final checkpoint " : "last checkpoint ", c.id(), ": ",
                    c.path(), " (", c.steps_done(), " steps)\n");
  }
  if (!status.checkpoint_error().empty()) {
    absl::StrAppend(&out, "CHECKPOINT FAILED: ", status.checkpoint_error(), "\n");
  }
  if (status.recoveries_size() > 0) absl::StrAppend(&out, RecoveriesSummary(status), "\n");
  if (!status.resumed_from().empty()) {
    absl::StrAppend(&out, "resumed from ", status.resumed_from(), "\n");
  }
  return out;
}

std::string CheckpointLine(const CheckpointInfo& c) {
  return absl::StrCat(
      "checkpoint ", c.id(), ": ", c.path(), ", ", c.steps_done(), " steps, ",
      FormatBytes(c.bytes()),
      absl::StrFormat(", written in %.2f s (paused %.0f ms)", c.write_seconds(), c.pause_ms()));
}

std::string BucketMoveLine(const MoveTableBucketsResponse& r) {
  const bool balance = r.from_shard() < 0;
  const std::string what =
      balance ? absl::StrCat("buckets of ", r.variable(), " to balance its shards")
              : absl::StrCat("buckets of ", r.variable(), " from shard ", r.from_shard(),
                             " to shard ", r.to_shard());
  if (!r.error().empty()) return absl::StrCat("moving ", what, " failed: ", r.error());
  const double rate = r.seconds() > 0 ? static_cast<double>(r.bytes()) / r.seconds() : 0;
  const std::string where =
      balance ? absl::StrFormat("%s; rows max/mean x%.2f -> x%.2f",
                                r.moves().empty() ? "balanced already: no move"
                                                  : absl::StrJoin(r.moves(), ", "),
                                r.imbalance_before(), r.imbalance_after())
              : absl::StrCat("ps ", r.from_ps(), " to ps ", r.to_ps());
  return absl::StrCat(
      "moved ", r.buckets(), " ", what, " (", where,
      ", routing version ", r.routing_version(), "): ", r.rows(), " rows, ",
      FormatBytes(r.bytes()), absl::StrFormat(" in %.2f s (", r.seconds()),
      FormatBytes(static_cast<int64_t>(rate)),
      absl::StrFormat("/s), longest freeze %.1f ms, steps %d to %d", r.frozen_s() * 1000,
                      r.steps_before(), r.steps_after()));
}

std::string ScaleLine(const ScalePsResponse& r) {
  if (!r.error().empty()) {
    return absl::StrCat("scale from ", r.from_ps(), " to ", r.to_ps(), " ps failed: ", r.error());
  }
  if (r.live()) {
    const bool added = r.to_ps() > r.from_ps();
    return absl::StrCat(
        added ? "added " : "removed ", std::abs(r.to_ps() - r.from_ps()), " ps live: ",
        r.from_ps(), " to ", r.to_ps(), " ps (layout version ", r.layout_version(),
        ") at step ", r.steps_done(), absl::StrFormat(", paused %.2f s; ", r.pause_s()),
        r.tables(),
        added ? " dynamic tables balanced onto the new ps: "
              : " dynamic tables moved off it and balanced: ",
        r.buckets_moved(), " buckets, ", r.rows_moved(), " rows, ", FormatBytes(r.bytes_moved()),
        absl::StrFormat(" in %.2f s; %.2f s in all", r.balance_s(), r.seconds()));
  }
  return absl::StrCat(
      "scaled from ", r.from_ps(), " to ", r.to_ps(), " ps (layout version ", r.layout_version(),
      "): through checkpoint ", r.checkpoint_id(), " at step ", r.steps_done(), ", ",
      FormatBytes(r.bytes_moved()), " moved",
      absl::StrFormat(", paused %.2f s, %.2f s in all", r.pause_s(), r.seconds()));
}

absl::StatusOr<std::string> StatusJson(const JobStatus& status, bool pretty) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = pretty;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string out;
  const auto result = google::protobuf::util::MessageToJsonString(status, &out, options);
  if (!result.ok()) {
    return absl::InternalError(absl::StrCat("JobStatus to JSON: ", result.ToString()));
  }
  if (pretty && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool PlainProgressThrottle::Due(const JobStatus& status, double now_s) {
  const bool new_eval = status.has_eval() != last_has_eval_ ||
                        (status.has_eval() && (status.last_eval().step() != last_eval_step_ ||
                                               status.last_eval().unix_time() != last_eval_time_));
  const bool durable_state_changed = status.phase() != last_phase_ ||
                                     status.last_checkpoint().id() != last_checkpoint_id_ ||
                                     status.checkpoint_error() != last_checkpoint_error_ ||
                                     status.recoveries_size() != last_recoveries_;
  const bool due = !printed_ || status.state() != last_state_ || new_eval ||
                   durable_state_changed || now_s - last_print_s_ >= interval_s_;
  if (!due) return false;
  last_phase_ = status.phase();
  last_checkpoint_id_ = status.last_checkpoint().id();
  last_checkpoint_error_ = status.checkpoint_error();
  last_recoveries_ = status.recoveries_size();
  printed_ = true;
  last_print_s_ = now_s;
  last_state_ = status.state();
  last_has_eval_ = status.has_eval();
  last_eval_step_ = status.last_eval().step();
  last_eval_time_ = status.last_eval().unix_time();
  return true;
}

}  // namespace shardps
