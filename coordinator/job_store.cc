#include "coordinator/job_store.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/job_spec.h"
#include "google/protobuf/util/field_comparator.h"
#include "google/protobuf/util/message_differencer.h"
#include "nlohmann/json.hpp"

namespace shardps {
namespace {

using Json = nlohmann::json;

absl::Status Corrupt(const std::string& file, absl::string_view why) {
  return absl::DataLossError(absl::StrCat(file, ": ", why));
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobStore>> JobStore::Open(const std::string& dir) {
  ASSIGN_OR_RETURN(CheckpointDir opened, CheckpointDir::Open(dir, /*create=*/true));
  return std::unique_ptr<JobStore>(new JobStore(std::move(opened)));
}

absl::StatusOr<std::optional<JobStore::Identity>> JobStore::UnfinishedJob(
    const std::string& dir) {
  absl::StatusOr<CheckpointDir> opened = CheckpointDir::OpenReadOnly(dir);
  if (!opened.ok()) return std::optional<Identity>();  // no directory: no job in it
  JobStore store(*std::move(opened));
  ASSIGN_OR_RETURN(std::optional<Identity> identity, store.ReadIdentity());
  if (!identity.has_value()) return identity;
  ASSIGN_OR_RETURN(const State state, store.ReadState());
  if (state.finished || !state.ended.empty()) return std::optional<Identity>();
  return identity;
}

absl::StatusOr<std::optional<JobStore::Identity>> JobStore::ReadIdentity() const {
  const std::string file = dir_.JobFile();
  absl::StatusOr<std::string> text = ReadWholeFile(file);
  if (absl::IsNotFound(text.status())) return std::optional<Identity>();
  if (!text.ok()) return text.status();
  Json json = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) return Corrupt(file, "not a JSON object");
  if (!json.contains("job_id") || !json["job_id"].is_string() || !json.contains("job") ||
      !json["job"].is_object()) {
    return Corrupt(file, "needs \"job_id\" (a string) and \"job\" (the job file, an object)");
  }
  Identity identity;
  identity.job_id = json["job_id"].get<std::string>();
  if (identity.job_id.empty()) return Corrupt(file, "\"job_id\" is empty");
  absl::StatusOr<JobSpec> job = ParseJobSpec(json["job"].dump(), kStoredJobWorkers);
  if (!job.ok()) return Corrupt(file, job.status().message());
  identity.job = *std::move(job);
  identity.job.set_job_id(identity.job_id);
  return std::optional<Identity>(std::move(identity));
}

absl::Status JobStore::WriteIdentity(const Identity& identity) {
  Json json;
  json["job_id"] = identity.job_id;
  json["job"] = Json::parse(JobSpecToJson(identity.job));
  return WriteFileAtomically(dir_.JobFile(), json.dump(2) + "\n");
}

absl::StatusOr<JobStore::State> JobStore::ReadState() const {
  const std::string file = dir_.StateFile();
  absl::StatusOr<std::string> text = ReadWholeFile(file);
  State state;
  if (absl::IsNotFound(text.status())) return state;
  if (!text.ok()) return text.status();
  Json json = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) return Corrupt(file, "not a JSON object");
  auto integer = [&](const char* key, int64_t* out) -> absl::Status {
    if (!json.contains(key)) return absl::OkStatus();
    if (!json[key].is_number_integer() || json[key].get<int64_t>() < 0) {
      return Corrupt(file, absl::StrCat("\"", key, "\" must be an integer >= 0"));
    }
    *out = json[key].get<int64_t>();
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(integer("generation", &state.generation));
  RETURN_IF_ERROR(integer("total_steps", &state.total_steps));
  RETURN_IF_ERROR(integer("final_checkpoint", &state.final_checkpoint));
  RETURN_IF_ERROR(integer("generation_start_steps", &state.generation_start_steps));
  RETURN_IF_ERROR(integer("best_checkpoint", &state.best_checkpoint));
  if (json.contains("best_accuracy")) {
    if (!json["best_accuracy"].is_number()) {
      return Corrupt(file, "\"best_accuracy\" must be a number");
    }
    state.best_accuracy = json["best_accuracy"].get<double>();
  }
  if (json.contains("finished")) {
    if (!json["finished"].is_boolean()) return Corrupt(file, "\"finished\" must be a boolean");
    state.finished = json["finished"].get<bool>();
  }
  RETURN_IF_ERROR(integer("steps_lost", &state.steps_lost));
  RETURN_IF_ERROR(integer("layout_version", &state.layout_version));
  RETURN_IF_ERROR(integer("dense_ps", &state.dense_ps));
  if (json.contains("ps_addresses")) {
    const Json& list = json["ps_addresses"];
    if (!list.is_array()) return Corrupt(file, "\"ps_addresses\" must be an array");
    for (const Json& a : list) {
      if (!a.is_string() || a.get<std::string>().empty()) {
        return Corrupt(file, "each of \"ps_addresses\" must be a non-empty string");
      }
      state.ps_addresses.push_back(a.get<std::string>());
    }
  }
  if (json.contains("ended")) {
    if (!json["ended"].is_string()) return Corrupt(file, "\"ended\" must be a string");
    state.ended = json["ended"].get<std::string>();
  }
  if (json.contains("recoveries")) {
    const Json& list = json["recoveries"];
    if (!list.is_array()) return Corrupt(file, "\"recoveries\" must be an array");
    for (const Json& r : list) {
      if (!r.is_object() || !r.value("cause", Json()).is_string() ||
          !r.value("action", Json()).is_string() ||
          !r.value("steps_lost", Json()).is_number_integer() ||
          !r.value("unix_time", Json()).is_number() || !r.value("seconds", Json()).is_number()) {
        return Corrupt(file, "each of \"recoveries\" needs \"unix_time\", \"cause\", "
                             "\"action\", \"steps_lost\" and \"seconds\"");
      }
      State::Recovery recovery;
      recovery.unix_time = r["unix_time"].get<double>();
      recovery.cause = r["cause"].get<std::string>();
      recovery.action = r["action"].get<std::string>();
      recovery.steps_lost = r["steps_lost"].get<int64_t>();
      recovery.seconds = r["seconds"].get<double>();
      state.recoveries.push_back(std::move(recovery));
    }
  }
  return state;
}

absl::Status JobStore::WriteState(const State& state) {
  Json json;
  json["generation"] = state.generation;
  json["total_steps"] = state.total_steps;
  json["finished"] = state.finished;
  json["final_checkpoint"] = state.final_checkpoint;
  json["generation_start_steps"] = state.generation_start_steps;
  json["best_checkpoint"] = state.best_checkpoint;
  json["best_accuracy"] = state.best_accuracy;
  json["ended"] = state.ended;
  json["steps_lost"] = state.steps_lost;
  json["layout_version"] = state.layout_version;
  json["ps_addresses"] = state.ps_addresses;
  json["dense_ps"] = state.dense_ps;
  Json recoveries = Json::array();
  for (const State::Recovery& r : state.recoveries) {
    recoveries.push_back({{"unix_time", r.unix_time},
                          {"cause", r.cause},
                          {"action", r.action},
                          {"steps_lost", r.steps_lost},
                          {"seconds", r.seconds}});
  }
  json["recoveries"] = std::move(recoveries);
  return WriteFileAtomically(dir_.StateFile(), json.dump(2) + "\n");
}

absl::Status JobStore::StartJournal(int64_t generation) {
  if (journal_ != nullptr && journal_generation_ == generation) return absl::OkStatus();
  journal_.reset();
  journal_generation_ = -1;
  ASSIGN_OR_RETURN(journal_, StepJournal::Open(dir_.JournalFile(generation)));
  journal_generation_ = generation;
  return absl::OkStatus();
}

absl::Status JobStore::Journal(int64_t step_id) {
  if (journal_ == nullptr) {
    return absl::FailedPreconditionError("the step journal is not open");
  }
  return journal_->Append(journal_generation_, step_id);
}

absl::StatusOr<std::vector<int64_t>> JobStore::JournalSteps(int64_t generation) const {
  ASSIGN_OR_RETURN(auto records, StepJournal::Read(dir_.JournalFile(generation)));
  std::vector<int64_t> steps;
  steps.reserve(records.size());
  for (const auto& [record_generation, step] : records) {
    if (record_generation == generation) steps.push_back(step);
  }
  return steps;
}

absl::Status CheckSameJob(const JobSpec& stored, const JobSpec& submitted) {
  auto operational = [](JobSpec job) {
    job.clear_job_id();
    job.clear_epochs();
    job.clear_steps();
    job.clear_checkpoint();
    job.clear_eval_every_steps();
    job.clear_step_timeout_ms();
    job.clear_backend();
    job.clear_steps_in_flight();
    job.clear_data_dir();
    job.clear_partitioner();
    job.clear_num_ps();  // a resumed job keeps its journal's layout
    job.clear_placement();
    job.clear_warm_start();
    return job;
  };
  if (stored.checkpoint().dir() != submitted.checkpoint().dir()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job: \"checkpoint.dir\": \"", submitted.checkpoint().dir(),
        "\" is not the directory the stored job was written to (\"",
        stored.checkpoint().dir(), "\")"));
  }
  google::protobuf::util::MessageDifferencer differencer;
  std::string report;
  differencer.ReportDifferencesToString(&report);
  if (differencer.Compare(operational(stored), operational(submitted))) {
    return absl::OkStatus();
  }
  const size_t newline = report.find('\n');
  if (newline != std::string::npos) report.resize(newline);
  return absl::InvalidArgumentError(absl::StrCat(
      "job: the checkpoint directory \"", stored.checkpoint().dir(), "\" holds job \"",
      stored.job_id(), "\", which differs from this job file (", report,
      "); submit with --fresh to start over there, or use another checkpoint.dir"));
}

}  // namespace shardps
