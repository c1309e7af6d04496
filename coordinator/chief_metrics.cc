// AddChiefMetrics: see chief_metrics.h.
#include "coordinator/chief_metrics.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace shardps {

namespace {

// The scrape's snapshot: taken by the registry's scrape hook, read by every family.
struct Snapshot {
  absl::Mutex mu;
  JobStatus status ABSL_GUARDED_BY(mu);
  absl::Time now ABSL_GUARDED_BY(mu);
};

}  // namespace

absl::Status AddChiefMetrics(metrics::Registry* registry, std::function<JobStatus()> status,
                             std::function<absl::Time()> now) {
  auto snapshot = std::make_shared<Snapshot>();
  registry->AddScrapeHook([snapshot, status = std::move(status), now = std::move(now)] {
    JobStatus taken = status();
    const absl::Time at = now();
    absl::MutexLock lock(&snapshot->mu);
    snapshot->status = std::move(taken);
    snapshot->now = at;
  });
  struct Plain {
    const char* name;
    const char* help;
    std::function<double(const JobStatus&, absl::Time)> read;
  };
  const auto running = [](const JobStatus& s) { return s.state() == JobStatus::RUNNING; };
  const auto busy = [](const JobStatus& s) {
    double n = 0;
    for (const WorkerInfo& worker : s.workers()) n += worker.state() == "busy";
    return n;
  };
  const std::vector<Plain> plain = {
      {"shardps_chief_job_running", "1 while a job runs, else 0.",
       [running](const JobStatus& s, absl::Time) { return running(s) ? 1.0 : 0.0; }},
      {"shardps_chief_steps_done", "Steps of the job done (a rollback takes it back).",
       [](const JobStatus& s, absl::Time) { return static_cast<double>(s.steps_done()); }},
      {"shardps_chief_steps_in_job", "Steps the job runs in all.",
       [](const JobStatus& s, absl::Time) { return static_cast<double>(s.total_steps()); }},
      {"shardps_chief_steps_leased", "Steps leased to workers now (busy workers).",
       [busy](const JobStatus& s, absl::Time) { return busy(s); }},
      {"shardps_chief_steps_queued", "Steps neither done nor leased.",
       [running, busy](const JobStatus& s, absl::Time) {
         if (!running(s)) return 0.0;
         const double queued =
             static_cast<double>(s.total_steps() - s.steps_done()) - busy(s);
         return queued > 0 ? queued : 0.0;
       }},
      {"shardps_chief_steps_failed", "Steps that failed on a worker (its failures), this job.",
       [](const JobStatus& s, absl::Time) {
         double n = 0;
         for (const WorkerInfo& worker : s.workers()) n += worker.failures();
         return n;
       }},
      {"shardps_chief_steps_released", "Steps leased again after a worker failed them.",
       [](const JobStatus& s, absl::Time) { return static_cast<double>(s.steps_requeued()); }},
      {"shardps_chief_steps_lost", "Done steps undone by rollbacks to a checkpoint.",
       [](const JobStatus& s, absl::Time) { return static_cast<double>(s.steps_lost()); }},
      {"shardps_chief_recoveries", "Recoveries of this job (a ps restarted, the chief resumed).",
       [](const JobStatus& s, absl::Time) { return static_cast<double>(s.recoveries_size()); }},
      {"shardps_chief_worker_joins", "Workers that announced themselves (JoinJob) since the "
       "chief started (elastic workers).",
       [](const JobStatus& s, absl::Time) { return static_cast<double>(s.worker_joins()); }},
      {"shardps_chief_worker_leaves", "Workers that left the job (LeaveJob) since the chief "
       "started.",
       [](const JobStatus& s, absl::Time) { return static_cast<double>(s.worker_leaves()); }},
      {"shardps_chief_ps_scales", "Scales of the job onto another number of ps (scale-ps) "
       "done since the chief started.",
       [](const JobStatus& s, absl::Time) { return static_cast<double>(s.ps_scales()); }},
      {"shardps_chief_ps_scales_failed", "Scales refused or failed since the chief started "
       "(the job stayed on its ps).",
       [](const JobStatus& s, absl::Time) { return static_cast<double>(s.ps_scales_failed()); }},
      {"shardps_chief_layout_version", "The version of the job's ps layout (1 as it started, "
       "one more per scale).",
       [](const JobStatus& s, absl::Time) { return static_cast<double>(s.layout_version()); }},
      {"shardps_chief_ps_tasks", "The ps tasks the job runs on.",
       [](const JobStatus& s, absl::Time) { return static_cast<double>(s.ps_size()); }},
      {"shardps_chief_examples_per_second", "Training examples per second, recent steps.",
       [](const JobStatus& s, absl::Time) { return s.examples_per_sec(); }},
  };
  const std::vector<Plain> checkpoint = {
      {"shardps_chief_checkpoint_id", "The last checkpoint's id.",
       [](const JobStatus& s, absl::Time) {
         return static_cast<double>(s.last_checkpoint().id());
       }},
      {"shardps_chief_checkpoint_duration_seconds",
       "The last checkpoint's time from its cut to its commit.",
       [](const JobStatus& s, absl::Time) { return s.last_checkpoint().write_seconds(); }},
      {"shardps_chief_checkpoint_bytes", "The last checkpoint's bytes.",
       [](const JobStatus& s, absl::Time) {
         return static_cast<double>(s.last_checkpoint().bytes());
       }},
      {"shardps_chief_checkpoint_age_seconds", "Seconds since the last checkpoint was taken.",
       [](const JobStatus& s, absl::Time now) {
         return absl::ToDoubleSeconds(now - absl::FromUnixSeconds(0)) -
                s.last_checkpoint().unix_time();
       }},
  };
  const std::vector<Plain> eval = {
      {"shardps_chief_eval_accuracy", "Accuracy of the last evaluation reported.",
       [](const JobStatus& s, absl::Time) { return s.last_eval().accuracy(); }},
      {"shardps_chief_eval_loss", "Loss of the last evaluation reported.",
       [](const JobStatus& s, absl::Time) { return s.last_eval().loss(); }},
      {"shardps_chief_eval_auc", "ROC AUC of the last evaluation reported (click models).",
       [](const JobStatus& s, absl::Time) { return s.last_eval().auc(); }},
  };
  // Only while the job has them: a checkpoint, an evaluation.
  auto add = [&](const std::vector<Plain>& gauges,
                 std::function<bool(const JobStatus&)> has) -> absl::Status {
    for (const Plain& gauge : gauges) {
      absl::Status added = registry->AddCallbackGauge(
          gauge.name, gauge.help, {}, [snapshot, has, read = gauge.read](metrics::Sink* sink) {
            absl::MutexLock lock(&snapshot->mu);
            if (has(snapshot->status)) sink->Add({}, read(snapshot->status, snapshot->now));
          });
      if (!added.ok()) return added;
    }
    return absl::OkStatus();
  };
  if (absl::Status s = add(plain, [](const JobStatus&) { return true; }); !s.ok()) return s;
  if (absl::Status s = add(checkpoint, [](const JobStatus& j) { return j.has_checkpoint(); });
      !s.ok()) {
    return s;
  }
  if (absl::Status s = add(eval, [](const JobStatus& j) { return j.has_eval(); }); !s.ok()) {
    return s;
  }
  absl::Status phases = registry->AddCallbackGauge(
      "shardps_chief_step_phase_seconds",
      "Mean time of recent steps' phases on their workers (pull, compute, push).", {"phase"},
      [snapshot](metrics::Sink* sink) {
        absl::MutexLock lock(&snapshot->mu);
        sink->Add({"pull"}, snapshot->status.pull_ms() / 1000);
        sink->Add({"compute"}, snapshot->status.compute_ms() / 1000);
        sink->Add({"push"}, snapshot->status.push_ms() / 1000);
      });
  if (!phases.ok()) return phases;
  absl::Status workers = registry->AddCallbackGauge(
      "shardps_chief_workers",
      "Workers by state (idle, busy, failed, starting, unreachable, leaving, left).",
      {"state"}, [snapshot](metrics::Sink* sink) {
        absl::MutexLock lock(&snapshot->mu);
        std::map<std::string, double> by_state;
        for (const WorkerInfo& worker : snapshot->status.workers()) ++by_state[worker.state()];
        for (const auto& [state, n] : by_state) sink->Add({state}, n);
      });
  if (!workers.ok()) return workers;
  return registry->AddCallbackGauge(
      "shardps_chief_ps", "Ps tasks by state (up, unreachable, restarted, restoring).",
      {"state"}, [snapshot](metrics::Sink* sink) {
        absl::MutexLock lock(&snapshot->mu);
        std::map<std::string, double> by_state;
        for (const PsInfo& ps : snapshot->status.ps()) ++by_state[ps.state()];
        for (const auto& [state, n] : by_state) sink->Add({state}, n);
      });
}

}  // namespace shardps
