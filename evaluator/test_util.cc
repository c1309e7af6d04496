#include "evaluator/test_util.h"

#include <stdlib.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/manifest.h"
#include "checkpoint/safetensors.h"
#include "client/local_ps_interface.h"
#include "common/status_macros.h"
#include "coordinator/job_spec.h"
#include "data/idx_reader.h"
#include "model/mlp/mlp_cpu.h"
#include "model/mlp/mlp_spec.h"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"

namespace shardps {
namespace testing {

JobSpec SoftmaxJob(const std::string& job_id, const std::string& checkpoint_dir) {
  const std::string json = R"({"name": "fm", "model": "softmax", "batch_size": 64, "steps": 100,
                         "optimizer": {"type": "sgd", "learning_rate": 0.1},
                         "partitioner": "fixed:2"})";
  absl::StatusOr<JobSpec> spec = ParseJobSpec(json, 1);
  if (!spec.ok()) abort();  // a bug in this helper
  spec->set_job_id(job_id);
  if (!checkpoint_dir.empty()) {
    spec->mutable_checkpoint()->set_dir(checkpoint_dir);
    spec->mutable_checkpoint()->set_keep(3);  // as ParseJobSpec defaults it
    spec->mutable_checkpoint()->set_every_steps(10);
  }
  return *spec;
}

std::vector<std::vector<float>> TrainSoftmax(int steps) {
  static const Dataset* train = [] {
    absl::StatusOr<Dataset> data = LoadFashionMnist(kDefaultFashionMnistDir, Split::kTrain);
    return data.ok() ? new Dataset(*std::move(data)) : nullptr;
  }();
  std::vector<std::vector<float>> values = {std::vector<float>(784 * 10), std::vector<float>(10)};
  if (train == nullptr) return values;
  absl::StatusOr<MlpSpec> model = ParseMlpSpec("softmax", 784, 10);
  if (!model.ok()) return values;
  std::unique_ptr<MlpCompute> compute = NewMlpCpuCompute(1);
  std::vector<std::vector<float>> grads = values;
  constexpr int kBatch = 64;
  for (int step = 0; step < steps; ++step) {
    const int64_t first = (static_cast<int64_t>(step) * kBatch) % (train->num_examples - kBatch);
    StepResult result;
    absl::Status s = compute->ForwardBackward(
        *model, {values[0].data(), values[1].data()},
        train->features.data() + first * train->feature_dim, train->labels.data() + first, kBatch,
        &result, {grads[0].data(), grads[1].data()});
    if (!s.ok()) return values;
    for (size_t v = 0; v < values.size(); ++v) {
      for (size_t i = 0; i < values[v].size(); ++i) values[v][i] -= 0.1f * grads[v][i];
    }
  }
  return values;
}

LocalPs::LocalPs() {
  for (int p = 0; p < 2; ++p) {
    ShardStore::Options options;
    options.task_index = p;
    absl::StatusOr<std::unique_ptr<ShardStore>> store = ShardStore::Create(options);
    if (!store.ok()) abort();
    stores_.push_back(*std::move(store));
  }
}

LocalPs::~LocalPs() {
  for (auto& store : stores_) store->Shutdown();
}

absl::StatusOr<std::unique_ptr<PsClient>> LocalPs::Connect() {
  std::vector<std::unique_ptr<PsInterface>> ps;
  for (size_t p = 0; p < stores_.size(); ++p) {
    ps.push_back(NewLocalPsInterface(absl::StrCat("ps", p), stores_[p].get()));
  }
  PsClient::Options options;
  options.initial_backoff = absl::Milliseconds(1);
  options.max_backoff = absl::Milliseconds(2);
  return PsClient::Create(std::move(ps), options);
}

absl::Status LocalPs::CreateSoftmax(const std::string& name,
                                    const std::vector<std::vector<float>>& values) {
  ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client, Connect());
  std::vector<VariableDef> defs(2);
  defs[0].name = name + "/dense_0/kernel";
  defs[0].shape = {784, 10};
  defs[1].name = name + "/dense_0/bias";
  defs[1].shape = {10};
  for (VariableDef& def : defs) {
    def.initializer.set_type(InitializerSpec::ZEROS);
    def.optimizer.set_type(OptimizerSpec::SGD);
    def.optimizer.set_learning_rate(0.1);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Partitioner> partitioner, ParsePartitioner("fixed:2"));
  ASSIGN_OR_RETURN(std::unique_ptr<Placer> placer, NewRoundRobinPlacer(2));
  RETURN_IF_ERROR(client->CreateVariables(defs, *partitioner, placer.get()));
  RETURN_IF_ERROR(client->Assign(defs[0].name, values[0]));
  return client->Assign(defs[1].name, values[1]);
}

void FakeChief::Then(absl::StatusOr<JobStatus> answer) {
  absl::MutexLock lock(&mu_);
  script_.push_back(std::move(answer));
}

absl::StatusOr<JobStatus> FakeChief::GetStatus() {
  absl::MutexLock lock(&mu_);
  ++status_calls_;
  if (script_.empty()) return absl::UnavailableError("fake chief: no script");
  absl::StatusOr<JobStatus> answer = script_.front();
  if (script_.size() > 1) script_.pop_front();
  return answer;
}

absl::Status FakeChief::ReportEval(const ReportEvalRequest& request) {
  absl::MutexLock lock(&mu_);
  reports_.push_back(request);
  return report_error_;
}

std::vector<ReportEvalRequest> FakeChief::reports() {
  absl::MutexLock lock(&mu_);
  return reports_;
}

int FakeChief::status_calls() {
  absl::MutexLock lock(&mu_);
  return status_calls_;
}

void FakeChief::set_report_error(absl::Status error) {
  absl::MutexLock lock(&mu_);
  report_error_ = std::move(error);
}

JobStatus Status(const JobSpec& job, JobStatus::State state, int64_t steps_done, bool training_done,
                 const std::string& phase) {
  JobStatus status;
  status.set_state(state);
  status.set_job_id(job.job_id());
  status.set_name(job.name());
  *status.mutable_job() = job;
  status.set_steps_done(steps_done);
  status.set_total_steps(job.steps());
  status.set_training_done(training_done);
  status.set_phase(phase);
  return status;
}

RecordingHooks::RecordingHooks(int max_sleeps) {
  hooks.sleep = [this, max_sleeps](absl::Duration timeout) {
    sleeps.push_back(timeout);
    if (on_sleep) on_sleep(static_cast<int>(sleeps.size()));
    return static_cast<int>(sleeps.size()) >= max_sleeps;
  };
  hooks.on_contact = [this] { ++contacts; };
  hooks.on_eval = [this](const EvalRecord& record) { evals.push_back(record); };
  hooks.log = [this](const std::string& line) { logs.push_back(line); };
}

int RecordingHooks::LogsWith(const std::string& text) const {
  return static_cast<int>(std::count_if(logs.begin(), logs.end(), [&text](const std::string& l) {
    return absl::StrContains(l, text);
  }));
}

std::string RecordingHooks::AllLogs() const {
  std::string all;
  for (const std::string& line : logs) absl::StrAppend(&all, line, "\n");
  return all;
}

namespace {

std::vector<std::string> SoftmaxNames(const JobSpec& job) {
  return {job.name() + "/dense_0/kernel", job.name() + "/dense_0/bias"};
}
std::vector<std::vector<int64_t>> SoftmaxShapes() { return {{784, 10}, {10}}; }

// Writes the two data files into checkpoint `id`'s directory and returns the manifest that
// commits them: variable k is names[k] of shape shapes[k], split in two halves of its rows
// across ps 0 and 1 when it has two dimensions, else whole on ps 1.
absl::StatusOr<Manifest> WriteData(const CheckpointDir& dir, const JobSpec& job, int64_t id,
                                   const std::vector<std::string>& names,
                                   const std::vector<std::vector<int64_t>>& shapes,
                                   const std::vector<std::vector<float>>& values,
                                   int64_t steps_done, bool final) {
  ASSIGN_OR_RETURN(std::string path, dir.Prepare(id));
  Manifest manifest;
  manifest.checkpoint_id = id;
  manifest.job_id = job.job_id();
  manifest.generation = 1;
  manifest.unix_time = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  manifest.final = final;
  manifest.job_json = JobSpecToJson(job);
  manifest.progress.steps_done = steps_done;
  manifest.progress.total_steps = job.steps();

  std::vector<std::vector<TensorToWrite>> files(2);
  auto add = [&](const std::string& variable, std::vector<int64_t> shape, int64_t width,
                 const std::vector<float>& all, std::vector<std::pair<int64_t, int>> parts) {
    ManifestVariable v;
    v.name = variable;
    v.shape = shape;
    v.partitioner = "fixed:2";
    v.optimizer.set_type(OptimizerSpec::SGD);
    int64_t offset = 0;
    for (size_t part = 0; part < parts.size(); ++part) {
      const auto [rows, ps] = parts[part];
      ManifestShard s;
      s.name = parts.size() == 1 ? variable : absl::StrCat(variable, "/part_", part);
      s.part = static_cast<int32_t>(part);
      s.num_parts = static_cast<int32_t>(parts.size());
      s.row_offset = offset;
      s.rows = rows;
      s.ps = ps;
      s.version = steps_done;
      s.file = CheckpointDir::DataFileName(ps, 2);
      s.tensors[""] = s.name;
      TensorToWrite t;
      t.name = s.name;
      t.shape = shape;
      t.shape[0] = rows;
      t.pieces.emplace_back(reinterpret_cast<const char*>(all.data() + offset * width),
                            static_cast<size_t>(rows * width) * sizeof(float));
      files[ps].push_back(std::move(t));
      v.shards.push_back(s);
      offset += rows;
    }
    manifest.variables.push_back(v);
  };
  for (size_t k = 0; k < names.size(); ++k) {
    if (shapes[k].size() == 2) {
      const int64_t rows = shapes[k][0];
      add(names[k], shapes[k], shapes[k][1], values[k], {{rows / 2, 0}, {rows - rows / 2, 1}});
    } else {
      add(names[k], shapes[k], 1, values[k], {{shapes[k].empty() ? 1 : shapes[k][0], 1}});
    }
  }
  for (int ps = 0; ps < 2; ++ps) {
    SafetensorsWriteOptions options;
    options.fsync = false;
    ASSIGN_OR_RETURN(DataFileInfo info,
                     WriteSafetensors(path + "/" + CheckpointDir::DataFileName(ps, 2),
                                      std::move(files[ps]), options));
    manifest.files.push_back(info);
  }
  return manifest;
}

}  // namespace

absl::Status WriteSoftmaxCheckpoint(const std::string& dir, const JobSpec& job, int64_t id,
                                    const std::vector<std::vector<float>>& values,
                                    int64_t steps_done, bool final) {
  ASSIGN_OR_RETURN(CheckpointDir checkpoints, CheckpointDir::Open(dir, /*create=*/true));
  ASSIGN_OR_RETURN(Manifest manifest, WriteData(checkpoints, job, id, SoftmaxNames(job),
                                                SoftmaxShapes(), values, steps_done, final));
  return checkpoints.Commit(manifest);
}

absl::Status WriteModelCheckpoint(const std::string& dir, const JobSpec& job, int64_t id,
                                  const std::vector<std::string>& names,
                                  const std::vector<std::vector<int64_t>>& shapes,
                                  const std::vector<std::vector<float>>& values) {
  ASSIGN_OR_RETURN(CheckpointDir checkpoints, CheckpointDir::Open(dir, /*create=*/true));
  ASSIGN_OR_RETURN(Manifest manifest,
                   WriteData(checkpoints, job, id, names, shapes, values, 1, false));
  return checkpoints.Commit(manifest);
}

absl::Status WriteSoftmaxCheckpointWithoutManifest(const std::string& dir, const JobSpec& job,
                                                   int64_t id,
                                                   const std::vector<std::vector<float>>& values) {
  ASSIGN_OR_RETURN(CheckpointDir checkpoints, CheckpointDir::Open(dir, /*create=*/true));
  return WriteData(checkpoints, job, id, SoftmaxNames(job), SoftmaxShapes(), values, 0, false)
      .status();
}

std::string NewTempDir(const std::string& prefix) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string templ = absl::StrCat(base != nullptr ? base : "/tmp", "/", prefix, "XXXXXX");
  if (::mkdtemp(templ.data()) == nullptr) abort();
  return templ;
}

}  // namespace testing
}  // namespace shardps
