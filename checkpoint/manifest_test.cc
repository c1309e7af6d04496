#include "checkpoint/manifest.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace shardps {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

TensorInfo Tensor(const std::string& name, std::vector<int64_t> shape, int64_t begin,
                  uint32_t crc) {
  TensorInfo t;
  t.set_name(name);
  t.set_dtype("F32");
  int64_t bytes = 4;
  for (int64_t d : shape) {
    t.add_shape(d);
    bytes *= d;
  }
  t.set_data_begin(begin);
  t.set_data_end(begin + bytes);
  t.set_crc32c(crc);
  return t;
}

// A kernel [10, 4] with Adam slots in two shards on two files, and a scalar on the first.
Manifest Sample() {
  Manifest m;
  m.checkpoint_id = 7;
  m.job_id = "fashion-mlp-1a2b3c4d";
  m.generation = 2;
  m.unix_time = 1795412345.123456789;
  m.final = true;
  m.job_json = R"({"name":"mlp","steps":100,"optimizer":{"type":"ADAM","learning_rate":0.001},)"
               R"("checkpoint":{"dir":"/tmp/x","every_steps":50}})";
  m.progress = {4200, 14070, 469, 8, 448};
  ManifestVariable kernel;
  kernel.name = "mlp/dense_0/kernel";
  kernel.shape = {10, 4};
  kernel.partitioner = "fixed:2";
  kernel.slots = {"adam_m", "adam_v"};
  kernel.optimizer.set_type(OptimizerSpec::ADAM);
  kernel.optimizer.set_learning_rate(0.1);  // not exact in binary
  kernel.optimizer.set_beta1(std::nextafter(0.9, 1.0));
  kernel.optimizer.set_beta2(1.0 / 3.0);
  kernel.optimizer.set_epsilon(1e-7);
  kernel.optimizer.set_decay_rate(5e-324);  // the smallest denormal
  kernel.optimizer.set_decay_steps(std::numeric_limits<int64_t>::max());
  kernel.optimizer.set_staircase(true);
  kernel.initializer.set_type(InitializerSpec::GLOROT_UNIFORM);
  kernel.initializer.set_seed(std::numeric_limits<uint64_t>::max());
  kernel.initializer.set_stddev(1.7976931348623157e308);
  kernel.update.set_mode(UpdateSpec::SYNC);
  kernel.update.set_num_replicas(3);
  for (int part = 0; part < 2; ++part) {
    ManifestShard s;
    s.name = "mlp/dense_0/kernel/part_" + std::to_string(part);
    s.part = part;
    s.num_parts = 2;
    s.row_offset = part * 6;
    s.rows = part == 0 ? 6 : 4;
    s.ps = part;
    s.version = 4200 + part;
    s.file = part == 0 ? "ps-00000-of-00002.safetensors" : "ps-00001-of-00002.safetensors";
    s.tensors = {{"", s.name}, {"adam_m", s.name + "/adam_m"}, {"adam_v", s.name + "/adam_v"}};
    kernel.shards.push_back(s);
  }
  m.variables.push_back(kernel);
  ManifestVariable step;
  step.name = "global_step";
  step.partitioner = "";
  ManifestShard s;
  s.name = "global_step";
  s.rows = 1;
  s.file = "ps-00000-of-00002.safetensors";
  s.tensors = {{"", "global_step"}};
  step.shards.push_back(s);
  m.variables.push_back(step);

  DataFileInfo f0;
  f0.set_file("ps-00000-of-00002.safetensors");
  f0.set_crc32c(0xFFFFFFFFu);
  f0.set_header_crc32c(4660);
  int64_t at = 0;
  for (const char* suffix : {"", "/adam_m", "/adam_v"}) {
    *f0.add_tensors() = Tensor(std::string("mlp/dense_0/kernel/part_0") + suffix, {6, 4}, at, 1);
    at += 96;
  }
  *f0.add_tensors() = Tensor("global_step", {}, at, 0);
  f0.set_bytes(at + 4 + 512);
  DataFileInfo f1;
  f1.set_file("ps-00001-of-00002.safetensors");
  f1.set_crc32c(17);
  f1.set_header_crc32c(18);
  at = 0;
  for (const char* suffix : {"", "/adam_m", "/adam_v"}) {
    *f1.add_tensors() = Tensor(std::string("mlp/dense_0/kernel/part_1") + suffix, {4, 4}, at, 2);
    at += 64;
  }
  f1.set_bytes(at + 400);
  m.files = {f0, f1};
  m.eval = ManifestEval{0.8812, 0.1 + 0.2, 4200};
  return m;
}

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

void ExpectSameManifest(const Manifest& a, const Manifest& b) {
  using google::protobuf::util::MessageDifferencer;
  EXPECT_EQ(a.format_version, b.format_version);
  EXPECT_EQ(a.checkpoint_id, b.checkpoint_id);
  EXPECT_EQ(a.job_id, b.job_id);
  EXPECT_EQ(a.generation, b.generation);
  EXPECT_TRUE(SameBits(a.unix_time, b.unix_time));
  EXPECT_EQ(a.final, b.final);
  EXPECT_EQ(a.job_json, b.job_json);
  EXPECT_EQ(a.progress.steps_done, b.progress.steps_done);
  EXPECT_EQ(a.progress.total_steps, b.progress.total_steps);
  EXPECT_EQ(a.progress.steps_per_epoch, b.progress.steps_per_epoch);
  EXPECT_EQ(a.progress.epoch, b.progress.epoch);
  EXPECT_EQ(a.progress.batch_index, b.progress.batch_index);
  ASSERT_EQ(a.variables.size(), b.variables.size());
  for (size_t i = 0; i < a.variables.size(); ++i) {
    const ManifestVariable& x = a.variables[i];
    const ManifestVariable& y = b.variables[i];
    SCOPED_TRACE(x.name);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.shape, y.shape);
    EXPECT_EQ(x.dtype, y.dtype);
    EXPECT_EQ(x.partitioner, y.partitioner);
    EXPECT_EQ(x.slots, y.slots);
    // MessageDifferencer compares doubles with ==; the bit patterns are checked too.
    EXPECT_TRUE(MessageDifferencer::Equals(x.optimizer, y.optimizer))
        << x.optimizer.DebugString() << " vs " << y.optimizer.DebugString();
    EXPECT_EQ(x.optimizer.SerializeAsString(), y.optimizer.SerializeAsString());
    EXPECT_EQ(x.initializer.SerializeAsString(), y.initializer.SerializeAsString());
    EXPECT_EQ(x.update.SerializeAsString(), y.update.SerializeAsString());
    ASSERT_EQ(x.shards.size(), y.shards.size());
    for (size_t s = 0; s < x.shards.size(); ++s) {
      EXPECT_EQ(x.shards[s].name, y.shards[s].name);
      EXPECT_EQ(x.shards[s].part, y.shards[s].part);
      EXPECT_EQ(x.shards[s].num_parts, y.shards[s].num_parts);
      EXPECT_EQ(x.shards[s].row_offset, y.shards[s].row_offset);
      EXPECT_EQ(x.shards[s].rows, y.shards[s].rows);
      EXPECT_EQ(x.shards[s].ps, y.shards[s].ps);
      EXPECT_EQ(x.shards[s].version, y.shards[s].version);
      EXPECT_EQ(x.shards[s].file, y.shards[s].file);
      EXPECT_EQ(x.shards[s].tensors, y.shards[s].tensors);
    }
  }
  ASSERT_EQ(a.files.size(), b.files.size());
  for (size_t i = 0; i < a.files.size(); ++i) {
    EXPECT_TRUE(MessageDifferencer::Equals(a.files[i], b.files[i]))
        << a.files[i].DebugString() << " vs " << b.files[i].DebugString();
  }
  ASSERT_EQ(a.eval.has_value(), b.eval.has_value());
  if (a.eval.has_value()) {
    EXPECT_TRUE(SameBits(a.eval->accuracy, b.eval->accuracy));
    EXPECT_TRUE(SameBits(a.eval->loss, b.eval->loss));
    EXPECT_EQ(a.eval->step, b.eval->step);
  }
}

TEST(ManifestTest, RoundTripsExactly) {
  const Manifest m = Sample();
  const std::string text = ManifestToJson(m);
  absl::StatusOr<Manifest> back = ParseManifest(text, "manifest.json");
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameManifest(m, *back);
  EXPECT_EQ(ManifestToJson(*back), text);
}

TEST(ManifestTest, RoundTripsWithoutJobOrEval) {
  Manifest m = Sample();
  m.job_json.clear();
  m.eval.reset();
  m.final = false;
  absl::StatusOr<Manifest> back = ParseManifest(ManifestToJson(m), "manifest.json");
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameManifest(m, *back);
}

TEST(ManifestTest, LayoutIsTheDocumentedOne) {
  const std::string text = ManifestToJson(Sample());
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  EXPECT_THAT(text, HasSubstr("\n  \"format\": \"shardps-checkpoint\",\n"));
  const Json j = Json::parse(text);
  EXPECT_EQ(j["format_version"], 1);
  ASSERT_TRUE(j["job"].is_object()) << "the job file is embedded as an object";
  EXPECT_EQ(j["job"]["optimizer"]["type"], "ADAM");
  EXPECT_EQ(j["variables"][0]["optimizer"]["type"], "ADAM");
  EXPECT_EQ(j["variables"][0]["update"]["mode"], "SYNC");
  EXPECT_EQ(j["variables"][0]["shards"][1]["tensors"]["adam_v"],
            "mlp/dense_0/kernel/part_1/adam_v");
  EXPECT_EQ(j["files"][0]["tensors"][1]["data_offsets"], Json::array({96, 192}));
  EXPECT_EQ(j["files"][0]["crc32c"], 0xFFFFFFFFu);
  // The first keys in the documented order.
  auto it = j.begin();
  for (const char* key : {"format", "format_version", "checkpoint_id", "job_id", "generation",
                          "unix_time", "final", "job", "progress", "variables", "files",
                          "eval"}) {
    ASSERT_NE(it, j.end());
    EXPECT_EQ(it.key(), key);
    ++it;
  }
}

TEST(ManifestTest, FindVariableAndFile) {
  const Manifest m = Sample();
  ASSERT_NE(m.FindVariable("global_step"), nullptr);
  EXPECT_EQ(m.FindVariable("global_step")->shards.size(), 1u);
  EXPECT_EQ(m.FindVariable("nope"), nullptr);
  ASSERT_NE(m.FindFile("ps-00001-of-00002.safetensors"), nullptr);
  EXPECT_EQ(m.FindFile("ps-00001-of-00002.safetensors")->crc32c(), 17u);
  EXPECT_EQ(m.FindFile("nope"), nullptr);
}

struct Corruption {
  const char* pointer;  // JSON pointer of the value to replace ("" replaces the document)
  Json value;           // replacement; a discarded value removes the member
  const char* message;  // expected in the error after "manifest.json: "
};

TEST(ManifestTest, ErrorsAreDataLossNamingTheField) {
  const Json good = Json::parse(ManifestToJson(Sample()));
  const Json remove(Json::value_t::discarded);
  const std::vector<Corruption> cases = {
      {"/format", "tf-checkpoint", "format: 'tf-checkpoint', expected 'shardps-checkpoint'"},
      {"/format_version", 2, "format_version: 2 is not supported"},
      {"/checkpoint_id", "7", "checkpoint_id: not an integer: \"7\""},
      {"/checkpoint_id", -1, "checkpoint_id: -1 is below 0"},
      {"/generation", 1.5, "generation: not an integer: 1.5"},
      {"/unix_time", "now", "unix_time: not a number"},
      {"/final", 1, "final: not a boolean"},
      {"/job", "not json", "job: not an object"},
      {"/extra", 1, "extra: unknown field"},
      {"/progress/steps_done", remove, "progress.steps_done: missing"},
      {"/progress/epoch", -3, "progress.epoch: -3 is below 0"},
      {"/variables/0/name", "global_step", "variables[1].name: 'global_step' appears twice"},
      {"/variables/0/dtype", "F33", "variables[0].dtype: unknown dtype 'F33'"},
      {"/variables/0/shape/1", -4, "variables[0].shape[1]: -4 is below 0"},
      {"/variables/0/slots/1", "adam_m", "variables[0].slots[1]: 'adam_m' appears twice"},
      {"/variables/0/optimizer/learning_rate", "fast", "variables[0].optimizer:"},
      {"/variables/0/optimizer/momentum_x", 1, "variables[0].optimizer:"},
      {"/variables/1/update", 3, "variables[1].update: not an object"},
      {"/variables/0/shape/0", 11, "variables[0].shards: cover rows [0, 10) of 11"},
      {"/variables/0/shards/1/rows", 3,
       "variables[0].shards[1].tensors.\"\": tensor 'mlp/dense_0/kernel/part_1' is F32 [4, 4], "
       "the shard is F32 [3, 4]"},
      {"/variables/0/shards/1/rows", 5,
       "variables[0].shards[1].rows: 5 rows from row 6 run past the variable's 10 rows"},
      {"/variables/0/shards/1/row_offset", 5,
       "variables[0].shards[1].row_offset: 5, but the shards before it end at row 6"},
      {"/variables/0/shards/0/part", 2, "variables[0].shards[0].part: 2 is above 1"},
      // A non-negative integer below its field's minimum (JSON reads it as unsigned).
      {"/variables/0/shards/0/num_parts", 0, "variables[0].shards[0].num_parts: 0 is below 1"},
      {"/variables/0/shards/0/file", "ps-9.safetensors",
       "variables[0].shards[0].file: 'ps-9.safetensors' is not listed under \"files\""},
      {"/variables/0/shards/0/tensors/adam_v", remove,
       "variables[0].shards[0].tensors: slot \"adam_v\" is missing"},
      {"/variables/0/shards/0/tensors/", remove,
       "variables[0].shards[0].tensors: the parameters (\"\") are missing"},
      {"/variables/0/shards/0/tensors/momentum", "x",
       "variables[0].shards[0].tensors: \"momentum\" is not a slot"},
      {"/variables/0/shards/0/tensors/adam_m", "nope",
       "variables[0].shards[0].tensors.\"adam_m\": tensor 'nope' is not in file"},
      {"/variables/0/shards/1/tensors/adam_m", "mlp/dense_0/kernel/part_0/adam_m",
       "variables[0].shards[1].tensors.\"adam_m\": tensor 'mlp/dense_0/kernel/part_0/adam_m' "
       "is not in file 'ps-00001-of-00002.safetensors'"},
      {"/files/0/tensors/0/shape", Json::array({5, 4}),
       "files[0].tensors[0].data_offsets: [0, 96) holds 96 bytes but shape [5, 4] of F32 "
       "needs 80"},
      {"/files/1/tensors/2/data_offsets", Json::array({130, 194}),
       "files[1].tensors[2].data_offsets: begins at 130, not where the tensor before it ends "
       "(128)"},
      {"/files/1/tensors/2/dtype", "I32",
       "variables[0].shards[1].tensors.\"adam_v\": tensor 'mlp/dense_0/kernel/part_1/adam_v' "
       "is I32 [4, 4], the shard is F32 [4, 4]"},
      {"/files/0/file", "../../etc/passwd", "files[0].file: '../../etc/passwd' is not a data file"},
      {"/files/1/file", "ps-00000-of-00002.safetensors", "files[1].file: 'ps-00000-of-00002"},
      {"/files/0/bytes", -1, "files[0].bytes: -1 is below 0"},
      {"/files/0/bytes", 100, "files[0].bytes: 100 is too few for 292 bytes of tensors"},
      {"/files/0/crc32c", 4294967296LL, "files[0].crc32c: 4294967296 is above 4294967295"},
      {"/files/0/header_crc32c", remove, "files[0].header_crc32c: missing"},
      {"/files/1/tensors/1/name", "mlp/dense_0/kernel/part_1",
       "files[1].tensors[1].name: 'mlp/dense_0/kernel/part_1' appears twice"},
      {"/eval/step", "x", "eval.step: not an integer"},
      {"", Json::array(), "not a JSON object"},
  };
  for (const Corruption& c : cases) {
    SCOPED_TRACE(std::string(c.pointer) + " = " + c.value.dump());
    Json bad = good;
    if (std::string(c.pointer).empty()) {
      bad = c.value;
    } else if (c.value.is_discarded()) {
      const Json::json_pointer ptr(c.pointer);
      bad.at(ptr.parent_pointer()).erase(ptr.back());
    } else {
      bad[Json::json_pointer(c.pointer)] = c.value;
    }
    absl::StatusOr<Manifest> parsed = ParseManifest(bad.dump(2), "manifest.json");
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(std::string(parsed.status().message()),
                HasSubstr(std::string("manifest.json: ") + c.message));
  }
}

TEST(ManifestTest, InvalidJsonIsDataLoss) {
  absl::StatusOr<Manifest> parsed = ParseManifest("{\"format\": ", "/ckpt/manifest.json");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(parsed.status().message(), HasSubstr("/ckpt/manifest.json: invalid JSON"));
}

TEST(ManifestTest, JobThatIsNotAnObjectDoesNotParseBack) {
  Manifest m = Sample();
  m.job_json = "[1, 2";  // a caller's bug: ManifestToJson keeps it visible, parsing refuses it
  absl::StatusOr<Manifest> parsed = ParseManifest(ManifestToJson(m), "manifest.json");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(parsed.status().message(), HasSubstr("job: not an object"));
}

}  // namespace
}  // namespace shardps
