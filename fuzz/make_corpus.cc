// Writes the seed corpora of the fuzz targets into DIR/<target>/ (committed as
// fuzz/corpus/): TF_CONFIGs, tiny IDX, Criteo TSV and ctrbin files, a checkpoint's
// safetensors file and manifest written by the ps's own code, serialized ps requests for
// every handler, and FuzzedDataProvider streams for the ps operation sequences. The job
// files are deploy/jobs/*.json, copied by hand. Deterministic: the same files every run.
//
// Usage: bazel run //fuzz:make_corpus -- "$PWD/fuzz/corpus"
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "checkpoint/safetensors.h"
#include "data/ctr/ctr_batch.h"
#include "data/ctr/ctr_binary.h"
#include "fuzz/ps_fixture.h"
#include "proto/ps.pb.h"

namespace shardps {
namespace {

namespace fs = std::filesystem;

std::string root;

void Write(const std::string& target, const std::string& name, absl::string_view bytes) {
  const fs::path dir = fs::path(root) / target;
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s/%s\n", dir.c_str(), name.c_str());
    std::exit(1);
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string Gzip(absl::string_view bytes) {
  const std::string path = (fs::temp_directory_path() / "make_corpus.gz").string();
  gzFile gz = gzopen(path.c_str(), "wb9");
  gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(gz);
  std::string out = ReadFile(path);
  fs::remove(path);
  return out;
}

void TfConfigs() {
  Write("tf_config_fuzzer", "ps.json",
        R"({"cluster": {"chief": ["localhost:2220"],)"
        R"( "worker": ["localhost:2221", "localhost:2222"],)"
        R"( "ps": ["localhost:2223", "[::1]:2224"]}, "task": {"type": "ps", "index": 1}})");
  Write("tf_config_fuzzer", "evaluator.json",
        R"({"cluster": {"chief": ["chief-0.svc:2222"], "ps": ["ps-0.svc:2222"]},)"
        R"( "task": {"type": "evaluator", "index": "0"}, "rpc_layer": "grpc",)"
        R"( "environment": "cloud"})");
  Write("tf_config_fuzzer", "kubeflow.json",
        R"({"cluster":{"chief":["job-chief-0:2222"],"worker":["job-worker-0:2222"],)"
        R"("ps":["job-ps-0:2222"],"evaluator":["job-evaluator-0:2222"]},)"
        R"("task":{"type":"worker","index":0,"trial":"1"},"environment":"cloud"})");
  Write("tf_config_fuzzer", "bad_port.json",
        R"({"cluster": {"ps": ["localhost:99999"]}, "task": {"type": "ps", "index": 0}})");
}

uint32_t BigEndian(uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xff00) | ((v << 8) & 0xff0000) | (v << 24);
}

std::string Idx(uint32_t magic, const std::vector<uint32_t>& dims, const std::string& payload) {
  std::string out;
  auto put = [&](uint32_t v) {
    const uint32_t be = BigEndian(v);
    out.append(reinterpret_cast<const char*>(&be), 4);
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  return out + payload;
}

// The IDX target's input: a little-endian length, the images file, the labels file.
std::string IdxPair(const std::string& images, const std::string& labels) {
  const uint32_t n = static_cast<uint32_t>(images.size());
  return std::string(reinterpret_cast<const char*>(&n), 4) + images + labels;
}

void IdxFiles() {
  std::string pixels;
  for (int i = 0; i < 3 * 2 * 2; ++i) pixels.push_back(static_cast<char>(i * 21));
  const std::string images = Idx(0x803, {3, 2, 2}, pixels);
  const std::string labels = Idx(0x801, {3}, std::string("\x00\x09\x04", 3));
  Write("idx_fuzzer", "plain", IdxPair(images, labels));
  Write("idx_fuzzer", "gzipped", IdxPair(Gzip(images), Gzip(labels)));
  Write("idx_fuzzer", "label_out_of_range",
        IdxPair(images, Idx(0x801, {3}, std::string("\x00\x0a\x04", 3))));
}

void CriteoFiles() {
  std::string criteo;
  for (int line = 0; line < 3; ++line) {
    criteo += line == 1 ? "1" : "0";
    for (int i = 0; i < 13; ++i) {
      criteo += absl::StrCat("\t", i == 4 ? "" : std::to_string(i * line - 2));
    }
    for (int i = 0; i < 26; ++i) {
      criteo += i == 7 ? "\t" : absl::StrCat("\t", absl::Hex(0x9a3b0c11u * (i + 1) + line));
    }
    criteo += line == 2 ? "\r\n" : "\n";
  }
  Write("criteo_tsv_fuzzer", "criteo.tsv", criteo);
  Write("criteo_tsv_fuzzer", "criteo.tsv.gz", Gzip(criteo));
  // The small schema's shape: 2 dense, 3 categorical of up to 3 ids, C2 below 1000.
  Write("criteo_tsv_fuzzer", "small.tsv",
        "1\t3\t-1\t0a,ff\t3e7\tffffffffffffffff\n0\t\t7\t\t1\t12,34,56\nbad line\n");
}

void CtrBinaryFiles() {
  CtrSchema schema;
  schema.num_dense = 2;
  schema.features = {{"C1", 0, 1}, {"C2", 100, 3}};
  const std::string path = (fs::temp_directory_path() / "make_corpus.ctrbin").string();
  auto writer = CtrBinaryWriter::Create(path, schema, "make_corpus: 3 examples");
  if (!writer.ok()) std::exit(1);
  CtrBatch batch;
  batch.Reset(schema, 3);
  for (int i = 0; i < 3; ++i) {
    const float dense[2] = {0.5f * i, 1.0f};
    batch.BeginExample(i % 2, dense, 2);
    batch.AddId(0, int64_t{1} << (10 * i));
    for (int k = 0; k < i; ++k) batch.AddId(1, 7 * k + i);
    batch.EndExample();
  }
  if (!(*writer)->Append(batch).ok() || !(*writer)->Finish().ok()) std::exit(1);
  Write("ctr_binary_fuzzer", "three_examples.ctrbin", ReadFile(path));
  fs::remove(path);
}

void CheckpointFiles() {
  const std::string dir = (fs::temp_directory_path() / "make_corpus_ps").string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string manifest_path;
  {
    PsFixture ps(dir);
    PushRequest push;
    push.set_request_id(9);
    push.set_shard("dense");
    push.set_data(std::string(8 * 4 * 4, '\0'));
    ps.Push(push);
    auto manifest = ps.WriteCheckpoint(3, 0);
    if (!manifest.ok()) {
      std::fprintf(stderr, "%s\n", manifest.status().ToString().c_str());
      std::exit(1);
    }
    manifest_path = *manifest;
  }
  Write("manifest_fuzzer", "manifest.json", ReadFile(manifest_path));
  Write("safetensors_fuzzer", "fixture.safetensors",
        ReadFile(fs::path(manifest_path).parent_path() / "ps-00000-of-00001.safetensors"));
  fs::remove_all(dir);

  // Other dtypes and a scalar, with metadata.
  const std::string path = (fs::temp_directory_path() / "make_corpus.safetensors").string();
  const int64_t ids[3] = {1, -2, 3};
  const uint8_t bytes[2] = {7, 9};
  const float scalar = 2.5f;
  std::vector<TensorToWrite> tensors(3);
  tensors[0].name = "keys";
  tensors[0].dtype = "I64";
  tensors[0].shape = {3};
  tensors[0].pieces = {absl::string_view(reinterpret_cast<const char*>(ids), sizeof(ids))};
  tensors[1].name = "u8";
  tensors[1].dtype = "U8";
  tensors[1].shape = {1, 2};
  tensors[1].pieces = {absl::string_view(reinterpret_cast<const char*>(bytes), 2)};
  tensors[2].name = "scalar";
  tensors[2].shape = {};
  tensors[2].pieces = {absl::string_view(reinterpret_cast<const char*>(&scalar), 4)};
  SafetensorsWriteOptions options;
  options.metadata["ps_task"] = "0";
  options.fsync = false;
  if (!WriteSafetensors(path, std::move(tensors), options).ok()) std::exit(1);
  Write("safetensors_fuzzer", "dtypes.safetensors", ReadFile(path));
  fs::remove(path);
}

// The request target's input: the handler's number (ps_request_fuzzer.cc's kHandlers order),
// then the request.
void Request(int handler, const std::string& name, const google::protobuf::MessageLite& m) {
  Write("ps_request_fuzzer", absl::StrCat(handler < 10 ? "0" : "", handler, "_", name),
        std::string(1, static_cast<char>(handler)) + m.SerializeAsString());
}

std::string FloatBytes(int n, float v) {
  std::vector<float> f(static_cast<size_t>(n), v);
  return std::string(reinterpret_cast<const char*>(f.data()), f.size() * 4);
}

void Requests() {
  CreateShardsRequest create;
  create.set_request_id(5);
  for (const ShardSpec& spec : FixtureShardSpecs()) *create.add_shards() = spec;
  create.mutable_shards(0)->set_name("dense2");
  Request(0, "create_shards", create);
  ListShardsRequest list;
  list.set_variable("dense");
  Request(1, "list_shards", list);
  PullRequest pull;
  pull.set_shard("dense");
  pull.set_row_begin(2);
  pull.set_row_end(6);
  Request(2, "pull", pull);
  PullBatchRequest pull_batch;
  *pull_batch.add_pulls() = pull;
  pull.set_shard("sync");
  pull.set_row_begin(0);
  pull.set_row_end(0);
  pull.set_min_version(1);
  pull.set_wait_timeout_ms(1);
  *pull_batch.add_pulls() = pull;
  Request(3, "pull_batch", pull_batch);
  PullRowsRequest pull_rows;
  pull_rows.set_shard("table");
  pull_rows.add_ids(3);
  pull_rows.add_ids(-77);
  Request(4, "pull_rows", pull_rows);
  PullRowsBatchRequest pull_rows_batch;
  *pull_rows_batch.add_pulls() = pull_rows;
  pull_rows.clear_ids();
  pull_rows.set_shard("dense");
  const int64_t raw[2] = {1, 7};
  pull_rows.set_ids_bytes(std::string(reinterpret_cast<const char*>(raw), sizeof(raw)));
  *pull_rows_batch.add_pulls() = pull_rows;
  Request(5, "pull_rows_batch", pull_rows_batch);
  PushRequest push;
  push.set_request_id(11);
  push.set_shard("sync");
  push.set_row_begin(0);
  push.set_row_end(4);
  push.set_data(FloatBytes(8, 0.25f));
  push.mutable_sync()->set_step(0);
  push.mutable_sync()->set_replica(1);
  push.set_step(0);
  Request(6, "push", push);
  PushBatchRequest push_batch;
  PushRequest item;
  item.set_request_id(12);
  item.set_shard("stale");
  item.set_row_begin(1);
  item.set_row_end(3);
  item.set_base_version(0);
  push_batch.add_pushes()->CopyFrom(item);
  push_batch.add_data_bytes(6 * 4);
  item.set_request_id(13);
  item.set_shard("scalar");
  item.set_row_begin(0);
  item.set_row_end(1);
  push_batch.add_pushes()->CopyFrom(item);
  push_batch.add_data_bytes(4);
  push_batch.set_data(FloatBytes(7, -1.0f));
  Request(7, "push_batch", push_batch);
  PushRowsRequest push_rows;
  push_rows.set_request_id(14);
  push_rows.set_shard("table");
  push_rows.add_ids(3);
  push_rows.add_ids(3);
  push_rows.set_data(FloatBytes(8, 0.5f));
  Request(8, "push_rows", push_rows);
  PushRowsBatchRequest push_rows_batch;
  *push_rows_batch.add_pushes() = push_rows;
  push_rows.set_request_id(15);
  push_rows.set_shard("ftrl");
  push_rows.clear_ids();
  push_rows.add_ids(4);
  push_rows.set_data(FloatBytes(2, 0.5f));
  *push_rows_batch.add_pushes() = push_rows;
  Request(9, "push_rows_batch", push_rows_batch);
  AssignRequest assign;
  assign.set_request_id(16);
  assign.set_shard("dense");
  assign.set_row_begin(7);
  assign.set_row_end(8);
  assign.set_data(FloatBytes(4, 3.0f));
  assign.set_reset_slots(true);
  Request(10, "assign", assign);
  HealthRequest health;
  health.set_from_chief(true);
  Request(11, "health", health);
  SetGenerationRequest generation;
  generation.set_generation(2);
  Request(12, "set_generation", generation);
  DropShardsRequest drop;
  drop.add_variables("stale");
  Request(13, "drop_shards", drop);
  SnapshotRequest snapshot;
  snapshot.set_checkpoint_id(2);
  snapshot.set_path("/ckpt/2/ps-00000-of-00001.safetensors");
  Request(14, "snapshot", snapshot);
  SnapshotStatusRequest snapshot_status;
  snapshot_status.set_checkpoint_id(2);
  Request(15, "snapshot_status", snapshot_status);
  RestoreRequest restore;
  restore.set_generation(1);
  restore.set_manifest("/ckpt/1/manifest.json");
  for (const char* shard : {"dense", "sync", "stale", "scalar", "ftrl"}) restore.add_shards(shard);
  Request(16, "restore", restore);
  restore.clear_manifest();
  restore.clear_shards();
  Request(16, "restore_reinitialize", restore);
  HoldPushesRequest hold;
  hold.set_from_step(3);
  hold.set_timeout_ms(5);
  Request(17, "hold_pushes", hold);
  ShutdownRequest shutdown;
  shutdown.set_reason("fuzz");
  Request(18, "shutdown", shutdown);
}

void OpsStreams() {
  std::mt19937 random(1);
  for (int i = 0; i < 6; ++i) {
    std::string bytes(static_cast<size_t>(256 << (i % 3)), '\0');
    for (char& c : bytes) c = static_cast<char>(random());
    Write("ps_ops_fuzzer", absl::StrCat("random_", i), bytes);
  }
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  shardps::root = argv[1];
  shardps::TfConfigs();
  shardps::IdxFiles();
  shardps::CriteoFiles();
  shardps::CtrBinaryFiles();
  shardps::CheckpointFiles();
  shardps::Requests();
  shardps::OpsStreams();
  return 0;
}
