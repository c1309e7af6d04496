#include "bench/job_watch.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace shardps {
namespace bench {

absl::StatusOr<SubmitJobResponse> SubmitJob(ChiefInterface& chief, const std::string& job_json) {
  SubmitJobRequest request;
  request.set_job_json(job_json);
  absl::StatusOr<SubmitJobResponse> response;
  for (int attempt = 0; attempt < 5; ++attempt) {
    response = chief.SubmitJob(request, absl::Seconds(60));
    if (response.ok()) return response;
    if (response.status().code() != absl::StatusCode::kUnavailable) break;
    absl::SleepFor(absl::Milliseconds(500));
  }
  return response;
}

absl::StatusOr<JobStatus> FollowJob(ChiefInterface& chief, const std::string& job_id,
                                    const FollowOptions& options) {
  const auto logs = [&] { return options.logs ? options.logs() : std::string(); };
  int failed_polls = 0;
  JobStatus last;
  ChiefInterface::WaitOptions wait;
  wait.poll_interval = options.poll_interval;
  wait.call_timeout = absl::Seconds(5);
  wait.on_answer = [&](const absl::StatusOr<JobStatus>& status) -> absl::Status {
    if (!status.ok()) {
      // The chief may be busy for a moment; give up once it has gone or stayed silent.
      const bool gone = options.chief_running && !options.chief_running();
      if (gone || ++failed_polls > 40) {
        return absl::UnavailableError(
            absl::StrCat("chief status: ", status.status().ToString(), "\n", logs()));
      }
      return absl::OkStatus();
    }
    failed_polls = 0;
    if (options.on_status) options.on_status(*status);
    last = *status;
    if (status->job_id() != job_id) {
      return absl::InternalError(absl::StrCat("the chief runs job \"", status->job_id(),
                                              "\", not the one submitted (\"", job_id, "\")"));
    }
    if (status->state() == JobStatus::CANCELLED || status->state() == JobStatus::FAILED) {
      return absl::InternalError(absl::StrCat("job ended as ",
                                              JobStatus::State_Name(status->state()), ": ",
                                              status->error(), "\n", logs()));
    }
    return absl::OkStatus();
  };
  absl::StatusOr<JobStatus> done =
      chief.WaitFor([](const JobStatus& s) { return s.state() == JobStatus::SUCCEEDED; },
                    absl::Now() + options.timeout, wait);
  if (done.ok() || done.status().code() != absl::StatusCode::kDeadlineExceeded) return done;
  return absl::DeadlineExceededError(absl::StrCat(
      "job not done after ", absl::FormatDuration(options.timeout), " (", last.steps_done(), "/",
      last.total_steps(), " steps)\n", logs()));
}

}  // namespace bench
}  // namespace shardps
